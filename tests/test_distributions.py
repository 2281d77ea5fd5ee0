"""batched_grad.distributions against torch.distributions: densities, moments, entropies, CDFs, KL values and their
gradients in float64; sample shapes and moments; validate_args' errors; rsample and log_prob under transforms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributions as TD

import batched_grad as bg
import batched_grad.distributions as D
import vmap

# family name: (constructor params as arrays, a value in the support, is the value batch-shaped integer-like)
_VEC = np.array([0.3, -1.2, 2.0])
_POS = np.array([0.7, 1.5, 3.0])
_POS2 = np.array([2.5, 0.8, 1.1])
_SIMPLEX_PARAM = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
_L = np.array([[1.5, 0.0, 0.0], [0.3, 0.8, 0.0], [-0.4, 0.2, 1.1]])
CASES = {
    "Normal": (dict(loc=_VEC, scale=_POS), np.array([0.1, 0.4, -2.0])),
    "Laplace": (dict(loc=_VEC, scale=_POS), np.array([0.1, 0.4, -2.0])),
    "Uniform": (dict(low=_VEC, high=_VEC + _POS), _VEC + 0.5 * _POS),
    "Exponential": (dict(rate=_POS), np.array([0.1, 0.4, 2.0])),
    "Gamma": (dict(concentration=_POS, rate=_POS2), np.array([0.1, 0.4, 2.0])),
    "Beta": (dict(concentration1=_POS, concentration0=_POS2), np.array([0.1, 0.4, 0.8])),
    "StudentT": (dict(df=_POS2 + 2, loc=_VEC, scale=_POS), np.array([0.1, 0.4, -2.0])),
    "LogNormal": (dict(loc=_VEC, scale=_POS), np.array([0.1, 0.4, 2.0])),
    "Dirichlet": (dict(concentration=np.array([[0.7, 1.5, 3.0], [2.0, 2.0, 0.5]])), _SIMPLEX_PARAM),
    "Bernoulli": (dict(probs=np.array([0.2, 0.5, 0.9])), np.array([1.0, 0.0, 1.0])),
    "BernoulliLogits": (dict(logits=_VEC), np.array([1.0, 0.0, 1.0])),
    "Categorical": (dict(probs=_SIMPLEX_PARAM), np.array([2.0, 0.0])),
    "CategoricalLogits": (dict(logits=_SIMPLEX_PARAM * 3), np.array([1.0, 2.0])),
    "OneHotCategorical": (dict(probs=_SIMPLEX_PARAM), np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])),
    "Poisson": (dict(rate=_POS), np.array([0.0, 2.0, 5.0])),
    "MultivariateNormal": (dict(loc=_VEC, scale_tril=_L), np.array([[0.1, 0.4, -2.0], [1.0, 0.0, 0.5]])),
    "MultivariateNormalCov": (dict(loc=_VEC, covariance_matrix=_L @ _L.T), np.array([0.1, 0.4, -2.0])),
    "MultivariateNormalPrec": (dict(loc=_VEC, precision_matrix=np.linalg.inv(_L @ _L.T)), np.array([0.1, 0.4, -2.0])),
    "LowRankMultivariateNormal": (dict(loc=_VEC, cov_factor=_L[:, :2], cov_diag=_POS), np.array([0.1, 0.4, -2.0])),
}


def _family(name):
    for suffix in ("Logits", "Cov", "Prec"):
        name = name.removesuffix(suffix)
    return name


def _both(name, requires_grad=False):
    """(ours, torch's, our params, torch's params) for CASES[name], float64."""
    params, _ = CASES[name]
    ours = {k: bg.tensor(v, dtype=bg.float64, requires_grad=requires_grad) for k, v in params.items()}
    theirs = {k: torch.tensor(v, dtype=torch.float64, requires_grad=requires_grad) for k, v in params.items()}
    family = _family(name)
    return getattr(D, family)(**ours), getattr(TD, family)(**theirs), ours, theirs


def _close(ours, theirs, atol=1e-10):
    np.testing.assert_allclose(np.asarray(ours.detach().numpy()), theirs.detach().numpy(), rtol=1e-9, atol=atol)


@pytest.mark.parametrize("name", CASES)
def test_log_prob_shapes_and_moments_match_torch(name):
    ours, theirs, _, _ = _both(name)
    value = CASES[name][1]
    assert ours.batch_shape == tuple(theirs.batch_shape) and ours.event_shape == tuple(theirs.event_shape)
    _close(ours.log_prob(bg.tensor(value, dtype=bg.float64)), theirs.log_prob(torch.tensor(value)))
    for attribute in ("mean", "variance", "stddev", "mode"):
        try:
            expected = getattr(theirs, attribute)
        except NotImplementedError:
            continue
        _close(getattr(ours, attribute), expected)
    try:
        expected_entropy = theirs.entropy()
    except NotImplementedError:
        return
    _close(ours.entropy(), expected_entropy)


@pytest.mark.parametrize("name", ["Normal", "Laplace", "Uniform", "Exponential", "Gamma", "LogNormal"])
def test_cdf_and_icdf_match_torch(name):
    ours, theirs, _, _ = _both(name)
    value = CASES[name][1]
    _close(ours.cdf(bg.tensor(value)), theirs.cdf(torch.tensor(value)))
    if name != "Gamma":
        q = np.array([0.1, 0.5, 0.95])
        _close(ours.icdf(bg.tensor(q)), theirs.icdf(torch.tensor(q)))


@pytest.mark.parametrize("name", [n for n in CASES if n not in ("Poisson",)])
def test_log_prob_gradients_match_torch(name):
    ours, theirs, our_params, their_params = _both(name, requires_grad=True)
    value = CASES[name][1]
    our_grads = bg.autograd.grad(ours.log_prob(bg.tensor(value)).sum(), list(our_params.values()))
    their_grads = torch.autograd.grad(theirs.log_prob(torch.tensor(value)).sum(), list(their_params.values()))
    for mine, expected in zip(our_grads, their_grads):
        _close(mine, expected, atol=1e-8)


def test_poisson_log_prob_gradient_matches_torch():
    ours, theirs, our_params, their_params = _both("Poisson", requires_grad=True)
    value = CASES["Poisson"][1]
    (mine,) = bg.autograd.grad(ours.log_prob(bg.tensor(value)).sum(), [our_params["rate"]])
    (expected,) = torch.autograd.grad(theirs.log_prob(torch.tensor(value)).sum(), [their_params["rate"]])
    _close(mine, expected)


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_sample_shapes(name):
    ours, theirs, _, _ = _both(name)
    assert ours.sample((4, 2)).shape == tuple(theirs.sample((4, 2)).shape)
    assert ours.expand((5,) + tuple(ours.batch_shape)).sample().shape == (5,) + tuple(theirs.sample().shape)


_MOMENT_CASES = [
    "Normal",
    "Laplace",
    "Uniform",
    "Exponential",
    "Gamma",
    "Beta",
    "Dirichlet",
    "Bernoulli",
    "Categorical",
    "Poisson",
    "MultivariateNormal",
    "LowRankMultivariateNormal",
    "StudentT",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", _MOMENT_CASES)
def test_sample_moments_match_the_distribution(name):
    bg.manual_seed(0)
    ours, theirs, _, _ = _both(name)
    draws = ours.sample((4000,)).double()
    if name == "Categorical":
        draws = bg.nn.functional.one_hot(draws.long(), 3).double()
        mean, variance = theirs.probs, theirs.probs * (1 - theirs.probs)
    else:
        mean, variance = theirs.mean, theirs.variance
    scale = variance.sqrt().numpy()
    np.testing.assert_allclose(draws.mean(0).numpy(), mean.numpy(), atol=float(5 * scale.max() / np.sqrt(4000)))
    np.testing.assert_allclose(draws.var(0).numpy(), variance.numpy(), rtol=0.25)


@pytest.mark.parametrize("name", ["Normal", "MultivariateNormal", "Laplace", "Exponential"])
def test_rsample_gradient_matches_torch_for_the_same_noise(name):
    # the sample is a deterministic function of the parameters and the noise, so the gradient of sum(x * w) is
    # checked through torch run on the noise that our sample implies (whatever noise torch would draw)
    ours, theirs, our_params, their_params = _both(name, requires_grad=True)
    bg.manual_seed(3)
    x = ours.rsample((2,))
    weights = np.arange(1.0, 1.0 + x.numel()).reshape(tuple(x.shape))
    grads = bg.autograd.grad((x * bg.tensor(weights)).sum(), list(our_params.values()))
    torch_x = _torch_sample_for(name, theirs, x.detach().numpy())
    expected = torch.autograd.grad((torch_x * torch.tensor(weights)).sum(), list(their_params.values()))
    for mine, reference in zip(grads, expected):
        _close(mine, reference, atol=1e-8)


def _torch_sample_for(name, dist, x):
    """torch's reparameterized function of its parameters giving the same x as ours (the noise solved back)."""
    x = torch.tensor(x)
    if name == "Normal":
        eps = (x - dist.loc.detach()) / dist.scale.detach()
        return dist.loc + eps * dist.scale
    if name == "Laplace":
        z = (x - dist.loc.detach()) / dist.scale.detach()  # = -sign(u) log1p(-|u|)
        return dist.loc + z * dist.scale
    if name == "Exponential":
        e = x * dist.rate.detach()
        return e / dist.rate
    if name == "MultivariateNormal":
        tril = dist._unbroadcasted_scale_tril
        eps = torch.linalg.solve_triangular(tril.detach(), (x - dist.loc.detach()).unsqueeze(-1), upper=False)
        return dist.loc + (tril @ eps).squeeze(-1)
    raise AssertionError(name)


