"""Reductions and scans beyond sum/mean/var/max: nansum, nanmean, count_nonzero, aminmax, logcumsumexp, cummax,
cummin, median, nanmedian, kthvalue, mode, quantile, nanquantile, msort, renorm, and torch's compositions diff,
trapezoid, cumulative_trapezoid, cov, corrcoef and logdet. Selections (median with a dim, kthvalue, mode, cummax)
send the gradient to the index they return; ties of a whole-tensor median share it, as torch's."""

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._autocast import autocast_policy
from .._dtypes import not_implemented
from .._tensor import Tensor, _wrap_dim
from ._core import SAVES_INDICES, Op, apply
from ._cpu_selection import kth_smallest_index, mode_index
from ._index_parse import _concrete
from .indexing import sort
from .linalg import slogdet
from .reduction import cumsum, dims
from .reduction import sum as _sum
from .return_types import return_type
from .shape import cat, narrow, unsqueeze
from .ternary import clamp, where

_RESULTS = {
    name: return_type(name, fields)
    for name, fields in (
        ("aminmax", ["min", "max"]),
        ("cummax", ["values", "indices"]),
        ("cummin", ["values", "indices"]),
        ("median", ["values", "indices"]),
        ("nanmedian", ["values", "indices"]),
        ("kthvalue", ["values", "indices"]),
        ("mode", ["values", "indices"]),
    )
}


