"""Helpers that check batched_grad against torch 2.13 as the oracle: values, gradients, double backward."""

import functools
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap

torch.set_default_dtype(torch.float32)


# the float dtypes of the op tables' tests, with their tolerances; the float32 cases run in the slow suite
FLOATS = {"float64": (bg.float64, dict(rtol=1e-6, atol=1e-8)), "float32": (bg.float32, dict(rtol=1e-4, atol=1e-5))}
FLOAT_PARAMS = ["float64", pytest.param("float32", marks=pytest.mark.slow)]
# (dtype, batched) for the op tables: the is_grads_batched comparison against the per-row loop compiles a vmapped
# program per op (half of those tables' time), so it runs in the slow tier; test_batched_ops covers every op batched
FLOAT_TIERS = [
    pytest.param("float64", False, id="float64"),
    pytest.param("float64", True, marks=pytest.mark.slow, id="float64-batched"),
    pytest.param("float32", False, marks=pytest.mark.slow, id="float32"),
]


def to_torch(x, requires_grad=None):
    if isinstance(x, bg.Tensor):
        t = torch.from_numpy(np.array(x.detach().numpy()))
        return t.requires_grad_(x.requires_grad if requires_grad is None else requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(to_torch(v, requires_grad) for v in x)
    return x


def to_numpy(x):
    if isinstance(x, bg.Tensor):
        return np.asarray(x.detach().numpy(force=True))
    if isinstance(x, torch.Tensor):
        return x.detach().numpy(force=True)  # force: torch returns ZeroTensors for some double-backward results
    return np.asarray(x)


def assert_same(actual, expected, rtol=1e-6, atol=1e-8, check_dtype=True):
    """Compare a bg result (Tensor, tuple, number, None) with the torch result of the same structure."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, rtol, atol, check_dtype)
        return
    if expected is None:
        assert actual is None, actual
        return
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, bg.Tensor), f"expected a Tensor, got {type(actual)}"
        assert tuple(actual.shape) == tuple(expected.shape), (actual.shape, expected.shape)
        if check_dtype:
            assert repr(actual.dtype) == repr(expected.dtype), (actual.dtype, expected.dtype)
    np.testing.assert_allclose(to_numpy(actual), to_numpy(expected), rtol=rtol, atol=atol, equal_nan=True)


def assert_float32_as_accurate(actual, torch32, torch64, roundings, factor=8):
    """A float32 result judged by its distance from torch's float64 result, against torch's own float32 distance.

    Which roundings a float32 computation gets depends on the CPU on both sides (vector width, FMA contraction, the
    kernels NumPy, XLA, MKL and ATen pick for it), so closeness to torch's float32 bits holds on one CPU and not on
    another; accuracy holds on all. torch's float32 error measures what the computation's conditioning makes of
    float32 rounding; `roundings` (about the number of dependent float32 steps behind each value) bounds it from
    below where torch happens to land near the float64 value. Allowed: `factor` times the larger of the two."""
    if isinstance(torch64, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(torch64), (actual, torch64)
        for a, t32, t64 in zip(actual, torch32, torch64):
            assert_float32_as_accurate(a, t32, t64, roundings, factor)
        return
    got, t32, t64 = (np.asarray(to_numpy(v)) for v in (actual, torch32, torch64))
    assert got.dtype == t32.dtype == np.float32 and got.shape == t64.shape, (got.dtype, t32.dtype, got.shape, t64.shape)
    got, t32, t64 = (v.astype(np.float64) for v in (got, t32, t64))
    torch_error = np.abs(t32 - t64).max(initial=0.0)
    floor = roundings * np.finfo(np.float32).eps * np.abs(t64).max(initial=0.0)
    error = np.abs(got - t64).max(initial=0.0)
    assert error <= factor * max(torch_error, floor), (
        f"float32 error {error:.3g} against float64; torch's float32 error {torch_error:.3g}, "
        f"{roundings} roundings of the scale {floor:.3g}"
    )


def _flat_tensors(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat_tensors(o)]
    return [out]


def _requiring_grad(values, kind):
    return [v for v in values if isinstance(v, kind) and v.requires_grad]


def _zeros_for_none(grads, inputs, zeros_like):
    """Unused inputs' None grads as zeros, so that the two libraries' grads compare element by element."""
    return tuple(zeros_like(x) if g is None else g for g, x in zip(grads, inputs))


def _check_forward(fn, torch_fn, inputs, t_inputs, rtol, atol):
    """The forward values agree; the outputs that require grad, in batched_grad and in torch."""
    out = fn(*inputs)
    t_out = torch_fn(*t_inputs)
    assert_same(out, t_out, rtol, atol)
    outs = _requiring_grad(_flat_tensors(out), bg.Tensor)
    t_outs = _requiring_grad(_flat_tensors(t_out), torch.Tensor)
    assert len(outs) == len(t_outs)
    return outs, t_outs


def _check_vjp(outs, t_outs, diff, t_diff, rng, rtol, atol, **grad_kw):
    """The grads of random cotangents of `outs` (the same in both libraries) agree; they are returned, Nones as
    zeros. grad_kw: batched_grad's extra keywords (torch frees its graph after the call unless create_graph)."""
    cots = [rng.standard_normal(o.shape).astype(to_numpy(o).dtype) for o in outs]
    create_graph = grad_kw.get("create_graph", False)
    g = bg.autograd.grad(outs, diff, [bg.tensor(c) for c in cots], allow_unused=True, **grad_kw)
    tg = torch.autograd.grad(
        t_outs, t_diff, [torch.from_numpy(c) for c in cots], create_graph=create_graph, allow_unused=True
    )
    tg = _zeros_for_none(tg, t_diff, torch.zeros_like)
    g = _zeros_for_none(g, diff, bg.zeros_like)
    assert_same(g, tg, rtol, atol)
    return g, tg


def check_op(fn, torch_fn, inputs, *, grad=True, gradgrad=True, batched=True, rtol=1e-6, atol=1e-8, seed=0):
    """Check fn(*inputs) against torch_fn(*inputs): forward values, then (for float inputs that require grad)
    grad of a random projection of the outputs, then the double backward of that grad; with `batched`, also
    that is_grads_batched=True equals the per-row loop at first and second order."""
    t_inputs = to_torch(inputs)
    outs, t_outs = _check_forward(fn, torch_fn, inputs, t_inputs, rtol, atol)
    if not grad or not outs:
        return
    diff, t_diff = _requiring_grad(inputs, bg.Tensor), _requiring_grad(t_inputs, torch.Tensor)
    rng = np.random.default_rng(seed)
    g, tg = _check_vjp(outs, t_outs, diff, t_diff, rng, rtol, atol, create_graph=gradgrad, retain_graph=True)
    if batched:
        check_batched(outs, diff, rng, rtol, atol)
    pairs = [(a, b) for a, b in zip(g, tg) if a.requires_grad and b.requires_grad] if gradgrad else []
    if not pairs:
        return
    firsts, t_firsts = [a for a, _ in pairs], [b for _, b in pairs]
    _check_vjp(firsts, t_firsts, diff, t_diff, rng, rtol, atol, retain_graph=batched)
    if batched:
        check_batched(firsts, diff, rng, rtol, atol)


def check_batched(outs, inputs, rng, rtol=1e-6, atol=1e-8, batch=3):
    """grad(..., is_grads_batched=True) equals the stacked per-row grads, and no built-in op falls back."""
    cots = [rng.standard_normal((batch,) + tuple(o.shape)).astype(to_numpy(o).dtype) for o in outs]
    with vmap.fallback_warnings(), warnings.catch_warnings():
        warnings.simplefilter("error", vmap.FallbackWarning)
        got = bg.autograd.grad(
            outs, inputs, [bg.tensor(c) for c in cots], retain_graph=True, allow_unused=True, is_grads_batched=True
        )
    rows = [
        bg.autograd.grad(outs, inputs, [bg.tensor(c[b]) for c in cots], retain_graph=True, allow_unused=True)
        for b in range(batch)
    ]
    for i, x in enumerate(inputs):
        if got[i] is None:
            assert all(r[i] is None for r in rows)
            continue
        expected = np.stack([to_numpy(r[i]) if r[i] is not None else np.zeros(x.shape) for r in rows])
        np.testing.assert_allclose(to_numpy(got[i]), expected, rtol=rtol, atol=atol)


def rand(*shape, dtype=bg.float64, requires_grad=True, low=-1.0, high=1.0, seed=None):
    """A random float64 leaf (requires grad) with values in [low, high)."""
    rng = np.random.default_rng(seed if seed is not None else abs(hash(shape)) % 2**31)
    a = rng.uniform(low, high, size=shape)
    return bg.tensor(a, dtype=dtype, requires_grad=requires_grad)


def pair(*shape, seed=0):
    """The same float64 leaf (values in [0.5, 1.5)) in batched_grad and in torch."""
    a = np.random.default_rng(seed).uniform(0.5, 1.5, size=shape)
    return bg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def raises_like_torch(fn):
    """fn(torch) and fn(batched_grad) raise the same builtin exception type with the same first line."""
    with pytest.raises(Exception) as want:
        fn(torch)
    with pytest.raises(Exception) as got:
        fn(bg)
    base = next(c for c in type(want.value).__mro__ if c.__module__ == "builtins")
    assert isinstance(got.value, base), (got.value, want.value)
    assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]  # torch appends C++ frames
    return got.value, want.value


def check_both(fn, inputs, batched=False, **kw):
    """check_op of fn(bg, ...) against fn(torch, ...) for a table entry written once against a module; the
    is_grads_batched comparison is opt-in here (compile cost; test_batched_ops covers every op)."""
    check_op(functools.partial(fn, bg), functools.partial(fn, torch), inputs, batched=batched, **kw)


def raises_like(fn, inputs, match=None):
    """fn(torch, ...) raises; fn(bg, ...) must raise the same exception class (and message part `match`)."""
    with pytest.raises(Exception) as expected:
        fn(torch, *to_torch(inputs))
    with pytest.raises(type(expected.value), match=match):
        fn(bg, *inputs)


def drawn_by_both(make, seed=0):
    """make(module, its vmap) for batched_grad and then torch, each after manual_seed(seed): NumPy arrays of the
    draws of each library from the same stream."""
    drawn = []
    for m, vmap_ in ((bg, vmap.vmap), (torch, torch.func.vmap)):
        m.manual_seed(seed)
        drawn.append(np.asarray(make(m, vmap_).numpy()))
    return drawn
