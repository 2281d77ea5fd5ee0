"""Indexing beyond gather and scatter: take, put, the index_* ops, masked_scatter, scatter_reduce and the
diagonal/select/slice scatters (each one op with torch's node name and derivative, duplicate indices included)."""

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._autocast import autocast_policy
from .._dtypes import not_implemented
from .._grad_mode import no_grad
from .._tensor import Tensor, _wrap_dim, warn_at_caller
from .._tracing import is_tracer
from ._core import Op, apply
from ._derivatives import with_derivative_of
from ._index_parse import check_index_dtype
from .indexing import (
    _check_index,
    _check_range,
    _concrete,
    _written,
    bools_as_integers,
    check_scatter_shapes,
    on_vectors,
    setitem,
    writes,
)
from .linalg import diagonal
from .nn import _check_tensor


def _at(shape, axis, index):
    """The index of the positions `index` (1-D) along `axis` of an array of `shape`."""
    return (slice(None),) * axis + (index,)


def _index_add(a, idx, src, *, axis, alpha):
    return a.at[_at(a.shape, axis, idx)].add(src * alpha if alpha != 1 else src)


def _index_copy(a, idx, src, *, axis, derivative=False):
    return _written(a, _at(a.shape, axis, idx), src, derivative)


def _index_fill(a, idx, value, *, axis):
    # one value at every filled position: a `where`, whose value gradient sums each position once, repeated or not
    # (torch's grad.index_select(dim, unique(index)).sum())
    filled = jnp.zeros(a.shape, bool).at[_at(a.shape, axis, idx)].set(True)
    return jnp.where(filled, value.astype(a.dtype), a)


_INDEX_ADD = Op("index_add", on_vectors(_index_add, promoted=(0, 2), like=0), linear=True)
_INDEX_COPY = writes("index_copy", on_vectors(_index_copy, promoted=(0, 2), like=0), linear=True)
_INDEX_FILL = {
    tensor: Op(
        "index_fill", on_vectors(_index_fill, promoted=(0,), like=0), f"IndexFillBackward{int(tensor)}", linear=True
    )
    for tensor in (False, True)
}


def _index_operands(name, input, dim, index, source=None):
    if index.dtype is not _dtypes.int64:
        raise IndexError(f"{name}_(): Expected dtype int64 for index.")
    if index.ndim > 1:
        raise IndexError(
            f"{name}_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: Long "
            f"and size: {list(index.shape)}"
        )
    d = _wrap_dim(dim, max(input.ndim, 1))
    size = input.shape[d] if input.ndim else 1
    try:
        _check_range(index, size, d, IndexError)
    except IndexError as error:
        raise IndexError(
            {"index_add": "index out of range in self", "index_copy": f"index_copy_(): {error}"}.get(name, str(error))
        ) from None
    if isinstance(source, Tensor) and source.dtype is not input.dtype:
        this, that = input.dtype.type_name, source.dtype.type_name
        raise RuntimeError(
            f"index_add_(): self ({this}) and source ({that}) must have the same scalar type"
            if name == "index_add"
            else f"{name}_(): self and source expected to have the same dtype, "
            f"but got (self) {this} and (source) {that}"
        )
    return d


def _no_dimensions(d):
    return IndexError(f"Dimension specified as {d} but tensor has no dimensions")


def _check_index_add_source(input, d, count, source):
    """torch's checks of index_add's source against input and the `count` indices (0-dim tensors included)."""
    if d != 0 and d >= source.ndim:
        raise RuntimeError(
            f"index_add_(): Indexing dim {d} is out of bounds of the source tensor with dim {source.ndim}"
        )
    if source.ndim == 0 and count != 1:
        raise _no_dimensions(d)  # torch's message reads source.size(dim) of the 0-dim source
    if source.ndim and count != source.shape[d]:
        raise RuntimeError(
            f"index_add_(): Number of indices ({count}) should be equal to source.size(dim): ({source.shape[d]}), "
            f"for dim: {d}"
        )
    this, that = list(input.shape), list(source.shape)
    if input.ndim and source.ndim:
        del this[d], that[d]
    if this != that:
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified dimension. "
            f"Got self.shape = {list(input.shape)} source.shape = {list(source.shape)}"
        )


