"""torch.autograd.gradcheck's deprecated Jacobian helpers, get_numerical_jacobian and get_analytical_jacobian,
against torch 2.13: their warnings, values, flags and errors."""

import importlib

import numpy as np
import pytest
import torch

import batched_grad as bg


def _module(m):
    return importlib.import_module(m.__name__ + ".autograd.gradcheck")


def _pair(m, seed=0):
    values = np.random.default_rng(seed).uniform(-1, 1, (2, 2, 2))
    return tuple(m.tensor(v, dtype=m.float64, requires_grad=True) for v in values)


def _mixed(inputs):
    x, y = inputs
    return (x * y).sin(), x + 2 * y


@pytest.mark.parametrize("target", [None, 0, 1])
def test_numerical_jacobian_of_the_first_output(target):
    results = []
    for m in (bg, torch):
        a, b = _pair(m)
        targets = None if target is None else ((a, b)[target],)
        with pytest.warns(FutureWarning, match="`get_numerical_jacobian` was part of PyTorch's private API"):
            jacobians = _module(m).get_numerical_jacobian(_mixed, (a, b), target=targets, eps=1e-6)
        assert isinstance(jacobians, tuple)
        results.append([j.detach().numpy() for j in jacobians])
    assert len(results[0]) == len(results[1])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-8)


def test_analytical_jacobian_and_its_flags():
    results = []
    for m in (bg, torch):
        a, b = _pair(m)
        out = _mixed((a, b))[0]
        with pytest.warns(FutureWarning, match="`get_analytical_jacobian` was part of PyTorch's private API"):
            jacobians, reentrant, sizes_ok, types_ok = _module(m).get_analytical_jacobian((a, 3, b), out)
        results.append(([j.numpy() for j in jacobians], reentrant, sizes_ok, types_ok))
    for ours, theirs in zip(results[0][0], results[1][0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    assert results[0][1:] == results[1][1:] == (True, True, True)


def test_analytical_jacobian_tells_a_backward_that_is_not_reentrant():
    for m in (bg, torch):

        class Jittery(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return g * (1 + m.rand_like(g) * 1e-6)

        a, _ = _pair(m)
        with pytest.warns(FutureWarning):
            _, reentrant, sizes_ok, types_ok = _module(m).get_analytical_jacobian((a,), Jittery.apply(a))
        assert (reentrant, sizes_ok, types_ok) == (False, True, True)
        with pytest.warns(FutureWarning):
            _, reentrant, _, _ = _module(m).get_analytical_jacobian((a,), Jittery.apply(a), nondet_tol=1e-3)
        assert reentrant


@pytest.mark.parametrize(
    "call",
    [
        lambda gc, a: gc.get_numerical_jacobian(lambda i: i[0] * 2, (a,), grad_out=2.0),
        lambda gc, a: gc.get_analytical_jacobian((a,), a * 2, grad_out=2.0),
        lambda gc, a: gc.get_numerical_jacobian(lambda i: i[0] * 1j, (a,)),
        lambda gc, a: gc.get_analytical_jacobian((a,), a * 1j),
    ],
)
def test_errors_match_torch(call):
    messages = []
    for m in (bg, torch):
        with pytest.warns(FutureWarning), pytest.raises(ValueError) as caught:
            call(_module(m), _pair(m)[0])
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
