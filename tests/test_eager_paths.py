"""Eager code around the batched calls on the CPU backend: in-place updates and small ops keep their values where
they are (no move between host and device per call) and compile nothing once warm; their values are torch's."""

import sys

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _host


@pytest.fixture
def moves(monkeypatch):
    """A list that gets one entry per array moved from the host to the device (every module's to_device)."""
    moved = []

    def counting(array):
        moved.append(array.shape)
        return original(array)

    original = _host.to_device
    for name, module in list(sys.modules.items()):
        if name.startswith("batched_grad") and getattr(module, "to_device", None) is original:
            monkeypatch.setattr(module, "to_device", counting)
    return moved


def _updates(lib, p, g):
    """A loop of the in-place updates optimizers and Krylov solvers write, and the values it leaves."""
    with lib.no_grad():
        for _ in range(5):
            p.add_(g, alpha=-0.1)
            p.mul_(0.9)
            p.sub_(g)
            p.addcmul_(g, g, value=0.5)
            p.clamp_(-3.0, 3.0)
        q = p.clone()
        q.zero_()
        q.copy_(p)
        q.fill_(2.5)
    return p, q


def test_in_place_updates_move_nothing_and_match_torch(moves):
    rng = np.random.default_rng(0)
    p0, g0 = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    p, g = bg.tensor(p0), bg.tensor(g0)
    _updates(bg, p, g)  # warm: a first call may compile, and moves each number constant once
    compiles, moved = bg.compile_count(), len(moves)
    got = _updates(bg, p, g)
    assert len(moves) == moved, "an in-place update moved its value between host and device"
    assert bg.compile_count() == compiles
    t_p = torch.tensor(p0)
    _updates(torch, t_p, torch.tensor(g0))
    expected = _updates(torch, t_p, torch.tensor(g0))
    for a, e in zip(got, expected):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-6, atol=1e-6)


def test_an_sgd_step_written_by_hand_moves_its_parameter_at_most_once(moves):
    rng = np.random.default_rng(1)
    w0, x0 = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((16, 4)).astype(np.float32)

    def train(lib, steps):
        w, x = lib.tensor(w0, requires_grad=True), lib.tensor(x0)
        for _ in range(steps):
            loss = (x @ w.t()).tanh().pow(2).mean()
            loss.backward()
            with lib.no_grad():
                w -= 0.1 * w.grad
                w.grad.zero_()
        return w.detach().numpy()

    train(bg, 3)
    moved = len(moves)
    got = train(bg, 3)
    # the updated parameter, read by the next step's forward and backward programs, and the two fresh inputs
    assert len(moves) - moved <= 3 + 2
    np.testing.assert_allclose(got, train(torch, 3), rtol=1e-5, atol=1e-6)


def test_a_new_number_operand_moves_nothing_on_the_host(moves):
    """Ops without a hand-written host form (a comparison, a power, a clamp) run by their derived forms: a Python number
    that changes every call (a threshold, an exponent) stays on the host too."""
    v0 = np.random.default_rng(2).standard_normal(300).astype(np.float32)

    def masked(lib, c):
        v = lib.tensor(v0)
        return v[v > c].pow(2.5 + c).clamp(0.1, 2.0 + c).mean()

    masked(bg, 0.25)  # warm: traces each op's jaxpr and compiles its elementwise kernels
    moved = len(moves)
    for c in np.linspace(-0.5, 0.5, 7):
        np.testing.assert_allclose(masked(bg, float(c)).numpy(), masked(torch, float(c)).numpy(), rtol=1e-5)
    assert len(moves) == moved, "a number operand was moved to the device"


def test_host_data_moved_to_the_device_keeps_64_bit_dtypes():
    for dtype in (np.float64, np.int64, np.complex128, np.float32, np.bool_):
        moved = _host.to_device(np.arange(6).reshape(2, 3).astype(dtype))
        assert moved.dtype == dtype
        assert np.asarray(moved).dtype == dtype  # read back outside JAX's 64-bit mode too
    strided = np.arange(12.0).reshape(3, 4)[:, ::2]
    np.testing.assert_array_equal(np.asarray(_host.to_device(strided)), strided)


