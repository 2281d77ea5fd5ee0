"""Host forms derived from an op's jaxpr (batched_grad/_numpy_eval.py): on the CPU backend, after a new size (a
slice x[:k], a mask, a reshape) the ops without a hand-written host form and their VJPs compile nothing, their values
match torch's and the kernel's within the tier rule, and what has no derived form still runs as a kernel."""

import functools

import jax
import numpy as np
import pytest
import torch
from jax import lax

import batched_grad as bg
from batched_grad import _host, _numpy_eval, _numpy_rows
from batched_grad._x64 import scoped
from oracle import assert_same

CPU = jax.default_backend() == "cpu"
SIZES = range(100, 120)  # 20 new sizes
# a call before the sizes: it traces each op's jaxpr for its pattern of shapes and compiles its elementwise kernels
WARM_UP = (99,)
pytestmark = pytest.mark.skipif(not CPU, reason="host forms run on the CPU backend only")


def _values(dtype, n=400, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(dtype)


def _masked(lib, v, k):
    """The elements of v above its k-th largest: exactly k of them (v's values are distinct)."""
    c = float(np.sort(np.asarray(v.detach()))[-k - 1])
    return v[v > c]


# name -> f(lib, vector, matrix, weight, k): the rows, each on a tensor of a new size k
ROWS = {
    "sum": lambda m, x, a, w, k: x[:k].sum(),
    "mean": lambda m, x, a, w, k: x[:k].mean(),
    "exp_sum": lambda m, x, a, w, k: x[:k].exp().sum(),
    "masked_pow_mean": lambda m, x, a, w, k: _masked(m, x, k).pow(2).mean(),
    "matmul_relu": lambda m, x, a, w, k: (a[:k] @ w).relu(),
    "softmax": lambda m, x, a, w, k: x[:k].softmax(0),
    "var": lambda m, x, a, w, k: x[:k].var(),
    "norm": lambda m, x, a, w, k: x[:k].norm(),
}


def _operands(lib, dtype, requires_grad=False):
    rng = np.random.default_rng(1)
    arrays = _values(dtype), rng.standard_normal((400, 16)).astype(dtype), rng.standard_normal(16).astype(dtype)
    return [lib.tensor(a, requires_grad=requires_grad) for a in arrays]


def _tolerance(dtype):
    return {"rtol": 2e-5, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ROWS))
def test_new_sizes_compile_nothing_and_match_torch(name, dtype):
    row = ROWS[name]
    ours, theirs = _operands(bg, dtype), _operands(torch, dtype)
    for k in WARM_UP:
        row(bg, *ours, k).numpy()
    before = bg.compile_count()
    for k in SIZES:
        got = row(bg, *ours, k)
        assert_same(got, row(torch, *theirs, k), **_tolerance(dtype))
    assert bg.compile_count() == before


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ROWS))
def test_gradients_through_new_sizes_compile_nothing_and_match_torch(name, dtype):
    row = ROWS[name]
    weight = np.linspace(0.5, 1.5, 256).astype(dtype)  # a loss whose gradient is not the same for every element

    def gradients(lib, k):
        x, a, w = _operands(lib, dtype, requires_grad=True)
        out = row(lib, x, a, w, k).reshape(-1)
        (out * lib.tensor(weight[: out.shape[0]])).sum().backward()
        return x.grad, a.grad, w.grad

    for k in WARM_UP:
        gradients(bg, k)
    before = bg.compile_count()
    for k in SIZES:
        ours, theirs = gradients(bg, k), gradients(torch, k)
        for g, t in zip(ours, theirs):
            if t is None:
                assert g is None or not np.any(g.numpy())
            else:
                assert_same(g, t, **_tolerance(dtype))
    assert bg.compile_count() == before


