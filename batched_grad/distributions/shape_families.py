"""Families of a scale and a shape: Weibull, Pareto, Kumaraswamy and InverseGamma (transformed Exponential, Uniform
and Gamma draws), FisherSnedecor (a ratio of Gamma draws) and GeneralizedPareto (inverse-CDF draws)."""

import math
import numbers

import batched_grad as bg

from . import constraints
from .composite import TransformedDistribution
from .continuous import Exponential, Gamma, Uniform, _Elementwise
from .distribution import Distribution
from .transforms import AffineTransform, ExpTransform, PowerTransform
from .utils import broadcast_all, euler_constant, uniform

__all__ = ["FisherSnedecor", "GeneralizedPareto", "InverseGamma", "Kumaraswamy", "Pareto", "Weibull"]


class Weibull(TransformedDistribution):
    """scale * E^(1 / concentration) for E ~ Exp(1)."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base = Exponential(bg.ones_like(self.scale), validate_args=validate_args)
        super().__init__(base, self._transforms(), validate_args=validate_args)

    def _transforms(self):
        return [PowerTransform(exponent=self.concentration_reciprocal), AffineTransform(loc=0, scale=self.scale)]

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        new.scale, new.concentration = self.scale.expand(batch_shape), self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        TransformedDistribution.__init__(
            new, self.base_dist.expand(batch_shape), new._transforms(), validate_args=False
        )
        new._validate_args = self._validate_args
        return new

    mean = property(lambda self: self.scale * bg.exp(bg.lgamma(1 + self.concentration_reciprocal)))

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k) ** k.reciprocal()

    @property
    def variance(self):
        inverse = self.concentration_reciprocal
        return self.scale.pow(2) * (bg.exp(bg.lgamma(1 + 2 * inverse)) - bg.exp(2 * bg.lgamma(1 + inverse)))

    def entropy(self):
        inverse = self.concentration_reciprocal
        return euler_constant * (1 - inverse) + bg.log(self.scale * inverse) + 1


class Pareto(TransformedDistribution):
    """The Pareto type I distribution: scale * exp(E) for E ~ Exp(alpha), on [scale, inf)."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(Exponential(self.alpha, validate_args=validate_args), transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Pareto, _instance)
        new.scale, new.alpha = self.scale.expand(batch_shape), self.alpha.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)  # infinite for alpha <= 1
        return a * self.scale / (a - 1)

    mode = property(lambda self: self.scale)

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)  # infinite for alpha <= 2
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


def _kumaraswamy_moment(a, b, n):
    """E[X^n] = b B(1 + n / a, b)."""
    shifted = 1 + n / a
    return b * bg.exp(bg.lgamma(shifted) + bg.lgamma(b) - bg.lgamma(shifted + b))


