"""vmap.vmap's batched results are differentiable by autograd outside the vmap with respect to the tensors its
function captures and its mapped arguments, as torch.func.vmap's (`out = vmap(f)(X); grad(out.sum(), (w, X))`),
with torch 2.13 as the oracle."""

import numpy as np
import pytest
import torch
import torch.func

import batched_grad as bg
from oracle import assert_same

RNG = np.random.default_rng(0)
W = RNG.standard_normal((3, 5))
B = RNG.standard_normal(3)
XS = RNG.standard_normal((4, 5))
CT = RNG.standard_normal((4, 3))


def t(m, data, requires_grad=False):
    return m.tensor(data, dtype=m.float64, requires_grad=requires_grad)


def mlp(m, w, b):
    return lambda x: m.tanh(w @ x + b) * 2


CASES = {
    "captured leaves": lambda m, w, b: m.func.vmap(mlp(m, w, b))(t(m, XS)),
    "captured non-leaf": lambda m, w, b: m.func.vmap(mlp(m, w * 2, b.exp()))(t(m, XS)),
    "in_dims and out_dims": lambda m, w, b: m.func.vmap(mlp(m, w, b), in_dims=1, out_dims=1)(t(m, XS.T.copy())),
    "keyword argument": lambda m, w, b: m.func.vmap(lambda x, scale: mlp(m, w, b)(x) * scale)(t(m, XS), scale=3.0),
    "unmapped argument": lambda m, w, b: m.func.vmap(lambda x, v: m.tanh(v @ x), in_dims=(0, None))(t(m, XS), w),
    "a result that ignores the rows": lambda m, w, b: m.func.vmap(lambda x: (x * 2, (w * w).sum()))(t(m, XS)),
    "nested vmap": lambda m, w, b: m.func.vmap(m.func.vmap(lambda x: (w @ x).sin()))(t(m, XS).reshape(2, 2, 5)),
    "per-sample gradients": lambda m, w, b: m.func.vmap(m.func.grad(lambda x: mlp(m, w, b)(x).pow(2).sum()))(t(m, XS)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_through_vmap_results_match_torch(name):
    def run(m):
        w, b = t(m, W, requires_grad=True), t(m, B, requires_grad=True)
        out = CASES[name](m, w, b)
        outs = out if isinstance(out, tuple) else (out,)
        loss = sum((o * o).sum() for o in outs)
        return [o.requires_grad for o in outs], m.autograd.grad(loss, (w, b), allow_unused=True, materialize_grads=True)

    expected = run(torch)
    for _ in range(2):
        assert_same(run(bg), expected, rtol=1e-6, atol=1e-10)


def test_backward_batched_and_double_backward_through_vmap_results_match_torch():
    def run(m):
        w, b = t(m, W, requires_grad=True), t(m, B, requires_grad=True)
        out = m.func.vmap(mlp(m, w, b))(t(m, XS))  # (4, 3)
        w.grad = None
        out.backward(t(m, CT), create_graph=True)
        first = w.grad
        (second,) = m.autograd.grad(first.pow(2).sum(), b, retain_graph=True)
        seeds = t(m, np.stack([CT, CT * 2]))
        (batched,) = m.autograd.grad(out, w, seeds, retain_graph=True, is_grads_batched=True)
        return first, second, batched

    assert_same(run(bg), run(torch), rtol=1e-6, atol=1e-10)


def test_results_do_not_require_grad_without_captured_tensors_that_do():
    def run(m):
        w = t(m, W)
        with_grad_off = t(m, W, requires_grad=True)
        with m.no_grad():
            off = m.func.vmap(lambda x: with_grad_off @ x)(t(m, XS))
        return m.func.vmap(lambda x: w @ x)(t(m, XS)).requires_grad, off.requires_grad

    assert run(bg) == run(torch) == (False, False)


def test_the_backward_rerun_sees_the_forwards_random_values():
    w = bg.tensor(W, dtype=bg.float32, requires_grad=True)
    bg.manual_seed(0)
    out = bg.vmap(lambda x: bg.tanh(w @ x) * bg.rand(3), randomness="same")(bg.tensor(XS, dtype=bg.float32))
    bg.manual_seed(0)
    noise = bg.rand(3)
    (g,) = bg.autograd.grad(out.sum(), w)
    x = bg.tensor(XS, dtype=bg.float32)
    expected = ((1 - bg.tanh(x @ w.detach().T) ** 2) * noise).T @ x
    np.testing.assert_allclose(g.numpy(), expected.numpy(), rtol=1e-5)
    assert not np.allclose(bg.rand(3).numpy(), noise.numpy())  # the generator moved on as after one draw


MAPPED_CASES = {
    "mapped leaf": lambda m, w, x: m.func.vmap(mlp(m, w, w[:, 0].detach()))(x),
    "mapped non-leaf": lambda m, w, x: m.func.vmap(lambda r: (w @ r).sin())(x * 2),
    "mapped on dim 1": lambda m, w, x: m.func.vmap(lambda r: (w @ r).sin(), in_dims=1)(x.T),
    "mapped and captured": lambda m, w, x: m.func.vmap(lambda r: (x.T @ r).tanh(), in_dims=1)(x),
    "mapped, and captured through an op": lambda m, w, x: m.func.vmap(lambda r: r * x.sum().sin())(x),
    "two mapped, one requiring grad": lambda m, w, x: m.func.vmap(lambda a, b: (a * b).exp())(x, t(m, XS)),
    "mapped dict": lambda m, w, x: m.func.vmap(lambda p, r: p["w"] @ r + p["b"], in_dims=({"w": None, "b": 0}, 0))(
        {"w": w, "b": x[:, :3]}, x
    ),
    "a result that ignores its rows": lambda m, w, x: m.func.vmap(lambda r: (r.sum() * 0 + 1, w.sum() * r))(x),
    "nested vmap": lambda m, w, x: m.func.vmap(m.func.vmap(lambda r: (w[0] * r).cos()))(x),
    "chunked": lambda m, w, x: m.func.vmap(lambda r: (w @ r).sin(), chunk_size=3)(x),
}


@pytest.mark.parametrize("name", list(MAPPED_CASES))
def test_gradients_for_mapped_arguments_match_torch(name):
    def run(m):
        w, x = t(m, W, requires_grad=True), t(m, XS, requires_grad=True)
        out = MAPPED_CASES[name](m, w, x)
        outs = out if isinstance(out, tuple) else (out,)
        loss = sum((o * o.detach().cos()).sum() for o in outs)
        return [o.requires_grad for o in outs], m.autograd.grad(loss, (w, x), allow_unused=True, materialize_grads=True)

    expected = run(torch)
    for _ in range(2):
        assert_same(run(bg), expected, rtol=1e-6, atol=1e-10)


def test_double_and_batched_backward_for_a_mapped_argument_match_torch():
    def run(m):
        w, x = t(m, W, requires_grad=True), t(m, XS, requires_grad=True)
        out = m.func.vmap(lambda r: (w @ r).tanh())(x)
        (gx,) = m.autograd.grad((out**3).sum(), x, create_graph=True)
        second = m.autograd.grad(gx.pow(2).sum(), (w, x), retain_graph=True)
        (batched,) = m.autograd.grad(out, x, t(m, np.stack([CT, -CT])), retain_graph=True, is_grads_batched=True)
        return gx, second, batched

    assert_same(run(bg), run(torch), rtol=1e-6, atol=1e-10)


TRANSFORM_CASES = {
    "grad": lambda m, f: m.func.grad(lambda x: m.func.vmap(f)(x).sum()),
    "jacrev": lambda m, f: m.func.jacrev(m.func.vmap(f)),
    "vjp": lambda m, f: lambda x: m.func.vjp(m.func.vmap(f), x)[1](m.ones(4, dtype=m.float64)),
}


@pytest.mark.parametrize("name", list(TRANSFORM_CASES))
def test_transforms_of_a_function_mapping_over_its_argument_match_torch(name):
    def run(m):
        w = t(m, W[0])
        return TRANSFORM_CASES[name](m, lambda r: (w * r).sin().sum())(t(m, XS))

    assert_same(run(bg), run(torch), rtol=1e-6, atol=1e-10)


def test_mapped_arguments_with_grad_off_give_results_that_do_not_require_grad():
    def run(m):
        x = t(m, XS, requires_grad=True)
        with m.no_grad():
            off = m.func.vmap(lambda r: r * 2)(x)
        return off.requires_grad, m.func.vmap(lambda r: r * 2)(x.detach()).requires_grad

    assert run(bg) == run(torch) == (False, False)


@pytest.mark.parametrize("derived", ["view", "exp"])
def test_a_captured_tensor_and_a_tensor_computed_from_it(derived):
    """Both reach w: the gradient counts each path once, and the derived tensor's node stays for a later path."""

    def run(m):
        w = t(m, W, requires_grad=True)
        b = w[:, 0] if derived == "view" else w[:, 0].exp()
        out = m.func.vmap(mlp(m, w, b))(t(m, XS))
        return m.autograd.grad(out.sum(), w, retain_graph=True), m.autograd.grad(out.sum() + b.sum(), w)

    assert_same(run(bg), run(torch), rtol=1e-6, atol=1e-10)
