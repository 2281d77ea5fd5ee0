"""functorch's make_functional and make_functional_with_buffers (deprecated there for torch.func.functional_call,
still in code written for functorch): the stateless model's values and gradients, per-sample gradients through
vmap(grad) of it, and its error, against functorch on torch 2.13."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad.func import grad, make_functional, make_functional_with_buffers
from oracle import assert_same, raises_like_torch

functorch = pytest.importorskip("functorch")


def _model(m):
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    if m is torch:
        return theirs
    ours = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.Tanh(), m.nn.Linear(4, 2)).double()
    ours.load_state_dict({k: m.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours


def _per_sample_grads(m, make, transforms):
    fmodel, params = make(_model(m))
    x = m.tensor(np.random.default_rng(1).standard_normal((5, 3)))

    def loss(params, row):
        return (fmodel(params, row[None]) ** 2).sum()

    return fmodel(params, x), transforms.vmap(transforms.grad(loss), in_dims=(None, 0))(params, x)


def test_make_functional_gives_functorchs_values_and_per_sample_gradients():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # functorch's deprecation
        want = _per_sample_grads(torch, functorch.make_functional, torch.func)
    got = _per_sample_grads(bg, make_functional, bg.func)
    assert_same(got[0], want[0].detach(), 1e-12, 1e-14)
    assert_same(list(got[1]), list(want[1]), 1e-12, 1e-14)


def test_make_functional_with_buffers_runs_the_model_with_given_buffers():
    def run(m, make):
        torch.manual_seed(0)
        model = m.nn.BatchNorm1d(3).double().eval()
        fmodel, params, buffers = make(model)
        shifted = tuple(b + 1 if b.is_floating_point() else b for b in buffers)
        x = m.tensor(np.random.default_rng(2).standard_normal((4, 3)))
        return fmodel(params, shifted, x), len(params), len(buffers)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        want = run(torch, functorch.make_functional_with_buffers)
    got = run(bg, make_functional_with_buffers)
    assert_same(got[0], want[0].detach(), 1e-12, 1e-14)
    assert got[1:] == want[1:]


def test_make_functional_of_a_model_with_buffers_raises_as_functorch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        raises_like_torch(lambda m: (functorch.make_functional if m is torch else make_functional)(m.nn.BatchNorm1d(3)))


def test_disable_autograd_tracking_gives_parameters_that_do_not_require_grad():
    _, params = make_functional(bg.nn.Linear(2, 2), disable_autograd_tracking=True)
    assert [p.requires_grad for p in params] == [False, False]
    grads = grad(lambda p: p[0].sum() + p[1].sum())(params)
    assert_same(list(grads), [torch.ones(2, 2), torch.ones(2)])
