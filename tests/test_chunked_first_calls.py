"""chunk_size on a structure's first calls (the per-node tier): the walk runs one chunk of rows at a time, with the
results of torch's is_grads_batched, hooks seeing what they see unchunked, shared kernels and bounded memory."""

import json
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from batched_grad import _lazy
from oracle import assert_same, pair


@pytest.fixture(autouse=True)
def per_node(monkeypatch):
    """Every call runs the per-node tier, as a structure's first calls do."""
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 10**9)


def _net(lib, x, w1, w2):
    return w2 @ lib.tanh(w1 @ x) + x.sum()


def _leaves(seed=0):
    x, tx = pair(3, seed=seed)
    w1, tw1 = pair(6, 3, seed=seed + 1)
    w2, tw2 = pair(4, 6, seed=seed + 2)
    return (x, w1, w2), (tx, tw1, tw2)


def _cotangents(rows, seed=5):
    v = np.random.default_rng(seed).standard_normal((rows, 4))
    return bg.tensor(v), torch.tensor(v)


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 7])
def test_first_calls_in_chunks_match_torch(chunk_size):
    (x, w1, w2), (tx, tw1, tw2) = _leaves()
    v, tv = _cotangents(10)  # 10 rows: the last chunk is padded for 3, 4 and 7
    want = torch.autograd.grad(_net(torch, tx, tw1, tw2), [tx, tw1, tw2], tv, is_grads_batched=True)
    for _ in range(2):
        got = bg.autograd.grad(_net(bg, x, w1, w2), [x, w1, w2], v, is_grads_batched=True, chunk_size=chunk_size)
        assert_same(got, want)


def test_a_jacobian_in_chunks_matches_torch_with_a_partial_last_chunk():
    x, tx = pair(5)
    w, tw = pair(10, 5, seed=1)

    def f(lib, w):
        return lambda u: lib.sin(w @ u) * u.sum()

    want = torch.autograd.functional.jacobian(f(torch, tw), tx, vectorize=True)
    for _ in range(2):  # 10 rows of the identity, 4 at a time: 2 real rows in the last chunk
        assert_same(bg.autograd.functional.jacobian(f(bg, w), x, vectorize=True, chunk_size=4), want)


def test_an_unused_input_stays_none_or_zeros_in_chunks():
    (x, w1, w2), _ = _leaves()
    unused, _ = pair(2, seed=9)
    v, _ = _cotangents(7)
    got = bg.autograd.grad(_net(bg, x, w1, w2), [x, unused], v, is_grads_batched=True, chunk_size=2, allow_unused=True)
    assert got[1] is None and got[0].shape == (7, 3)
    got = bg.autograd.grad(
        _net(bg, x, w1, w2), [x, unused], v, is_grads_batched=True, chunk_size=2, materialize_grads=True
    )
    assert_same(got[1], torch.zeros(2, dtype=torch.float64))  # torch's zeros_like(input): no batch dimension


def test_the_graph_is_freed_after_the_last_chunk_only_as_torch_frees_it():
    (x, w1, w2), (tx, tw1, tw2) = _leaves()
    v, tv = _cotangents(9)
    y, ty = _net(bg, x, w1, w2), _net(torch, tx, tw1, tw2)
    first = bg.autograd.grad(y, x, v, is_grads_batched=True, chunk_size=2, retain_graph=True)
    again = bg.autograd.grad(y, x, v, is_grads_batched=True, chunk_size=2)
    assert_same(first, torch.autograd.grad(ty, tx, tv, is_grads_batched=True, retain_graph=True))
    assert_same(again, torch.autograd.grad(ty, tx, tv, is_grads_batched=True))
    with pytest.raises(RuntimeError) as torch_error:
        torch.autograd.grad(ty, tx, tv, is_grads_batched=True)
    with pytest.raises(RuntimeError) as error:
        bg.autograd.grad(y, x, v, is_grads_batched=True, chunk_size=2)
    assert str(error.value) == str(torch_error.value)


def _hooked(lib, x, w1, w2, hook):
    h = lib.tanh(w1 @ x)
    h.register_hook(hook)
    return w2 @ h


def test_a_vectorized_hook_sees_rows_once_per_chunk_and_changes_the_result_as_in_torch():
    (x, w1, w2), (tx, tw1, tw2) = _leaves()
    v, tv = _cotangents(10)
    seen, torch_seen = [], []

    def double(seen):
        return lambda g: seen.append(tuple(g.shape)) or g * 2

    want = torch.autograd.grad(_hooked(torch, tx, tw1, tw2, double(torch_seen)), tx, tv, is_grads_batched=True)
    got = bg.autograd.grad(_hooked(bg, x, w1, w2, double(seen)), x, v, is_grads_batched=True, chunk_size=4)
    assert_same(got, want)
    # per-row shapes, as torch's hook sees them under its vmap; called once per chunk of 4 (as torch.func.jacrev's
    # chunk_size calls it), where torch calls it once for all 10 rows
    assert torch_seen == [(6,)] and seen == [(6,)] * 3


