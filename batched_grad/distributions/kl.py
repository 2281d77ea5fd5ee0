"""kl_divergence(p, q) dispatched on the pair of types (register_kl adds a pair), with the closed forms of the
common pairs, written in batched_grad ops so that they differentiate."""

import math

import batched_grad as bg

from .composite import Independent, TransformedDistribution
from .continuous import Exponential, ExponentialFamily, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .multivariate import (
    LowRankMultivariateNormal,
    MultivariateNormal,
    _batch_mahalanobis,
    _lowrank_logdet,
    _lowrank_mahalanobis,
)
from .simplex import Beta, Dirichlet
from .utils import _sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}  # (type_p, type_q) -> fn(p, q)
_KL_MEMOIZE = {}  # (type(p), type(q)) -> the most specific registered fn


def register_kl(type_p, type_q):
    """A decorator registering fn(p, q) as KL(p || q) for p of type_p and q of type_q (and their subclasses,
    where no more specific pair is registered)."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()
        return fn

    return decorator


def _dispatch(type_p, type_q):
    """The registered function of the nearest pair of base classes (p's distance first, then q's)."""
    matches = [
        (type_p.__mro__.index(super_p), type_q.__mro__.index(super_q), fn)
        for (super_p, super_q), fn in _KL_REGISTRY.items()
        if issubclass(type_p, super_p) and issubclass(type_q, super_q)
    ]
    return min(matches, key=lambda m: m[:2])[2] if matches else NotImplemented


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], over the batch shape."""
    key = type(p), type(q)
    if key not in _KL_MEMOIZE:
        _KL_MEMOIZE[key] = _dispatch(*key)
    fn = _KL_MEMOIZE[key]
    if fn is NotImplemented:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type {q.__class__.__name__}"
        )
    return fn(p, q)


def _infinite_where(value, mask):
    return bg.where(mask.expand_as(value), math.inf, value)


def _zero_where(value, mask):
    return bg.where(mask.expand_as(value), 0.0, value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    mean_term = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + mean_term - 1 - var_ratio.log())


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes cannot be computed"
        )
    p_tril, q_tril = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_log_det_ratio = q_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) - p_tril.diagonal(dim1=-2, dim2=-1).log().sum(
        -1
    )
    n = p.event_shape[0]
    batch = tuple(bg.broadcast_shapes(tuple(q_tril.shape[:-2]), tuple(p_tril.shape[:-2])))
    solved = bg.linalg.solve_triangular(q_tril.expand(batch + (n, n)), p_tril.expand(batch + (n, n)), upper=False)
    trace = solved.pow(2).sum((-2, -1))  # tr(Sigma_q^{-1} Sigma_p)
    mahalanobis = _batch_mahalanobis(q_tril, q.loc - p.loc)
    return half_log_det_ratio + 0.5 * (trace + mahalanobis - n)


def _check_event_shapes(p, q, what):
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two {what} with different event shapes cannot be computed")


def _batch_trace_xxt(matrix):
    """trace(X X^T) of each matrix of a batch."""
    return matrix.pow(2).sum((-2, -1))


def _lowrank_terms(q, loc_p):
    """log det(Sigma_q), the Mahalanobis term of p's mean under q, and A with Sigma_q^{-1} = D^{-1} - A^T A."""
    factor, diag, capacitance = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, q._capacitance_tril
    log_det = _lowrank_logdet(factor, diag, capacitance)
    mahalanobis = _lowrank_mahalanobis(factor, diag, q.loc - loc_p, capacitance)
    a = bg.linalg.solve_triangular(capacitance, factor.mT / diag.unsqueeze(-2), upper=False)
    return log_det, mahalanobis, a