def test_lowrank_rsample_is_loc_plus_factor_noise_plus_diagonal_noise():
    ours, _, params, _ = _both("LowRankMultivariateNormal", requires_grad=True)
    bg.manual_seed(5)
    x = ours.rsample((3,))
    bg.manual_seed(5)
    eps_w = bg.randn(3, 2, dtype=bg.float64)
    eps_d = bg.randn(3, 3, dtype=bg.float64)
    expected = params["loc"] + eps_w @ params["cov_factor"].detach().T + params["cov_diag"].detach().sqrt() * eps_d
    _close(x, expected)
    (grad_factor,) = bg.autograd.grad(x.sum(), [params["cov_factor"]])
    _close(grad_factor, torch.tensor(np.ones((3, 1)) * eps_w.sum(0).numpy()[None, :]))


_KL_PAIRS = {
    "Normal": (dict(loc=_VEC, scale=_POS), dict(loc=-_VEC, scale=_POS2)),
    "Laplace": (dict(loc=_VEC, scale=_POS), dict(loc=-_VEC, scale=_POS2)),
    "Exponential": (dict(rate=_POS), dict(rate=_POS2)),
    "Gamma": (dict(concentration=_POS, rate=_POS2), dict(concentration=_POS2, rate=_POS)),
    "Beta": (dict(concentration1=_POS, concentration0=_POS2), dict(concentration1=_POS2, concentration0=_POS)),
    "Dirichlet": (dict(concentration=_SIMPLEX_PARAM + 0.5), dict(concentration=_SIMPLEX_PARAM[::-1] + 1)),
    "Uniform": (dict(low=_VEC, high=_VEC + 1), dict(low=_VEC - 1, high=_VEC + 2)),
    "Bernoulli": (dict(probs=np.array([0.2, 0.5, 0.9])), dict(probs=np.array([0.6, 0.3, 0.5]))),
    "Categorical": (dict(probs=_SIMPLEX_PARAM), dict(probs=_SIMPLEX_PARAM[::-1].copy())),
    "MultivariateNormal": (dict(loc=_VEC, scale_tril=_L), dict(loc=-_VEC, covariance_matrix=_L.T @ _L + np.eye(3))),
}


