"""Gradients recorded with create_graph=True link only to the values they depend on, as torch's do: a gradient
that does not read an input is None for it (allow_unused=True), leaves it out of `.grad`, and does not require
grad when it reads nothing that does. Each case runs on torch and on batched_grad, under both engine tiers."""

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad._reads import output_reads
from oracle import raises_like_torch, to_numpy

RNG = np.random.default_rng(17)
W1, B1, W2, B2, X, Y = [RNG.standard_normal(shape) for shape in [(3, 4), (3,), (2, 3), (2,), (4,), (4,)]]


def leaf(m, a, requires_grad=True):
    return m.tensor(np.array(a), requires_grad=requires_grad)


def matmul(m):
    W, x = leaf(m, W1), leaf(m, X)
    (gx,) = m.autograd.grad((W @ x).sum(), x, create_graph=True)
    return gx, m.autograd.grad(gx.sum(), [x, W], allow_unused=True)


def linear(m):
    x, W, b = leaf(m, X), leaf(m, W1), leaf(m, B1)
    gx, gW, gb = m.autograd.grad(m.nn.functional.linear(x, W, b).sum(), [x, W, b], create_graph=True)
    first = m.autograd.grad(gx.sum(), [x, W, b], allow_unused=True, retain_graph=True)
    return gx, gW, gb, first, m.autograd.grad(gW.sum(), [x, W, b], allow_unused=True)


def mul(m):
    x, y = leaf(m, X), leaf(m, Y)
    (gx,) = m.autograd.grad((x * y).sum(), [x], create_graph=True)
    return gx, m.autograd.grad(gx.sum(), [x, y], allow_unused=True)


def square(m):
    x, y = leaf(m, X), leaf(m, Y)
    (gx,) = m.autograd.grad((x**2 + y).sum(), x, create_graph=True)
    return gx, m.autograd.grad(gx.sum(), [x, y], allow_unused=True)


def total(m):
    x = leaf(m, X)
    return m.autograd.grad(x.sum(), x, create_graph=True)


def tanh(m):
    x, W = leaf(m, X), leaf(m, W1)
    gx, gW = m.autograd.grad(m.tanh(W @ x).sum(), [x, W], create_graph=True)
    return gx, gW, m.autograd.grad((gx * gx).sum(), [x, W], allow_unused=True)


def mlp_hvp(m):
    params = [leaf(m, W1), leaf(m, B1), leaf(m, W2), leaf(m, B2)]
    w1, b1, w2, b2 = params
    out = w2 @ m.tanh(w1 @ leaf(m, X, False) + b1) + b2
    grads = m.autograd.grad(out.sum(), params, create_graph=True)
    dot = sum([(g * leaf(m, np.ones(g.shape), False)).sum() for g in grads])
    return grads, m.autograd.grad(dot, params, allow_unused=True)


def unused_bias_grad(m):
    x, W, b = leaf(m, X), leaf(m, W1), leaf(m, B1)
    (gx,) = m.autograd.grad((W @ x + b).sum(), x, create_graph=True)
    (gx * gx).sum().backward()
    return x.grad, W.grad, b.grad


def third_order(m):
    x, y = leaf(m, X), leaf(m, Y)
    (gx,) = m.autograd.grad((x**3 * y).sum(), x, create_graph=True)
    (gxx,) = m.autograd.grad(gx.sum(), x, create_graph=True)
    return gxx, m.autograd.grad(gxx.sum(), [x, y], allow_unused=True)


def batched_jacobian(m):
    W, x = leaf(m, W1), leaf(m, X)
    (jac,) = m.autograd.grad(W @ x, x, m.eye(3, dtype=m.float64), is_grads_batched=True, create_graph=True)
    return jac, m.autograd.grad(jac.sum(), [x, W], allow_unused=True)


CASES = [matmul, linear, mul, square, total, tanh, mlp_hvp, unused_bias_grad, third_order, batched_jacobian]


def assert_like(got, want, where="result"):
    """The same structure, None where torch has None, and for each Tensor the same values and requires_grad."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (where, got)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_like(g, w, f"{where}[{i}]")
        return
    if want is None:
        assert got is None, f"{where}: torch gives None, got {got!r}"
        return
    assert got is not None, f"{where}: torch gives {want!r}, got None"
    assert got.requires_grad == want.requires_grad, f"{where}: requires_grad differs from torch's"
    assert (got.grad_fn is None) == (want.grad_fn is None), where
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=1e-10, atol=1e-12, err_msg=where)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_links_like_torch(case, engine_tier):
    want = case(torch)
    for _ in range(2):  # the fused tier's second call runs a program compiled from the first
        assert_like(case(bg), want)


def test_gradient_that_reads_nothing_requiring_grad_is_a_leaf():
    def differentiate_bias_gradient(m):
        x, W, b = leaf(m, X), leaf(m, W1), leaf(m, B1)
        _, _, gb = m.autograd.grad(m.nn.functional.linear(x, W, b).sum(), [x, W, b], create_graph=True)
        assert gb.is_leaf and gb.grad_fn is None
        m.autograd.grad(gb.sum(), b)

    raises_like_torch(differentiate_bias_gradient)


def test_reads_look_into_calls_but_not_loops():
    scalar = [((), np.float64)] * 3

    def call(a, b, c):  # a jitted function and a custom_jvp one read only the arguments they are given
        return jax.jit(lambda u, v: u * 2)(a, b), jax.nn.relu(c), 1.0

    assert output_reads(call, scalar) == (0b001, 0b100, 0)

    def rotate(a, b, c):  # each iteration passes the carries one place on: after three, the first holds c
        return jax.lax.scan(lambda carry, _: ((carry[1], carry[2], carry[2]), None), (a, b, c), None, length=3)[0][0]

    assert output_reads(rotate, scalar)[0] & 0b100
