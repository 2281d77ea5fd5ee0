"""The closed forms of KL(p || q) that torch registers beyond kl.py's pairs of a family with itself: the less common
families with themselves, and pairs of different families (infinite where p's support leaves q's)."""

import math

import batched_grad as bg

from .continuous import Exponential, Gamma, Laplace, Normal, Uniform
from .counts import Binomial, Geometric
from .discrete import Bernoulli, Poisson
from .distribution import _all_true
from .kl import _kl_normal_normal, register_kl
from .location_scale import Cauchy, Gumbel, HalfNormal
from .relaxed import ContinuousBernoulli
from .shape_families import Pareto
from .simplex import Beta
from .utils import euler_constant


def _infinite_like(tensor):
    return bg.full_like(tensor, math.inf)


def _infinite_where(value, mask):
    return bg.where(mask, math.inf, value)


def _x_log_x(tensor):
    return bg.special.xlogy(tensor, tensor)  # 0 at x = 0


# ---- a family with itself ---------------------------------------------------------------------------------------


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if not _all_true(p.total_count >= q.total_count):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return _infinite_where(kl, p.total_count > q.total_count)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    p_terms = p.mean * (p.logits - q.logits) + p._cont_bern_log_norm() + bg.log1p(-p.probs)
    return p_terms - q._cont_bern_log_norm() - bg.log1p(-q.probs)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    scale_ratio, q_loc, p_loc = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    log_terms = -scale_ratio.log() - q_loc + p_loc + scale_ratio * euler_constant
    return log_terms + bg.exp(q_loc + (1 + scale_ratio).lgamma() - p_loc) - (1 + euler_constant)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - bg.log1p(-q.probs) / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * (p.scale / q.scale).log() - alpha_ratio.log() + alpha_ratio - 1
    return _infinite_where(result, p.support.lower_bound < q.support.lower_bound)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    return ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log() - (4 * p.scale * q.scale).log()


# ---- p's support outside q's: infinite ----------------------------------------------------------------------------


def _register_infinite(type_p, parameter, *types_q):
    def kl(p, q):
        return _infinite_like(getattr(p, parameter))

    for type_q in types_q:
        register_kl(type_p, type_q)(kl)


_register_infinite(Beta, "concentration1", Pareto)
_register_infinite(ContinuousBernoulli, "probs", Pareto)
_register_infinite(Exponential, "rate", Beta, ContinuousBernoulli, Pareto, Uniform)
_register_infinite(Gamma, "concentration", Beta, ContinuousBernoulli, Pareto, Uniform)
_register_infinite(Gumbel, "loc", Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)
_register_infinite(Laplace, "loc", Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)
_register_infinite(Normal, "loc", Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)
_register_infinite(Pareto, "scale", Beta, ContinuousBernoulli, Uniform)
_register_infinite(Poisson, "rate", Bernoulli, Binomial)


# ---- pairs of different families ----------------------------------------------------------------------------------


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


def _beta_mean(p):
    return p.concentration1 / (p.concentration1 + p.concentration0)


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - p.mean * q.logits - bg.log1p(-q.probs) - q._cont_bern_log_norm()


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * _beta_mean(p)


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    log_norm = q.concentration.lgamma() - q.concentration * q.rate.log()
    expected_log = p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma()
    return -p.entropy() + log_norm - (q.concentration - 1) * expected_log + q.rate * _beta_mean(p)


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    mean, var_normal = _beta_mean(p), q.scale.pow(2)
    second_moment = mean * (1 - mean) / (p.concentration1 + p.concentration0 + 1) + mean.pow(2)
    quadratic = second_moment * 0.5 - q.loc * mean + q.loc.pow(2) * 0.5
    return -p.entropy() + 0.5 * (var_normal * 2 * math.pi).log() + quadratic / var_normal


