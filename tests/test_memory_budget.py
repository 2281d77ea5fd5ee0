"""chunk_size="auto" and the memory budget (vmap/_memory.py): the chunk comes from XLA's memory analysis of the
compiled program, once per structure, and a Jacobian whose program over all rows needs many times the budget runs
within it, with the same values."""

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
from batched_grad.func import jacrev
from oracle import assert_float32_as_accurate
from vmap import _memory


@pytest.fixture
def budget():
    yield vmap.set_memory_budget
    vmap.set_memory_budget(None)


def _wide(lib, m=256, n=64):
    """A function whose backward holds an (m, n) array per row: its Jacobian over m rows holds m of them at once."""
    rng = np.random.default_rng(0)
    a = lib.tensor(rng.standard_normal((m, 1)).astype(np.float32))
    c = lib.tensor(rng.standard_normal(n).astype(np.float32))
    return (lambda x: lib.tanh(a * (c * x)).sum(1)), lib.tensor(rng.standard_normal(n).astype(np.float32))


def test_the_budget_is_set_read_and_checked(budget, monkeypatch):
    monkeypatch.delenv("VMAP_MEMORY_BUDGET", raising=False)
    default = vmap.memory_budget()
    assert default > 0
    budget(123456)
    assert vmap.memory_budget() == 123456
    budget(None)
    assert vmap.memory_budget() == default
    monkeypatch.setenv("VMAP_MEMORY_BUDGET", "5000000")
    assert vmap.memory_budget() == 5000000
    monkeypatch.setenv("VMAP_MEMORY_BUDGET", "lots")
    with pytest.raises(ValueError, match="VMAP_MEMORY_BUDGET must be a positive number of bytes, but got 'lots'"):
        vmap.memory_budget()
    for bad in (0, -1, 1.5, True, "1e6"):
        with pytest.raises(ValueError, match="set_memory_budget\\(nbytes\\): the memory budget must be a positive"):
            budget(bad)


def test_chunk_size_is_checked():
    x = bg.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="chunk_size must be None, \"auto\" or a positive int, but got 'big'"):
        bg.autograd.grad(x * 2, x, bg.ones(2, 3), is_grads_batched=True, chunk_size="big")


def test_auto_chooses_a_chunk_that_fits_once_per_structure(budget, monkeypatch):
    analysed = []
    real = _memory.program_bytes
    monkeypatch.setattr(_memory, "program_bytes", lambda c: analysed.append(real(c)) or analysed[-1])
    f, x = _wide(bg)
    want = bg.autograd.functional.jacobian(f, x, vectorize=True)
    budget(2 << 20)
    for _ in range(3):
        got = bg.autograd.functional.jacobian(f, x, vectorize=True, chunk_size="auto")
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    whole, chosen = analysed[0], analysed[-1]
    assert whole > 2 * vmap.memory_budget() >= chosen  # all rows would not fit; the chunk chosen does
    assert 3 <= len(analysed) <= 6  # all rows, one row, then the guesses: for the first call only
    first = len(analysed)
    budget(1 << 20)  # a new budget: chosen again
    got = bg.autograd.functional.jacobian(f, x, vectorize=True, chunk_size="auto")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert len(analysed) > first and analysed[-1] <= vmap.memory_budget() < chosen


@pytest.mark.slow
def test_auto_everywhere_matches_torch(budget):
    budget(2 << 20)
    f, x = _wide(bg)
    x.requires_grad_()
    tf, tx = _wide(torch)
    want = torch.autograd.functional.jacobian(tf, tx, vectorize=True)
    exact = torch.autograd.functional.jacobian(tf, tx.double(), vectorize=True)  # the same inputs, in float64
    results = {
        "jacobian": bg.autograd.functional.jacobian(f, x, vectorize=True, chunk_size="auto"),
        "forward-mode": bg.autograd.functional.jacobian(
            f, x, vectorize=True, strategy="forward-mode", chunk_size="auto"
        ),
        "jacrev": jacrev(f, chunk_size="auto")(x),
        "vmap": vmap.vmap(lambda v: bg.autograd.grad(f(x), x, v)[0], chunk_size="auto")(bg.eye(256)),
    }
    for got in results.values():  # jacobian, forward-mode, jacrev, vmap
        assert_float32_as_accurate(got.detach(), want, exact, roundings=8)
    h = bg.autograd.functional.hessian(lambda x: f(x).sum(), x, vectorize=True, chunk_size="auto")
    th, exact_h = (
        torch.autograd.functional.hessian(lambda x: tf(x).sum(), v, vectorize=True) for v in (tx, tx.double())
    )
    assert_float32_as_accurate(h, th, exact_h, roundings=256)  # each entry sums 256 rows


def test_a_backward_without_one_program_says_its_rows_run_at_once(budget):
    class Square(bg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = bg.arange(4.0, requires_grad=True)
    with pytest.warns(UserWarning, match='chunk_size="auto": this backward does not compile to one program'):
        (g,) = bg.autograd.grad(Square.apply(x), x, bg.eye(4), is_grads_batched=True, chunk_size="auto")
    np.testing.assert_allclose(g.numpy(), np.diag(2 * np.arange(4.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one program: no warning
        bg.autograd.grad((x * x).sum(), x, bg.ones(3), is_grads_batched=True, chunk_size="auto")


# One process: the peak RSS a first Jacobian call with chunk_size="auto" adds, within a 64 MB budget, where the
# program over all rows needs about 1 GB (XLA's own figure, the first one analysed); then its values against 16 rows
# at a time (after the peak is read).
_WITHIN_BUDGET = textwrap.dedent("""
    import json
    import numpy as np
    import batched_grad as bg
    import vmap
    from vmap import _memory

    analysed = []
    real = _memory.program_bytes
    _memory.program_bytes = lambda c: analysed.append(real(c)) or analysed[-1]

    def status_mb(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024

    rng = np.random.default_rng(0)
    a = bg.tensor(rng.standard_normal((1024, 1)).astype(np.float32))
    c = bg.tensor(rng.standard_normal(256).astype(np.float32))
    x = bg.tensor(rng.standard_normal(256).astype(np.float32))
    f = lambda x: bg.tanh(a * (c * x)).sum(1)
    vmap.set_memory_budget(64 << 20)
    with open("/proc/self/clear_refs", "w") as file:
        file.write("5")  # the peak starts again from the RSS now
    before = status_mb("VmRSS:")
    got = bg.autograd.functional.jacobian(f, x, vectorize=True, chunk_size="auto").numpy()
    raised = status_mb("VmHWM:") - before
    want = bg.autograd.functional.jacobian(f, x, vectorize=True, chunk_size=16).numpy()
    print(json.dumps([raised, analysed[0] / 2**20, float(np.abs(got - want).max())]))
""")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak RSS from /proc/self/status")
def test_a_jacobian_many_times_the_budget_runs_within_it():
    done = subprocess.run([sys.executable, "-c", _WITHIN_BUDGET], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    raised, whole, difference = json.loads(done.stdout.splitlines()[-1])
    assert whole > 8 * 64  # all rows at once: over 8 times the budget
    assert raised < 2 * 64, raised  # the budget, and what compiling takes
    assert difference < 1e-5