# ---- nan-ignoring and counting reductions ----------------------------------------------------------------------
_NANSUM = Op(
    "nansum",
    lambda a, *, axis, keepdim, dtype: jnp.sum(jnp.where(jnp.isnan(a), 0, a).astype(dtype), axis, keepdims=keepdim),
)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum, with nan counted as 0."""
    d = (
        _dtypes.to_dtype(dtype)
        if dtype is not None
        else (_dtypes.int64 if not (input.dtype.is_floating_point or input.dtype.is_complex) else input.dtype)
    )
    return apply(_NANSUM, [input], axis=dims(dim, input.ndim), keepdim=bool(keepdim), dtype=d.np)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """mean of the elements that are not nan."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(
            f"nanmean(): expected input to have floating point or complex dtype but got {input.dtype.type_name}"
        )
    count = _sum(input.isnan().logical_not(), dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count


_COUNT_NONZERO = Op("count_nonzero", lambda a, *, axis: jnp.sum(a != 0, axis).astype(jnp.int64))


def count_nonzero(input, dim=None):
    """The number of non-zero elements (over `dim`, an int or a tuple)."""
    return apply(_COUNT_NONZERO, [input], axis=dims(dim, input.ndim))


def _aminmax(a, *, axis, keepdim):
    return jnp.min(a, axis, keepdims=keepdim), jnp.max(a, axis, keepdims=keepdim)


_AMINMAX = Op("aminmax", _aminmax, multi=True)


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over `dim` (all elements when None); ties share the gradient, as amin's and amax's."""
    axis = None if dim is None else (_wrap_dim(dim, max(input.ndim, 1)),) if input.ndim else None
    if dim is not None and not input.ndim:
        _wrap_dim(dim, 1)  # a scalar's dim is -1 or 0
    if axis is not None and input.shape[axis[0]] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {axis[0]} to have non-zero size.")
    if axis is None and input.numel() == 0:
        raise RuntimeError(
            "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."
        )
    return _RESULTS["aminmax"](*apply(_AMINMAX, [input], axis=axis, keepdim=bool(keepdim)))


# ---- scans ------------------------------------------------------------------------------------------------------
_LOGCUMSUMEXP = Op("logcumsumexp", lambda a, *, axis: jax.lax.cumlogsumexp(a, axis=axis) if a.ndim else a)


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along `dim`, computed stably."""
    axis = _wrap_dim(dim, max(input.ndim, 1))  # a scalar's dim is -1 or 0
    return apply(_LOGCUMSUMEXP, [input], axis=axis if input.ndim else 0)


def _cum_extreme(a, *, axis, largest):
    # the running extreme and the latest index reaching it; torch's scan takes every nan it meets (the result is nan
    # from the first on, its index the latest nan's)
    index = jnp.broadcast_to(jnp.arange(a.shape[axis]).reshape((-1,) + (1,) * (a.ndim - 1 - axis)), a.shape)

    def pick(left, right):
        (lv, li), (rv, ri) = left, right
        better = jnp.isnan(rv) | (~jnp.isnan(lv) & (rv >= lv if largest else rv <= lv))
        return jnp.where(better, rv, lv), jnp.where(better, ri, li)

    _, indices = jax.lax.associative_scan(pick, (jax.lax.stop_gradient(a), index), axis=axis)
    return jnp.take_along_axis(a, indices, axis), indices.astype(jnp.int64)


_CUM_EXTREME = {
    largest: Op("cummax" if largest else "cummin", _cum_extreme, multi=True, torch_saves=SAVES_INDICES)
    for largest in (True, False)
}


def _cum(name, input, dim, largest):
    if input.ndim == 0:
        if dim not in (-1, 0):
            raise IndexError(f"{name}(): Expected reduction dim -1 or 0 for scalar but got {dim}")
        return _RESULTS[name](input * 1, Tensor._wrap(np.asarray(0, np.int64)))
    return _RESULTS[name](*apply(_CUM_EXTREME[largest], [input], axis=_wrap_dim(dim, input.ndim), largest=largest))


def cummax(input, dim):
    """(values, indices): the running maximum along `dim` and where it was reached (the latest index of ties)."""
    return _cum("cummax", input, dim, True)


def cummin(input, dim):
    """(values, indices): the running minimum along `dim` and where it was reached (the latest index of ties)."""
    return _cum("cummin", input, dim, False)


# ---- order statistics -------------------------------------------------------------------------------------------
def _kth(a, *, axis, k, keepdim, ignore_nan, nan_wins=True):
    """The k-th smallest (0-based) along axis and its index (stable order; nan sorts last, and is the result of a row
    holding one where nan_wins, as median's), or with ignore_nan the k-th of the non-nan elements (k given per row as
    the lower median there)."""
    order = jnp.argsort(a, axis=axis, stable=True)
    if ignore_nan:
        count = jnp.sum(~jnp.isnan(a), axis, keepdims=True)
        position = jnp.maximum((count - 1) // 2, 0)
    else:
        position = jnp.full(a.shape[:axis] + (1,) + a.shape[axis + 1 :], k)
    index = jnp.take_along_axis(order, position, axis)
    if nan_wins and not ignore_nan and jnp.issubdtype(a.dtype, jnp.floating):  # torch: a row with nan has nan there
        first_nan = jnp.argmax(jnp.isnan(a), axis, keepdims=True)
        index = jnp.where(jnp.any(jnp.isnan(a), axis, keepdims=True), first_nan, index)
    value = jnp.take_along_axis(a, index, axis)
    if not keepdim:
        value, index = jnp.squeeze(value, axis), jnp.squeeze(index, axis)
    return value, index.astype(jnp.int64)


_KTH = {
    name: Op(name, _kth, backward_name, multi=True, torch_saves=SAVES_INDICES)
    for name, backward_name in (
        ("median", "MedianBackward1"),
        ("nanmedian", "NanmedianBackward1"),
        ("kthvalue", "KthvalueBackward0"),
    )
}


def _evenly_shared(a, value):
    """value (an element of a), with the derivative torch gives a whole-tensor median: shared evenly among the
    elements equal to it (the nan ones, when it is nan)."""
    hit = (a == value) | (jnp.isnan(a) & jnp.isnan(value))
    shared = jnp.sum(jnp.where(hit, a, 0)) / jnp.sum(hit)
    return shared + jax.lax.stop_gradient(value - shared)


def _median_all(a, *, ignore_nan):
    flat = a.reshape(-1)
    value, _ = _kth(jax.lax.stop_gradient(flat), axis=0, k=(flat.size - 1) // 2, keepdim=False, ignore_nan=ignore_nan)
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        return value  # an integer or bool median has no gradient to share
    return _evenly_shared(flat, value) if flat.size else jnp.asarray(jnp.nan, a.dtype)


_MEDIAN_ALL = {ignore: Op("nanmedian" if ignore else "median", _median_all) for ignore in (False, True)}


def _picked(a, idx, *, axis, keepdim):
    """a's elements at idx (an index per row along axis) and idx, as the selections give them."""
    value, idx = jnp.take_along_axis(a, jnp.expand_dims(idx, axis), axis), jnp.expand_dims(idx, axis)
    return (value, idx) if keepdim else (jnp.squeeze(value, axis), jnp.squeeze(idx, axis))


_PICKED = {
    name: Op(name, _picked, backward_name, multi=True, torch_saves=SAVES_INDICES)
    for name, backward_name in (("kthvalue", "KthvalueBackward0"), ("mode", "ModeBackward0"))
}
# above this many elements kthvalue and mode pick among equal elements as the traced forms do (the host replays of
# torch's choices are Python)
HOST_CHOICE_LIMIT = 1 << 16


def _torch_choice(input, axis, choose, skip_nan=False):
    """choose(rows) (the index torch picks in each row, rows along the last axis) on input's values, or None where
    they are traced, too many, or (skip_nan) hold nan."""
    values = None if input.numel() > HOST_CHOICE_LIMIT else _concrete(input)
    if values is None or (skip_nan and values.dtype.kind == "f" and np.isnan(values).any()):
        return None
    return choose(np.moveaxis(values, axis, -1))


def _selection(name, input, dim, keepdim, k=None):
    if input.ndim == 0:
        _wrap_dim(dim, 1)  # a scalar's dim is -1 or 0
        return _RESULTS[name](input * 1, Tensor._wrap(np.asarray(0, np.int64)))
    axis = _wrap_dim(dim, input.ndim)
    size = input.shape[axis]
    if size == 0:
        raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size.")
    kth = (size - 1) // 2 if k is None else k
    if name == "kthvalue":  # which of equal elements: torch's quickselect's
        index = _torch_choice(input, axis, lambda rows: kth_smallest_index(rows, kth))
        if index is not None:
            return _RESULTS[name](*apply(_PICKED[name], [input, index], axis=axis, keepdim=bool(keepdim)))
    kwargs = dict(k=kth, keepdim=bool(keepdim), ignore_nan=name == "nanmedian", nan_wins=name != "kthvalue")
    return _RESULTS[name](*apply(_KTH[name], [input], axis=axis, **kwargs))


def _no_bool_median(input, dim):
    if input.dtype is _dtypes.bool:
        raise not_implemented("median_cpu" if dim is None else "median_out", input.dtype)


def median(input, dim=None, keepdim=False):
    """The lower median of all elements; with `dim`, (values, indices) along it. nan, if present, is the result."""
    _no_bool_median(input, dim)
    if dim is None:
        if input.numel() == 0:  # nan; an integer one as x86 converts nan (the type's least value), as torch's
            kind = input.dtype.np
            return Tensor._wrap(np.asarray(np.nan if kind.kind in "fc" else np.iinfo(kind).min, kind))
        return apply(_MEDIAN_ALL[False], [input], ignore_nan=False)
    return _selection("median", input, dim, keepdim)


def nanmedian(input, dim=None, keepdim=False):
    """median ignoring nan (nan only where every element is)."""
    _no_bool_median(input, dim)
    if dim is None:
        return apply(_MEDIAN_ALL[True], [input], ignore_nan=True)
    return _selection("nanmedian", input, dim, keepdim)


def kthvalue(input, k, dim=-1, keepdim=False):
    """(values, indices): the k-th smallest element (1-based) along `dim`."""
    axis = _wrap_dim(dim, max(input.ndim, 1))
    size = input.shape[axis] if input.ndim else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {axis}")
    return _selection("kthvalue", input, dim, keepdim, k - 1)


def _mode(a, *, axis, keepdim):
    moved = jnp.moveaxis(a, axis, -1)
    equal = moved[..., :, None] == moved[..., None, :]
    counts = jnp.sum(equal, -1)
    best = jnp.max(counts, -1, keepdims=True)
    # the smallest of the most frequent values, and its last index
    candidates = jnp.where(
        counts == best,
        jax.lax.stop_gradient(moved),
        jnp.inf if jnp.issubdtype(a.dtype, jnp.floating) else jnp.iinfo(a.dtype).max,
    )
    value = jnp.min(candidates, -1, keepdims=True)
    positions = jnp.arange(moved.shape[-1])
    index = jnp.max(jnp.where(jax.lax.stop_gradient(moved) == value, positions, -1), -1, keepdims=True)
    picked = jnp.take_along_axis(moved, index, -1)
    if keepdim:
        return jnp.moveaxis(picked, -1, axis), jnp.moveaxis(index, -1, axis).astype(jnp.int64)
    return picked[..., 0], index[..., 0].astype(jnp.int64)


_MODE = Op("mode", _mode, multi=True, torch_saves=SAVES_INDICES)


def mode(input, dim=-1, keepdim=False):
    """(values, indices): the most frequent value along `dim` (the smallest of equally frequent ones) and the index
    of one of its occurrences: torch's (mode_index), or the last where nan is present or the values are traced."""
    if input.ndim == 0:
        _wrap_dim(dim, 1)  # a scalar's dim is -1 or 0
        return _RESULTS["mode"](input * 1, Tensor._wrap(np.asarray(0, np.int64)))
    axis = _wrap_dim(dim, input.ndim)
    index = _torch_choice(input, axis, mode_index, skip_nan=True)
    if index is not None:
        return _RESULTS["mode"](*apply(_PICKED["mode"], [input, index], axis=axis, keepdim=bool(keepdim)))
    return _RESULTS["mode"](*apply(_MODE, [input], axis=axis, keepdim=bool(keepdim)))


def _quantile(a, q, *, axis, keepdim, interpolation, ignore_nan, scalar):
    out = _quantiles_of(a, q, axis, keepdim, interpolation, ignore_nan)
    return out[0] if scalar else out


def _quantiles_of(a, q, axis, keepdim, interpolation, ignore_nan):
    flat = a.reshape(-1) if axis is None else a
    ax = 0 if axis is None else axis
    values = jnp.sort(flat, axis=ax)  # nan sorts last
    n = flat.shape[ax]
    valid = jnp.sum(~jnp.isnan(flat), ax, keepdims=True) if ignore_nan else n
    rank = q.reshape((-1,) + (1,) * flat.ndim) * (jnp.asarray(valid) - 1)
    low = jnp.floor(rank).astype(jnp.int64)
    high = jnp.ceil(rank).astype(jnp.int64)
    if interpolation == "nearest":
        low = high = jnp.round(rank).astype(jnp.int64)
    elif interpolation == "lower":
        high = low
    elif interpolation == "higher":
        low = high
    expanded = jnp.broadcast_to(values, (q.size,) + values.shape)

    def at(position):
        shaped = jnp.broadcast_to(
            jnp.clip(position, 0, n - 1), expanded.shape[: ax + 1] + (1,) + expanded.shape[ax + 2 :]
        )
        return jnp.take_along_axis(expanded, shaped, ax + 1)

    lo, hi = at(low), at(high)
    weight = (rank - low) if interpolation == "linear" else 0.5 if interpolation == "midpoint" else 0.0
    out = lo + (hi - lo) * jnp.asarray(weight, a.dtype) if interpolation in ("linear", "midpoint") else lo
    if ignore_nan:
        out = jnp.where(jnp.broadcast_to(valid, out.shape[1:]) == 0, jnp.nan, out)
    else:
        out = jnp.where(jnp.any(jnp.isnan(flat), ax, keepdims=True), jnp.nan, out)
    if axis is None:
        return out.reshape((q.size,) + ((1,) * a.ndim if keepdim else ()))
    return out if keepdim else jnp.squeeze(out, ax + 1)


_QUANTILE = Op("quantile", _quantile, "SqueezeBackward4")
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantiles(name, input, q, dim, keepdim, interpolation):
    # torch's messages name quantile() for nanquantile too
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(
            "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, but got "
            f"{interpolation}"
        )
    if input.dtype not in (_dtypes.float32, _dtypes.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    scalar = not isinstance(q, Tensor)
    qs = np.asarray([q] if scalar else q.detach().numpy(), dtype=input.dtype.np).reshape(-1)
    if isinstance(q, Tensor) and q.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if ((qs < 0) | (qs > 1)).any():
        raise RuntimeError(
            f"quantile() q must be in the range [0, 1] but got {q}"
            if scalar
            else "quantile() q values must be in the range [0, 1]"
        )
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    axis = None if dim is None else _wrap_dim(dim, max(input.ndim, 1))
    x = input.reshape(1) if input.ndim == 0 else input
    return apply(
        _QUANTILE,
        [x, Tensor._wrap(qs)],
        axis=axis,
        keepdim=bool(keepdim),
        interpolation=interpolation,
        ignore_nan=name == "nanquantile",
        scalar=scalar,
    )


@autocast_policy("fp32")
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles (q a number or a 1-D tensor in [0, 1]) over `dim` (all elements when None), interpolated
    between order statistics as `interpolation` says; nan if any element is."""
    return _quantiles("quantile", input, q, dim, keepdim, interpolation)


@autocast_policy("fp32")
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring nan (nan only where every element is)."""
    return _quantiles("nanquantile", input, q, dim, keepdim, interpolation)


def msort(input):
    """input sorted along dim 0."""
    return sort(input, 0).values


# ---- torch's compositions ---------------------------------------------------------------------------------------
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along `dim`, after joining `prepend` and `append`."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _wrap_dim(dim, input.ndim)
    x = (
        cat([t for t in (prepend, input, append) if t is not None], d)
        if prepend is not None or append is not None
        else input
    )
    for _ in range(n):
        length = x.shape[d]
        if length <= 1:
            return narrow(x, d, 0, 0)
        later, earlier = narrow(x, d, 1, length - 1), narrow(x, d, 0, length - 1)
        x = later ^ earlier if x.dtype is _dtypes.bool else later - earlier  # bools differ by xor, as torch's
    return x


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along `dim`: spacing `dx` (1 by default) or sample points `x`."""
    d = _wrap_dim(dim, y.ndim)
    length = y.shape[d]
    if length == 0:
        return _sum(y, d)
    pairs = narrow(y, d, 1, length - 1) + narrow(y, d, 0, length - 1)
    if x is None or not isinstance(x, Tensor):
        spacing = 1.0 if x is None and dx is None else (x if x is not None else dx)
        return _sum(pairs, d) * (spacing / 2)
    widths = diff(x, dim=d if x.ndim == y.ndim else -1)
    return _sum(widths * pairs, d) / 2


def trapz(y, x=None, *, dx=None, dim=-1):
    """trapezoid under its older name."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal rule along `dim` (one element fewer than y)."""
    if y.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, y.ndim)
    length = y.shape[d]
    pairs = narrow(y, d, 1, max(length - 1, 0)) + narrow(y, d, 0, max(length - 1, 0))
    if x is None or not isinstance(x, Tensor):
        spacing = 1.0 if x is None and dx is None else (x if x is not None else dx)
        return cumsum(pairs * (spacing / 2), d)
    widths = diff(x, dim=d if x.ndim == y.ndim else -1)
    return cumsum(widths * pairs / 2, d)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of `input` (observations in its columns)."""
    if input.ndim > 2:
        raise RuntimeError(
            f"cov(): expected input to have two or fewer dimensions but got an input with {input.ndim} dimensions"
        )
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(_dtypes.get_default_dtype())
    w = None
    if fweights is not None:
        w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    if w is None:
        total = x.shape[1]
        mean = x.mean(1, keepdim=True)
        norm = total - correction
    else:
        total = w.sum()
        mean = (x * w).sum(1, keepdim=True) / total
        norm = total - correction if aweights is None else total - correction * (w * aweights).sum() / total
    centered = x - mean
    weighted = centered if w is None else centered * w
    out = (
        weighted.matmul(centered.mT.conj()) / clamp(norm, min=0)
        if isinstance(norm, Tensor)
        else weighted.matmul(centered.mT.conj()) / max(norm, 0)
    )
    return out.squeeze() if input.ndim < 2 else out


def corrcoef(input):
    """The Pearson correlation coefficients of the variables in the rows of `input`, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    std = d.sqrt() if not c.dtype.is_complex else d.real.sqrt()
    out = c / unsqueeze(std, 1) / unsqueeze(std, 0)
    return clamp(out, -1, 1) if not out.dtype.is_complex else out


def _renorm(a, *, p, axis, maxnorm):
    others = tuple(d for d in range(a.ndim) if d != axis)
    if p == float("inf"):
        norm = jnp.max(jnp.abs(a), others, keepdims=True)
    else:
        norm = jnp.sum(jnp.abs(a) ** p, others, keepdims=True) ** (1.0 / p)
    return a * jnp.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0).astype(a.dtype)


_RENORM = Op("renorm", _renorm)


def renorm(input, p, dim, maxnorm):
    """Each slice along `dim` whose p-norm exceeds maxnorm scaled down to norm maxnorm."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    return apply(_RENORM, [input], p=float(p), axis=_wrap_dim(dim, input.ndim), maxnorm=float(maxnorm))


def logdet(input):
    """log(det(input)): nan for a negative determinant, -inf for a zero one; complex for a complex input (the log
    of the determinant's phase added)."""
    sign, logabsdet = slogdet(input)
    if input.dtype.is_complex:
        return logabsdet + sign.log()
    return where(sign == -1, Tensor._wrap(np.asarray(np.nan, logabsdet.dtype.np)), logabsdet)


FUNCTIONS = {
    f.__name__: f
    for f in (
        nansum,
        nanmean,
        count_nonzero,
        aminmax,
        logcumsumexp,
        cummax,
        cummin,
        median,
        nanmedian,
        kthvalue,
        mode,
        quantile,
        nanquantile,
        msort,
        diff,
        trapezoid,
        trapz,
        cumulative_trapezoid,
        cov,
        corrcoef,
        renorm,
        logdet,
    )
}
METHODS = {
    name: FUNCTIONS[name]
    for name in (
        "nansum",
        "nanmean",
        "count_nonzero",
        "aminmax",
        "logcumsumexp",
        "cummax",
        "cummin",
        "median",
        "nanmedian",
        "kthvalue",
        "mode",
        "quantile",
        "nanquantile",
        "msort",
        "diff",
        "cov",
        "corrcoef",
        "renorm",
        "logdet",
    )
}