def _check_index_copy_source(input, d, count, source):
    """torch's checks of index_copy's source against input and the `count` indices (0-dim tensors included)."""
    if source.ndim == 0 and count != 1:
        raise IndexError(f"index_copy_(): When source is scalar, index should have one element (got {count})")
    if source.ndim != input.ndim and source.ndim and input.ndim:
        raise IndexError(
            "index_copy_(): When source and destination are not scalars, their dimensionality must match. "
            f"Source dimensionality ({source.ndim}), destination dimensionality ({input.ndim})"
        )
    this = [n for k, n in enumerate(input.shape) if k != d]
    that = [n for k, n in enumerate(source.shape) if k != d]
    if this != that:
        raise RuntimeError(
            "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: "
            f"{' '.join(map(str, this))} at dimension {d} and source slice shape: {' '.join(map(str, that))} at "
            "dimension 0."
        )
    if source.ndim and count != source.shape[d]:
        raise IndexError(
            f"index_copy_(): Number of indices ({count}) should be equal to source.size(dim) ({source.shape[d]})"
        )


def index_add(input, dim, index, source, *, alpha=1):
    """A copy of input with alpha * source added at `index` along `dim` (duplicates accumulate)."""
    d = _index_operands("index_add", input, dim, index, source)
    _check_index_add_source(input, d, index.numel(), source)
    return apply(_INDEX_ADD, [input, index.reshape(-1), source], axis=d, alpha=alpha)


@autocast_policy("promote")
def index_copy(input, dim, index, source):
    """A copy of input with the slices of `source` written at `index` along `dim`."""
    d = _index_operands("index_copy", input, dim, index, source)
    _check_index_copy_source(input, d, index.numel(), source)
    return apply(_INDEX_COPY, [input, index.reshape(-1), source], axis=d)


def index_fill(input, dim, index, value):
    """A copy of input with `value` (a number or 0-dim tensor) at `index` along `dim`."""
    d = _index_operands("index_fill", input, dim, index)
    tensor = isinstance(value, Tensor)
    if tensor and value.ndim:
        raise RuntimeError(
            f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.ndim} dimension(s)."
        )
    return apply(_INDEX_FILL[tensor], [input, index.reshape(-1), value], axis=d)


def _take(a, idx):
    return jnp.take(a.reshape(-1), idx)


def _put(a, idx, src, *, accumulate, derivative=False):
    flat, where = a.reshape(-1), (idx.reshape(-1),)
    src = src.reshape(-1).astype(a.dtype)
    return (flat.at[where].add(src) if accumulate else _written(flat, where, src, derivative)).reshape(a.shape)


_TAKE = Op("take", _take, linear=True)
_PUT = writes("put", bools_as_integers(_put), linear=True)


def _check_flat_range(index, n):

    values = _concrete(index)
    if values is not None and values.size and (values.min() < -n or values.max() >= n):
        bad = values[(values < -n) | (values >= n)][0]
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")


def take(input, index):
    """The elements of the flattened input at `index` (of index's shape)."""
    _check_index(index, "take(): Expected a long tensor for index, but got " + index.dtype.type_name)
    _check_flat_range(index, input.numel())
    return apply(_TAKE, [input, index])


def put(input, index, source, accumulate=False):
    """A copy of input with source written (added, with `accumulate`) at the flat positions `index`."""
    _check_index(index, "put_(): Expected a long tensor for index, but got " + index.dtype.type_name)
    if index.numel() != source.numel():
        raise IndexError(
            f"put_(): Expected source and index to have the same number of elements, but got "
            f"source.numel() = {source.numel()}, index.numel() = {index.numel()}"
        )
    if source.dtype is not input.dtype:
        raise RuntimeError(
            f"put_(): self and source expected to have the same dtype, but got "
            f"self.dtype = {input.dtype.type_name} and source.dtype = "
            f"{source.dtype.type_name}"
        )
    _check_flat_range(index, input.numel())
    return apply(_PUT, [input, index, source], accumulate=bool(accumulate))


