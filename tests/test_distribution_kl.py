"""kl_divergence against torch's for every pair torch registers among the families below (a family with itself and
pairs of different families), in float64: values (infinite where p's support leaves q's) and their gradients."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributions as TD
import torch.distributions.kl as torch_kl

import batched_grad as bg
import batched_grad.distributions as D

_VEC = np.array([0.3, -1.2, 2.0])
_POS = np.array([0.7, 1.5, 3.0])
_POS2 = np.array([2.5, 0.8, 1.1])
_UNIT = np.array([0.2, 0.5, 0.9])

# family: (p's parameters, q's parameters), each batch (3,); the uniforms reach outside [0, 1] and above Pareto's
# scale in some entries, so that some divergences are infinite
PARAMS = {
    "Normal": (dict(loc=_VEC, scale=_POS), dict(loc=-_VEC, scale=_POS2)),
    "Laplace": (dict(loc=_VEC, scale=_POS), dict(loc=_VEC / 2, scale=_POS2)),
    "Gumbel": (dict(loc=_VEC, scale=_POS), dict(loc=-_VEC, scale=_POS2)),
    "Cauchy": (dict(loc=_VEC, scale=_POS), dict(loc=-_VEC, scale=_POS2)),
    "HalfNormal": (dict(scale=_POS), dict(scale=_POS2)),
    "Exponential": (dict(rate=_POS), dict(rate=_POS2)),
    "Gamma": (dict(concentration=_POS + 1, rate=_POS2), dict(concentration=_POS2, rate=_POS)),
    "Beta": (dict(concentration1=_POS, concentration0=_POS2), dict(concentration1=_POS2, concentration0=_POS)),
    "Uniform": (
        dict(low=np.array([0.1, 0.3, -0.5]), high=np.array([0.6, 1.2, 0.4])),
        dict(low=_VEC - 1, high=_VEC + 2),
    ),
    "Pareto": (
        dict(scale=np.array([0.4, 0.2, 0.5]), alpha=_POS + 1.5),
        dict(scale=np.array([0.3, 0.25, 0.1]), alpha=_POS2),
    ),
    "ContinuousBernoulli": (dict(probs=_UNIT), dict(probs=_UNIT[::-1].copy())),
    "Geometric": (dict(probs=_UNIT), dict(probs=_UNIT[::-1].copy())),
    "Binomial": (
        dict(total_count=np.array([5.0, 10.0, 30.0]), probs=_UNIT),
        dict(total_count=np.array([5.0, 8.0, 30.0]), probs=np.array([0.6, 0.3, 0.5])),
    ),
    "Bernoulli": (dict(probs=_UNIT), dict(probs=np.array([0.6, 0.3, 0.5]))),
    "Poisson": (dict(rate=_POS), dict(rate=_POS2)),
}

PAIRS = sorted(
    (p.__name__, q.__name__) for p, q in torch_kl._KL_REGISTRY if p.__name__ in PARAMS and q.__name__ in PARAMS
)


def _made(lib, family, side):
    params = {k: lib.tensor(v, dtype=lib.float64, requires_grad=True) for k, v in PARAMS[family][side].items()}
    return getattr(lib.distributions, family)(**params), list(params.values())


def _kl_and_grads(lib, pair):
    p, p_params = _made(lib, pair[0], 0)
    q, q_params = _made(lib, pair[1], 1)
    kl = lib.distributions.kl_divergence(p, q)
    if not kl.requires_grad:
        return kl, None
    leaves = p_params + q_params
    grads = lib.autograd.grad(kl.sum(), leaves, allow_unused=True)
    return kl, [None if g is None else g.numpy() for g in grads]


def test_every_pair_of_torchs_registry_is_registered():
    ours = {(p.__name__, q.__name__) for p, q in D.kl._KL_REGISTRY}
    theirs = {(p.__name__, q.__name__) for p, q in torch_kl._KL_REGISTRY}
    assert theirs <= ours  # (other tests may register pairs of their own)
    assert len(PAIRS) == 77


@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(pair) for pair in PAIRS])
def test_kl_divergence_and_gradients_match_torch(pair):
    (ours, our_grads), (theirs, their_grads) = _kl_and_grads(bg, pair), _kl_and_grads(torch, pair)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-9, atol=1e-10)
    assert (our_grads is None) == (their_grads is None)
    for mine, expected in zip(our_grads or [], their_grads or [], strict=True):
        assert (mine is None) == (expected is None)
        if expected is not None:
            np.testing.assert_allclose(mine, expected, rtol=1e-8, atol=1e-10)


def test_binomial_kl_refuses_a_larger_q_count_as_torch():
    for lib in (bg, torch):
        p = lib.distributions.Binomial(lib.tensor([3.0]), lib.tensor([0.5]))
        q = lib.distributions.Binomial(lib.tensor([4.0]), lib.tensor([0.5]))
        with pytest.raises(NotImplementedError, match="q.total_count > p.total_count is not implemented"):
            lib.distributions.kl_divergence(p, q)


def test_chi2_uses_gammas_pairs():
    chi2, gamma = D.Chi2(bg.tensor([3.0])), D.Gamma(bg.tensor([2.0]), bg.tensor([1.0]))
    expected = TD.kl_divergence(TD.Chi2(torch.tensor([3.0])), TD.Gamma(torch.tensor([2.0]), torch.tensor([1.0])))
    np.testing.assert_allclose(D.kl_divergence(chi2, gamma).numpy(), expected.numpy(), rtol=1e-6)


_L = np.array([[1.5, 0.0, 0.0], [0.3, 0.8, 0.0], [-0.4, 0.2, 1.1]])


def _normals_and_wisharts(lib):
    def t(a):
        return lib.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)

    leaves = [t([0.1, 0.2, 0.3]), t(_L[:, :2]), t([0.5, 1.0, 2.0]), t([[0.0, 1.0, 0.3]]), t([_L[:, 1:] * 0.5])]
    leaves += [t([[1.5, 1.0, 0.2]]), t([0.3, -0.2, 0.0]), t(_L), t([4.0, 6.0]), t(_L @ _L.T), t(5.5)]
    leaves += [t(np.linalg.cholesky(_L.T @ _L + np.eye(3)))]
    dists = lib.distributions
    low_rank = dists.LowRankMultivariateNormal(*leaves[0:3])
    low_rank_batch = dists.LowRankMultivariateNormal(*leaves[3:6])
    normal = dists.MultivariateNormal(leaves[6], scale_tril=leaves[7])
    wishart = dists.Wishart(leaves[8], covariance_matrix=leaves[9])
    wishart_tril = dists.Wishart(leaves[10], scale_tril=leaves[11])
    pairs = [(low_rank, low_rank_batch), (normal, low_rank_batch), (low_rank_batch, normal), (wishart, wishart_tril)]
    return pairs, leaves


@pytest.mark.slow
def test_low_rank_normal_pairs_and_the_bregman_divergence_of_wisharts_match_torch():
    results = []
    for lib in (bg, torch):
        pairs, leaves = _normals_and_wisharts(lib)
        kls = [lib.distributions.kl_divergence(p, q) for p, q in pairs]
        total = sum(kl.sum() for kl in kls)
        # the Bregman divergence differentiates p's natural parameters detached: p's df is unused (as in torch)
        grads = lib.autograd.grad(total, leaves, allow_unused=True)
        results.append([kl.detach().numpy() for kl in kls] + [g if g is None else g.numpy() for g in grads])
    for mine, expected in zip(*results, strict=True):
        assert (mine is None) == (expected is None)
        if expected is not None:
            np.testing.assert_allclose(mine, expected, rtol=1e-8, atol=1e-10)


def test_different_exponential_families_have_no_bregman_divergence():
    errors = []
    for lib in (bg, torch):
        wishart = lib.distributions.Wishart(lib.tensor(4.0), lib.eye(2))
        with pytest.raises(NotImplementedError) as info:
            lib.distributions.kl_divergence(wishart, lib.distributions.Poisson(lib.tensor(1.0)))
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def _rate_family(dists):
    class RateFamily(dists.ExponentialFamily):
        """An exponential distribution written only through its exponential-family form."""

        arg_constraints = {}
        _mean_carrier_measure = 0

        def __init__(self, rate):
            self.rate = rate
            super().__init__(rate.shape, validate_args=False)

        @property
        def _natural_params(self):
            return (-self.rate,)

        def _log_normalizer(self, theta):
            return -(-theta).log()

    return RateFamily


def test_exponential_family_entropy_and_bregman_divergence_from_the_log_normalizer():
    results = []
    for lib in (bg, torch):
        family = _rate_family(lib.distributions)
        p_rate = lib.tensor([0.5, 2.0], dtype=lib.float64, requires_grad=True)
        q_rate = lib.tensor([1.5, 0.7], dtype=lib.float64, requires_grad=True)
        p, q = family(p_rate), family(q_rate)
        kl, entropy = lib.distributions.kl_divergence(p, q), p.entropy()
        grads = lib.autograd.grad(kl.sum() + entropy.sum(), [p_rate, q_rate], allow_unused=True)
        results.append([kl, entropy, *[g for g in grads if g is not None]])
    for mine, expected in zip(*results, strict=True):
        np.testing.assert_allclose(mine.detach().numpy(), expected.detach().numpy(), rtol=1e-10)
    expected_kl = TD.kl_divergence(TD.Exponential(torch.tensor([0.5, 2.0])), TD.Exponential(torch.tensor([1.5, 0.7])))
    np.testing.assert_allclose(results[0][0].detach().numpy(), expected_kl.numpy(), rtol=1e-6)
