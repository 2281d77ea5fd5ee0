"""batched_grad.special against torch.special 2.13: every name torch code calls, as values, first and second
derivatives, node names and dtypes; the functions torch cannot differentiate give results outside the graph (or
raise torch's error in the backward)."""

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.special  # noqa: F401  (the module import torch code writes)
from oracle import assert_same, check_both, raises_like_torch, to_torch

RNG = np.random.default_rng(3)
X = bg.tensor(RNG.uniform(-2, 2, (3, 4)), requires_grad=True)
POSITIVE = bg.tensor(RNG.uniform(0.2, 3, (3, 4)), requires_grad=True)
PROBABILITY = bg.tensor(RNG.uniform(0.05, 0.95, (3, 4)), requires_grad=True)

UNARY = {
    "erf": X,
    "erfc": X,
    "erfcx": X,
    "erfinv": PROBABILITY,
    "expit": X,
    "logit": PROBABILITY,
    "gammaln": POSITIVE,
    "digamma": POSITIVE,
    "psi": POSITIVE,
    "i0": X,
    "i0e": X,
    "i1": X,
    "i1e": X,
    "ndtr": X,
    "ndtri": PROBABILITY,
    "log_ndtr": X,
    "sinc": X,
    "expm1": X,
    "exp2": X,
    "log1p": POSITIVE,
    "entr": POSITIVE,
    "round": X,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_as_torch(name):
    check_both(lambda m, x: getattr(m.special, name)(x), [UNARY[name]])
    y = getattr(bg.special, name)(UNARY[name])
    assert y.grad_fn.name() == getattr(torch.special, name)(to_torch(UNARY[name])).grad_fn.name()


@pytest.mark.parametrize(
    "call",
    [
        lambda m, x, p: m.special.xlogy(x, p),
        lambda m, x, p: m.special.xlog1py(x, p),
        lambda m, x, p: m.special.xlog1py(x * (x > 0), p - 0.5),
        lambda m, x, p: m.special.xlog1py(2.0, p),
        lambda m, x, p: m.special.polygamma(2, p + 1),
        lambda m, x, p: m.special.multigammaln(p + 2, 3),
        lambda m, x, p: m.special.logsumexp(x, dim=1),
        lambda m, x, p: m.special.softmax(x, 0),
        lambda m, x, p: m.special.log_softmax(x, -1),
        lambda m, x, p: m.special.round(x * 10, decimals=1),
        lambda m, x, p: m.special.logit(p * 2, eps=0.1),
    ],
)
def test_operations_with_arguments_as_torch(call):
    check_both(call, [X, PROBABILITY])


def test_integer_inputs_give_default_float():
    for name in ("i1", "i0e", "ndtr", "erfcx", "entr"):
        assert_same(getattr(bg.special, name)(bg.arange(4)), getattr(torch.special, name)(torch.arange(4)))


def test_functions_torch_cannot_differentiate():
    for name in ("bessel_j0", "bessel_j1", "modified_bessel_i0", "modified_bessel_i1", "spherical_bessel_j0"):
        y = getattr(bg.special, name)(X)
        ty = getattr(torch.special, name)(to_torch(X))
        assert_same(y, ty)
        assert not y.requires_grad and not ty.requires_grad
    q = POSITIVE + 1
    assert_same(bg.special.zeta(q, POSITIVE), torch.special.zeta(to_torch(q), to_torch(POSITIVE)))
    assert_same(bg.special.zeta(2.0, POSITIVE), torch.special.zeta(2.0, to_torch(POSITIVE)))
    raises_like_torch(lambda m: m.special.zeta(m.ones(2, requires_grad=True) + 1, m.ones(2)).sum().backward())
    raises_like_torch(lambda m: m.special.gammainc(m.ones(2, requires_grad=True), m.ones(2)).sum().backward())


def test_gamma_incomplete_aliases():
    a = POSITIVE.detach()
    assert_same(bg.special.gammainc(a, a * 2), torch.special.gammainc(to_torch(a), to_torch(a * 2)))
    assert_same(bg.special.gammaincc(a, a * 2), torch.special.gammaincc(to_torch(a), to_torch(a * 2)))


def test_round_records_the_decimals_overload_when_decimals_is_given():
    for kwargs in ({}, dict(decimals=0), dict(decimals=2)):
        assert bg.round(X, **kwargs).grad_fn.name() == torch.round(to_torch(X), **kwargs).grad_fn.name()
