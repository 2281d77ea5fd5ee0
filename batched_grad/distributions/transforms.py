"""torch.distributions.transforms: invertible maps with the log |det J| that TransformedDistribution needs; the
common elementwise ones (exp, affine, sigmoid, tanh, power, softplus, abs) and their composition (the transforms of
whole events are in structured_transforms, named here too)."""

import math
import numbers

import batched_grad as bg

from . import constraints
from .utils import _sum_rightmost, broadcast_all

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "CatTransform",
    "ComposeTransform",
    "CorrCholeskyTransform",
    "CumulativeDistributionTransform",
    "ExpTransform",
    "IndependentTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "PowerTransform",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StackTransform",
    "StickBreakingTransform",
    "TanhTransform",
    "Transform",
    "identity_transform",
]


class Transform:
    """y = T(x) with inverse and log |dy/dx|; `cache_size=1` remembers the last pair, so that the inverse of a
    sampled y is its x exactly."""

    bijective = False
    domain = constraints.real
    codomain = constraints.real
    sign = 1

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = None, None
        self._inv = None

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        inverse = self._inv
        if inverse is None:
            inverse = _InverseTransform(self)
            self._inv = inverse
        return inverse

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __repr__(self):
        return self.__class__.__name__ + "()"


class _InverseTransform(Transform):
    """The inverse of a transform (its .inv)."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    domain = property(lambda self: self._inv.codomain)
    codomain = property(lambda self: self._inv.domain)
    bijective = property(lambda self: self._inv.bijective)
    sign = property(lambda self: self._inv.sign)

    @property
    def inv(self):
        return self._inv

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """parts[-1] after ... after parts[0]."""

    def __init__(self, parts, cache_size=0):
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = parts

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        # a later part with more event dimensions makes the domain's events larger
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    bijective = property(lambda self: all(p.bijective for p in self.parts))

    @property
    def sign(self):
        sign = 1
        for part in self.parts:
            sign = sign * part.sign
        return sign

    @property
    def inv(self):
        inverse = self._inv
        if inverse is None:
            inverse = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv, inverse._inv = inverse, self
        return inverse

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return bg.zeros_like(x)
        terms, event_dim = [], self.domain.event_dim
        for part in self.parts[:-1]:
            y_part = part(x)
            terms.append(_sum_rightmost(part.log_abs_det_jacobian(x, y_part), event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
            x = y_part
        last = self.parts[-1]
        terms.append(_sum_rightmost(last.log_abs_det_jacobian(x, y), event_dim - last.domain.event_dim))
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        return total

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self):
        return self.__class__.__name__ + "(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


class ExpTransform(Transform):
    """y = exp(x)."""

    domain, codomain = constraints.real, constraints.positive
    bijective, sign = True, 1

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    __hash__ = Transform.__hash__
    _call = staticmethod(lambda x: x.exp())
    _inverse = staticmethod(lambda y: y.log())

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent, for positive x."""

    domain = codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else PowerTransform(self.exponent, cache_size=cache_size)

    sign = property(lambda self: self.exponent.sign())

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()


class SigmoidTransform(Transform):
    """y = sigmoid(x), clamped into (0, 1) as torch does."""

    domain, codomain = constraints.real, constraints.unit_interval
    bijective, sign = True, 1

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    __hash__ = Transform.__hash__

    def _call(self, x):
        finfo = bg.finfo(x.dtype)
        return bg.clamp(bg.sigmoid(x), min=finfo.tiny, max=1.0 - finfo.eps)

    def _inverse(self, y):
        finfo = bg.finfo(y.dtype)
        y = y.clamp(min=finfo.tiny, max=1.0 - finfo.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -bg.nn.functional.softplus(-x) - bg.nn.functional.softplus(x)


class SoftplusTransform(Transform):
    """y = log(1 + exp(x))."""

    domain, codomain = constraints.real, constraints.positive
    bijective, sign = True, 1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    __hash__ = Transform.__hash__
    _call = staticmethod(lambda x: bg.nn.functional.softplus(x))
    _inverse = staticmethod(lambda y: (-y).expm1().neg().log() + y)

    def log_abs_det_jacobian(self, x, y):
        return -bg.nn.functional.softplus(-x)


class TanhTransform(Transform):
    """y = tanh(x)."""

    domain, codomain = constraints.real, constraints.interval(-1.0, 1.0)
    bijective, sign = True, 1

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    __hash__ = Transform.__hash__
    _call = staticmethod(lambda x: x.tanh())
    _inverse = staticmethod(lambda y: bg.atanh(y))

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) in a form that stays accurate for large |x|
        return 2.0 * (math.log(2.0) - x - bg.nn.functional.softplus(-2.0 * x))


class AbsTransform(Transform):
    """y = |x| (not bijective)."""

    domain, codomain = constraints.real, constraints.positive

    def __eq__(self, other):
        return isinstance(other, AbsTransform)

    __hash__ = Transform.__hash__
    _call = staticmethod(lambda x: x.abs())
    _inverse = staticmethod(lambda y: y)


class AffineTransform(Transform):
    """y = loc + scale * x, over `event_dim` rightmost dimensions as one event."""

    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self._event_dim, cache_size=cache_size)

    event_dim = property(lambda self: self._event_dim)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.real if self.event_dim == 0 else constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.real if self.event_dim == 0 else constraints.independent(constraints.real, self.event_dim)

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = x.shape
        if isinstance(self.scale, numbers.Real):
            result = bg.full_like(x, math.log(abs(self.scale)))
        else:
            result = bg.abs(self.scale).log()
        if self.event_dim:
            result = result.reshape(tuple(result.shape[: result.dim() - self.event_dim]) + (-1,)).sum(-1)
            shape = shape[: len(shape) - self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return bg.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))

    inverse_shape = forward_shape


# the transforms of whole events live beside these; torch.distributions.transforms names them all
from .structured_transforms import (  # noqa: E402
    CatTransform,
    CorrCholeskyTransform,
    CumulativeDistributionTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    ReshapeTransform,
    SoftmaxTransform,
    StackTransform,
    StickBreakingTransform,
)

_STRUCTURED = (CatTransform, CorrCholeskyTransform, CumulativeDistributionTransform, IndependentTransform)
_STRUCTURED += (LowerCholeskyTransform, PositiveDefiniteTransform, ReshapeTransform, SoftmaxTransform)
for _transform in (*_STRUCTURED, StackTransform, StickBreakingTransform):
    _transform.__module__ = __name__  # torch defines every transform in this module
