"""Continuous relaxations of the discrete families: RelaxedBernoulli and RelaxedOneHotCategorical (Concrete /
Gumbel-softmax draws at a temperature, through their logit and log-space forms), OneHotCategoricalStraightThrough
(one-hot draws with the probabilities' gradient) and ContinuousBernoulli (a density on [0, 1] of Bernoulli form)."""

import math

import batched_grad as bg

from . import constraints
from .composite import TransformedDistribution
from .continuous import ExponentialFamily
from .discrete import Categorical, OneHotCategorical, _BinaryParameter
from .distribution import Distribution, _all_true
from .transforms import ExpTransform, SigmoidTransform
from .utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs, uniform

__all__ = [
    "ContinuousBernoulli",
    "ExpRelaxedCategorical",
    "LogitRelaxedBernoulli",
    "OneHotCategoricalStraightThrough",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
]

_BCE = bg.nn.functional.binary_cross_entropy_with_logits


class LogitRelaxedBernoulli(_BinaryParameter):
    """The logit of a RelaxedBernoulli draw: (logistic noise + logits) / temperature."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        given = self._set_probs_or_logits(probs, logits)
        batch_shape = bg.Size() if not isinstance(given, bg.Tensor) else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogitRelaxedBernoulli, _instance)
        new.temperature = self.temperature
        return self._expand_into(new, bg.Size(batch_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        u = clamp_probs(uniform(shape, probs.dtype))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    """The binary Concrete distribution on (0, 1): sigmoid of a LogitRelaxedBernoulli draw; lower temperatures
    put the mass nearer 0 and 1."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(RelaxedBernoulli, _instance))

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical draw: log_softmax((logits + Gumbel noise) / temperature)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(self._categorical.batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = bg.Size(batch_shape)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    param_shape = property(lambda self: self._categorical.param_shape)
    logits = property(lambda self: self._categorical.logits)
    probs = property(lambda self: self._categorical.probs)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = clamp_probs(uniform(shape, self.logits.dtype))
        gumbels = -(-u.log()).log()
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        # the density of the Concrete distribution in log space: (K - 1)! t^(K - 1) prod(...)
        log_scale = bg.full_like(self.temperature, float(k)).lgamma() - self.temperature.log().mul(-(k - 1))
        score = logits - value.mul(self.temperature)
        return (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1) + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """The Concrete (Gumbel-softmax) distribution on the simplex: exp of an ExpRelaxedCategorical draw."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(RelaxedOneHotCategorical, _instance))

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose rsample is the one-hot draw in value and has the probabilities' gradient (the
    straight-through estimator)."""

    has_rsample = True

    def rsample(self, sample_shape=()):
        draws = self.sample(sample_shape)
        probs = self._categorical.probs
        return draws + (probs - probs.detach())


class ContinuousBernoulli(_BinaryParameter, ExponentialFamily):
    """The continuous Bernoulli distribution on [0, 1], density proportional to p^x (1 - p)^(1 - x); near p = 1/2
    (inside `lims`) its normalizer and moments are Taylor expansions."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        given = self._set_probs_or_logits(probs, logits)
        if probs is not None:
            if validate_args is not None and not _all_true(self.arg_constraints["probs"].check(self.probs)):
                raise ValueError("The parameter probs has invalid values")
            self.probs = self._param = clamp_probs(self.probs)
        self._lims = lims
        batch_shape = bg.Size() if not isinstance(given, bg.Tensor) else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        return self._expand_into(new, bg.Size(batch_shape))

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return bg.where(self._outside_unstable_region(), self.probs, self._lims[0] * bg.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """log C(p), C(p) = 2 atanh(1 - 2p) / (1 - 2p)."""
        cut = self._cut_probs()
        below_half = bg.where(cut <= 0.5, cut, bg.zeros_like(cut))
        above_half = bg.where(cut >= 0.5, cut, bg.ones_like(cut))
        log_norm = bg.log(bg.abs(bg.log1p(-cut) - bg.log(cut))) - bg.where(
            cut <= 0.5, bg.log1p(-2.0 * below_half), bg.log(2.0 * above_half - 1.0)
        )
        x = bg.pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return bg.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / (bg.log1p(-cut) - bg.log(cut))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * bg.pow(x, 2)) * x
        return bg.where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self):
        cut = self._cut_probs()
        variances = cut * (cut - 1.0) / bg.pow(1.0 - 2.0 * cut, 2) + 1.0 / bg.pow(bg.log1p(-cut) - bg.log(cut), 2)
        x = bg.pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return bg.where(self._outside_unstable_region(), variances, taylor)

    def sample(self, sample_shape=()):
        u = uniform(self._extended_shape(sample_shape), self.probs.dtype)
        with bg.no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=()):
        return self.icdf(uniform(self._extended_shape(sample_shape), self.probs.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_BCE(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (bg.pow(cut, value) * bg.pow(1.0 - cut, 1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        inside = bg.where(self._outside_unstable_region(), cdfs, value)
        return bg.where(value <= 0.0, bg.zeros_like(value), bg.where(value >= 1.0, bg.ones_like(value), inside))

    def icdf(self, value):
        cut = self._cut_probs()
        inverse = (bg.log1p(-cut + value * (2.0 * cut - 1.0)) - bg.log1p(-cut)) / (bg.log(cut) - bg.log1p(-cut))
        return bg.where(self._outside_unstable_region(), inverse, value)

    def entropy(self):
        log_q, log_p = bg.log1p(-self.probs), bg.log(self.probs)
        return self.mean * (log_q - log_p) - self._cont_bern_log_norm() - log_q

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        outside = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = bg.where(outside, x, (self._lims[0] - 0.5) * bg.ones_like(x))
        log_norm = bg.log(bg.abs(bg.special.expm1(cut))) - bg.log(bg.abs(cut))
        taylor = 0.5 * x + bg.pow(x, 2) / 24.0 - bg.pow(x, 4) / 2880.0
        return bg.where(outside, log_norm, taylor)
