"""Dirichlet and Beta (a Dirichlet of two components), reparameterized through normalized Gamma draws, and the
logistic-normal distribution (a Normal vector broken onto the simplex)."""

import numbers

import batched_grad as bg

from . import constraints
from .composite import TransformedDistribution
from .continuous import ExponentialFamily, Normal
from .structured_transforms import StickBreakingTransform
from .utils import broadcast_all, sample_dirichlet

__all__ = ["Beta", "Dirichlet", "LogisticNormal"]


class Dirichlet(ExponentialFamily):
    """Dirichlet over the simplex of the last dimension of `concentration`."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = concentration.shape
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = bg.Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape + self.event_shape)
        ExponentialFamily.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return sample_dirichlet(self.concentration.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return bg.xlogy(c - 1.0, value).sum(-1) + bg.lgamma(c.sum(-1)) - bg.lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        above = (self.concentration - 1).clamp(min=0.0)
        mode = above / above.sum(-1, True)
        # where every concentration is below 1 the density peaks at the vertex of the largest one
        all_below = (self.concentration < 1).all(-1, keepdim=True)
        vertex = bg.nn.functional.one_hot(above.argmax(-1), above.shape[-1]).to(mode.dtype)
        return bg.where(all_below, vertex, mode)

    @property
    def variance(self):
        total = self.concentration.sum(-1, True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def entropy(self):
        c = self.concentration
        k, total = c.size(-1), c.sum(-1)
        return (
            bg.lgamma(c).sum(-1)
            - bg.lgamma(total)
            - (k - total) * bg.digamma(total)
            - ((c - 1.0) * bg.digamma(c)).sum(-1)
        )


class Beta(ExponentialFamily):
    """Beta(concentration1, concentration0) on the unit interval."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        if isinstance(concentration1, numbers.Real) and isinstance(concentration0, numbers.Real):
            both = bg.tensor([float(concentration1), float(concentration0)])
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            both = bg.stack([concentration1, concentration0], -1)
        self._dirichlet = Dirichlet(both, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = bg.Size(batch_shape)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        ExponentialFamily.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def concentration1(self):
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(bg.stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()


class LogisticNormal(TransformedDistribution):
    """The logistic-normal distribution on the simplex: a Normal(loc, scale) vector of K - 1 coordinates through
    the StickBreakingTransform."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand([1])
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, _instance=self._get_checked_instance(LogisticNormal, _instance))

    loc = property(lambda self: self.base_dist.base_dist.loc)
    scale = property(lambda self: self.base_dist.base_dist.scale)
