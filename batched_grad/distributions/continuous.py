"""The univariate continuous families whose parameters broadcast elementwise: Normal, Laplace, Uniform,
Exponential, Gamma, StudentT; each written with batched_grad ops so that its densities and samples differentiate."""

import math
import numbers

import batched_grad as bg

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, standard_exponential, standard_gamma, standard_normal, uniform

__all__ = ["ExponentialFamily", "Exponential", "Gamma", "Laplace", "Normal", "StudentT", "Uniform"]


class ExponentialFamily(Distribution):
    """The base of the exponential-family distributions, density exp(<t(x), theta> - F(theta) + k(x)): a family
    giving its natural parameters theta, log normalizer F and mean carrier measure E[k(x)] has its entropy, and
    kl_divergence with itself as the Bregman divergence of F (each family here writes its entropy in closed form)."""

    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        """-E[k(x)] + F(theta) - <theta, grad F(theta)>, the gradient of the log normalizer by autograd."""
        params = [theta.detach().requires_grad_() for theta in self._natural_params]
        log_normalizer = self._log_normalizer(*params)
        gradients = bg.autograd.grad(log_normalizer.sum(), params, create_graph=True)
        result = log_normalizer - self._mean_carrier_measure
        for theta, gradient in zip(params, gradients):
            result = result - (theta * gradient).reshape(self._batch_shape + (-1,)).sum(-1)
        return result


