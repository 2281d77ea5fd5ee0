"""Compositions of batched_grad.func's transforms that differentiate through a vjp_fn, and the grad mode a vjp_fn is
called under, against torch.func 2.13: each case is written once against a library `m` and its `F = m.func`, and
its results (values and whether they require grad) are compared in float64."""

import numpy as np
import pytest
import torch
import torch.func

import batched_grad as bg
import batched_grad.func
from oracle import assert_same

RNG = np.random.default_rng(7)
X = RNG.standard_normal(4)
V = RNG.standard_normal(4)
VS = RNG.standard_normal((3, 4))


def t(m, data, requires_grad=False):
    return m.tensor(data, dtype=m.float64, requires_grad=requires_grad)


def f(m, x):
    return m.tanh(x) * m.sin(x)


def requires_grad_flags(results):
    return [r.requires_grad for r in (results if isinstance(results, (tuple, list)) else (results,))]


def _vjp_fn(m, F, fn=f):
    """The vjp_fn of `fn` at X, built outside any other transform."""
    return F.vjp(lambda x: fn(m, x), t(m, X))[1]


def _vjp_of_grad_then_grad(m, F):
    def outer(x, v):
        _, vjp_fn = F.vjp(F.grad(lambda y: f(m, y).sum()), x)
        return (vjp_fn(v)[0] * x).sum()

    return F.grad(outer, argnums=(0, 1))(t(m, X), t(m, V))


COMPOSITIONS = {
    "grad of vjp w.r.t. the cotangent": lambda m, F: F.grad(
        lambda x, v: F.vjp(lambda y: f(m, y), x)[1](v)[0].sum(), argnums=1
    )(t(m, X), t(m, V)),
    "grad of vjp w.r.t. the primal": lambda m, F: F.grad(lambda x, v: F.vjp(lambda y: f(m, y), x)[1](v)[0].sum())(
        t(m, X), t(m, V)
    ),
    "grad of vjp w.r.t. both": lambda m, F: F.grad(
        lambda x, v: (F.vjp(lambda y: f(m, y), x)[1](v)[0] ** 2).sum(), argnums=(0, 1)
    )(t(m, X), t(m, V)),
    "grad through a vjp_fn built outside": lambda m, F: F.grad(lambda v: (_vjp_fn(m, F)(v)[0] ** 2).sum())(t(m, V)),
    "scalar grad of vjp of sin": lambda m, F: F.grad(lambda v: F.vjp(m.sin, t(m, X[0]))[1](v)[0])(t(m, V[0])),
    "scalar grad of vjp of grad": lambda m, F: F.grad(
        lambda v: F.vjp(F.grad(lambda y: -m.cos(y)), t(m, X[0]))[1](v)[0]
    )(t(m, V[0])),
    "jacrev through a vjp_fn": lambda m, F: F.jacrev(lambda v: _vjp_fn(m, F)(v)[0])(t(m, V)),
    "jacfwd through a vjp_fn": lambda m, F: F.jacfwd(lambda v: _vjp_fn(m, F)(v)[0])(t(m, V)),
    "vmap of grad through a vjp_fn": lambda m, F: F.vmap(F.grad(lambda v: (_vjp_fn(m, F)(v)[0] ** 2).sum()))(t(m, VS)),
    "vjp of grad": lambda m, F: F.vjp(F.grad(lambda y: f(m, y).sum()), t(m, X))[1](t(m, V)),
    "grad of vjp of grad w.r.t. both": _vjp_of_grad_then_grad,
}


@pytest.mark.parametrize("name", list(COMPOSITIONS))
def test_differentiating_through_a_vjp_fn_matches_torch_func(name):
    expected = COMPOSITIONS[name](torch, torch.func)
    actual = COMPOSITIONS[name](bg, bg.func)
    assert requires_grad_flags(actual) == requires_grad_flags(expected)
    assert_same(actual, expected, rtol=1e-6, atol=1e-10)


def test_a_vjp_fn_gives_results_differentiable_with_respect_to_a_cotangent_that_requires_grad():
    def run(m, F):
        v = t(m, V, requires_grad=True)
        (g,) = _vjp_fn(m, F)(v)
        return g.requires_grad, m.autograd.grad((g**2).sum(), v)

    assert_same(run(bg, bg.func), run(torch, torch.func))


# ---- the grad mode a vjp_fn is called under ----------------------------------------------------------------------


def _built_under_no_grad(m, F, fn):
    """vjp of `fn` at a tensor that requires grad, built under no_grad, its vjp_fn called with grad mode on."""
    x = t(m, X, requires_grad=True)
    with m.no_grad():
        out, vjp_fn = F.vjp(fn, x)
    (g,) = vjp_fn(t(m, V))
    return out.requires_grad, g.requires_grad, g, m.autograd.grad(g.sum(), x)


def _called_under_no_grad(m, F):
    x = t(m, X, requires_grad=True)
    out, vjp_fn = F.vjp(lambda y: y**3, x)
    with m.no_grad():
        (g,) = vjp_fn(t(m, V))
    return out.requires_grad, g.requires_grad, g, m.autograd.grad(out.sum(), x)