def _ulps(a, b):
    ints = {4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia, ib = (np.asarray(v).view(ints).astype(np.int64) for v in (a, b))
    ordered = [np.where(i < 0, np.iinfo(ints).min - i, i) for i in (ia, ib)]
    return np.where(np.isnan(a) & np.isnan(b), 0, np.abs(ordered[0] - ordered[1]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ROWS))
def test_values_agree_with_the_kernel(name, dtype, monkeypatch):
    """Elementwise results within 2 ulp of the kernel's; sums (reductions, products) within the error bound of a
    sum in another order, n eps times the scale of the sum of n terms."""
    row = ROWS[name]
    ours = _operands(bg, dtype)
    sizes = (101, 117)
    derived = [row(bg, *ours, k).numpy() for k in sizes]
    monkeypatch.setattr(_host, "HOST_ELEMENTS", 0)
    kernel = [row(bg, *ours, k).numpy() for k in sizes]
    for n, d, k in zip(sizes, derived, kernel):
        if name == "softmax":
            assert _ulps(d, k).max() <= 2
        scale = max(np.abs(k).max(), 1.0) * np.finfo(dtype).eps
        np.testing.assert_allclose(d, k, rtol=0, atol=n * scale)


def test_elementwise_chains_agree_bit_for_bit_with_the_kernel(monkeypatch):
    """Transcendental functions and multiply-adds (which XLA contracts into one rounding) run as XLA's kernels; exact
    operations with NumPy give the same bits."""
    x = bg.tensor(np.linspace(-6.0, 6.0, 301, dtype=np.float32))
    chains = [
        lambda t: bg.sigmoid(t) * (1 - bg.sigmoid(t)),
        lambda t: t * t + 3 * t - 2,
        lambda t: bg.sinc(t),
        lambda t: bg.nn.functional.gelu(t),
        lambda t: bg.special.erfc(t) / (t * t + 1),
        lambda t: bg.where(t > 0, bg.log1p(t.abs()), bg.expm1(t)),
    ]
    derived = [f(x).numpy() for f in chains]
    monkeypatch.setattr(_host, "HOST_ELEMENTS", 0)
    for d, f in zip(derived, chains):
        np.testing.assert_array_equal(d, f(x).numpy())


def _evaluated(fn, *arrays):
    """fn's outputs computed from its jaxpr by the NumPy rows, traced on concrete shapes."""
    flat = lambda *a: tuple(jax.tree_util.tree_leaves(fn(*a)))
    found = _numpy_eval.program_for(fn, lambda structs: (flat, structs), [(a.shape, a.dtype) for a in arrays], True)
    assert found is not None, "no derived form"
    return _numpy_eval.evaluate(*found, list(arrays))


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.7, -2.7, 3e9, -3e9, 7.0])
INTEGERS = np.array([0, 1, -1, 7, -7, 5, 2**31 - 1, -(2**31), 3, -3, 2, -2, 33, 40, 31, 0], np.int32)


def _prims():
    f32 = SPECIAL.astype(np.float32)
    ints, shifts = INTEGERS, np.roll(INTEGERS, 3)
    return {
        "div_rem_int": (lambda a, b: (lax.div(a, b), lax.rem(a, b)), ints, shifts),
        "div_rem_float": (lambda a, b: (lax.div(a, b), lax.rem(a, b)), f32, np.roll(f32, 5)),
        "max_min_signed_zeros": (lambda a, b: (lax.max(a, b), lax.min(a, b)), f32, np.roll(f32, 1)),
        "sign_round": (lambda a: (lax.sign(a), lax.round(a), lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN)), f32),
        "float_to_int": (lambda a: (a.astype(np.int32), a.astype(np.uint8), a.astype(np.int64), a.astype(bool)), f32),
        "shifts": (
            lambda a, b: (lax.shift_left(a, b), lax.shift_right_arithmetic(a, b), lax.shift_right_logical(a, b)),
            ints,
            shifts,
        ),
        "integer_pow": (lambda a: (lax.integer_pow(a, 3), lax.integer_pow(a, -2), lax.integer_pow(a, 0)), f32),
        # a 0-d operand's bitcast stays 0-d (copysign and signbit bitcast: digamma of a 0-d tensor reaches them)
        "bitcast_zero_dim": (
            lambda a: (lax.bitcast_convert_type(a, np.int32), jax.numpy.copysign(np.float32(np.inf), -a)),
            np.float32(-2.5),
        ),
        "clamp_select": (lambda a, b: (lax.clamp(np.float32(-1), a, np.float32(2)), lax.select(a > b, a, b)), f32, f32),
        "argmax_cummax": (
            lambda a: (jax.numpy.argmax(a), jax.numpy.argmin(a), lax.cummax(a, 0), lax.cummin(a, 0)),
            f32,
        ),
        "cumsum_exact": (  # sums of small integers: exact in any order
            lambda a: (lax.cumsum(a, 0, reverse=True), lax.cumprod(a[:6], 0), jax.numpy.sum(a)),
            np.arange(-5.0, 11.0, dtype=np.float32),
        ),
        "pad_rev_slice": (
            lambda a: (
                lax.pad(a, np.float32(9), [(2, -3, 1)]),
                lax.rev(a, (0,)),
                a[1:11:3],
                lax.dynamic_slice(a, (13,), (5,)),
            ),
            f32,
        ),
        "dot_general": (
            lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
            np.arange(24.0, dtype=np.float32).reshape(2, 3, 4),
            np.arange(40.0, dtype=np.float32).reshape(2, 4, 5),
        ),
    }


