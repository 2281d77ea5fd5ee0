"""DataLoader workers where they cannot start by 'forkserver' or 'spawn' (a script without a main guard, a lambda
collate_fn): torch on Linux forks and runs such scripts, so batched_grad loads their batches in the main process, with
one warning, as the workers would (get_worker_info() included), giving the batches torch's workers give; a guarded
script with picklable parts keeps its workers."""

import json
import subprocess
import sys

import pytest

SCRIPT = """
import json, warnings
import {lib} as torch
from {lib}.utils.data import DataLoader, Dataset, default_collate, get_worker_info


class Squares(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.tensor([i * i], dtype=torch.float64), int(get_worker_info() is not None)


def main():
    seeded = torch.Generator().manual_seed(3)
    loader = DataLoader(Squares(), batch_size=4, shuffle=True, num_workers=2, generator=seeded, {collate})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = [(x.flatten().tolist(), w.tolist()) for x, w in loader]
    warned = [str(c.message) for c in caught if "DataLoader workers" in str(c.message)]
    in_worker = max(max(w) for _, w in batches)
    print(json.dumps({{"batches": [b for b, _ in batches], "in_worker": in_worker, "warned": warned}}))


{call}
"""
GUARDED, UNGUARDED = 'if __name__ == "__main__":\n    main()', "main()"


def _run(tmp_path, lib, call, collate):
    path = tmp_path / f"{lib}_{abs(hash((call, collate)))}.py"
    path.write_text(SCRIPT.format(lib=lib, call=call, collate=collate))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize(
    "call, collate, reason",
    [(UNGUARDED, "", "no `if __name__"), (GUARDED, "collate_fn=lambda b: default_collate(b)", "cannot be pickled")],
    ids=["no main guard", "lambda collate_fn"],
)
def test_batches_load_in_the_main_process_where_workers_cannot_start(tmp_path, call, collate, reason):
    got, expected = _run(tmp_path, "batched_grad", call, collate), _run(tmp_path, "torch", call, collate)
    assert got["batches"] == expected["batches"] and expected["in_worker"] == 1
    # read in the main process as worker i % num_workers would have read batch i: get_worker_info() says so too
    assert got["in_worker"] == 1 and len(got["warned"]) == 1 and reason in got["warned"][0]


@pytest.mark.slow
def test_a_guarded_script_keeps_its_workers(tmp_path):
    got, expected = _run(tmp_path, "batched_grad", GUARDED, ""), _run(tmp_path, "torch", GUARDED, "")
    assert got == expected and got["in_worker"] == 1 and got["warned"] == []
