"""First calls of small functional-API calls (autograd.functional, torch.func, is_grads_batched) compile nothing:
the rows of a Jacobian or Hessian run as one batched backward, each node's VJP of all rows at once on the host (a
derived NumPy program, traced once per pattern of shapes, so a new number of rows compiles nothing either), and an op
computed in float64 for float32 operands (tanh) runs with NumPy's float64 there too. Counted in compiles and calls of
the engine, not in time."""

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.autograd.functional as F
from batched_grad import _budget, _engine, _host, _lazy
from oracle import assert_same as _assert_same

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="host forms run on the CPU backend only")


@pytest.fixture(autouse=True)
def first_sightings(monkeypatch):
    """Every call is a structure's first call: the per-node tier, as a script's first calls run it."""
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 10**9)


def _mlp(lib, n, seed):
    """f(x) = tanh(W2 tanh(W1 x)) and s(x) = sum(f(x)^2), in float32, on shapes of their own (no other test warms
    them)."""
    rng = np.random.default_rng(seed)
    w1, w2 = (lib.tensor((rng.standard_normal(s) / 3).astype(np.float32)) for s in ((n + 3, n), (4, n + 3)))

    def f(x):
        return lib.tanh(w2 @ lib.tanh(w1 @ x))

    def s(x):
        y = f(x)
        return (y * y).sum()

    return f, s, lib.tensor(rng.standard_normal(n).astype(np.float32))


def assert_same(actual, expected):
    _assert_same(actual, expected, rtol=1e-4, atol=1e-6)  # float32, as torch's own paths differ


def _count_backwards(monkeypatch):
    calls = []
    real = _engine.run_backward
    monkeypatch.setattr(_engine, "run_backward", lambda *a, **k: calls.append(k.get("batch")) or real(*a, **k))
    return calls


def test_first_jacobians_and_hessians_compile_nothing():
    f, s, x = _mlp(bg, 9, seed=0)
    tf, ts, tx = _mlp(torch, 9, seed=0)
    before = bg.compile_count()
    for vectorize in (False, True):
        assert_same(F.jacobian(f, x, vectorize=vectorize), torch.autograd.functional.jacobian(tf, tx))
        assert_same(F.hessian(s, x, vectorize=vectorize), torch.autograd.functional.hessian(ts, tx))
    assert_same(bg.func.jacrev(f)(x), torch.func.jacrev(tf)(tx))
    assert bg.compile_count() == before


@pytest.fixture
def jitted_calls(monkeypatch):
    """Every call of a compiled program, kernel or region kernel (one XLA dispatch each)."""
    calls = []
    real = _budget.Jitted.__call__

    def counting(self, *args, **kwargs):
        calls.append(self.name[0] if isinstance(self.name, tuple) else self.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(_budget.Jitted, "__call__", counting)
    return calls


def test_first_calls_of_second_derivatives_dispatch_no_compiled_code(jitted_calls):
    """Hessian-vector products, double backward and per-sample gradients under vmap (a backward program recorded
    inside the function, computed a row at a time by its steps' host VJPs): no compile and no XLA call. s's square
    is x ** 2, whose derivatives XLA computes exactly (2 * x ** 1 is 2 * x), so NumPy gives its bits."""
    f, s, x = _mlp(bg, 7, seed=4)
    tf, ts, tx = _mlp(torch, 7, seed=4)

    def squared(lib, fn):
        return lambda x: (fn(x) ** 2).sum()

    v = np.random.default_rng(5).standard_normal(7).astype(np.float32)
    before = bg.compile_count()
    for name in ("hvp", "vhp"):
        ours = getattr(F, name)(squared(bg, f), x, bg.tensor(v))
        theirs = getattr(torch.autograd.functional, name)(squared(torch, tf), tx, torch.tensor(v))
        assert_same(ours[1], theirs[1])
    xr, txr = x.detach().requires_grad_(), tx.detach().requires_grad_()
    (g,) = bg.autograd.grad(squared(bg, f)(xr), xr, create_graph=True)
    (tg,) = torch.autograd.grad(squared(torch, tf)(txr), txr, create_graph=True)
    assert_same(bg.autograd.grad(g.sum(), xr)[0], torch.autograd.grad(tg.sum(), txr)[0])
    xs = np.random.default_rng(6).standard_normal((5, 7)).astype(np.float32)
    assert_same(bg.func.vmap(bg.func.grad(s))(bg.tensor(xs)), torch.func.vmap(torch.func.grad(ts))(torch.tensor(xs)))
    assert bg.compile_count() == before
    assert jitted_calls == []


def test_a_first_forward_mode_jacobian_compiles_nothing():
    """The traced function's constants (the weights it closes over, host arrays) reach the Jacobian op as NumPy
    arrays, so its host form computes it: the trace stages its ops' kernels, and nothing is compiled."""
    f, _, x = _mlp(bg, 8, seed=10)
    tf, _, tx = _mlp(torch, 8, seed=10)
    before = _compiles()
    assert_same(bg.func.jacfwd(f)(x), torch.func.jacfwd(tf)(tx))
    ours = F.jacobian(f, x, vectorize=True, strategy="forward-mode")
    assert_same(ours, torch.autograd.functional.jacobian(tf, tx, vectorize=True, strategy="forward-mode"))
    assert _compiles() == before


def test_a_first_forward_over_reverse_hessian_computes_its_concrete_values_on_the_host(monkeypatch):
    """torch.func.hessian (jacfwd of jacrev) traces jacrev's backward; the values in that trace that read no traced
    value (a root cotangent's VJP) are computed now, by their host forms, not by a kernel compiled for each op and
    shape. What compiles is the Hessian program's region kernels (its float32 multiply-adds, which XLA contracts),
    once per region."""
    from batched_grad import _numpy_program

    regions, real = set(), _numpy_program._call
    monkeypatch.setattr(_numpy_program, "_call", lambda kernel, args: regions.add(kernel) or real(kernel, args))
    _, s, x = _mlp(bg, 6, seed=11)
    _, ts, tx = _mlp(torch, 6, seed=11)
    before = _compiles()
    assert_same(bg.func.hessian(s)(x), torch.func.hessian(ts)(tx))
    assert _compiles() - before <= len(regions)


def _compiles():
    """XLA compiles so far in this process (a trace that only stages a kernel into another program compiles none)."""
    return _xla_compiles[0]


_xla_compiles = [0]
jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **_: (
        _xla_compiles.__setitem__(0, _xla_compiles[0] + 1)
        if event == "/jax/core/compile/backend_compile_duration"
        else None
    )
)