def _capture_built_under_no_grad(m, F):
    w = t(m, X, requires_grad=True)
    with m.no_grad():
        _, vjp_fn = F.vjp(lambda y: y * w, t(m, V))
    (g,) = vjp_fn(t(m, V))
    return g.requires_grad, m.autograd.grad(g.sum(), w)


def _built_under_no_grad_inside_grad(m, F):
    def inner(x):
        with m.no_grad():
            _, vjp_fn = F.vjp(lambda y: y**3, x)
        return vjp_fn(t(m, V))[0].sum()

    return F.grad(inner)(t(m, X))


GRAD_MODES = {
    "built under no_grad, called with grad on": lambda m, F: _built_under_no_grad(m, F, lambda y: y**2),
    "built under no_grad, a cube": lambda m, F: _built_under_no_grad(m, F, lambda y: y**3 * 0.5),
    "built with grad on, called under no_grad": _called_under_no_grad,
    "a captured tensor, built under no_grad": _capture_built_under_no_grad,
    "built under no_grad inside grad": _built_under_no_grad_inside_grad,
}


@pytest.mark.parametrize("name", list(GRAD_MODES))
def test_the_grad_mode_at_the_call_of_a_vjp_fn_decides_as_torch_func(name):
    assert_same(GRAD_MODES[name](bg, bg.func), GRAD_MODES[name](torch, torch.func), rtol=1e-6, atol=1e-10)


# ---- in-place writes into the arguments of vmap and jvp reach the caller's tensors --------------------------------

A = RNG.standard_normal((3, 2))
B = RNG.standard_normal((3, 2))
C = RNG.standard_normal((3, 2))
D = RNG.standard_normal((3, 2))


def _jvp_writing(F, f):
    return lambda x, xt, y, yt: F.jvp(f, (x, y), (xt, yt))


def _copy_into_first(x, y):
    x.copy_(y)
    return x


def _copy_into_strided_view(x, y):
    view = x[::2]
    view.copy_(y)
    return view, x


def _after(m, F, call, *arrays):
    """`call(F, *tensors)` on float64 tensors of `arrays`, then the tensors as the caller sees them afterwards."""
    tensors = [t(m, a) for a in arrays]
    return call(F, *tensors), tensors


WRITES = {
    "jvp": lambda m, F: _after(m, F, lambda F, *ts: _jvp_writing(F, _copy_into_first)(*ts), A, B, C, D),
    "jvp, a scaled write": lambda m, F: _after(
        m, F, lambda F, x, xt: F.jvp(lambda p: p.mul_(3).sin(), (x,), (xt,)), A, B
    ),
    "vmap of jvp": lambda m, F: _after(m, F, lambda F, *ts: F.vmap(_jvp_writing(F, _copy_into_first))(*ts), A, B, C, D),
    "vmap of jvp, in_dims 1, unbatched source": lambda m, F: _after(
        m,
        F,
        lambda F, *ts: F.vmap(_jvp_writing(F, _copy_into_first), in_dims=(1, 1, None, None))(*ts),
        A,
        B,
        C[:, 0],
        D[:, 0],
    ),
    "vmap of jvp, through a view": lambda m, F: _after(
        m,
        F,
        lambda F, *ts: F.vmap(_jvp_writing(F, _copy_into_strided_view), in_dims=(1, 1, 0, 0))(*ts),
        A,
        B,
        C[:2, :],
        D[:2, :],
    ),
    "vmap": lambda m, F: _after(m, F, lambda F, x: F.vmap(lambda r: r.add_(1.5))(x), A),
    "vmap, in_dims 1, result not the argument": lambda m, F: _after(
        m, F, lambda F, x: F.vmap(lambda r: r.mul_(2).sum(), in_dims=1)(x), A
    ),
    "vmap in chunks": lambda m, F: _after(m, F, lambda F, x: F.vmap(lambda r: r.mul_(-1), chunk_size=2)(x), A),
    "nested vmap": lambda m, F: _after(m, F, lambda F, x: F.vmap(F.vmap(lambda r: r.sub_(0.5)))(x), A),
    "vmap over a view": lambda m, F: _after(m, F, lambda F, x: F.vmap(lambda r: r.mul_(10))(x[:, 1]), A),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_in_place_writes_under_vmap_and_jvp_reach_the_callers_tensors_as_torch(name):
    assert_same(WRITES[name](bg, bg.func), WRITES[name](torch, torch.func), rtol=1e-6, atol=1e-10)


def test_a_write_under_vmap_is_differentiable_with_respect_to_a_captured_tensor():
    def run(m, F):
        w = t(m, A[0], requires_grad=True)
        x = t(m, B)
        out = F.vmap(lambda r: r.mul_(w).sin())(x)
        total = (x**2).sum() + out.sum()
        first = m.autograd.grad(total, w, retain_graph=True)
        return x, first, m.autograd.grad(total, w)  # again: the backward's rerun starts from what func saw

    assert_same(run(bg, bg.func), run(torch, torch.func), rtol=1e-6, atol=1e-10)
