"""Cauchy, Gumbel (a uniform draw through log-log), the half-normal and half-Cauchy (|X| of a centred Normal or
Cauchy) and Chi2 (a Gamma of shape df / 2 and rate 1 / 2)."""

import math
import numbers

import batched_grad as bg

from . import constraints
from .composite import TransformedDistribution
from .continuous import Gamma, Normal, Uniform, _Elementwise
from .transforms import AbsTransform, AffineTransform, ExpTransform
from .utils import broadcast_all, euler_constant, standard_cauchy

__all__ = ["Cauchy", "Chi2", "Gumbel", "HalfCauchy", "HalfNormal"]


class Cauchy(_Elementwise):
    """The Cauchy (Lorentz) distribution of median loc and half width at half maximum scale."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        super().__init__(loc, scale, validate_args=validate_args)

    mean = property(lambda self: bg.full(self._extended_shape(), math.nan, dtype=self.loc.dtype))
    mode = property(lambda self: self.loc)
    variance = property(lambda self: bg.full(self._extended_shape(), math.inf, dtype=self.loc.dtype))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return self.loc + standard_cauchy(shape, self.loc.dtype) * self.scale

    def log_prob(self, value):
        value = self._checked(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        value = self._checked(value)
        return bg.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return bg.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class Chi2(Gamma):
    """The chi-square distribution of `df` degrees of freedom: Gamma(df / 2, 1 / 2)."""

    arg_constraints = {"df": constraints.positive}
    _stored = ("concentration", "rate")

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    df = property(lambda self: self.concentration * 2)


class Gumbel(TransformedDistribution):
    """The Gumbel (type I extreme value) distribution: loc - scale * log(-log(U)) for U uniform on (0, 1)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        finfo = bg.finfo(self.loc.dtype)
        if isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number):
            base = Uniform(finfo.tiny, 1 - finfo.eps, validate_args=validate_args)
        else:
            low, high = bg.full_like(self.loc, finfo.tiny), bg.full_like(self.loc, 1 - finfo.eps)
            base = Uniform(low, high, validate_args=validate_args)
        transforms = [
            ExpTransform().inv,
            AffineTransform(loc=0, scale=-bg.ones_like(self.scale)),
            ExpTransform().inv,
            AffineTransform(loc=loc, scale=-self.scale),
        ]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    mean = property(lambda self: self.loc + self.scale * euler_constant)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: (math.pi / math.sqrt(6)) * self.scale)
    variance = property(lambda self: self.stddev.pow(2))

    def entropy(self):
        return self.scale.log() + (1 + euler_constant)


class _Folded(TransformedDistribution):
    """|X| for X of a distribution centred at 0 (`_base`, made from the scale): densities doubled on [0, inf)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _base = None

    def __init__(self, scale, validate_args=None):
        super().__init__(type(self)._base(0, scale, validate_args=False), AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        family = next(c for c in type(self).__mro__ if _Folded in c.__bases__)
        return super().expand(batch_shape, _instance=self._get_checked_instance(family, _instance))

    scale = property(lambda self: self.base_dist.scale)
    mode = property(lambda self: bg.zeros_like(self.scale))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = bg.as_tensor(value, dtype=self.scale.dtype)
        return bg.where(value >= 0, self.base_dist.log_prob(value) + math.log(2), -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_Folded):
    """|X| for X ~ N(0, scale^2)."""

    _base = Normal

    def __init__(self, scale, validate_args=None):
        super().__init__(scale, validate_args=validate_args)

    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    variance = property(lambda self: self.scale.pow(2) * (1 - 2 / math.pi))


class HalfCauchy(_Folded):
    """|X| for X ~ Cauchy(0, scale)."""

    _base = Cauchy

    def __init__(self, scale, validate_args=None):
        super().__init__(scale, validate_args=validate_args)

    mean = property(lambda self: bg.full(self._extended_shape(), math.inf, dtype=self.scale.dtype))
    variance = property(lambda self: self.base_dist.variance)
