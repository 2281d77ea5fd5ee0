"""The counting families: Geometric (failures before the first success), Binomial, NegativeBinomial (a Gamma-Poisson
mixture) and Multinomial (counts of Categorical draws), each given probs or logits (the other computed when read)."""

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

import batched_grad as bg

from .._binomial_draws import binomial
from .._ops._index_parse import _concrete
from .._ops.random_draws import sample
from . import constraints
from .continuous import Gamma
from .discrete import Categorical, _BinaryParameter
from .distribution import Distribution, _all_true
from .utils import broadcast_all, lazy_property, uniform

__all__ = ["Binomial", "Geometric", "Multinomial", "NegativeBinomial"]

_BCE = bg.nn.functional.binary_cross_entropy_with_logits


class Geometric(_BinaryParameter):
    """The number of failures before the first success of Bernoulli(probs) trials."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        given = self._set_probs_or_logits(probs, logits)
        batch_shape = bg.Size() if isinstance(given, numbers.Number) else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args and probs is not None and not _all_true(self.probs > 0):
            value = self.probs
            raise ValueError(
                f"Expected parameter probs ({type(value).__name__} of shape {tuple(value.shape)}) of distribution "
                f"{self!r} to be positive but found invalid values:\n{value[value <= 0]}"
            )

    def expand(self, batch_shape, _instance=None):
        return self._expand_into(self._get_checked_instance(Geometric, _instance), bg.Size(batch_shape))

    mean = property(lambda self: 1.0 / self.probs - 1.0)
    mode = property(lambda self: bg.zeros_like(self.probs))
    variance = property(lambda self: (1.0 / self.probs - 1.0) / self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with bg.no_grad():
            u = uniform(shape, self.probs.dtype, bg.finfo(self.probs.dtype).tiny, 1.0)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # a certain success at the first trial: 0 * log(0) is 0
        probs = bg.where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return _BCE(self.logits, self.probs, reduction="none") / self.probs


class Binomial(_BinaryParameter):
    """The number of successes in `total_count` Bernoulli(probs) trials. Draws are torch's for the same seed
    (its inversion and BTRS rejection samplers, run here element by element) where the parameters' values are
    known; while tracing (bg.compile, vmap) they are JAX's, keyed by a draw from the default generator."""

    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        self._set_probs_or_logits(probs, logits, total_count)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_into(self._get_checked_instance(Binomial, _instance), bg.Size(batch_shape))

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    mean = property(lambda self: self.total_count * self.probs)
    mode = property(lambda self: ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count))
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with bg.no_grad():
            total_count, probs = self.total_count.expand(shape), self.probs.expand(shape)
            counts, known_probs = _concrete(total_count), _concrete(probs)
            if counts is None or known_probs is None:
                key = sample(None, "binomial", (2,), lambda bits, size: bits.integers(size, 0, 2**31, np.int64))
                return _BINOMIAL_BY_JAX(key, total_count, probs)
            dtype = self.probs.dtype
            drawn = sample(
                None, "binomial", shape, lambda bits, size: binomial(bits, *_rows(counts, known_probs, size), dtype.np)
            )
            return drawn.to(dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_choose = bg.lgamma(n + 1) - bg.lgamma(value + 1) - bg.lgamma(n - value + 1)
        # n log(1 + e^logits), written stably: n max(logits, 0) + n log1p(e^-|logits|), the max written so that
        # its derivative at 0 is 1/2 (as torch's)
        positive_part = (logits.clamp(min=0) + logits - logits.clamp(max=0)) / 2
        log_normalizer = n * positive_part + n * bg.log1p(bg.exp(-bg.abs(logits)))
        return value * logits + log_choose - log_normalizer

    def _homogeneous_count(self, what):
        count = int(self.total_count.max())
        if not self.total_count.min() == count:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return count

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(bg.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        count = self._homogeneous_count("enumerate_support")
        values = bg.arange(1 + count, dtype=self._param.dtype).view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


def _binomial_by_jax(key, counts, probs):
    rng = jax.random.wrap_key_data(key.astype(jnp.uint32))
    return jax.random.binomial(rng, counts, probs, counts.shape, dtype=probs.dtype)


_BINOMIAL_BY_JAX = bg.jax_function(_binomial_by_jax)


def _rows(counts, probs, size):
    """The parameters broadcast to `size` (a vmap's rows before the draw's shape)."""
    return np.broadcast_to(counts, size), np.broadcast_to(probs, size)


class NegativeBinomial(_BinaryParameter):
    """The number of successes before `total_count` failures of Bernoulli(probs) trials; drawn as
    Poisson(Gamma(total_count, rate=exp(-logits))), torch's draws for the same seed."""

    arg_constraints = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        self._set_probs_or_logits(probs, logits, total_count)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_into(self._get_checked_instance(NegativeBinomial, _instance), bg.Size(batch_shape))

    mean = property(lambda self: self.total_count * bg.exp(self.logits))
    mode = property(lambda self: ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0))
    variance = property(lambda self: self.mean / bg.sigmoid(-self.logits))

    @lazy_property
    def _gamma(self):
        return Gamma(concentration=self.total_count, rate=bg.exp(-self.logits), validate_args=False)

    def sample(self, sample_shape=()):
        with bg.no_grad():
            return bg.poisson(self._gamma.sample(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logsigmoid = bg.nn.functional.logsigmoid
        unnormalized = self.total_count * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        log_norm = -bg.lgamma(self.total_count + value) + bg.lgamma(1.0 + value) + bg.lgamma(self.total_count)
        # no trials and no successes: probability 1
        log_norm = log_norm.masked_fill(self.total_count + value == 0.0, 0.0)
        return unnormalized - log_norm


class Multinomial(Distribution):
    """Counts over the K categories of the last dimension of probs (or logits) in `total_count` draws."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(self._categorical.batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = bg.Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    logits = property(lambda self: self._categorical.logits)
    probs = property(lambda self: self._categorical.probs)
    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        sample_shape = bg.Size(sample_shape)
        with bg.no_grad():
            indices = self._categorical.sample(bg.Size((self.total_count,)) + sample_shape)
            indices = indices.permute(*range(1, indices.dim()), 0)  # the draws of one outcome last
            counts = bg.zeros(self._extended_shape(sample_shape), dtype=indices.dtype)
            return counts.scatter_add(-1, indices, bg.ones_like(indices)).type_as(self.probs)

    def entropy(self):
        n = bg.tensor(self.total_count)
        log_factorials_term = n * self._categorical.entropy() - bg.lgamma(n + 1)
        # E[sum_i log x_i!] from each count's Binomial(n, p_i) marginal
        support = self._binomial.enumerate_support(expand=False)[1:]
        marginal_probs = bg.exp(self._binomial.log_prob(support))
        return log_factorials_term + (marginal_probs * bg.lgamma(support + 1)).sum([0, -1])

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = bg.lgamma(value.sum(-1) + 1)
        log_factorial_xs = bg.lgamma(value + 1).sum(-1)
        logits = bg.where((value == 0) & (logits == -math.inf), 0.0, logits)  # 0 * log(0) is 0
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)
