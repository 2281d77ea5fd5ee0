"""Indexing: __getitem__/__setitem__ (basic and advanced), gather/scatter, masks, nonzero, sort and topk."""
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._tensor import Tensor, _wrap_dim
from ._core import Op, apply
from .reduction import values_indices
from .shape import _SLICE, decode_index, encode_index, reshape


def _rebuild(structure, arrays):
    return tuple(arrays[i[1]] if isinstance(i, tuple) and i[0] == "array" else i
                 for i in decode_index(structure))


def _check_int(i, size, dim):
    if not -size <= i < size:
        raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")


def _parse(shape, index):
    """Split an index into a hashable structure and the integer arrays of its advanced parts."""
    if not isinstance(index, tuple):
        index = (index,)
    consumed = sum(1 if not (i is None or i is Ellipsis) else 0 for i in index)
    consumed += sum(_ndim_of(i) - 1 for i in index if _is_bool(i))
    items, arrays, dim = [], [], 0
    for i in index:
        if i is Ellipsis:
            items.append(i)
            dim = len(shape) - (consumed - dim)
            continue
        if i is None:
            items.append(i)
            continue
        if isinstance(i, (list, np.ndarray)) or isinstance(i, Tensor):
            a = np.asarray(i._value if isinstance(i, Tensor) else i) if not _is_traced(i) else i._value
            if a.dtype == np.bool_:
                for k, nz in enumerate(np.nonzero(a)):
                    items.append(("array", len(arrays)))
                    arrays.append(nz)
                dim += a.ndim
                continue
            if isinstance(a, np.ndarray):
                if a.dtype.kind not in "iu":
                    raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
                if a.size:
                    _check_int(int(a.max()), shape[dim], dim)
                    _check_int(int(a.min()), shape[dim], dim)
            items.append(("array", len(arrays)))
            arrays.append(a)
        elif isinstance(i, slice):
            items.append(i)
        else:
            i = int(i)
            if dim >= len(shape):
                raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
            _check_int(i, shape[dim], dim)
            items.append(i)
        dim += 1
    if dim > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    return encode_index(items), arrays


def _is_traced(i):
    import jax

    return isinstance(i, Tensor) and isinstance(i._value, jax.core.Tracer)


def _is_bool(i):
    return (isinstance(i, Tensor) and i.dtype is _dtypes.bool) or (isinstance(i, np.ndarray) and i.dtype == np.bool_)


def _ndim_of(i):
    return i.ndim


_INDEX = Op("index", lambda a, *idx, structure: a[_rebuild(structure, idx)])
_INDEX_PUT = Op("index_put", lambda a, v, *idx, structure: a.at[_rebuild(structure, idx)].set(v.astype(a.dtype)),
                backward_name="IndexPutBackward0")


def getitem(input, index):
    """input[index] with ints, slices, None, Ellipsis, integer tensors/lists and boolean masks."""
    structure, arrays = _parse(input.shape, index)
    if not arrays:
        return apply(_SLICE, [input], index=structure)
    return apply(_INDEX, [input] + arrays, structure=structure)


def setitem(input, index, value):
    """input[index] = value, recorded as an in-place op."""
    structure, arrays = _parse(input.shape, index)
    input._assign(apply(_INDEX_PUT, [input, value] + arrays, structure=structure))


def _gather_fn(a, idx, *, axis):
    a = a[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(idx.shape))]
    return jnp.take_along_axis(a, idx, axis=axis)


def _scatter_fn(a, idx, src, *, axis, reduce):
    grids = jnp.meshgrid(*[jnp.arange(n) for n in idx.shape], indexing="ij")
    grids[axis] = idx
    src = jnp.broadcast_to(src, idx.shape) if src.ndim == 0 else src[tuple(slice(0, n) for n in idx.shape)]
    at = a.at[tuple(grids)]
    return at.add(src.astype(a.dtype)) if reduce == "add" else at.set(src.astype(a.dtype))


