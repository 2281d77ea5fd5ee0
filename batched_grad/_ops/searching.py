"""Searching and counting, with integer (or count) results: searchsorted, bucketize, isin, argwhere,
nonzero_static, unravel_index, unique_consecutive, bincount, histc and histogram."""

import functools

import jax.numpy as jnp
import numpy as np

from .. import _dtypes, _dual
from .._dtypes import not_implemented
from .._int_args import int_or_ints
from .._tensor import Tensor, _wrap_dim
from .._vmap_levels import refuse_dynamic_shape
from ._core import Op, apply
from ._derivatives import without_derivative
from ._forward_refused import unsupported_forward
from .indexing import nonzero
from .return_types import return_type
from .unique import _host_values, _taken


def _search(seq, values, *, right, int32):
    # the count of sequence entries below each value (or not above it, with `right`), row by row
    below = (seq[..., None, :] <= values[..., :, None]) if right else (seq[..., None, :] < values[..., :, None])
    return jnp.sum(below, -1).astype(jnp.int32 if int32 else jnp.int64)


_SEARCH = Op(
    "searchsorted",
    lambda seq, values, *, right, int32, flat: (
        _search(seq, values.reshape(-1), right=right, int32=int32).reshape(values.shape)
        if flat
        else _search(seq, values, right=right, int32=int32)
    ),
)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Where each value of `input` would be inserted into the sorted last dim of sorted_sequence to keep it sorted
    (after equal entries with right=True or side='right')."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError(
                "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True"
            )
        right = side == "right"
    if sorter is not None:
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    values = input if isinstance(input, Tensor) else Tensor._wrap(np.asarray(input))
    flat = sorted_sequence.ndim == 1
    if not flat and tuple(sorted_sequence.shape[:-1]) != tuple(values.shape[:-1]):
        raise RuntimeError(
            f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
            f"of boundaries tensor and input value tensor must match, but we got boundaries tensor "
            f"{list(sorted_sequence.shape)} and input value tensor {list(values.shape)}"
        )
    out = apply(
        _SEARCH, [sorted_sequence.detach(), values.detach()], right=bool(right), int32=bool(out_int32), flat=flat
    )
    return out if isinstance(input, Tensor) else out.reshape(())


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The index of the bucket (between consecutive 1-D `boundaries`) each element of input falls into."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


