"""Multi-host through jax.distributed, for real on one machine: two processes (CPU collectives, the coordinator on
127.0.0.1), each with 2 simulated CPU devices, compute a Jacobian whose rows are split over the 4 devices
(_multihost_case.py). Each holds the rows of its own devices, equal to the Jacobian computed in one process."""

import json
import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CPU collectives (gloo) as tested on Linux")
def test_two_processes_compute_a_jacobian_split_over_their_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    port = str(_free_port())
    processes = [
        subprocess.Popen(
            [sys.executable, os.path.join(HERE, "_multihost_case.py"), str(i), port],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outputs = []
    for p in processes:
        try:
            out, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in processes:
                q.kill()
            raise
        assert p.returncode == 0, err[-4000:]
        outputs.append(json.loads(out.strip().splitlines()[-1]))
    rows = {"identity": [], "padded": []}
    for process, report in enumerate(outputs):
        assert report["process"] == process and report["devices"] == 4 and report["local_devices"] == 2
        for name in rows:
            assert report[name]["same"] and report[name]["devices"] == 4 and report[name]["spec"] == "P('rows',)"
            rows[name] += [tuple(s) for s in report[name]["shards"]]
    # every row once, on the process whose devices hold it: process 0 the first half
    assert sorted(rows["identity"]) == [(0, 6), (6, 12), (12, 18), (18, 24)]
    assert sorted(rows["padded"]) == [(0, 5), (5, 10), (10, 15), (15, 20)]
    assert [s[0] for s in outputs[0]["padded"]["shards"]] == [0, 5]