# ---- scatters of a view ------------------------------------------------------------------------------------------
def _diagonal_scatter(a, src, *, offset, dim1, dim2):
    moved = jnp.moveaxis(a, (dim1, dim2), (-2, -1))
    n = src.shape[-1]
    rows, cols = jnp.arange(n) + max(-offset, 0), jnp.arange(n) + max(offset, 0)
    return jnp.moveaxis(moved.at[..., rows, cols].set(src.astype(a.dtype)), (-2, -1), (dim1, dim2))


_DIAGONAL_SCATTER = Op("diagonal_scatter", _diagonal_scatter, linear=True)
_SELECT_SCATTER = Op(
    "select_scatter",
    lambda a, src, *, axis, index: a.at[(slice(None),) * axis + (index,)].set(src.astype(a.dtype)),
    linear=True,
)
_SLICE_SCATTER = Op(
    "slice_scatter",
    lambda a, src, *, axis, start, end, step: a.at[(slice(None),) * axis + (slice(start, end, step),)].set(
        src.astype(a.dtype)
    ),
    linear=True,
)


def _check_embedding(name, view_shape, src):
    if tuple(view_shape) != tuple(src.shape):
        raise RuntimeError(
            f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
            f"slice size = {list(view_shape)}"
        )


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of input with its diagonal (as diagonal(input, offset, dim1, dim2) gives it) replaced by src."""
    _check_embedding("diagonal_scatter", diagonal(input.detach(), offset, dim1, dim2).shape, src)
    return apply(
        _DIAGONAL_SCATTER,
        [input, src],
        offset=int(offset),
        dim1=_wrap_dim(dim1, input.ndim),
        dim2=_wrap_dim(dim2, input.ndim),
    )


def select_scatter(input, src, dim, index):
    """A copy of input with the slice input.select(dim, index) replaced by src."""
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {d}"
        )
    _check_embedding("select_scatter", input.shape[:d] + input.shape[d + 1 :], src)
    return apply(_SELECT_SCATTER, [input, src], axis=d, index=int(index) % size)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of input with the slice [start:end:step] along `dim` replaced by src."""
    d = _wrap_dim(dim, input.ndim)
    lo, hi, st = slice(start, end, step).indices(input.shape[d])
    shape = list(input.shape)
    shape[d] = len(range(lo, hi, st))
    _check_embedding("slice_scatter", shape, src)
    return apply(_SLICE_SCATTER, [input, src], axis=d, start=lo, end=hi, step=st)


# ---- masked_scatter, index_put, scatter_reduce ---------------------------------------------------------------------
def _masked_scatter(a, mask, src):
    shape = jnp.broadcast_shapes(a.shape, mask.shape)
    a, mask = jnp.broadcast_to(a, shape), jnp.broadcast_to(mask, shape)
    positions = jnp.cumsum(mask.reshape(-1)) - 1
    taken = jnp.take(src.reshape(-1).astype(a.dtype), jnp.clip(positions, 0, max(src.size - 1, 0)))
    return jnp.where(mask, taken.reshape(shape), a)


_MASKED_SCATTER = Op("masked_scatter", _masked_scatter, linear=True)


MASKED_SCATTER_UINT8 = (
    "masked_scatter_ received a mask with dtype torch.uint8, this behavior is now deprecated,please use a mask with "
    "dtype torch.bool instead."
)