def _p_lowrank_log_det(p):
    return _lowrank_logdet(p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, p._capacitance_tril)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    _check_event_shapes(p, q, "Low Rank Multivariate Normals")
    log_det_q, mahalanobis, a = _lowrank_terms(q, p.loc)
    p_factor, p_diag, q_diag = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, q._unbroadcasted_cov_diag
    # tr(Sigma_q^{-1} Sigma_p) with Sigma_q^{-1} = D_q^{-1} - A^T A and Sigma_p = D_p + W_p W_p^T
    trace = (
        (p_diag / q_diag).sum(-1)
        + _batch_trace_xxt(p_factor * q_diag.rsqrt().unsqueeze(-1))
        - _batch_trace_xxt(a * p_diag.sqrt().unsqueeze(-2))
        - _batch_trace_xxt(a.matmul(p_factor))
    )
    return 0.5 * (log_det_q - _p_lowrank_log_det(p) + trace + mahalanobis - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p, q):
    _check_event_shapes(p, q, "(Low Rank) Multivariate Normals")
    log_det_q, mahalanobis, a = _lowrank_terms(q, p.loc)
    p_tril = p._unbroadcasted_scale_tril
    log_det_p = 2 * p_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    trace = _batch_trace_xxt(p_tril * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1)) - _batch_trace_xxt(
        a.matmul(p_tril)
    )
    return 0.5 * (log_det_q - log_det_p + trace + mahalanobis - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p, q):
    _check_event_shapes(p, q, "(Low Rank) Multivariate Normals")
    q_tril = q._unbroadcasted_scale_tril
    log_det_q = 2 * q_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    mahalanobis = _batch_mahalanobis(q_tril, q.loc - p.loc)
    n = p.event_shape[0]
    batch = tuple(bg.broadcast_shapes(tuple(q_tril.shape[:-2]), tuple(p._unbroadcasted_cov_factor.shape[:-2])))
    q_tril = q_tril.expand(batch + (n, n))
    p_factor = p._unbroadcasted_cov_factor.expand(batch + (n, p.cov_factor.size(-1)))
    p_diag_root = bg.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    trace = _batch_trace_xxt(bg.linalg.solve_triangular(q_tril, p_factor, upper=False)) + _batch_trace_xxt(
        bg.linalg.solve_triangular(q_tril, p_diag_root, upper=False)
    )
    return 0.5 * (log_det_q - _p_lowrank_log_det(p) + trace + mahalanobis - n)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """The Bregman divergence of the log normalizer F between the natural parameters:
    F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>."""
    if type(p) is not type(q):
        raise NotImplementedError(
            "The cross KL-divergence between different exponential families cannot "
            "                            be computed using Bregman divergences"
        )
    p_params = [theta.detach().requires_grad_() for theta in p._natural_params]
    q_params = q._natural_params
    log_normalizer_p = p._log_normalizer(*p_params)
    gradients = bg.autograd.grad(log_normalizer_p.sum(), p_params, create_graph=True)
    result = q._log_normalizer(*q_params) - log_normalizer_p
    for p_theta, q_theta, gradient in zip(p_params, q_params, gradients):
        result = result - _sum_rightmost((q_theta - p_theta) * gradient, len(q.event_shape))
    return result


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    terms = p.probs * (p.logits - q.logits)
    terms = _infinite_where(terms, q.probs == 0)
    return _zero_where(terms, p.probs == 0).sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    softplus = bg.nn.functional.softplus
    ones = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    ones = _zero_where(_infinite_where(ones, q.probs == 0), p.probs == 0)
    zeros = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    zeros = _zero_where(_infinite_where(zeros, q.probs == 1), p.probs == 1)
    return ones + zeros


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    total_p = p.concentration1 + p.concentration0
    total_q = q.concentration1 + q.concentration0
    log_beta_q = q.concentration1.lgamma() + q.concentration0.lgamma() - total_q.lgamma()
    log_beta_p = p.concentration1.lgamma() + p.concentration0.lgamma() - total_p.lgamma()
    return (
        log_beta_q
        - log_beta_p
        + (p.concentration1 - q.concentration1) * bg.digamma(p.concentration1)
        + (p.concentration0 - q.concentration0) * bg.digamma(p.concentration0)
        + (total_q - total_p) * bg.digamma(total_p)
    )


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    return (
        q.concentration * bg.log(p.rate / q.rate)
        + bg.lgamma(q.concentration)
        - bg.lgamma(p.concentration)
        + (p.concentration - q.concentration) * bg.digamma(p.concentration)
        + (q.rate - p.rate) * (p.concentration / p.rate)
    )


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    total_p, total_q = p.concentration.sum(-1), q.concentration.sum(-1)
    log_norm = total_p.lgamma() - total_q.lgamma() - (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    expected_log = p.concentration.digamma() - total_p.digamma().unsqueeze(-1)
    return log_norm + ((p.concentration - q.concentration) * expected_log).sum(-1)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _infinite_where(result, (q.low > p.low) | (q.high < p.high))


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_distance = (p.loc - q.loc).abs()
    return -scale_ratio.log() + loc_distance / q.scale + scale_ratio * bg.exp(-loc_distance / p.scale) - 1


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


# the pairs of the less common families and of different families register there
from . import kl_pairs  # noqa: E402,F401
