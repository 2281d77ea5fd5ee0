"""The transforms of whole events: onto the simplex (softmax, stick breaking), onto Cholesky factors and positive
definite matrices, reshaping, a transform over more event dimensions, pieces of a tensor transformed apart (cat,
stack), and a distribution's CDF."""

import math

import batched_grad as bg

from . import constraints
from .transforms import Transform
from .utils import _sum_rightmost, lazy_property, tril_matrix_to_vec, vec_to_tril_matrix

__all__ = [
    "CatTransform",
    "CorrCholeskyTransform",
    "CumulativeDistributionTransform",
    "IndependentTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "ReshapeTransform",
    "SoftmaxTransform",
    "StackTransform",
    "StickBreakingTransform",
]

_pad = bg.nn.functional.pad


def _at_least(shape, ndim):
    if len(shape) < ndim:
        raise ValueError("Too few dimensions on input")


class _Stateless(Transform):
    """A transform without parameters: all instances are equal."""

    def __eq__(self, other):
        return isinstance(other, type(self))

    __hash__ = Transform.__hash__


class IndependentTransform(Transform):
    """base_transform over `reinterpreted_batch_ndims` more rightmost dimensions as one event (its log |det J| summed
    over them)."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    bijective = property(lambda self: self.base_transform.bijective)
    sign = property(lambda self: self.base_transform.sign)

    def _call(self, x):
        _at_least(x.shape, self.domain.event_dim)
        return self.base_transform(x)

    def _inverse(self, y):
        _at_least(y.shape, self.codomain.event_dim)
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Events of in_shape reshaped to out_shape (the same number of elements)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape, self.out_shape = bg.Size(in_shape), bg.Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        return x.reshape(x.shape[: x.dim() - len(self.in_shape)] + self.out_shape)

    def _inverse(self, y):
        return y.reshape(y.shape[: y.dim() - len(self.out_shape)] + self.in_shape)

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(x.shape[: x.dim() - len(self.in_shape)])

    @staticmethod
    def _swap(shape, old, new):
        _at_least(shape, len(old))
        cut = len(shape) - len(old)
        if shape[cut:] != old:
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {old}")
        return shape[:cut] + new

    def forward_shape(self, shape):
        return self._swap(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._swap(shape, self.out_shape, self.in_shape)


def _clipped_sigmoid(x):
    finfo = bg.finfo(x.dtype)
    return bg.clamp(bg.sigmoid(x), min=finfo.tiny, max=1.0 - finfo.eps)


class SoftmaxTransform(_Stateless):
    """Vectors to the simplex by softmax (not bijective: the inverse is the log, one of many preimages)."""

    domain, codomain = constraints.real_vector, constraints.simplex

    def _call(self, x):
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        _at_least(shape, 1)
        return shape

    inverse_shape = forward_shape


class StickBreakingTransform(_Stateless):
    """Vectors of K - 1 reals to the K-simplex by breaking a stick: each coordinate's sigmoid (offset so that 0 maps
    to the centre) takes its share of what is left."""

    domain, codomain = constraints.real_vector, constraints.simplex
    bijective = True

    @staticmethod
    def _log_offset(x):
        return (x.shape[-1] + 1 - x.new_ones(x.shape[-1]).cumsum(-1)).log()

    def _call(self, x):
        z = _clipped_sigmoid(x - self._log_offset(x))
        return _pad(z, [0, 1], value=1) * _pad((1 - z).cumprod(-1), [1, 0], value=1)

    def _inverse(self, y):
        head = y[..., :-1]
        offset = y.shape[-1] - y.new_ones(head.shape[-1]).cumsum(-1)
        left = bg.clamp(1 - head.cumsum(-1), min=bg.finfo(y.dtype).tiny)
        return head.log() - left.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        x = x - self._log_offset(x)
        return (-x + bg.nn.functional.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        _at_least(shape, 1)
        return shape[:-1] + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        _at_least(shape, 1)
        return shape[:-1] + (shape[-1] - 1,)


class LowerCholeskyTransform(_Stateless):
    """Square matrices to lower-triangular ones with a positive diagonal: the strict lower part kept, the diagonal
    exponentiated (not bijective: the upper part is dropped)."""

    domain, codomain = constraints.independent(constraints.real, 2), constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(_Stateless):
    """Square matrices to positive definite ones: L L^T of their LowerCholeskyTransform."""

    domain, codomain = constraints.independent(constraints.real, 2), constraints.positive_definite

    def _call(self, x):
        tril = LowerCholeskyTransform()(x)
        return tril @ tril.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(bg.linalg.cholesky(y))


class CorrCholeskyTransform(Transform):
    """Vectors of D (D - 1) / 2 reals to Cholesky factors of D x D correlation matrices: tanh of each gives a
    partial correlation, and each row is a stick broken on the unit sphere."""

    domain, codomain = constraints.real_vector, constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        eps = bg.finfo(x.dtype).eps
        r = vec_to_tril_matrix(bg.tanh(x).clamp(min=-1 + eps, max=1 - eps), diag=-1)
        remaining = (1 - r**2).sqrt().cumprod(-1)
        r = r + bg.eye(r.shape[-1], dtype=r.dtype)
        return r * _pad(remaining[..., :-1], [1, 0], value=1)

    def _inverse(self, y):
        remaining = 1 - bg.cumsum(y * y, dim=-1)
        remaining = tril_matrix_to_vec(_pad(remaining[..., :-1], [1, 0], value=1), diag=-1)
        t = tril_matrix_to_vec(y, diag=-1) / remaining.sqrt()
        return (t.log1p() - t.neg().log1p()) / 2  # atanh

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        left = tril_matrix_to_vec(1 - (y * y).cumsum(dim=-1), diag=-2)
        stick_breaking = 0.5 * left.log().sum(-1)
        tanh = -2 * (x + bg.nn.functional.softplus(-2 * x) - math.log(2.0)).sum(dim=-1)
        return stick_breaking + tanh

    def forward_shape(self, shape):
        _at_least(shape, 1)
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return shape[:-1] + (d, d)

    def inverse_shape(self, shape):
        _at_least(shape, 2)
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return shape[:-2] + (d * (d - 1) // 2,)


def _check_dim(t, dim, name, size, what, expected):
    """torch's assertions of CatTransform / StackTransform on a piece's dimension and size."""
    if not -t.dim() <= dim < t.dim():
        raise AssertionError(f"dim {dim} out of range for {name} with {t.dim()} dimensions")
    if t.size(dim) != size:
        raise AssertionError(f"{what}.size({dim}) = {t.size(dim)} must equal {expected} {size}")


def _checked_parts(tseq, cache_size):
    if not all(isinstance(t, Transform) for t in tseq):
        raise AssertionError("All elements of tseq must be Transform instances")
    return [t.with_cache(cache_size) for t in tseq] if cache_size else list(tseq)


class CatTransform(Transform):
    """transforms[i] on consecutive pieces of lengths[i] along `dim`, concatenated."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        parts = _checked_parts(tseq, cache_size)
        super().__init__(cache_size=cache_size)
        self.transforms = parts
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.transforms)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match transforms ({len(self.transforms)})")
        self.dim = dim

    @lazy_property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @lazy_property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _pieces(self, t):
        starts = [sum(self.lengths[:i]) for i in range(len(self.lengths))]
        return [t.narrow(self.dim, start, length) for start, length in zip(starts, self.lengths)]

    def _call(self, x):
        _check_dim(x, self.dim, "tensor", self.length, "x", "length")
        return bg.cat([t(piece) for t, piece in zip(self.transforms, self._pieces(x))], dim=self.dim)

    def _inverse(self, y):
        _check_dim(y, self.dim, "tensor", self.length, "y", "length")
        return bg.cat([t.inv(piece) for t, piece in zip(self.transforms, self._pieces(y))], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        _check_dim(x, self.dim, "x", self.length, "x", "length")
        _check_dim(y, self.dim, "y", self.length, "y", "length")
        terms = []
        for t, x_piece, y_piece in zip(self.transforms, self._pieces(x), self._pieces(y)):
            terms.append(_sum_rightmost(t.log_abs_det_jacobian(x_piece, y_piece), self.event_dim - t.event_dim))
        # the dimension concatenated along, counted from the right of the log |det J| terms
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        return bg.cat(terms, dim=dim) if dim < 0 else sum(terms)

    bijective = property(lambda self: all(t.bijective for t in self.transforms))

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """transforms[i] on the i-th slice along `dim`, stacked."""

    def __init__(self, tseq, dim=0, cache_size=0):
        parts = _checked_parts(tseq, cache_size)
        super().__init__(cache_size=cache_size)
        self.transforms = parts
        self.dim = dim

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slice(self, z):
        return [z.select(self.dim, i) for i in range(z.size(self.dim))]

    def _checked(self, t, name, what):
        _check_dim(t, self.dim, name, len(self.transforms), what, "len(transforms)")

    def _call(self, x):
        self._checked(x, "tensor", "x")
        return bg.stack([t(piece) for piece, t in zip(self._slice(x), self.transforms)], dim=self.dim)

    def _inverse(self, y):
        self._checked(y, "tensor", "y")
        return bg.stack([t.inv(piece) for piece, t in zip(self._slice(y), self.transforms)], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        self._checked(x, "x", "x")
        self._checked(y, "y", "y")
        pieces = zip(self._slice(x), self._slice(y), self.transforms)
        return bg.stack([t.log_abs_det_jacobian(xs, ys) for xs, ys, t in pieces], dim=self.dim)

    bijective = property(lambda self: all(t.bijective for t in self.transforms))

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """x to distribution.cdf(x), onto the unit interval (log |det J| is the log density)."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    domain = property(lambda self: self.distribution.support)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)