def masked_scatter(input, mask, source):
    """A copy of input with the elements of source, in order, at the positions where mask is True."""
    if mask.dtype is _dtypes.uint8:
        warn_at_caller(MASKED_SCATTER_UINT8)
    if mask.dtype is not _dtypes.bool:
        raise RuntimeError(
            f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype.type_name}"
        )
    if source.dtype is not input.dtype:
        raise RuntimeError(
            f"masked_scatter: expected self and source to have same dtypes but got "
            f"{input.dtype.type_name} and {source.dtype.type_name}"
        )

    values = _concrete(mask)
    if values is not None:
        count = int(np.broadcast_to(values, np.broadcast_shapes(values.shape, tuple(input.shape))).sum())
        if count > source.numel():
            raise RuntimeError("Number of elements of source < number of ones in mask")
    return apply(_MASKED_SCATTER, [input, mask, source])


_INDEX_PUT_ADD = Op(
    "index_put",
    bools_as_integers(lambda a, v, *idx: a.at[idx].add(v.astype(a.dtype))),
    linear=True,
    backward_name="IndexPutBackward0",
)


def _integer_indices(indices):
    """index_put's indices as integer arrays: each mask (bool, or uint8 with torch's warning) is replaced by its
    nonzero positions, one array per dimension it covers."""
    arrays = []
    for index in indices:
        check_index_dtype(index._held, from_tensor=True)
        if index.dtype in (_dtypes.bool, _dtypes.uint8) and index.ndim:
            arrays.extend(index.bool().nonzero(as_tuple=True))
        else:
            arrays.append(index)
    return arrays


def index_put(input, indices, values, accumulate=False):
    """A copy of input with values written (added, with `accumulate`) at input[indices]."""
    indices = tuple(indices)
    if not accumulate:
        out = input.clone()
        setitem(out, indices, values)
        return out
    return apply(_INDEX_PUT_ADD, [input, values] + _integer_indices(indices))


def _scatter_reduce(a, idx, src, *, axis, reduce, include_self):
    if idx.size == 0:
        return a
    grids = list(jnp.meshgrid(*[jnp.arange(n) for n in idx.shape], indexing="ij"))
    grids[axis] = idx
    where = tuple(grids)
    src = src[tuple(slice(0, n) for n in idx.shape)].astype(a.dtype)
    hit = jnp.zeros(a.shape, jnp.int32).at[where].add(1)
    if reduce in ("sum", "mean"):
        total = (a if include_self else jnp.where(hit > 0, 0, a)).at[where].add(src)
        if reduce == "sum":
            return total
        count = jnp.maximum(hit + (1 if include_self else 0), 1)
        return total / count.astype(a.dtype) if jnp.issubdtype(a.dtype, jnp.inexact) else total // count
    return _dense_reduce(a, idx, src, hit, axis, reduce, include_self)


def _dense_reduce(a, idx, src, hit, axis, reduce, include_self):
    """prod, amax or amin: each output position reduces the sources sent to it (a dense (positions, sources) layout
    along `axis`), so that the derivative is a reduction's: ties share the gradient evenly, as torch's."""
    if reduce == "prod":
        fill = 1
    elif jnp.issubdtype(a.dtype, jnp.inexact):
        fill = -jnp.inf if reduce == "amax" else jnp.inf
    else:
        fill = jnp.iinfo(a.dtype).min if reduce == "amax" else jnp.iinfo(a.dtype).max
    positions = jnp.arange(a.shape[axis]).reshape((-1, 1) + (1,) * (a.ndim - 1 - axis))
    member = jnp.expand_dims(idx, axis) == positions  # (..., positions, sources, ...)
    spread = jnp.where(member, jnp.expand_dims(src, axis), jnp.asarray(fill, a.dtype))
    pads = [(0, a.shape[d] - spread.shape[d]) for d in range(axis)] + [(0, 0), (0, 0)]
    pads += [(0, a.shape[d] - spread.shape[d + 1]) for d in range(axis + 1, a.ndim)]
    spread = jnp.pad(spread, pads, constant_values=fill)
    reduced = {"prod": jnp.prod, "amax": jnp.max, "amin": jnp.min}[reduce]

    def reducer(x, axis):
        return reduced(x, axis).astype(a.dtype)  # jnp.prod widens int32 to int64

    if include_self:
        return reducer(jnp.concatenate([jnp.expand_dims(a, axis + 1), spread], axis + 1), axis + 1)
    value = jnp.where(hit > 0, reducer(spread, axis + 1), a)
    if reduce == "prod":
        return value
    # torch shares a position's gradient among the sources equal to its result, counting the input's own value
    # among the ties even though it was not reduced
    ties = jax.lax.stop_gradient(spread == jnp.expand_dims(value, axis + 1))
    count = jnp.sum(ties, axis + 1) + jax.lax.stop_gradient(a == value)
    shared = jnp.sum(jnp.where(ties, spread, 0), axis + 1) / jnp.maximum(count, 1)
    return with_derivative_of(value, jnp.where(hit > 0, shared, a))


