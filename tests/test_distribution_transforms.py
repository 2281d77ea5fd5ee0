"""The transforms of whole events (simplex, Cholesky, reshape, independent, cat, stack, CDF) and the constraint
registries biject_to / transform_to against torch.distributions, run side by side in float64: values, inverses,
log |det J| and its gradient, shapes, domains and codomains, and the distributions built on them."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributions as TD

import batched_grad as bg
import batched_grad.distributions as D
from oracle import raises_like_torch

_RNG = np.random.default_rng(0)
_X3 = _RNG.normal(size=(2, 3))
_X6 = _RNG.normal(size=(2, 6))
_SQUARE = _RNG.normal(size=(2, 3, 3))


def _transforms(dists, lib):
    """name: (transform, an input in its domain)."""
    return {
        "SoftmaxTransform": (dists.SoftmaxTransform(), _X3),
        "StickBreakingTransform": (dists.StickBreakingTransform(), _X3),
        "LowerCholeskyTransform": (dists.LowerCholeskyTransform(), _SQUARE),
        "PositiveDefiniteTransform": (dists.PositiveDefiniteTransform(), _SQUARE),
        "CorrCholeskyTransform": (dists.CorrCholeskyTransform(), _X6),
        "ReshapeTransform": (dists.ReshapeTransform((6,), (2, 3)), _X6),
        "IndependentTransform": (dists.IndependentTransform(dists.ExpTransform(), 1), _X3),
        "CatTransform": (
            dists.CatTransform([dists.ExpTransform(), dists.AffineTransform(1.0, 3.0)], dim=-1, lengths=[2, 1]),
            _X3,
        ),
        "CatTransformBatchDim": (
            dists.CatTransform(
                [
                    dists.IndependentTransform(dists.ExpTransform(), 1),
                    dists.IndependentTransform(dists.TanhTransform(), 1),
                ],
                dim=0,
                lengths=[1, 1],
            ),
            _X3,
        ),
        "CatTransformEventDim": (
            dists.CatTransform(
                [dists.IndependentTransform(dists.ExpTransform(), 1), dists.AffineTransform(1.0, 3.0, event_dim=1)],
                dim=-1,
                lengths=[2, 1],
            ),
            _X3,
        ),
        "StackTransform": (dists.StackTransform([dists.ExpTransform(), dists.SigmoidTransform()], dim=0), _X3),
        "CumulativeDistributionTransform": (
            dists.CumulativeDistributionTransform(dists.Normal(lib.tensor(0.5), lib.tensor(2.0))),
            _X3,
        ),
    }


def _close(ours, theirs, rtol=1e-9, atol=1e-10):
    np.testing.assert_allclose(np.asarray(ours.detach().numpy()), theirs.detach().numpy(), rtol=rtol, atol=atol)


def _event_dim(transform):
    try:
        return transform.event_dim
    except ValueError as error:  # a transform changing the number of event dimensions
        return str(error)


_NOT_BIJECTIVE = ("SoftmaxTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform")


@pytest.mark.parametrize("name", list(_transforms(TD, torch)))
def test_transform_values_inverses_and_jacobians_match_torch(name):
    ours, x = _transforms(D, bg)[name]
    theirs, _ = _transforms(TD, torch)[name]
    assert repr(ours.domain) == repr(theirs.domain) and repr(ours.codomain) == repr(theirs.codomain)
    assert ours.bijective == theirs.bijective and _event_dim(ours) == _event_dim(theirs)
    our_x = bg.tensor(x, requires_grad=True)
    their_x = torch.tensor(x, requires_grad=True)
    our_y, their_y = ours(our_x), theirs(their_x)
    _close(our_y, their_y)
    assert tuple(ours.forward_shape(bg.Size(x.shape))) == tuple(theirs.forward_shape(torch.Size(x.shape)))
    assert tuple(ours.inverse_shape(bg.Size(their_y.shape))) == tuple(theirs.inverse_shape(their_y.shape))
    fresh = bg.tensor(their_y.detach().numpy())  # not the cached output: the inverse is computed
    _close(ours.inv(fresh), theirs.inv(their_y.detach().clone()), atol=1e-8)
    if name in _NOT_BIJECTIVE:
        return
    our_jacobian = ours.log_abs_det_jacobian(our_x, our_y)
    their_jacobian = theirs.log_abs_det_jacobian(their_x, their_y)
    _close(our_jacobian, their_jacobian)
    (our_grad,) = bg.autograd.grad((our_jacobian.sin().sum() + our_y.sum()), [our_x])
    (their_grad,) = torch.autograd.grad((their_jacobian.sin().sum() + their_y.sum()), [their_x])
    _close(our_grad, their_grad, atol=1e-8)


def _constraints(c):
    return [
        c.real,
        c.real_vector,
        c.positive,
        c.nonnegative,
        c.greater_than(1.5),
        c.greater_than_eq(-2.0),
        c.less_than(3.0),
        c.unit_interval,
        c.interval(-1.0, 4.0),
        c.half_open_interval(0.0, 2.0),
        c.simplex,
        c.lower_cholesky,
        c.positive_definite,
        c.corr_cholesky,
        c.independent(c.positive, 1),
        c.cat([c.positive, c.unit_interval], dim=-1, lengths=[2, 1]),
        c.stack([c.real, c.positive, c.less_than(0.0)], dim=-1),
    ]


_INPUTS = {"lower_cholesky": _SQUARE, "positive_definite": _SQUARE, "corr_cholesky": _X6}


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("index", range(len(_constraints(TD.constraints))))
def test_constraint_registries_give_torchs_transforms(registry, index):
    theirs_c, ours_c = _constraints(TD.constraints)[index], _constraints(D.constraints)[index]
    try:
        theirs = getattr(TD, registry)(theirs_c)
    except NotImplementedError as error:
        with pytest.raises(NotImplementedError, match=str(error)):
            getattr(D, registry)(ours_c)
        return
    ours = getattr(D, registry)(ours_c)
    assert repr(ours) == repr(theirs)
    x = _INPUTS.get(_constraint_name(theirs_c), _X3)
    y = ours(bg.tensor(x))
    _close(y, theirs(torch.tensor(x)))
    assert bool(ours_c.check(y).all())


def _constraint_name(constraint):
    for name in _INPUTS:
        if constraint is getattr(TD.constraints, name):
            return name
    return None


def test_registries_refuse_an_unknown_constraint_and_accept_new_ones():
    class Odd(D.constraints.Constraint):
        pass

    with pytest.raises(NotImplementedError, match="Cannot transform Odd constraints"):
        D.biject_to(Odd())
    with pytest.raises(TypeError, match="Expected constraint to be either a Constraint subclass or instance"):
        D.biject_to.register(int, lambda c: D.ExpTransform())
    D.transform_to.register(Odd, lambda c: D.ExpTransform())
    assert isinstance(D.transform_to(Odd()), D.ExpTransform)


def _on_base(lib, dists, name):
    """A TransformedDistribution of `name` built on a batch of Normals."""
    loc, scale = lib.tensor(_X6), lib.tensor(np.abs(_X6) + 0.5)
    base = dists.Normal(loc, scale)
    transform = {
        "reshape": dists.ReshapeTransform((6,), (3, 2)),
        "stick_breaking": dists.StickBreakingTransform(),
        "corr_cholesky": dists.CorrCholeskyTransform(),
        "independent_exp": dists.IndependentTransform(dists.ExpTransform(), 1),
    }[name]
    return dists.TransformedDistribution(base, transform)


@pytest.mark.parametrize("name", ["reshape", "stick_breaking", "corr_cholesky", "independent_exp"])
def test_transformed_distributions_over_events_match_torch(name):
    ours, theirs = _on_base(bg, D, name), _on_base(torch, TD, name)
    assert ours.batch_shape == theirs.batch_shape and ours.event_shape == theirs.event_shape
    assert type(ours.base_dist).__name__ == type(theirs.base_dist).__name__
    torch.manual_seed(0)
    value = theirs.sample((2,))
    _close(ours.log_prob(bg.tensor(value.numpy())), theirs.log_prob(value), atol=1e-8)
    bg.manual_seed(4)
    torch.manual_seed(4)
    _close(ours.rsample((3,)), theirs.rsample((3,)), atol=1e-12)


def test_logistic_normal_matches_torch():
    loc, scale = np.array([[0.3, -0.5, 1.0], [0.0, 0.2, -1.0]]), np.array([[0.5, 1.0, 2.0], [1.5, 0.3, 0.8]])
    results = []
    for lib in (bg, torch):
        params = [lib.tensor(loc, requires_grad=True), lib.tensor(scale, requires_grad=True)]
        dist = lib.distributions.LogisticNormal(*params)
        lib.manual_seed(9)
        x = dist.rsample((4,))
        log_prob = dist.log_prob(x.detach())
        grads = lib.autograd.grad(
            (x * lib.arange(4.0, dtype=lib.float64).reshape(4, 1, 1)).sum() + log_prob.sum(), params
        )
        results.append([x, log_prob, dist.expand((3, 2)).sample(), *grads])
        assert tuple(dist.batch_shape) == (2,) and tuple(dist.event_shape) == (4,)
    for mine, reference in zip(*results, strict=True):
        assert tuple(mine.shape) == tuple(reference.shape)
    for mine, reference in zip(results[0][:2] + results[0][3:], results[1][:2] + results[1][3:], strict=True):
        _close(mine, reference, atol=1e-9)
    ours, theirs = raises_like_torch(
        lambda lib: lib.distributions.LogisticNormal(lib.zeros(2), -lib.ones(2), validate_args=True)
    )
    assert isinstance(ours, ValueError) and str(ours) == str(theirs)


@pytest.mark.parametrize(
    "make",
    [
        lambda dists, lib: dists.ReshapeTransform((2, 3), (4,)),
        lambda dists, lib: dists.ReshapeTransform((2, 3), (3, 2)).forward_shape((4, 3, 3)),
        lambda dists, lib: dists.CorrCholeskyTransform().forward_shape((4,)),
        lambda dists, lib: dists.CorrCholeskyTransform().inverse_shape((2, 3)),
        lambda dists, lib: dists.StickBreakingTransform().forward_shape(()),
    ],
)
def test_shape_errors_match_torch(make):
    ours, theirs = raises_like_torch(lambda lib: make(lib.distributions, lib))
    assert isinstance(ours, ValueError) and str(ours) == str(theirs)


def test_cat_and_stack_refuse_a_wrong_size_as_torch():
    for dists, lib in ((D, bg), (TD, torch)):
        cat = dists.CatTransform([dists.ExpTransform()], dim=0, lengths=[2])
        with pytest.raises(AssertionError, match=r"x.size\(0\) = 3 must equal length 2"):
            cat(lib.zeros(3))
        stack = dists.StackTransform([dists.ExpTransform()], dim=0)
        with pytest.raises(AssertionError, match=r"x.size\(0\) = 3 must equal len\(transforms\) 1"):
            stack(lib.zeros(3))