_INDEX_SELECT = Op("index_select", lambda a, idx, *, axis: jnp.take(a, idx, axis=axis))
_GATHER = Op("gather", _gather_fn)
_SCATTER = Op("scatter", _scatter_fn)
_TAKE_ALONG = Op("take_along_dim", lambda a, idx, *, axis: jnp.take_along_axis(a, idx, axis=axis))
_MASKED_FILL = Op("masked_fill", lambda a, m, v: jnp.where(m, v.astype(a.dtype), a))


def _check_index(index, name):
    if not isinstance(index, Tensor) or index.dtype not in (_dtypes.int64, _dtypes.int32):
        raise RuntimeError(f"{name}(): Expected dtype int64 for index")


def index_select(input, dim, index):
    _check_index(index, "index_select")
    return apply(_INDEX_SELECT, [input, index], axis=_wrap_dim(dim, input.ndim))


def gather(input, dim, index):
    """out[i][j] = input[index[i][j]][j] for dim=0 (and so on)."""
    _check_index(index, "gather")
    return apply(_GATHER, [input, index], axis=_wrap_dim(dim, input.ndim))


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of `input` with `src` (or `value`) written at `index` along `dim`."""
    _check_index(index, "scatter")
    source = src if src is not None else value
    return apply(_SCATTER, [input, index, source], axis=_wrap_dim(dim, input.ndim), reduce=reduce)


def scatter_add(input, dim, index, src):
    _check_index(index, "scatter_add")
    return apply(_SCATTER, [input, index, src], axis=_wrap_dim(dim, input.ndim), reduce="add")


def take_along_dim(input, indices, dim=None):
    if dim is None:
        return apply(_TAKE_ALONG, [reshape(input, -1), reshape(indices, -1)], axis=0)
    return apply(_TAKE_ALONG, [input, indices], axis=_wrap_dim(dim, input.ndim))


def masked_fill(input, mask, value):
    """`value` where `mask` is True (mask broadcasts against input)."""
    if not isinstance(mask, Tensor) or mask.dtype is not _dtypes.bool:
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{getattr(mask, 'dtype', type(mask).__name__)}")
    return apply(_MASKED_FILL, [input, mask, value])


def masked_select(input, mask):
    """The elements of `input` where `mask` is True, as a 1-D tensor."""
    from .shape import expand

    shape = tuple(np.broadcast_shapes(tuple(input.shape), tuple(mask.shape)))
    return getitem(expand(input, shape), expand(mask, shape))


def nonzero(input, *, as_tuple=False):
    """Indices of the non-zero elements: an (n, ndim) int64 tensor, or a tuple of 1-D tensors."""
    idx = np.nonzero(np.asarray(input._value).reshape(input.shape or (1,)))
    if as_tuple:
        return tuple(Tensor._wrap(jnp.asarray(i, dtype=jnp.int64)) for i in idx)
    return Tensor._wrap(jnp.asarray(np.stack(idx, axis=1) if idx else np.zeros((0, 0)), dtype=jnp.int64))


def _sort_fn(a, *, axis, descending, k):
    idx = jnp.argsort(a, axis=axis, stable=True, descending=descending)
    if k is not None:
        idx = jnp.moveaxis(jnp.moveaxis(idx, axis, 0)[:k], 0, axis)
    return jnp.take_along_axis(a, idx, axis=axis), idx.astype(jnp.int64)


_SORT = Op("sort", _sort_fn, multi=True)


def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along `dim`; ties keep their order."""
    if input.ndim == 0:
        return values_indices["sort"](input, Tensor._wrap(jnp.zeros((), jnp.int64)))
    return values_indices["sort"](*apply(_SORT, [input], axis=_wrap_dim(dim, input.ndim), descending=descending, k=None))


def argsort(input, dim=-1, descending=False, stable=False):
    return sort(input, dim, descending, stable).indices


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """The k largest (or smallest) elements along `dim` and their indices."""
    d = _wrap_dim(dim, input.ndim)
    if not 0 <= k <= (input.shape[d] if input.ndim else 1):
        raise RuntimeError("selected index k out of range")
    return values_indices["topk"](*apply(_SORT, [input], axis=d, descending=largest, k=k))