@pytest.mark.parametrize(
    "code",
    [
        "a = m.zeros(3, dtype=m.int64); a.fill_(2.7); a",
        "a = m.zeros(3, dtype=m.int32); a.copy_(m.tensor([1.7, -2.7, 3.2])); a",
        "a = m.zeros(2, 3); a.copy_(m.tensor([1.5, 2.5, 3.5])); a",
        "a = m.zeros(3, dtype=m.bool); a.fill_(2); a",
        "a = m.ones(3, dtype=m.float64); a.copy_(m.tensor([1, 2, 3])); a.zero_(); a",
    ],
)
def test_copy_fill_and_zero_cast_as_torch(code):
    got, expected = _run(code, bg), _run(code, torch)
    assert str(got.dtype) == str(expected.dtype)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def _run(code, lib):
    *statements, last = code.split("; ")
    scope = {"m": lib, "np": np}
    exec("\n".join(statements), scope)
    return eval(last, scope)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_number_operands_give_torchs_values(dtype):
    """A Python number reaches the host form's NumPy function as it is (cast to the op's dtype there, as the kernel
    casts it): floats that round, overflow or underflow in float32, and ints float64 holds exactly or not."""
    x0 = np.array([1.5, -2.25, 3.0, 1e-3], dtype)
    numbers = [0.1, 1e300, -1e-50, 16777217, 2**53 + 1, -(2**62) - 777, 3]
    outputs = {}
    for lib in (bg, torch):
        x = lib.tensor(x0)
        results = [op(x, n) for n in numbers for op in (lambda x, n: x + n, lambda x, n: n - x, lambda x, n: x * n)]
        p = lib.tensor(x0)
        for n in numbers[:3]:
            p.mul_(n).add_(n, alpha=2)
        results.append(p)
        outputs[lib] = results
    for got, expected in zip(outputs[bg], outputs[torch]):
        assert str(got.dtype) == str(expected.dtype)
        np.testing.assert_array_equal(got.numpy(), expected.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_on_the_host_is_its_derived_forms_reduction(dtype):
    """x.sum()'s eager front sums as sum's derived host form does, bit for bit."""
    from batched_grad._numpy_eval import derived
    from batched_grad._ops.reduction import _SUM, sum_all_host

    rng = np.random.default_rng(3)
    for shape in [(1000,), (64,), (7, 300), (5, 6, 7), (), (0, 3)]:
        a = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(dtype)
        static = {"axis": tuple(range(a.ndim)), "keepdim": False, "dtype": np.dtype(dtype)}
        hand, reference = sum_all_host(a), np.asarray(derived(_SUM[0], [a], static))
        assert hand.dtype == reference.dtype and hand.shape == reference.shape == ()
        assert hand.tobytes() == reference.tobytes()
        assert bg.tensor(a).sum().numpy().tobytes() == reference.tobytes()
    np.testing.assert_allclose(bg.tensor(a).sum().numpy(), torch.tensor(a).sum().numpy(), rtol=1e-6)


def _plain(value):
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, (bg.Tensor, torch.Tensor)):
        values = repr(value.detach().numpy().tolist())  # nan as 'nan', equal to itself
        return values, str(value.dtype), value.requires_grad, type(value.grad_fn).__name__
    return value