def _refused_through_zeros(function, name):
    """torch's refusal of a second derivative of a prod reduction's gradient for `name` (its source operand) where
    more than one zero of it is sent to one position: the gradient is computed, differentiating it raises."""
    message = (
        f"{function}(): Double backward is unsupported for {name} when >1 zeros in {name} are scattered to the same "
        "position in self"
    )

    def second_order(static, operands, grads):
        if static["reduce"] != "prod" or grads[2] is None:
            return grads
        from ..autograd._once_differentiable import refusing_differentiation

        input, index, src = operands
        with no_grad():
            zeros = (src == 0).to(input.dtype)[tuple(slice(0, n) for n in index.shape)]
            counts = input.new_zeros(input.shape).scatter_add(static["axis"], index, zeros)
            repeated = (counts > 1).any()._value
        if not is_tracer(repeated) and repeated:  # a traced gradient (a transform's) is not checked
            grads[2] = refusing_differentiation(message, [grads[2]], keep_graph=True)[0]
        return grads

    return second_order


_SCATTER_REDUCE = Op(
    "scatter_reduce",
    on_vectors(_scatter_reduce, promoted=(0, 1, 2), like=0),
    second_order=_refused_through_zeros("scatter_reduce", "src"),
)
INDEX_REDUCE = Op(
    "index_reduce",
    on_vectors(_scatter_reduce, promoted=(0, 1, 2), like=0),
    second_order=_refused_through_zeros("index_reduce", "source"),
)
_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """A copy of input where each position `index` points to along `dim` is reduced ('sum', 'prod', 'mean', 'amax',
    'amin') with the src elements sent to it (and its own value, with include_self)."""
    return scatter_reduce_by(_SCATTER_REDUCE, input, dim, index, src, reduce, include_self)


def scatter_reduce_by(op, input, dim, index, src, reduce, include_self):
    """scatter_reduce as the op `op` (scatter_reduce's, or index_reduce's, whose node torch names otherwise)."""
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)  # torch's older names, still accepted
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    _check_tensor("scatter_reduce", "src", src, 4)
    _check_index(index, "scatter_reduce(): Expected dtype int64 for index")
    if src.dtype is not input.dtype:
        raise RuntimeError("scatter_reduce(): Expected self.dtype to be equal to src.dtype")
    if reduce == "mean" and input.dtype is _dtypes.bool:
        kernel = "div_floor_cpu" if op is INDEX_REDUCE else "scatter_gather_tensor_cpu_reduce_mean"
        raise not_implemented(kernel, input.dtype)
    d = _wrap_dim(dim, max(input.ndim, 1))
    check_scatter_shapes(input, d, index, src)
    _check_range(index, input.shape[d] if input.ndim else 1, d)
    return apply(op, [input, index, src], axis=d, reduce=reduce, include_self=bool(include_self))


FUNCTIONS = {
    f.__name__: f
    for f in (
        index_add,
        index_copy,
        index_fill,
        take,
        put,
        diagonal_scatter,
        select_scatter,
        slice_scatter,
        masked_scatter,
        index_put,
        scatter_reduce,
    )
}
METHODS = dict(FUNCTIONS)