_ISIN = Op("isin", lambda a, b, *, invert: jnp.isin(a, b, invert=invert))


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element is among test_elements (either may be a number)."""
    operands = [x if isinstance(x, Tensor) else Tensor._wrap(np.asarray(x)) for x in (elements, test_elements)]
    return apply(_ISIN, [x.detach() for x in operands], invert=bool(invert))


def argwhere(input):
    """The indices of the non-zero elements, one row each (nonzero(input))."""
    return nonzero(input)


_NONZERO_STATIC = Op(
    "nonzero_static",
    lambda a, *, size, fill: (
        jnp.stack(jnp.nonzero(a, size=size, fill_value=fill), -1).astype(jnp.int64)
        if a.ndim
        else jnp.full((min(size, 1) if a.ndim == 0 and size else 0, 0), fill, jnp.int64)
    ),
)


def nonzero_static(input, *, size, fill_value=-1):
    """The first `size` rows of nonzero(input), padded with fill_value rows: a shape known without the values."""
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, but got size: {size}")
    if input.numel() == 0 or input.ndim == 0:  # a scalar's indices have no columns
        return Tensor._wrap(np.full((int(size), input.ndim), int(fill_value), np.int64))
    return apply(_NONZERO_STATIC, [input.detach()], size=int(size), fill=int(fill_value))


def unravel_index(indices, shape):
    """The coordinates in `shape` of flat indices, one int64 tensor per dim."""
    values = indices if isinstance(indices, Tensor) else Tensor._wrap(np.asarray(indices))
    if values.dtype.is_floating_point or values.dtype.is_complex or values.dtype is _dtypes.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {values.dtype.type_name}")
    shape = int_or_ints(shape)
    flat = np.asarray(_host_values(values)).astype(np.int64)
    total = int(np.prod(shape))
    coords = np.unravel_index(flat % total if total else flat, shape)  # torch wraps indices around, as Python
    return tuple(Tensor._wrap(np.asarray(c, np.int64)) for c in coords)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """The first element (or slice along `dim`) of each run of equal consecutive ones; with `return_inverse` each
    element's run, with `return_counts` each run's length. The values are not differentiable (as torch's)."""
    refuse_dynamic_shape(input, "unique_consecutive" if dim is None else "unique_dim_consecutive")
    a = _host_values(input)
    if dim is None:
        flat = a.reshape(-1)
        starts = np.ones(flat.shape, bool)
        starts[1:] = flat[1:] != flat[:-1]
        source, axis, shaped = input.reshape(-1), 0, a.shape
    else:
        axis = _wrap_dim(dim, input.ndim)
        rows = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
        starts = np.ones(rows.shape[0], bool)
        starts[1:] = (rows[1:] != rows[:-1]).any(1)
        source, shaped = input, (a.shape[axis],)
    first = np.flatnonzero(starts)
    values = _taken(source, first, axis, "unique_consecutive" if dim is None else "unique_dim_consecutive")
    results = (values,)
    if return_inverse:
        results += (Tensor._wrap((np.cumsum(starts) - 1).reshape(shaped).astype(np.int64)),)
    if return_counts:
        results += (Tensor._wrap(np.diff(np.append(first, starts.size)).astype(np.int64)),)
    return results if len(results) > 1 else values


@functools.cache
def _not_implemented_op(aten_name):
    return Op(
        aten_name,
        without_derivative(
            lambda value, *operands: value,
            lambda: RuntimeError(f"derivative for aten::{aten_name} is not implemented"),
        ),
        "torch::autograd::NotImplemented",
        forward_error=unsupported_forward(aten_name),
    )


def without_derivative_of(value, aten_name, *operands):
    """`value` (a count computed on the host from `operands`), recorded as torch records it where an operand
    requires grad or carries a tangent: by a NotImplemented node whose backward raises torch's error naming
    `aten_name`, and which forward mode refuses."""
    tracked = [o for o in operands if isinstance(o, Tensor) and (o.requires_grad or _dual.tangent_of(o) is not None)]
    return apply(_not_implemented_op(aten_name), [value, *tracked]) if tracked else value


def bincount(input, weights=None, minlength=0):
    """How often each value 0..max(input) occurs in the 1-D non-negative integer input (summing `weights`
    instead, if given); at least minlength bins."""
    if input.ndim != 1 or input.dtype.is_floating_point or input.dtype.is_complex or input.dtype is _dtypes.bool:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    values = np.asarray(_host_values(input)).astype(np.int64)
    if values.size and values.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and tuple(weights.shape) != tuple(input.shape):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    bins = max(int(values.max()) + 1 if values.size else 0, int(minlength))
    if weights is None or values.size == 0:  # torch counts an empty input in int64, weights or not
        return Tensor._wrap(np.bincount(values, minlength=bins).astype(np.int64))
    w = np.asarray(_host_values(weights))
    d = weights.dtype if weights.dtype in (_dtypes.float32, _dtypes.float64) else _dtypes.float64
    counts = Tensor._wrap(np.bincount(values, w.astype(np.float64), minlength=bins).astype(d.np))
    return without_derivative_of(counts, "bincount", weights)


def _histc(a, *, bins, low, high):
    lo, hi = (jnp.min(a), jnp.max(a)) if low == high == 0 else (jnp.asarray(low, a.dtype), jnp.asarray(high, a.dtype))
    lo, hi = jnp.where(lo == hi, lo - 1, lo), jnp.where(lo == hi, hi + 1, hi)
    inside = (a >= lo) & (a <= hi)
    position = jnp.clip(((a - lo) * bins / (hi - lo)).astype(jnp.int64), 0, bins - 1)
    return jnp.zeros(bins, a.dtype).at[jnp.where(inside, position, 0)].add(inside.astype(a.dtype))


_HISTC = Op("histc", _histc)


def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """A histogram of `bins` equal bins over [min, max] (the data's range when both are 0); elements outside are
    ignored. Its counts are not differentiable: torch records no node for them."""
    if not input.dtype.is_floating_point:
        raise not_implemented("histogram_cpu", input.dtype)
    if bins <= 0:
        raise RuntimeError("torch.histc(): bins must be > 0, but got " + str(bins) + " for dim 0")
    if min > max:
        raise RuntimeError("torch.histc(): max must be larger than min")
    return apply(_HISTC, [input.detach()], bins=int(bins), low=float(min), high=float(max))


def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """(hist, bin_edges): NumPy's histogram of the flattened input, with `bins` equal bins (over `range` or the
    data's) or the given edges."""

    a = np.asarray(_host_values(input)).reshape(-1)
    edges = np.asarray(_host_values(bins)) if isinstance(bins, Tensor) else int(bins)
    w = None if weight is None else np.asarray(_host_values(weight)).reshape(-1)
    hist, edge_values = np.histogram(a, edges, range=range, weights=w, density=density)
    result = return_type("histogram", ["hist", "bin_edges"])
    d = input.dtype.np
    operands = (input, bins, weight)
    return result(
        *(without_derivative_of(Tensor._wrap(v.astype(d)), "histogram", *operands) for v in (hist, edge_values))
    )


FUNCTIONS = {
    f.__name__: f
    for f in (
        searchsorted,
        bucketize,
        isin,
        argwhere,
        nonzero_static,
        unravel_index,
        unique_consecutive,
        bincount,
        histc,
        histogram,
    )
}
METHODS = {
    name: FUNCTIONS[name]
    for name in ("argwhere", "nonzero_static", "unique_consecutive", "bincount", "histc", "histogram")
}