def _assert_same_bits(got, want):
    """Equal values, with the sign of zeros and nan where nan is."""
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        got, want = np.where(np.isnan(got), 0, got), np.where(np.isnan(want), 0, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", list(_prims()))
def test_rows_give_xla_bits_on_special_values(case):
    fn, *arrays = _prims()[case]
    with jax.enable_x64(True):
        expected = jax.tree_util.tree_leaves(jax.jit(fn)(*arrays))
    got = _evaluated(fn, *arrays)
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        _assert_same_bits(g, w)


def _kernels(fn, *arrays):
    """How many region kernels the derived program of `fn` runs."""
    flat = lambda *a: tuple(jax.tree_util.tree_leaves(fn(*a)))
    program, _ = _numpy_eval.program_for(
        fn, lambda structs: (flat, structs), [(a.shape, a.dtype) for a in arrays], True
    )
    return sum([isinstance(step[0], functools.partial) for step in program.steps])


def test_a_power_the_jaxpr_fixes_runs_with_numpy_bit_for_bit():
    """XLA's simplifier computes pow(a, b) for an exponent it knows when it compiles (0, 1, 2 or 3, also where the
    program computes it from constants, as a derivative's b - 1) as 1, a, a * a, a * a * a: the rows give those bits
    without a kernel. A square that is added to something is a multiply-add (a kernel), and an exponent the program
    reads is XLA's general pow (a kernel)."""
    x = np.concatenate([SPECIAL, np.random.default_rng(0).standard_normal(300) * 30]).astype(np.float32)

    def fixed(a):
        three = jax.numpy.full_like(a, 3.0)
        return tuple([lax.pow(a, np.float32(p)) for p in (0, 1, 2, 3)]) + (lax.pow(a, three - 1), lax.pow(a, three))

    cases = [(fixed, (x,), 0), (lambda a: lax.pow(a, np.float32(2)) + a, (x,), 1), (lax.pow, (x, np.roll(x, 7)), 1)]
    for fn, arrays, kernels in cases:
        assert _kernels(fn, *arrays) == kernels
        with jax.enable_x64(True):
            expected = jax.tree_util.tree_leaves(jax.jit(fn)(*arrays))
        for got, want in zip(_evaluated(fn, *arrays), expected):
            _assert_same_bits(got, want)


def test_a_jaxpr_is_traced_once_per_pattern_of_sizes():
    x = bg.tensor(_values(np.float32, 300))
    x[:50].logsumexp(0)
    traced = len(_numpy_eval._programs)
    for k in range(51, 71):
        x[:k].logsumexp(0)
    assert len(_numpy_eval._programs) == traced


def test_a_function_needing_concrete_sizes_is_traced_per_shape():
    fn = lambda a: a.reshape(2, -1).sum(0)  # a fixed reshape: a symbolic size cannot be split in two
    for n in (6, 10):
        (got,) = _evaluated(fn, np.arange(n, dtype=np.float32))
        np.testing.assert_array_equal(got, np.arange(n, dtype=np.float32).reshape(2, -1).sum(0))


def test_a_primitive_without_a_row_runs_as_a_kernel():
    assert "sort" not in _numpy_rows.ROWS
    x, t = bg.tensor(_values(np.float32)), torch.tensor(_values(np.float32))
    x[:30].sort()
    for k in (31, 32):
        before = bg.compile_count()
        assert_same(x[:k].sort().values, t[:k].sort().values)
        assert bg.compile_count() > before  # a kernel for each new size, as before


def test_repeated_calls_give_the_same_bits_and_compile_nothing():
    """A value does not depend on how often the per-op tier computed it (gradcheck, which runs there, asks for the
    same bits from a backward run twice)."""
    x = bg.tensor(_values(np.float32), requires_grad=True)
    previous = bg.get_fusion()
    bg.set_fusion("off")  # the per-op tier only
    try:
        first = bg.autograd.grad(x[:137].softmax(0)[::3].sum() * x[:137].var(), x)[0].numpy()
        before = bg.compile_count()
        for _ in range(4):
            again = bg.autograd.grad(x[:137].softmax(0)[::3].sum() * x[:137].var(), x)[0].numpy()
            np.testing.assert_array_equal(again, first)
        assert bg.compile_count() == before
    finally:
        bg.set_fusion(previous)


def test_large_operands_and_other_dtypes_run_as_kernels(monkeypatch):
    monkeypatch.setattr(_host, "HOST_ELEMENTS", 64)
    x = bg.tensor(_values(np.float32))
    x[:70].mean()
    before = bg.compile_count()
    assert_same(x[:71].mean(), torch.tensor(_values(np.float32))[:71].mean())
    assert bg.compile_count() > before
    z, zt = bg.tensor(_values(np.float32)).to(bg.complex64), torch.tensor(_values(np.float32)).to(torch.complex64)
    z[:8].exp()
    before = bg.compile_count()
    assert_same(z[:9].exp(), zt[:9].exp(), rtol=1e-6)
    assert bg.compile_count() > before  # complex: no derived form


def test_integer_and_bool_results_match_torch():
    x, t = bg.tensor(_values(np.float32)), torch.tensor(_values(np.float32))
    x[:10].argmax()
    before = bg.compile_count()
    for k in (40, 41, 42):
        assert_same(x[:k].argmax(), t[:k].argmax())
        assert_same((x[:k] > 0).sum(), (t[:k] > 0).sum())
        assert_same((x[:k] * 100).long().cumsum(0), (t[:k] * 100).long().cumsum(0))
    assert bg.compile_count() == before


def _pooled(lib, n):
    x = lib.tensor(_values(np.float32, 2 * 3 * n * (n + 1), seed=n).reshape(2, 3, n, n + 1), requires_grad=True)
    F = lib.nn.functional
    y = F.max_pool2d(x, 2).sum() + F.avg_pool2d(x, 3, stride=2, padding=1).pow(2).sum() + F.unfold(x, 2).tanh().sum()
    y.backward()
    return y.detach(), x.grad


def test_pooling_and_unfold_run_on_the_host():
    """Pooling reduces windows (reduce_window_max, reduce_window_sum) and unfold gathers them with jnp.stack, one
    primitive of its own (with unstack, its transpose) since JAX 0.10: they and their gradients compile nothing at a
    new size, with torch's values."""
    _pooled(bg, 6)
    before = bg.compile_count()
    for n in (7, 9, 12):
        for got, want in zip(_pooled(bg, n), _pooled(torch, n)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=2e-6)
    assert bg.compile_count() == before


@pytest.mark.parametrize(
    "name, init, combine", [("sum", 0.0, lax.add), ("max", -np.inf, lax.max), ("min", np.inf, lax.min)]
)
def test_window_reduction_rows_equal_xlas(name, init, combine):
    rng = np.random.default_rng(len(name))
    row = _numpy_rows.ROWS[f"reduce_window_{name}"]
    checked = 0
    for _ in range(30):
        rank = int(rng.integers(1, 4))
        a = rng.standard_normal([int(n) for n in rng.integers(1, 7, rank)])
        params = dict(
            window_dimensions=tuple(int(n) for n in rng.integers(1, 4, rank)),
            window_strides=tuple(int(n) for n in rng.integers(1, 3, rank)),
            padding=tuple((int(lo), int(hi)) for lo, hi in rng.integers(-1, 3, (rank, 2))),
            base_dilation=tuple(int(n) for n in rng.integers(1, 3, rank)),
            window_dilation=tuple(int(n) for n in rng.integers(1, 3, rank)),
        )
        try:
            want = scoped(lax.reduce_window)(a, init, combine, *params.values())  # in float64
        except (TypeError, ValueError):  # a cropping beyond the operand, say
            continue
        got = row(a, **params)
        assert got.shape == want.shape and got.dtype == want.dtype, params
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-13, atol=1e-13, err_msg=str(params))
        checked += 1
    assert checked >= 15
