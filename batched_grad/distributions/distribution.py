"""torch.distributions.Distribution: batch and event shapes, argument and sample validation with torch's messages,
and the defaults every family shares (sample from rsample, stddev from variance, perplexity)."""

import warnings

import batched_grad as bg

from .._ops._index_parse import _concrete
from . import constraints

__all__ = ["Distribution"]


def _all_true(valid):
    """Whether a check holds everywhere; True while tracing, when the values are not known (checks skipped)."""
    values = _concrete(valid)
    return values is None or bool(values.all())


class Distribution:
    """The base of the distributions: `batch_shape` indexes independent distributions, `event_shape` is the shape
    of one draw."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Switch validation of parameters and values on or off for distributions made from now on."""
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = bg.Size(batch_shape)
        self._event_shape = bg.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()

    def _check_parameters(self):
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
            warnings.warn(
                f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = {{}}` or "
                "initialize the distribution with `validate_args=False` to turn off validation.",
                stacklevel=3,
            )
        for param, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if param not in self.__dict__ and isinstance(getattr(type(self), param), _lazy_property):
                continue  # a parameter made only when read
            value = getattr(self, param)
            if not _all_true(constraint.check(value)):
                raise ValueError(
                    f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) of "
                    f"distribution {self!r} to satisfy the constraint {constraint!r}, but found invalid "
                    f"values:\n{value}"
                )

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """A draw of shape sample_shape + batch_shape + event_shape, not differentiable."""
        with bg.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparameterized draw: differentiable in the parameters."""
        raise NotImplementedError

    def sample_n(self, n):
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning, stacklevel=2)
        return self.sample(bg.Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return bg.exp(self.entropy())

    def _extended_shape(self, sample_shape=()):
        return bg.Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        """torch's checks of a value given to log_prob / cdf: a Tensor, of a shape that broadcasts with
        batch_shape + event_shape, inside the support."""
        if not isinstance(value, bg.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_start = value.dim() - len(self._event_shape)
        if value.size()[event_start:] != self._event_shape:
            raise ValueError(
                f"The right-most size of value must match event_shape: {value.size()} vs {self._event_shape}."
            )
        actual, expected = value.size(), self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual} vs {expected}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(
                f"{self.__class__} does not define `support` to enable sample validation. Please initialize the "
                "distribution with `validate_args=False` to turn off validation.",
                stacklevel=3,
            )
            return
        if not _all_true(support.check(value)):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be within the "
                f"support ({support!r}) of the distribution {self!r}, but found invalid values:\n{value}"
            )

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom __init__ method "
                "must also define a custom .expand() method."
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        shown = [
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}" for p in names
        ]
        return self.__class__.__name__ + "(" + ", ".join(shown) + ")"


class _lazy_property:  # noqa: N801  (used as a decorator, like property)
    """A property computed at the first read and then stored on the instance (probs from logits and back)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with bg.enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value