@pytest.mark.parametrize("name", _KL_PAIRS)
def test_kl_divergence_and_its_gradients_match_torch(name):
    results = []
    for lib, dists in ((bg, D), (torch, TD)):
        params = [
            {k: lib.tensor(np.ascontiguousarray(v), dtype=lib.float64, requires_grad=True) for k, v in side.items()}
            for side in _KL_PAIRS[name]
        ]
        kl = dists.kl_divergence(getattr(dists, name)(**params[0]), getattr(dists, name)(**params[1]))
        leaves = [t for side in params for t in side.values()]
        results.append((kl, lib.autograd.grad(kl.sum(), leaves)))
    (ours, our_grads), (theirs, their_grads) = results
    _close(ours, theirs)
    for mine, expected in zip(our_grads, their_grads):
        _close(mine, expected, atol=1e-8)


def test_kl_of_independent_normals_sums_over_reinterpreted_dimensions_and_unknown_pairs_raise():
    p = D.Independent(D.Normal(bg.zeros(2, 3), bg.ones(2, 3)), 1)
    q = D.Independent(D.Normal(bg.ones(2, 3), 2 * bg.ones(2, 3)), 1)
    tp = TD.Independent(TD.Normal(torch.zeros(2, 3), torch.ones(2, 3)), 1)
    tq = TD.Independent(TD.Normal(torch.ones(2, 3), 2 * torch.ones(2, 3)), 1)
    _close(D.kl_divergence(p, q), TD.kl_divergence(tp, tq), atol=1e-6)
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q type"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(bg.tensor([0.5, 0.5])))