def test_a_hessians_rows_run_as_one_batched_backward(monkeypatch):
    _, s, x = _mlp(bg, 11, seed=1)
    _, ts, tx = _mlp(torch, 11, seed=1)
    backwards = _count_backwards(monkeypatch)
    assert_same(F.hessian(s, x), torch.autograd.functional.hessian(ts, tx))
    # the gradient (recorded), then its Jacobian: one backward over its 11 rows, not 11 backwards
    assert len(backwards) == 2 and backwards[0] is None and backwards[1].size == 11


def test_a_hook_in_the_graph_keeps_torchs_loop_over_rows(monkeypatch):
    def seen(lib, calls):
        rng = np.random.default_rng(2)
        w = lib.tensor(rng.standard_normal((5, 3)))

        def f(x):
            h = w @ x
            h.register_hook(lambda g: calls.append(tuple(g.shape)))
            return lib.tanh(h)

        return lib.autograd.functional.jacobian(f, lib.tensor(rng.standard_normal(3)))

    ours, theirs = [], []
    backwards = _count_backwards(monkeypatch)
    assert_same(seen(bg, ours), seen(torch, theirs))
    assert ours == theirs == [(5,)] * 5  # the hook sees each row's gradient, once a row
    assert len(backwards) == 5


def test_a_new_number_of_rows_compiles_nothing(kernel_calls):
    f, _, x = _mlp(bg, 6, seed=3)
    tf, _, tx = _mlp(torch, 6, seed=3)
    x.requires_grad_()
    tx.requires_grad_()
    before = bg.compile_count()
    for rows in (3, 5, 17):
        v = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
        (got,) = bg.autograd.grad(f(x), x, bg.tensor(v), is_grads_batched=True)
        (expected,) = torch.autograd.grad(tf(tx), tx, torch.tensor(v), is_grads_batched=True)
        assert_same(got, expected)
    assert bg.compile_count() == before
    assert kernel_calls == []  # each node's VJP of all rows runs on the host


def test_float32_tanh_derivatives_run_on_the_host_within_an_ulp_of_the_kernels(monkeypatch):
    """tanh is computed in float64 for float32 operands; its VJP and its VJP's VJP (traced programs) run that part
    with NumPy's float64 functions and multiply-adds, as tanh's hand-written host forms do: no kernel, and float32
    values that round as the kernels' do (a difference only where a saturated derivative cancels, far below the
    scale of the result)."""

    x0 = np.linspace(-9.0, 9.0, 1201, dtype=np.float32)

    def derivatives():
        x = bg.tensor(x0, requires_grad=True)
        (g,) = bg.autograd.grad(bg.tanh(x).sum(), x, create_graph=True)
        (h,) = bg.autograd.grad((g * g).sum(), x)
        return g.detach().numpy(), h.numpy()

    before = bg.compile_count()
    host = derivatives()
    assert bg.compile_count() == before
    monkeypatch.setattr(_host, "HOST_ELEMENTS", 0)  # every op and VJP as its kernel
    for ours, kernel in zip(host, derivatives()):
        np.testing.assert_allclose(ours, kernel, rtol=0, atol=4 * np.finfo(np.float32).eps * np.abs(kernel).max())
        np.testing.assert_array_equal(ours[np.abs(x0) < 4], kernel[np.abs(x0) < 4])


@pytest.mark.parametrize("estimate", [0.0, 1e9])
def test_vmaps_rows_stop_on_the_host_where_their_program_would_cost_less(monkeypatch, estimate):
    """Once the rows done show that the rest would cost more than the structure's program is estimated to, the
    program computes them all (compiled now); otherwise every row runs on the host. The values are the same."""
    from batched_grad import _payback

    monkeypatch.setattr(_lazy, "FUSE_AFTER", None)  # the cost model, whose estimate is set here
    monkeypatch.setattr(_payback, "compile_estimate", lambda mix: estimate)
    _, s, _ = _mlp(bg, 5, seed=7 if estimate else 8)
    _, ts, _ = _mlp(torch, 5, seed=7 if estimate else 8)
    xs = np.random.default_rng(9).standard_normal((6, 5)).astype(np.float32)
    before = bg.compile_count()
    assert_same(bg.func.vmap(bg.func.grad(s))(bg.tensor(xs)), torch.func.vmap(torch.func.grad(ts))(torch.tensor(xs)))
    assert (bg.compile_count() > before) == (estimate == 0.0)
