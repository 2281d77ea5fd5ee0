"""The discrete families: Bernoulli, Categorical and OneHotCategorical (given probs or logits, the other computed
when read), and Poisson."""

import math
import numbers

import batched_grad as bg

from .._ops._index_parse import _concrete
from . import constraints
from .continuous import ExponentialFamily
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits, uniform

__all__ = ["Bernoulli", "Categorical", "OneHotCategorical", "Poisson"]

_BCE = bg.nn.functional.binary_cross_entropy_with_logits


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


def _expand_probs_or_logits(self, new, shape):
    """Expand whichever of probs and logits the distribution holds (the other stays lazy)."""
    for name in ("probs", "logits"):
        if name in self.__dict__:
            setattr(new, name, self.__dict__[name].expand(shape))
            new._param = getattr(new, name)


class _BinaryParameter(Distribution):
    """A family with one success probability per batch entry, given as probs or logits, and for the counting
    families a number of trials `total_count` broadcast with it."""

    def _set_probs_or_logits(self, probs, logits, total_count=None):
        _one_of(probs, logits)
        given = probs if probs is not None else logits
        if total_count is None:
            (self._param,) = broadcast_all(given)
        else:
            self.total_count, self._param = broadcast_all(total_count, given)
            self.total_count = self.total_count.type_as(self._param)
        setattr(self, "probs" if probs is not None else "logits", self._param)
        return given

    def _expand_into(self, new, batch_shape):
        if "total_count" in self.__dict__:
            new.total_count = self.total_count.expand(batch_shape)
        _expand_probs_or_logits(self, new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    param_shape = property(lambda self: self._param.size())


class Bernoulli(_BinaryParameter, ExponentialFamily):
    """1 with probability `probs` (or sigmoid(`logits`)), else 0."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        given = self._set_probs_or_logits(probs, logits)
        batch_shape = bg.Size() if isinstance(given, numbers.Number) else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_into(self._get_checked_instance(Bernoulli, _instance), bg.Size(batch_shape))

    mean = property(lambda self: self.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return bg.where(self.probs == 0.5, math.nan, mode)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with bg.no_grad():
            return (uniform(shape, self.probs.dtype) < self.probs.expand(shape)).to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_BCE(logits, value, reduction="none")

    def entropy(self):
        return _BCE(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = bg.arange(2, dtype=self._param.dtype).view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class Categorical(Distribution):
    """An index in 0..K-1 drawn with the probabilities of the last dimension of `probs` (or softmax(`logits`))."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else bg.Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = bg.Size(batch_shape)
        _expand_probs_or_logits(self, new, batch_shape + (self._num_events,))
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    param_shape = property(lambda self: self._param.size())
    mean = property(lambda self: bg.full(self._extended_shape(), math.nan, dtype=self.probs.dtype))
    mode = property(lambda self: self.probs.argmax(dim=-1))
    variance = property(lambda self: bg.full(self._extended_shape(), math.nan, dtype=self.probs.dtype))

    def sample(self, sample_shape=()):
        """torch's draw where the probabilities are known: multinomial with replacement on each distribution's row;
        while tracing (bg.compile, vmap), the index of the first cumulative probability above a uniform draw."""
        shape = self._extended_shape(sample_shape)
        with bg.no_grad():
            if _concrete(self.probs) is not None:
                rows = self.probs.reshape(-1, self._num_events)
                return bg.multinomial(rows, math.prod(sample_shape), True).T.reshape(shape)
            u = uniform(tuple(shape) + (1,), self.probs.dtype)
            below = (self.probs.cumsum(-1) <= u).sum(-1)
            return below.clamp(max=self._num_events - 1).long()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, log_pmf = bg.broadcast_tensors(value.long().unsqueeze(-1), self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        logits = bg.clamp(self.logits, min=bg.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = bg.arange(self._num_events, dtype=bg.long).view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class OneHotCategorical(Distribution):
    """A Categorical draw given as a one-hot vector of length K."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:], validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = bg.Size(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    _param = property(lambda self: self._categorical._param)
    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self._categorical.probs)
    variance = property(lambda self: self._categorical.probs * (1 - self._categorical.probs))

    @property
    def mode(self):
        probs = self._categorical.probs
        return bg.nn.functional.one_hot(probs.argmax(dim=-1), probs.shape[-1]).to(probs.dtype)

    def sample(self, sample_shape=()):
        indices = self._categorical.sample(sample_shape)
        return bg.nn.functional.one_hot(indices, self._categorical._num_events).to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.max(-1)[1])

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self.event_shape[0]
        values = bg.eye(n, dtype=self._param.dtype).view((n,) + (1,) * len(self.batch_shape) + (n,))
        return values.expand((n,) + tuple(self.batch_shape) + (n,)) if expand else values


class Poisson(ExponentialFamily):
    """Counts with mean `rate`."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = bg.Size() if isinstance(rate, numbers.Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = bg.Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    mean = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())
    variance = property(lambda self: self.rate)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with bg.no_grad():
            return bg.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()