def test_register_kl_adds_a_pair_used_for_subclasses():
    class Wide(D.Normal):
        pass

    @D.register_kl(Wide, D.Exponential)
    def _kl(p, q):
        return p.loc * 0 + 7.0

    assert float(D.kl_divergence(Wide(0.0, 1.0), D.Exponential(1.0))) == 7.0
    with pytest.raises(TypeError, match="Expected type_p to be a Distribution subclass"):
        D.register_kl(int, D.Normal)


def _error(make):
    with pytest.raises(ValueError) as info:
        make()
    return str(info.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda lib, dists: dists.Normal(lib.tensor([0.0, 1.0]), lib.tensor([1.0, -1.0]), validate_args=True),
        lambda lib, dists: dists.Bernoulli(probs=lib.tensor([1.5]), validate_args=True),
        lambda lib, dists: dists.Categorical(probs=lib.tensor([0.5, 0.5]), logits=lib.tensor([0.0, 0.0])),
        lambda lib, dists: dists.Normal(0.0, 1.0, validate_args=True).log_prob(lib.zeros(2, 3)[0, :1] + lib.nan),
        lambda lib, dists: dists.Exponential(lib.ones(2), validate_args=True).log_prob(lib.tensor([1.0, -1.0])),
        lambda lib, dists: dists.Dirichlet(lib.ones(3), validate_args=True).log_prob(lib.ones(2)),
        lambda lib, dists: dists.MultivariateNormal(lib.zeros(2)),
        lambda lib, dists: dists.Independent(dists.Normal(lib.zeros(2), lib.ones(2)), 2),
        lambda lib, dists: dists.Gamma(1.0, 1.0, validate_args=True).log_prob(lib.tensor(-1.0)),
    ],
)
def test_validate_args_errors_match_torch(make):
    assert _error(lambda: make(bg, D)) == _error(lambda: make(torch, TD))


def test_set_default_validate_args_switches_checks_off():
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(bg.tensor([0.0]), bg.tensor([-1.0]))  # no error
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="to satisfy the constraint GreaterThan"):
        D.Normal(bg.tensor([0.0]), bg.tensor([-1.0]))


def test_constraints_check_like_torch():
    value = np.array([[0.2, 0.8], [0.5, 0.6], [-0.1, 1.1]])
    for name in ("real", "positive", "unit_interval", "simplex", "nonnegative", "real_vector"):
        ours = getattr(D.constraints, name).check(bg.tensor(value))
        theirs = getattr(TD.constraints, name).check(torch.tensor(value))
        assert ours.tolist() == theirs.tolist(), name
        assert repr(getattr(D.constraints, name)) == repr(getattr(TD.constraints, name))


# every family's draws are torch's for the same seed: its samplers run on the same stream (Categorical's multinomial,
# the gamma rejection sampler of Gamma, Beta, Dirichlet and StudentT, ...)
_DRAWN = [name for name in CASES if name not in ("MultivariateNormalCov", "MultivariateNormalPrec")]


def _draws(module, name, dtype):
    params, _ = CASES[name]
    dist = getattr(module.distributions, _family(name))(
        **{k: module.tensor(v, dtype=getattr(module, dtype)) for k, v in params.items()}
    )
    module.manual_seed(11)
    draws = [dist.sample((3,)), dist.sample()]
    if dist.has_rsample:
        draws.append(dist.rsample((2,)))
    return [d.double().numpy() for d in draws]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", _DRAWN)
def test_draws_are_torchs_for_the_same_seed(name, dtype):
    tolerance = dict(rtol=1e-6, atol=1e-7) if dtype == "float32" else dict(rtol=1e-13, atol=1e-15)
    for ours, theirs in zip(_draws(bg, name, dtype), _draws(torch, name, dtype), strict=True):
        np.testing.assert_allclose(ours, theirs, **tolerance)