def test_a_hook_that_reads_values_sees_each_real_row_once_in_order():
    (x, w1, w2), (tx, tw1, tw2) = _leaves()
    v, tv = _cotangents(7)
    seen = []
    got = bg.autograd.grad(
        _hooked(bg, x, w1, w2, lambda g: seen.append(g.sum().item())), x, v, is_grads_batched=True, chunk_size=3
    )  # 3 chunks, 2 padding rows in the last one
    th = torch.tanh(tw1 @ tx)
    rows = [torch.autograd.grad(tw2 @ th, th, tv[b], retain_graph=True)[0].sum().item() for b in range(7)]
    np.testing.assert_allclose(seen, rows, rtol=1e-12)
    assert_same(got, torch.autograd.grad(_net(torch, tx, tw1, tw2) - tx.sum(), tx, tv, is_grads_batched=True))


def test_a_fallback_warns_once_for_the_whole_batch():
    (x, w1, w2), _ = _leaves()
    v, _ = _cotangents(10)
    with vmap.fallback_warnings(), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        bg.autograd.grad(
            _hooked(bg, x, w1, w2, lambda g: float(g.sum()) and None), x, v, is_grads_batched=True, chunk_size=3
        )
    fallbacks = [str(r.message) for r in record if issubclass(r.category, vmap.FallbackWarning)]
    assert len(fallbacks) == 1 and "10 rows" in fallbacks[0]


def test_chunks_share_kernels_so_a_new_batch_size_compiles_nothing():
    x, _ = pair(7, seed=3)  # shapes of its own: no other test warms these kernels
    w, _ = pair(11, 7, seed=4)

    def grad(rows, chunk_size):
        v = bg.tensor(np.random.default_rng(rows).standard_normal((rows, 11)))
        return bg.autograd.grad(bg.sin(w @ x) * 3.0, [x, w], v, is_grads_batched=True, chunk_size=chunk_size)

    for _ in range(4):  # the forward ops' first sightings run on the host; from the fourth they are kernels
        grad(15, 5)
    before = bg.compile_count()
    for rows in (40, 73, 200):  # 8, 15 and 40 chunks of 5 rows
        grad(rows, 5)
    assert bg.compile_count() == before
    grad(16, None)
    unchunked = bg.compile_count()
    grad(32, None)  # without chunks, each node's VJP of all rows runs on the host: a new batch size compiles nothing
    assert bg.compile_count() == unchunked


# One process: a first call with chunk_size=10, then one without (each a structure's first call), each reporting how
# far it raised the peak RSS (MB) above the RSS before it. The peak is the process's VmHWM, reset before each call:
# ru_maxrss would not do here, as a process started by a large one (pytest) inherits that one's peak.
_MEMORY = textwrap.dedent("""
    import json
    import numpy as np
    import batched_grad as bg

    rng = np.random.default_rng(0)
    rows, width = 8000, 8000
    w1 = bg.tensor(rng.standard_normal((width, 50)).astype(np.float32) / 10)
    w2 = bg.tensor(rng.standard_normal((50, width)).astype(np.float32) / 50)
    v = bg.tensor(rng.standard_normal((rows, 50)).astype(np.float32))

    def status_mb(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024

    def raised_peak(chunk_size):
        x = bg.tensor(rng.standard_normal(50).astype(np.float32), requires_grad=True)
        y = w2 @ bg.tanh(w1 @ x)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak starts again from the RSS now
        before = status_mb("VmRSS:")
        (g,) = bg.autograd.grad(y, x, v, is_grads_batched=True, chunk_size=chunk_size)
        g.numpy()
        return status_mb("VmHWM:") - before

    print(json.dumps([raised_peak(10), raised_peak(None)]))
""")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak RSS from /proc/self/status")
def test_a_first_call_in_chunks_holds_a_fraction_of_the_memory_of_one_over_all_rows():
    done = subprocess.run([sys.executable, "-c", _MEMORY], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    chunked, whole = json.loads(done.stdout.splitlines()[-1])
    # all rows at once hold (8000 x 8000) float32 cotangents (256 MB each) between nodes; 10 rows at a time do not
    assert whole > 400 and chunked < whole / 5, (chunked, whole)