class Kumaraswamy(TransformedDistribution):
    """(1 - U^(1 / concentration0))^(1 / concentration1) for U uniform on [0, 1): a Beta-like law on the unit
    interval with a closed-form CDF."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        zeros, ones = bg.zeros_like(self.concentration0), bg.ones_like(self.concentration0)
        transforms = [
            PowerTransform(exponent=self.concentration0.reciprocal()),
            AffineTransform(loc=1.0, scale=-1.0),
            PowerTransform(exponent=self.concentration1.reciprocal()),
        ]
        super().__init__(Uniform(zeros, ones, validate_args=validate_args), transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    mean = property(lambda self: _kumaraswamy_moment(self.concentration1, self.concentration0, 1))

    @property
    def mode(self):
        """((a - 1) / (a b - 1))^(1 / a) where a, b >= 1 (not both 1); NaN elsewhere. (torch 2.13's formula takes
        log1p(-b), which is NaN for every b > 1; this is the density's maximum.)"""
        a, b = self.concentration1, self.concentration0
        defined = (a >= 1) & (b >= 1) & ((a > 1) | (b > 1))
        return bg.where(defined, ((a - 1) / (a * b - 1)) ** a.reciprocal(), math.nan)

    @property
    def variance(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        harmonic_b = bg.digamma(b + 1) + euler_constant
        return (1 - b.reciprocal()) + (1 - a.reciprocal()) * harmonic_b - bg.log(a) - bg.log(b)


class InverseGamma(TransformedDistribution):
    """1 / X for X ~ Gamma(concentration, rate)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base = Gamma(concentration, rate, validate_args=validate_args)
        inverse = PowerTransform(-base.rate.new_ones(()))
        super().__init__(base, inverse, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(InverseGamma, _instance))

    concentration = property(lambda self: self.base_dist.concentration)
    rate = property(lambda self: self.base_dist.rate)
    mode = property(lambda self: self.rate / (self.concentration + 1))

    @property
    def mean(self):
        return bg.where(self.concentration > 1, self.rate / (self.concentration - 1), math.inf)

    @property
    def variance(self):
        c = self.concentration
        finite = self.rate.square() / ((c - 1).square() * (c - 2))
        return bg.where(c > 2, finite, math.inf)

    def entropy(self):
        c = self.concentration
        return c + self.rate.log() + c.lgamma() - (1 + c) * c.digamma()


class FisherSnedecor(Distribution):
    """The F distribution of df1 and df2 degrees of freedom: a ratio of two scaled chi-square draws."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        numbers_only = isinstance(df1, numbers.Number) and isinstance(df2, numbers.Number)
        super().__init__(bg.Size() if numbers_only else self.df1.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = bg.Size(batch_shape)
        new.df1, new.df2 = self.df1.expand(batch_shape), self.df2.expand(batch_shape)
        new._gamma1, new._gamma2 = self._gamma1.expand(batch_shape), self._gamma2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        df2 = bg.where(self.df2 <= 2, math.nan, self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return bg.where(self.df1 <= 2, math.nan, mode)

    @property
    def variance(self):
        df2 = bg.where(self.df2 <= 4, math.nan, self.df2)
        return 2 * df2.pow(2) * (self.df1 + df2 - 2) / (self.df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        numerator = self._gamma1.rsample(sample_shape).view(shape)
        tiny = bg.finfo(numerator.dtype).tiny
        denominator = self._gamma2.rsample(sample_shape).view(shape).clamp(min=tiny)
        return (numerator / denominator).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        half1, half2, ratio = self.df1 * 0.5, self.df2 * 0.5, self.df1 / self.df2
        log_norm = (half1 + half2).lgamma() - half1.lgamma() - half2.lgamma()
        return log_norm + half1 * ratio.log() + (half1 - 1) * bg.log(value) - (half1 + half2) * bg.log1p(ratio * value)


class GeneralizedPareto(_Elementwise):
    """The generalized Pareto distribution of loc, scale and concentration (shape xi): exponential tails at xi = 0,
    heavy for xi > 0, bounded above by loc - scale / xi for xi < 0."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        super().__init__(loc, scale, concentration, validate_args=validate_args)

    def _at_zero(self):
        """Where the concentration is 0 (to isclose's tolerance), and a concentration safe to divide by."""
        c = self.concentration
        at_zero = bg.isclose(c, bg.zeros_like(c))
        return at_zero, bg.where(at_zero, bg.ones_like(c), c)

    def rsample(self, sample_shape=()):
        return self.icdf(uniform(self._extended_shape(sample_shape), self.loc.dtype))

    def log_prob(self, value):
        value = self._checked(value)
        z = (value - self.loc) / self.scale
        at_zero, safe = self._at_zero()
        y = 1 / safe + bg.ones_like(z)
        nonzero = bg.where(y == 0, y, y * bg.log1p(safe * z))
        return -self.scale.log() - bg.where(at_zero, z, nonzero)

    def log_survival_function(self, value):
        value = self._checked(value)
        z = (value - self.loc) / self.scale
        at_zero, safe = self._at_zero()
        return bg.where(at_zero, -z, -bg.log1p(safe * z) / safe)

    def log_cdf(self, value):
        return bg.log1p(-bg.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return bg.exp(self.log_cdf(value))

    def icdf(self, value):
        at_zero, safe = self._at_zero()
        log_u = bg.log1p(-value)
        nonzero = self.loc + self.scale / safe * bg.expm1(-safe * log_u)
        return bg.where(at_zero, self.loc - self.scale * log_u, nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        safe = bg.where(valid, self.concentration, 0.5)
        return bg.where(valid, self.loc + self.scale / (1 - safe), math.nan)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe = bg.where(valid, self.concentration, 0.25)
        return bg.where(valid, self.scale**2 / ((1 - safe) ** 2 * (1 - 2 * safe)), math.nan)

    def entropy(self):
        return bg.broadcast_to(bg.log(self.scale) + self.concentration + 1, self._batch_shape)

    mode = property(lambda self: self.loc)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        upper = bg.where(self.concentration < 0, self.loc - self.scale / self.concentration, math.inf)
        return constraints.interval(self.loc, upper)