def test_mixture_draws_are_torchs_for_the_same_seed():
    def draws(m):
        dist = m.distributions
        mixture = dist.MixtureSameFamily(
            dist.Categorical(m.tensor([0.3, 0.7])), dist.Normal(m.tensor([0.0, 5.0]), m.tensor([1.0, 0.5]))
        )
        m.manual_seed(2)
        return mixture.sample((6,)).numpy()

    np.testing.assert_array_equal(draws(bg), draws(torch))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gamma_and_student_t_rsample_gradients_are_torchs(dtype):
    # torch's implicit reparameterization gradient of its gamma draws (a series, a saddle point expansion and a
    # rational approximation by regime of alpha and x), through Gamma's rate and StudentT's chi-square
    def gradients(m):
        d = getattr(m, dtype)
        alpha = m.tensor([0.3, 0.9, 2.0, 5.0, 12.0, 40.0], dtype=d, requires_grad=True)
        rate = m.tensor([1.5, 0.5, 2.0, 1.0, 0.7, 3.0], dtype=d, requires_grad=True)
        m.manual_seed(5)
        x = m.distributions.Gamma(alpha, rate).rsample((3,))
        weights = m.arange(18, dtype=d).reshape(3, 6)
        df = m.tensor([3.0, 7.5], dtype=d, requires_grad=True)
        m.manual_seed(6)
        t = m.distributions.StudentT(df, 0.5, 2.0).rsample((4,))
        return m.autograd.grad((x * weights).sum(), [alpha, rate]) + m.autograd.grad(t.sin().sum(), [df])

    tolerance = dict(rtol=1e-5) if dtype == "float32" else dict(rtol=1e-12)
    for ours, theirs in zip(gradients(bg), gradients(torch), strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), **tolerance)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dirichlet_and_beta_rsample_gradients_are_torchs(dtype):
    # torch's Dirichlet gradient, from each coordinate's Beta marginal: Taylor series near 0 and 1, a saddle point
    # expansion for large concentrations, a rational approximation between (Beta draws through a 2-D Dirichlet)
    def gradients(m):
        d = getattr(m, dtype)
        c = m.tensor([[0.3, 2.0, 3.0], [8.0, 12.0, 0.7], [15.0, 20.0, 30.0]], dtype=d, requires_grad=True)
        a = m.tensor([0.5, 2.0, 9.0], dtype=d, requires_grad=True)
        b = m.tensor([1.5, 0.4, 11.0], dtype=d, requires_grad=True)
        m.manual_seed(7)
        z = m.distributions.Dirichlet(c).rsample((2,))
        x = m.distributions.Beta(a, b).rsample((3,))
        weights = m.arange(18, dtype=d).reshape(2, 3, 3)
        return m.autograd.grad((z * weights).sum() + x.sin().sum(), [c, a, b])

    tolerance = dict(rtol=1e-5, atol=1e-7) if dtype == "float32" else dict(rtol=1e-11, atol=1e-14)
    for ours, theirs in zip(gradients(bg), gradients(torch), strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), **tolerance)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_implicit_gradient_formulas_are_torchs_across_their_regimes(dtype):
    from batched_grad.distributions import _implicit_gradients as implicit

    grid = np.array([0.05, 0.3, 0.9, 1.7, 4.0, 7.5, 9.0, 25.0])
    alpha, x = (v.ravel().astype(dtype) for v in np.meshgrid(grid, grid * 0.97))
    with jax.enable_x64(True):  # as batched_grad's ops run them: the formulas accumulate in double
        gamma = implicit._torch_gamma_gradient(jnp.asarray(alpha), jnp.asarray(x))
    expected = torch._standard_gamma_grad(torch.tensor(alpha), torch.tensor(x))
    tolerance = dict(rtol=1e-5, atol=1e-7) if dtype == "float32" else dict(rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(np.asarray(gamma), expected.numpy(), **tolerance)
    share = np.linspace(0.01, 0.99, 9).astype(dtype)
    s, a = (v.ravel() for v in np.meshgrid(share, grid.astype(dtype)))
    total = (a / np.where(s > 0.5, 1 - s, s) * 0.5 + a).astype(dtype)  # totals above alpha, near and far from it
    with jax.enable_x64(True):
        dirichlet = implicit._torch_dirichlet_gradient(jnp.asarray(s), jnp.asarray(a), jnp.asarray(total))
    expected = torch._dirichlet_grad(torch.tensor(s), torch.tensor(a), torch.tensor(total))
    np.testing.assert_allclose(np.asarray(dirichlet), expected.numpy(), **tolerance)


def test_draws_while_tracing_keep_their_support():
    # under vmap the parameters are traced: the draws are then JAX's (keyed by the default generator)
    bg.manual_seed(0)

    def draw(c):
        simplex = bg.stack([c, c + 1])
        return (
            D.Gamma(c, 1.0).rsample(),
            D.Dirichlet(simplex).rsample(),
            D.Categorical(logits=bg.stack([c, -c])).sample(),
        )

    gammas, simplex, indices = vmap.vmap(draw, randomness="different")(bg.tensor([0.5, 2.0, 3.0]))
    assert (gammas.numpy() > 0).all() and np.allclose(simplex.sum(-1).numpy(), 1.0)
    assert set(indices.tolist()) <= {0, 1}


@pytest.mark.slow
def test_log_prob_under_vmap_and_batched_grads_with_create_graph():
    loc = bg.tensor([0.3, -0.2], dtype=bg.float64, requires_grad=True)
    values = bg.tensor([[0.1, 0.2], [1.0, -1.0], [0.0, 0.5]], dtype=bg.float64)
    per_row = vmap.vmap(lambda v: D.Normal(loc, 2.0).log_prob(v).sum())(values)
    tloc = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)
    expected = TD.Normal(tloc, 2.0).log_prob(torch.tensor(values.numpy())).sum(-1)
    _close(per_row, expected)
    (first,) = bg.autograd.grad(per_row.sum(), [loc], create_graph=True)
    (hessian_rows,) = bg.autograd.grad(first, [loc], bg.eye(2, dtype=bg.float64), is_grads_batched=True)
    (tfirst,) = torch.autograd.grad(expected.sum(), [tloc], create_graph=True)
    (texpected,) = torch.autograd.grad(tfirst, [tloc], torch.eye(2, dtype=torch.float64), is_grads_batched=True)
    _close(hessian_rows, texpected)