def _entropy_against_uniform(p, q, outside):
    return _infinite_where(-p.entropy() + (q.high - q.low).log(), outside)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    return _entropy_against_uniform(p, q, (q.low > p.support.lower_bound) | (q.high < p.support.upper_bound))


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - bg.log(q.rate) + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    log_norm = 0.5 * (math.log(2.0 * math.pi) + bg.square(q.loc / q.scale)) + bg.log(q.scale)
    quadratic = (p.variance + bg.square(p.mean) - 2.0 * q.loc * p.mean) / (2.0 * bg.square(q.scale))
    return -p.entropy() + log_norm + quadratic


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    # infinite unless q's interval strictly contains [0, 1] (torch's bounds, equality included)
    outside = (q.low >= p.support.lower_bound) | (q.high <= p.support.upper_bound)
    return _entropy_against_uniform(p, q, outside)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    log_terms = -q.concentration * bg.log(ratio) + ratio + q.concentration.lgamma()
    return log_terms + q.concentration * euler_constant - (1 + euler_constant)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    product, loc_ratio = p.rate * q.scale, q.loc / q.scale
    return product.log() - 1 - loc_ratio + bg.exp(loc_ratio) * product / (product + 1) + product.reciprocal()


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal, rate_sqr = q.scale.pow(2), p.rate.pow(2)
    quadratic = rate_sqr.reciprocal() - q.loc / p.rate + q.loc.pow(2) * 0.5
    return 0.5 * bg.log(rate_sqr * var_normal * 2 * math.pi) - 1 + quadratic / var_normal


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    product, loc_ratio, c = p.rate * q.scale, q.loc / q.scale, p.concentration
    negative_entropy_part = (c - 1) * c.digamma() - c.lgamma() - c
    expected_log_q = product.log() + c / product + bg.exp(loc_ratio) * (1 + product.reciprocal()).pow(-c) - loc_ratio
    return negative_entropy_part + expected_log_q


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var_normal, beta_sqr, c = q.scale.pow(2), p.rate.pow(2), p.concentration
    log_terms = 0.5 * bg.log(beta_sqr * var_normal * 2 * math.pi) - c - c.lgamma()
    quadratic = 0.5 * (c.pow(2) + c) / beta_sqr - q.loc * c / p.rate + 0.5 * q.loc.pow(2)
    return log_terms + (c - 1) * c.digamma() + quadratic / var_normal


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    ratio = p.scale / q.scale
    shift = ((p.loc + p.scale * euler_constant - q.loc) / q.scale).pow(2) * 0.5
    return -(ratio / math.sqrt(2 * math.pi)).log() + (math.pi * ratio * 0.5).pow(2) / 3 + shift - (euler_constant + 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    ratio = p.scale.pow(2) / var_normal
    quadratic = 0.5 * p.loc.pow(2) - p.loc * q.loc + 0.5 * q.loc.pow(2)
    return -0.5 * bg.log(2 * ratio / math.pi) + ratio + quadratic / var_normal - 1


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_ratio, var_ratio, loc_ratio = p.loc / q.scale, (p.scale / q.scale).pow(2), q.loc / q.scale
    terms = -var_ratio.log() * 0.5 + mean_ratio - loc_ratio + bg.exp(-mean_ratio + 0.5 * var_ratio + loc_ratio)
    return terms - 0.5 * (1 + math.log(2 * math.pi))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    standardized = loc_diff / p.scale
    folded_mean = math.sqrt(2 / math.pi) * p.scale * bg.exp(-0.5 * standardized.pow(2))
    folded_mean = folded_mean + loc_diff * bg.erf(math.sqrt(0.5) * standardized)  # E|X - q.loc|
    return -bg.log(p.scale / q.scale) + folded_mean / q.scale - 0.5 * (1 + math.log(0.5 * math.pi))


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    product = p.scale * q.rate
    result = (p.alpha / product).log() - p.alpha.reciprocal() + p.alpha * product / (p.alpha - 1) - 1
    return _infinite_where(result, p.alpha <= 1)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    expected_log = p.scale.log() + p.alpha.reciprocal()
    log_norm = q.concentration.lgamma() - q.concentration * q.rate.log()
    mean = p.alpha * p.scale / (p.alpha - 1)
    result = p.alpha.log() - expected_log + log_norm + (1 - q.concentration) * expected_log + q.rate * mean - 1
    return _infinite_where(result, p.alpha <= 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    twice_var = 2 * q.scale.pow(2)
    common = p.scale / (p.alpha - 1)
    log_terms = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log() - p.alpha.reciprocal()
    quadratic = p.alpha * common.pow(2) / (p.alpha - 2) + (p.alpha * common - q.loc).pow(2)
    return _infinite_where(log_terms + quadratic / twice_var - 1, p.alpha <= 2)


def _uniform_expected_log(p):
    """E[log x] for x uniform on [p.low, p.high]: (x log x - x) between the bounds over the width."""
    width = p.high - p.low
    return (_x_log_x(p.high) - _x_log_x(p.low) - width) / width


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    log_one_minus = (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width) / width
    log_beta = q.concentration1.lgamma() + q.concentration0.lgamma() - (q.concentration1 + q.concentration0).lgamma()
    result = (q.concentration0 - 1) * log_one_minus + log_beta - width.log()
    result = result - (q.concentration1 - 1) * _uniform_expected_log(p)
    return _infinite_where(result, (p.high > q.support.upper_bound) | (p.low < q.support.lower_bound))


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() - p.mean * q.logits - bg.log1p(-q.probs) - q._cont_bern_log_norm()
    return _infinite_where(result, (p.high >= q.support.upper_bound) | (p.low <= q.support.lower_bound))


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _infinite_where(result, p.low < q.support.lower_bound)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    log_norm = q.concentration.lgamma() - q.concentration * q.rate.log()
    result = -(p.high - p.low).log() + log_norm + (1 - q.concentration) * _uniform_expected_log(p)
    result = result + q.rate * (p.high + p.low) / 2
    return _infinite_where(result, p.low < q.support.lower_bound)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    ratio = q.scale / (p.high - p.low)
    high, low = (p.high - q.loc) / q.scale, (p.low - q.loc) / q.scale
    return ratio.log() + 0.5 * (high + low) - ratio * (bg.exp(-high) - bg.exp(-low))


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    width = p.high - p.low
    spread = width.pow(2) / 12 + ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return (math.sqrt(math.pi * 2) * q.scale / width).log() + 0.5 * spread / q.scale.pow(2)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    result = _uniform_expected_log(p) * (q.alpha + 1) - (q.alpha * q.scale.pow(q.alpha) * width).log()
    return _infinite_where(result, p.low < q.support.lower_bound)