@pytest.mark.parametrize(
    "code",
    [
        "x = m.arange(4.0); y = m.full((4,), 0.5); (x * y, x + y, x - y, x / y, 2.0 * x, 1 + x, x * 3, x / 0.0)",
        "x = m.arange(4.0); (x.mul(2.0), x.add(1.5), x.sub(x), x.div(3.0), x.tanh(), x.add(x, alpha=2.0))",
        "x = m.arange(4.0, dtype=m.float64); (x * 0.1, x + 2**60, x * 2**60, x * (2**53 + 1), x.tanh())",
        "x = m.tensor(3.0); y = m.tensor(0.25); (x * y, x / y, (x * y).tanh(), x * m.ones(2, 3))",
        "x = m.ones(2, 3); (x * m.arange(3.0), x + m.ones(1, 3), x * m.ones(3, dtype=m.float64), x * True)",
        "x = m.ones(3, requires_grad=True); y = x * 2.0; z = y.tanh() + x; (y, z, m.autograd.grad(z.sum(), x)[0])",
        "x = m.ones(3, requires_grad=True); m.set_grad_enabled(False); y = x * 2.0; m.set_grad_enabled(True); y",
        "x = m.ones(3, dtype=m.float16); (x * 0.5, x.tanh())",
    ],
)
def test_small_ops_on_host_data_give_torchs_values_and_nodes(code):
    assert _plain(_run(code, bg)) == _plain(_run(code, torch))


def test_small_ops_raise_torchs_errors():
    from oracle import raises_like_torch

    raises_like_torch(lambda m: m.ones(3) * m.ones(4))
    raises_like_torch(lambda m: m.ones(3) + m.ones(2, 4))


def test_small_ops_show_in_the_profiler_and_under_forward_ad():
    x = bg.arange(3.0)
    with bg.profiler.profile() as prof:
        (x * 2.0).tanh()
    names = [e.name for e in prof.events()]
    assert "aten::mul" in names and "aten::tanh" in names
    fw = bg.autograd.forward_ad
    with fw.dual_level():
        d = fw.make_dual(bg.arange(3.0), bg.ones(3))
        assert fw.unpack_dual((d * 2.0).tanh()).tangent is not None


@pytest.mark.parametrize(
    "code",
    [
        "x = m.arange(4.0); y = m.full((4,), 0.5); A = m.ones(3, 4); "
        "(x.dot(y), x @ y, A @ x, x.sum(), A.sum(), A @ A.T)",
        "A = m.ones(2, 3, 4, dtype=m.float64); B = m.ones(4, 5, dtype=m.float64); "
        "(A @ B, A.matmul(m.ones(4, dtype=m.float64)))",
        "x = m.arange(3.0, requires_grad=True); d = x.dot(x); s = (x @ x) + x.sum(); (d, s, m.autograd.grad(s, x)[0])",
        "x = m.tensor(2.5); (x.sum(), m.ones(0).sum(), m.ones(0, 3).sum(), m.ones(2) @ m.ones(2, 0))",
        "x = m.arange(4.0); (x.sum(0), x.sum(dtype=m.float64), x.sum(0, keepdim=True), x.dot(x.double().float()))",
    ],
)
def test_products_and_sums_on_host_data_give_torchs_values_and_nodes(code):
    assert _plain(_run(code, bg)) == _plain(_run(code, torch))


@pytest.mark.parametrize(
    "code",
    [
        "m.ones(3).dot(m.ones(4))",
        "m.ones(3).dot(m.ones(3, dtype=m.float64))",
        "m.ones(2, 3).dot(m.ones(3))",
        "m.ones(2, 3) @ m.ones(2)",
        "m.ones(2, 3) @ m.tensor(1.0)",
        "m.ones(2, 3).matmul(m.ones(3, dtype=m.float64))",
    ],
)
def test_products_on_host_data_raise_torchs_errors(code):
    from oracle import raises_like_torch

    raises_like_torch(lambda m: _run(code, m))


def test_a_product_in_an_autocast_region_is_cast():
    x, A = bg.ones(4), bg.ones(3, 4)
    with bg.autocast("cpu"):
        assert (A @ x).dtype == bg.bfloat16 and A.matmul(x).dtype == bg.bfloat16
    assert (A @ x).dtype == bg.float32