def test_mixture_and_transformed_distributions_match_torch():
    logits, loc, scale = np.array([0.2, -0.5, 1.0]), _VEC, _POS
    value = np.array([0.3, -1.0])
    ours = D.MixtureSameFamily(D.Categorical(logits=bg.tensor(logits)), D.Normal(bg.tensor(loc), bg.tensor(scale)))
    theirs = TD.MixtureSameFamily(
        TD.Categorical(logits=torch.tensor(logits)), TD.Normal(torch.tensor(loc), torch.tensor(scale))
    )
    _close(ours.log_prob(bg.tensor(value)), theirs.log_prob(torch.tensor(value)))
    _close(ours.mean, theirs.mean)
    _close(ours.variance, theirs.variance)
    assert ours.sample((5,)).shape == (5,)
    for ours_t, theirs_t in (
        ([D.AffineTransform(1.0, 2.0), D.SigmoidTransform()], [TD.AffineTransform(1.0, 2.0), TD.SigmoidTransform()]),
        ([D.TanhTransform()], [TD.TanhTransform()]),
        (
            [D.ComposeTransform([D.ExpTransform(), D.AffineTransform(0.5, 3.0)])],
            [TD.ComposeTransform([TD.ExpTransform(), TD.AffineTransform(0.5, 3.0)])],
        ),
    ):
        mine = D.TransformedDistribution(D.Normal(bg.tensor(loc), bg.tensor(scale)), ours_t)
        reference = TD.TransformedDistribution(TD.Normal(torch.tensor(loc), torch.tensor(scale)), theirs_t)
        y = reference.sample((2,))
        _close(mine.log_prob(bg.tensor(y.numpy())), reference.log_prob(y), atol=1e-8)


def test_torchs_gamma_and_dirichlet_samplers_are_callable_directly_as_torch():
    """torch._standard_gamma and torch._sample_dirichlet (mixup draws its Beta weight with the latter): torch's
    draws on the default generator and on a given one, and the gamma draw's reparameterized gradient."""

    def drawn(m):
        m.manual_seed(0)
        gammas = m._standard_gamma(m.tensor([0.5, 1.0, 2.0, 5.0])).tolist()
        weight = float(m._sample_dirichlet(m.tensor([0.4, 0.4]))[0])
        generator = m.Generator().manual_seed(3)
        seeded = m._sample_dirichlet(m.tensor([[1.0, 2.0, 3.0]], dtype=m.float64), generator=generator).tolist()
        alpha = m.tensor([1.5, 2.5], requires_grad=True)
        m._standard_gamma(alpha).sum().backward()
        return gammas, weight, seeded, alpha.grad.tolist()

    assert drawn(bg) == drawn(torch)
