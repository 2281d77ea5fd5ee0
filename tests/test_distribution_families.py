"""The less common families of batched_grad.distributions against torch.distributions, run side by side: densities,
moments, entropies, CDFs in float64, log_prob and rsample gradients, draws for the same seed (float32 and float64)
and validate_args' errors."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributions as TD

import batched_grad as bg
import batched_grad.distributions as D
import vmap
from oracle import raises_like_torch

_VEC = np.array([0.3, -1.2, 2.0])
_POS = np.array([0.7, 1.5, 3.0])
_UNIT = np.array([0.2, 0.5, 0.9])
_SIMPLEX = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
_CORR_TRIL = TD.CorrCholeskyTransform()(torch.tensor([[0.3, -1.2, 0.8], [1.5, 0.2, -0.4]], dtype=torch.float64)).numpy()
_L = np.array([[1.5, 0.0, 0.0], [0.3, 0.8, 0.0], [-0.4, 0.2, 1.1]])
_SPD = np.stack([_L @ _L.T, _L.T @ _L + np.eye(3)])

# name: (family, parameters (keyword arrays; a number stays a number), a value in the support, methods beyond log_prob)
CASES = {
    "Cauchy": ("Cauchy", dict(loc=_VEC, scale=_POS), np.array([0.1, 0.4, -2.0]), ("cdf", "icdf")),
    "Gumbel": ("Gumbel", dict(loc=_VEC, scale=_POS), np.array([0.1, 0.4, -2.0]), ("cdf", "icdf")),
    "HalfNormal": ("HalfNormal", dict(scale=_POS), np.array([0.1, 0.4, 2.0]), ("cdf", "icdf")),
    "HalfCauchy": ("HalfCauchy", dict(scale=_POS), np.array([0.1, 0.4, 2.0]), ("cdf", "icdf")),
    "Chi2": ("Chi2", dict(df=_POS + 1), np.array([0.1, 0.4, 2.0]), ("cdf",)),
    "Weibull": ("Weibull", dict(scale=_POS, concentration=_POS + 0.5), np.array([0.1, 0.4, 2.0]), ("cdf", "icdf")),
    "Pareto": ("Pareto", dict(scale=_POS / 2, alpha=_POS + 2), np.array([0.5, 1.4, 2.0]), ("cdf", "icdf")),
    "Kumaraswamy": ("Kumaraswamy", dict(concentration1=_POS, concentration0=_POS + 1), _UNIT, ("cdf", "icdf")),
    "InverseGamma": ("InverseGamma", dict(concentration=_POS + 2, rate=_POS), np.array([0.1, 0.4, 2.0]), ()),
    "FisherSnedecor": ("FisherSnedecor", dict(df1=_POS + 2, df2=_POS + 4), np.array([0.1, 0.4, 2.0]), ()),
    "Geometric": ("Geometric", dict(probs=np.array([0.2, 0.5, 1.0])), np.array([0.0, 3.0, 0.0]), ()),
    "GeometricLogits": ("Geometric", dict(logits=_VEC), np.array([4.0, 3.0, 0.0]), ()),
    "Binomial": (
        "Binomial",
        dict(total_count=np.array([5.0, 10.0, 30.0]), probs=_UNIT),
        np.array([0.0, 3.0, 28.0]),
        (),
    ),
    "BinomialHomogeneous": ("Binomial", dict(total_count=6, logits=_VEC), np.array([0.0, 3.0, 6.0]), ()),
    "NegativeBinomial": (
        "NegativeBinomial",
        dict(total_count=np.array([5.0, 0.5, 30.0]), probs=_UNIT),
        np.array([0.0, 3.0, 28.0]),
        (),
    ),
    "Multinomial": ("Multinomial", dict(total_count=7, probs=_SIMPLEX), np.array([[1.0, 3.0, 3.0], [0, 0, 7]]), ()),
    "ContinuousBernoulli": (
        "ContinuousBernoulli",
        dict(probs=np.array([0.2, 0.5, 0.9])),
        np.array([0.3, 0.5, 0.99]),
        ("cdf", "icdf"),
    ),
    "ContinuousBernoulliLogits": ("ContinuousBernoulli", dict(logits=_VEC), _UNIT, ("cdf", "icdf")),
    "RelaxedBernoulli": ("RelaxedBernoulli", dict(temperature=np.array(0.7), probs=_UNIT), _UNIT, ()),
    "RelaxedBernoulliLogits": ("RelaxedBernoulli", dict(temperature=np.array(2.5), logits=_VEC), _UNIT, ()),
    "RelaxedOneHotCategorical": (
        "RelaxedOneHotCategorical",
        dict(temperature=np.array(0.7), logits=_SIMPLEX * 3),
        _SIMPLEX[::-1].copy(),
        (),
    ),
    "OneHotCategoricalStraightThrough": (
        "OneHotCategoricalStraightThrough",
        dict(probs=_SIMPLEX),
        np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]),
        (),
    ),
    "VonMises": ("VonMises", dict(loc=_VEC, concentration=_POS * 3), np.array([0.1, 2.5, -3.0]), ()),
    "LKJCholesky": ("LKJCholesky", dict(dim=3, concentration=np.array([0.5, 2.0])), _CORR_TRIL, ()),
    "Wishart": ("Wishart", dict(df=np.array([4.0, 5.5]), covariance_matrix=_L @ _L.T), _SPD, ()),
    "WishartTril": ("Wishart", dict(df=3.5, scale_tril=_L), _SPD, ()),
    "WishartPrecision": ("Wishart", dict(df=np.array([6.0]), precision_matrix=_SPD[1]), _SPD, ()),
}
# Wishart's first calls compile its Cholesky solves and log-determinants (seconds): its cases run in the slow tier
_NAMES = [pytest.param(n, marks=pytest.mark.slow) if n.startswith("Wishart") else n for n in CASES]
# torch's Kumaraswamy.mode takes log1p(-concentration0), NaN for every concentration0 > 1 (see test below)
_NOT_COMPARED = {"Kumaraswamy": ("mode",)}


def _make(lib, name, dtype="float64", requires_grad=False):
    family, params, _, _ = CASES[name]
    d = getattr(lib, dtype)
    made = {k: v if np.isscalar(v) else lib.tensor(v, dtype=d, requires_grad=requires_grad) for k, v in params.items()}
    return getattr(lib.distributions, family)(**made), [v for v in made.values() if not np.isscalar(v)]


def _close(ours, theirs, rtol=1e-9, atol=1e-10):
    np.testing.assert_allclose(np.asarray(ours.detach().numpy()), theirs.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", _NAMES)
def test_log_prob_moments_and_entropy_match_torch(name):
    (ours, _), (theirs, _) = _make(bg, name), _make(torch, name)
    value = CASES[name][2]
    assert ours.batch_shape == theirs.batch_shape and ours.event_shape == theirs.event_shape
    assert ours.has_rsample == theirs.has_rsample and repr(ours.support) == repr(theirs.support)
    _close(ours.log_prob(bg.tensor(value)), theirs.log_prob(torch.tensor(value)))
    for attribute in ("mean", "variance", "stddev", "mode"):
        if attribute in _NOT_COMPARED.get(name, ()):
            continue
        try:
            expected = getattr(theirs, attribute)
        except NotImplementedError:
            continue
        _close(getattr(ours, attribute), expected)
    try:
        expected = theirs.entropy()
    except NotImplementedError as error:
        with pytest.raises(NotImplementedError, match=str(error) or None):
            ours.entropy()
        return
    _close(ours.entropy(), expected)


@pytest.mark.parametrize("name", [n for n in CASES if CASES[n][3]])
def test_cdf_and_icdf_match_torch(name):
    (ours, _), (theirs, _) = _make(bg, name), _make(torch, name)
    value, methods = CASES[name][2], CASES[name][3]
    _close(ours.cdf(bg.tensor(value)), theirs.cdf(torch.tensor(value)))
    if "icdf" in methods:
        q = np.array([0.1, 0.5, 0.95])
        _close(ours.icdf(bg.tensor(q)), theirs.icdf(torch.tensor(q)))


@pytest.mark.parametrize("name", _NAMES)
def test_log_prob_gradients_match_torch(name):
    (ours, our_params), (theirs, their_params) = (
        _make(bg, name, requires_grad=True),
        _make(torch, name, requires_grad=True),
    )
    value = CASES[name][2]
    differentiable = [i for i, p in enumerate(their_params) if p.is_floating_point()]
    our_grads = bg.autograd.grad(ours.log_prob(bg.tensor(value)).sum(), [our_params[i] for i in differentiable])
    expected = torch.autograd.grad(
        theirs.log_prob(torch.tensor(value)).sum(), [their_params[i] for i in differentiable]
    )
    for mine, reference in zip(our_grads, expected, strict=True):
        _close(mine, reference, atol=1e-8)


def _draws(lib, name, dtype):
    dist, _ = _make(lib, name, dtype)
    lib.manual_seed(11)
    draws = [dist.sample((3,)), dist.sample(), dist.expand((2,) + tuple(dist.batch_shape)).sample()]
    if dist.has_rsample:
        draws.append(dist.rsample((2,)))
    return [d.double().numpy() for d in draws]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", _NAMES)
def test_draws_are_torchs_for_the_same_seed(name, dtype):
    tolerance = dict(rtol=1e-6, atol=1e-7) if dtype == "float32" else dict(rtol=1e-13, atol=1e-15)
    if name == "LKJCholesky" and dtype == "float32":
        # a diagonal entry is sqrt(1 - |row|^2): a last-place difference of the row's float32 norm grows there
        tolerance = dict(rtol=1e-6, atol=1e-5)
    for ours, theirs in zip(_draws(bg, name, dtype), _draws(torch, name, dtype), strict=True):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, **tolerance)


@pytest.mark.parametrize("name", [n for n in CASES if getattr(TD, CASES[n][0]).has_rsample and "Wishart" not in n])
def test_rsample_gradients_match_torch(name):
    # the draws are torch's for the same seed, so the gradients of a weighted sum of them are compared directly
    results = []
    for lib in (bg, torch):
        dist, params = _make(lib, name, requires_grad=True)
        lib.manual_seed(5)
        x = dist.rsample((2,))
        weights = lib.arange(1.0, 1.0 + x.numel(), dtype=lib.float64).reshape(x.shape)
        results.append(lib.autograd.grad((x * weights).sum(), params))
    for mine, reference in zip(*results, strict=True):
        _close(mine, reference, rtol=1e-8, atol=1e-10)


def test_kumaraswamy_mode_is_the_density_maximum():
    # torch 2.13's mode is NaN for every concentration0 > 1; ours is the maximum, NaN where the density has none
    a, b = bg.tensor([2.0, 3.0, 0.5, 1.0]), bg.tensor([3.0, 1.5, 2.0, 1.0])
    mode = D.Kumaraswamy(a, b).mode
    grid = bg.linspace(1e-3, 1 - 1e-3, 999).unsqueeze(-1)
    best = grid.squeeze(-1)[D.Kumaraswamy(a, b).log_prob(grid)[:, :2].argmax(0)]
    np.testing.assert_allclose(mode[:2].numpy(), best.numpy(), atol=1e-3)
    assert np.isnan(mode[2:].numpy()).all()


def test_binomial_draws_cover_both_samplers_and_match_torch():
    # count * min(p, 1 - p) below 10 draws by inversion, from 10 on by BTRS rejection; both are torch's streams
    n, p = [100.0, 1000.0, 50.0, 7.0, 400.0, 30.0], [0.3, 0.9, 0.5, 0.99, 0.03, 0.0]
    for dtype in ("float32", "float64"):
        draws = []
        for lib in (bg, torch):
            d = getattr(lib, dtype)
            lib.manual_seed(1)
            draws.append(lib.distributions.Binomial(lib.tensor(n, dtype=d), lib.tensor(p, dtype=d)).sample((50,)))
        np.testing.assert_array_equal(draws[0].numpy(), draws[1].numpy())
        np.testing.assert_allclose(draws[0].mean(0).numpy(), np.array(n) * np.array(p), rtol=0.1)


@pytest.mark.parametrize(
    "make",
    [
        lambda lib, dists: dists.Cauchy(lib.tensor([0.0, 1.0]), lib.tensor([1.0, -1.0]), validate_args=True),
        lambda lib, dists: dists.HalfNormal(lib.tensor([-1.0]), validate_args=True),
        lambda lib, dists: dists.HalfNormal(lib.tensor([1.0]), validate_args=True).log_prob(lib.tensor([-1.0])),
        lambda lib, dists: dists.Chi2(lib.tensor([0.0, 2.0]), validate_args=True),
        lambda lib, dists: dists.Gumbel(lib.tensor([0.0]), lib.tensor([0.0]), validate_args=True),
        lambda lib, dists: dists.Pareto(lib.tensor([1.0]), lib.tensor([2.0]), validate_args=True).log_prob(
            lib.tensor([0.5])
        ),
        lambda lib, dists: dists.Geometric(probs=lib.tensor([0.0, 0.5]), validate_args=True),
        lambda lib, dists: dists.Geometric(probs=0.5, logits=0.0),
        lambda lib, dists: dists.Binomial(lib.tensor([2.5]), lib.tensor([0.5]), validate_args=True),
        lambda lib, dists: dists.Binomial(4, lib.tensor([0.5]), validate_args=True).log_prob(lib.tensor([5.0])),
        lambda lib, dists: dists.NegativeBinomial(lib.tensor([2.0]), lib.tensor([1.0]), validate_args=True),
        lambda lib, dists: dists.Multinomial(3, lib.tensor([0.5, 0.5]), validate_args=True).log_prob(
            lib.tensor([4.0, -1.0])
        ),
        lambda lib, dists: dists.Kumaraswamy(lib.tensor([1.0]), lib.tensor([-2.0]), validate_args=True),
        lambda lib, dists: dists.Weibull(lib.tensor([1.0]), lib.tensor([-2.0]), validate_args=True),
        lambda lib, dists: dists.InverseGamma(lib.tensor([1.0]), lib.tensor([-2.0]), validate_args=True),
        lambda lib, dists: dists.FisherSnedecor(lib.tensor([1.0]), lib.tensor([-2.0]), validate_args=True),
        lambda lib, dists: dists.ContinuousBernoulli(lib.tensor([1.5]), validate_args=True),
        lambda lib, dists: dists.VonMises(lib.tensor([0.0]), lib.tensor([-1.0]), validate_args=True),
        lambda lib, dists: dists.LKJCholesky(1),
        lambda lib, dists: dists.LKJCholesky(3, lib.tensor([-1.0]), validate_args=True),
        lambda lib, dists: dists.LKJCholesky(2, validate_args=True).log_prob(lib.eye(2) * 2),
        lambda lib, dists: dists.Wishart(lib.tensor(1.5), lib.eye(3)),
        lambda lib, dists: dists.Wishart(lib.tensor(3.5), scale_tril=lib.ones(3, 3), validate_args=True),
        lambda lib, dists: dists.Wishart(lib.tensor(3.5), lib.eye(3), validate_args=True).log_prob(-lib.eye(3)),
        lambda lib, dists: dists.ContinuousBernoulli(lib.tensor([0.5]), validate_args=True).log_prob(lib.tensor([2.0])),
        lambda lib, dists: dists.RelaxedBernoulli(lib.tensor(0.5), lib.tensor([1.5]), validate_args=True),
        lambda lib, dists: dists.RelaxedOneHotCategorical(lib.tensor(0.5), lib.tensor([0.5, -0.5]), validate_args=True),
        lambda lib, dists: dists.OneHotCategoricalStraightThrough(lib.tensor([0.5, 0.5]), validate_args=True).log_prob(
            lib.tensor([0.5, 0.5])
        ),
    ],
)
def test_validate_args_errors_match_torch(make):
    ours, theirs = raises_like_torch(lambda lib: make(lib, lib.distributions))
    assert isinstance(ours, ValueError) and str(ours) == str(theirs)


def test_generalized_pareto_matches_torch_in_float32():
    # torch 2.13's log_prob compares the concentration with a float32 zero, so it runs in float32 only
    params = dict(loc=_VEC, scale=_POS, concentration=np.array([0.0, 0.3, -0.2]))
    ours = D.GeneralizedPareto(**{k: bg.tensor(v, dtype=bg.float32) for k, v in params.items()})
    theirs = TD.GeneralizedPareto(**{k: torch.tensor(v, dtype=torch.float32) for k, v in params.items()})
    value = np.array([0.8, 0.0, 3.0], np.float32)
    for method in ("log_prob", "cdf", "log_survival_function", "log_cdf"):
        _close(getattr(ours, method)(bg.tensor(value)), getattr(theirs, method)(torch.tensor(value)), 1e-5, 1e-6)
    q = np.array([0.1, 0.5, 0.95], np.float32)
    _close(ours.icdf(bg.tensor(q)), theirs.icdf(torch.tensor(q)), 1e-5, 1e-6)
    for attribute in ("mean", "variance", "mode"):
        _close(getattr(ours, attribute), getattr(theirs, attribute), 1e-6, 1e-7)
    _close(ours.entropy(), theirs.entropy(), 1e-6)
    assert repr(ours.support) == repr(theirs.support)
    bg.manual_seed(2)
    torch.manual_seed(2)
    _close(ours.rsample((4,)), theirs.rsample((4,)), 1e-6, 1e-6)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Singular sample detected")
@pytest.mark.parametrize("name", ["Wishart", "WishartTril", "WishartPrecision"])
def test_wishart_rsample_redraws_as_torch_and_differentiates(name):
    # torch 2.13 redraws every positive definite Bartlett draw once (and its rsample then fails to differentiate,
    # an in-place change of the mask it indexes with): our draws are its second draws, our gradients those of
    # torch's second Bartlett draws
    results = []
    for lib in (bg, torch):
        dist, params = _make(lib, name, requires_grad=True)
        lib.manual_seed(5)
        if lib is bg:
            x = dist.rsample((2,))
        else:
            assert bool(dist.support.check(dist._bartlett_sampling((2,))).all())
            x = dist._bartlett_sampling((2,))
            torch.manual_seed(5)
            np.testing.assert_allclose(x.detach().numpy(), dist.rsample((2,)).detach().numpy(), rtol=1e-13)
        weights = lib.arange(1.0, 1.0 + x.numel(), dtype=lib.float64).reshape(x.shape)
        results.append(lib.autograd.grad((x * weights).sum(), params))
    for mine, reference in zip(*results, strict=True):
        _close(mine, reference, rtol=1e-8, atol=1e-10)


@pytest.mark.slow
def test_families_draw_and_evaluate_under_vmap():
    # under vmap the parameters are traced: draws are JAX's, keyed by the default generator, and each row's
    # log_prob is the one computed outside vmap for that row's parameter
    c = bg.tensor([0.5, 1.0, 2.0], dtype=bg.float64)

    def families(c):
        return [D.Gumbel(c, 1.0), D.HalfNormal(c), D.Weibull(c, 2.0), D.Kumaraswamy(c, 2.0), D.InverseGamma(c + 1, 1.0)]

    def row(c):
        dists = families(c)
        draws = [d.rsample() for d in dists]
        value = bg.tensor(0.3, dtype=bg.float64)
        fixed = D.Geometric(probs=c / 3).log_prob(value * 10) + D.VonMises(c, c).log_prob(value)
        return bg.stack(draws), bg.stack([d.log_prob(x) for d, x in zip(dists, draws)]), fixed

    bg.manual_seed(0)
    draws, log_probs, fixed = vmap.vmap(row, randomness="different")(c)
    outside = bg.stack([d.log_prob(draws[:, i]) for i, d in enumerate(families(c))], 1)
    _close(log_probs, outside)
    value = bg.tensor(0.3, dtype=bg.float64)
    _close(fixed, D.Geometric(probs=c / 3).log_prob(value * 10) + D.VonMises(c, c).log_prob(value))


@pytest.mark.slow
def test_binomial_draws_while_tracing_are_jaxs_within_the_support():
    bg.manual_seed(0)
    counts = bg.tensor([5.0, 50.0, 200.0])
    draws = vmap.vmap(lambda p: D.Binomial(counts, p).sample((400,)), randomness="different")(bg.tensor([0.2, 0.5]))
    values = draws.numpy()
    assert values.shape == (2, 400, 3) and (values >= 0).all() and (values <= counts.numpy()).all()
    assert (values == np.round(values)).all()
    expected = np.array([[0.2], [0.5]]) * counts.numpy()
    np.testing.assert_allclose(values.mean(1), expected, rtol=0.1)