class _Elementwise(Distribution):
    """A family whose parameters (the keys of arg_constraints, in order, unless `_stored` names the members held
    instead) broadcast to the batch shape."""

    _stored = None

    @classmethod
    def _stored_names(cls):
        return list(cls._stored or cls.arg_constraints)

    def __init__(self, *params, validate_args=None):
        names = self._stored_names()
        for name, value in zip(names, broadcast_all(*params)):
            setattr(self, name, value)
        numbers_only = all(isinstance(p, numbers.Number) for p in params)
        batch_shape = bg.Size() if numbers_only else getattr(self, names[0]).size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = bg.Size(batch_shape)
        for name in self._stored_names():
            setattr(new, name, getattr(self, name).expand(batch_shape))
        self._expand_extra(new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _expand_extra(self, new, batch_shape):
        """Derived members a subclass keeps beside its parameters (StudentT's chi-square)."""

    def _checked(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return value


class Normal(_Elementwise, ExponentialFamily):
    """N(loc, scale^2)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, loc, scale, validate_args=None):
        super().__init__(loc, scale, validate_args=validate_args)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: self.scale)
    variance = property(lambda self: self.stddev.pow(2))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return self.loc + standard_normal(shape, self.loc.dtype) * self.scale

    def log_prob(self, value):
        value = self._checked(value)
        log_scale = math.log(self.scale) if isinstance(self.scale, numbers.Real) else self.scale.log()
        return -((value - self.loc) ** 2) / (2 * self.scale**2) - log_scale - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        value = self._checked(value)
        return 0.5 * (1 + bg.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * bg.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + bg.log(self.scale)


class Laplace(_Elementwise):
    """The double exponential distribution of location loc and scale."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        super().__init__(loc, scale, validate_args=validate_args)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    variance = property(lambda self: 2 * self.scale.pow(2))
    stddev = property(lambda self: (2**0.5) * self.scale)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = bg.finfo(self.loc.dtype).eps
        u = uniform(shape, self.loc.dtype) * (2 - eps) + (eps - 1)  # uniform on [eps - 1, 1)
        return self.loc - self.scale * u.sign() * bg.log1p(-u.abs())

    def log_prob(self, value):
        value = self._checked(value)
        return -bg.log(2 * self.scale) - bg.abs(value - self.loc) / self.scale

    def cdf(self, value):
        value = self._checked(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * bg.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * bg.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + bg.log(2 * self.scale)


class Uniform(_Elementwise):
    """Uniform on the half-open interval [low, high)."""

    arg_constraints = {
        "low": constraints.dependent(is_discrete=False, event_dim=0),
        "high": constraints.dependent(is_discrete=False, event_dim=0),
    }
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        super().__init__(low, high, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    mean = property(lambda self: (self.high + self.low) / 2)
    mode = property(lambda self: math.nan * self.high)
    stddev = property(lambda self: (self.high - self.low) / 12**0.5)
    variance = property(lambda self: (self.high - self.low).pow(2) / 12)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return self.low + uniform(shape, self.low.dtype) * (self.high - self.low)

    def log_prob(self, value):
        value = self._checked(value)
        inside = self.low.le(value).type_as(self.low) * self.high.gt(value).type_as(self.low)
        return bg.log(inside) - bg.log(self.high - self.low)

    def cdf(self, value):
        value = self._checked(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return bg.log(self.high - self.low)


class Exponential(_Elementwise, ExponentialFamily):
    """Exponential of the given rate (mean 1 / rate)."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate, validate_args=None):
        super().__init__(rate, validate_args=validate_args)

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: bg.zeros_like(self.rate))
    stddev = property(lambda self: self.rate.reciprocal())
    variance = property(lambda self: self.rate.pow(-2))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return standard_exponential(shape, self.rate.dtype) / self.rate

    def log_prob(self, value):
        value = self._checked(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        value = self._checked(value)
        return 1 - bg.exp(-self.rate * value)

    def icdf(self, value):
        return -bg.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - bg.log(self.rate)


def _clamped_below(value, tiny):
    """value clamped to >= tiny without changing its gradient (torch clamps the detached sample in place)."""
    return value + (value.clamp(min=tiny) - value).detach()


class Gamma(_Elementwise, ExponentialFamily):
    """Gamma of shape `concentration` and inverse scale `rate`; rsample differentiates by implicit
    reparameterization."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        super().__init__(concentration, rate, validate_args=validate_args)

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: ((self.concentration - 1) / self.rate).clamp(min=0))
    variance = property(lambda self: self.concentration / self.rate.pow(2))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return _clamped_below(value, bg.finfo(value.dtype).tiny)

    def log_prob(self, value):
        value = bg.as_tensor(value, dtype=self.rate.dtype)
        value = self._checked(value)
        c, r = self.concentration, self.rate
        return bg.xlogy(c, r) + bg.xlogy(c - 1, value) - r * value - bg.lgamma(c)

    def cdf(self, value):
        value = self._checked(value)
        return bg.igamma(self.concentration, self.rate * value)

    def entropy(self):
        c = self.concentration
        return c - bg.log(self.rate) + bg.lgamma(c) + (1.0 - c) * bg.digamma(c)


class StudentT(_Elementwise):
    """Student's t with `df` degrees of freedom, location loc and scale."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        super().__init__(df, loc, scale, validate_args=validate_args)
        self._chi2 = Gamma(0.5 * self.df, bg.full_like(self.df, 0.5))

    def _expand_extra(self, new, batch_shape):
        new._chi2 = self._chi2.expand(batch_shape)

    @property
    def mean(self):
        return bg.where(self.df <= 1, math.nan, self.loc)

    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        return bg.where(df > 2, finite, bg.where(df > 1, math.inf, math.nan))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x = standard_normal(shape, self.df.dtype)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * bg.rsqrt(z / self.df)

    def log_prob(self, value):
        value = self._checked(value)
        y = (value - self.loc) / self.scale
        half_df = 0.5 * self.df
        log_norm = (
            self.scale.log()
            + 0.5 * self.df.log()
            + 0.5 * math.log(math.pi)
            + bg.lgamma(half_df)
            - bg.lgamma(half_df + 0.5)
        )
        return -0.5 * (self.df + 1.0) * bg.log1p(y**2.0 / self.df) - log_norm

    def entropy(self):
        half_df = 0.5 * self.df
        log_beta = bg.lgamma(half_df) + math.lgamma(0.5) - bg.lgamma(half_df + 0.5)
        return (
            self.scale.log()
            + (half_df + 0.5) * (bg.digamma(half_df + 0.5) - bg.digamma(half_df))
            + 0.5 * self.df.log()
            + log_beta
        )
