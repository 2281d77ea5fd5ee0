"""Indexing: __getitem__/__setitem__ (basic and advanced), gather/scatter, masks, nonzero, sort and topk."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._foreign import not_a_tensor
from .._tensor import Tensor, _wrap_dim, type_name
from .._vmap_levels import DYNAMIC_SHAPE, MASKED_SELECT_MASK, NO_RULE, refuse_dynamic_shape
from ._core import SAVES_INDICES, Op, apply
from ._cpu_selection import topk_order, unstable_sort_order
from ._index_parse import _concrete, _first_out_of_range, _parse
from .reduction import values_indices
from .shape import _SELECT, _SLICE, broadcast_shapes, decode_index, encode_index, expanded_shape, reshape, sum_to

# ---- __getitem__ / __setitem__ ------------------------------------------------------------------


def _rebuild(structure, arrays):
    return tuple(arrays[i[1]] if isinstance(i, tuple) and i[0] == "array" else i for i in decode_index(structure))


def _index_fn(a, *idx, structure):
    basic, advanced = structure
    a = a[decode_index(basic)]
    return a if advanced is None else a[_rebuild(advanced, idx)]


def _written(a, where, src, derivative=False):
    """a with src written at `where`: the value torch writes (the last of duplicates), whose forward-mode derivative
    is the tangents written the same way; or (`derivative`, the op's Op.derivative) the linear map whose VJP is
    torch's backward: every duplicate's source gets its position's gradient, the input none where overwritten."""
    if not derivative:
        return a.at[where].set(src)
    return a * jnp.ones_like(a).at[where].set(0) + jnp.zeros_like(a).at[where].add(src)


def writes(op_name, fn, *op_args, **op_params):
    """The Op of `fn`, a function writing through _written (its keyword `derivative`), with torch's backward."""
    return Op(op_name, fn, *op_args, derivative=functools.partial(fn, derivative=True), **op_params)


def _index_put_fn(a, v, *idx, structure, derivative=False):
    # index an array of flat positions to find the elements written
    positions = _index_fn(jnp.arange(a.size).reshape(a.shape), *idx, structure=structure)
    v = jnp.broadcast_to(v.astype(a.dtype), positions.shape)
    return _written(a.reshape(-1), (positions.reshape(-1),), v.reshape(-1), derivative).reshape(a.shape)


def _index_on_host(a, *idx, structure):
    return _index_fn(a, *idx, structure=structure)


def _index_host_vjp(ct, operands, avals, *, structure):
    """The gradient of input[index]: the cotangent added at the positions read (np.add.at: repeats accumulate)."""
    basic, advanced = structure
    grad = np.zeros(*avals[0])
    part = grad[decode_index(basic) + ((Ellipsis,) if Ellipsis not in decode_index(basic) else ())]  # a view
    np.add.at(part, _rebuild(advanced, operands[1:]), ct)
    return (grad,) + (None,) * (len(operands) - 1)


_BASIC = {"SliceBackward0": _SLICE, "SelectBackward0": _SELECT}
_BASIC.update(
    {
        name: Op(
            "slice", _SLICE.fn, linear=True, view=True, backward_name=name, host=_SLICE.host, host_vjp=_SLICE.host_vjp
        )
        for name in ("UnsqueezeBackward0", "AliasBackward0")
    }
)


@functools.lru_cache(maxsize=4096)
def _template(index, shape):
    """(template, positions) of an (encoded) basic index whose integers and partial slices' starts are operands:
    ("int", j) stands for the integer positions[j], ("range", j, span, step) for a slice of `span` elements from
    positions[j]. So x[i] or x[i:i + 2] for every i shares one kernel."""
    items, positions = [], []
    for i, dim in _with_dims(decode_index(index), len(shape)):
        if dim is None:
            items.append(i)
        elif type(i) is int:
            items.append(("int", len(positions)))
            positions.append(i)
        else:
            start, stop, step = i.indices(shape[dim])
            length = len(range(start, stop, step))
            if length in (0, shape[dim]):  # empty or whole: nothing to place
                items.append(i)
            else:
                items.append(("range", len(positions), (length - 1) * step + 1, step))
                positions.append(start)
    return encode_index(items), tuple(positions)


def _with_dims(items, ndim):
    """(item, the dimension it indexes) for each item of a basic index; None and Ellipsis index none."""
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    dim = 0
    for i in items:
        if i is Ellipsis:
            dim += ndim - consumed
        if i is None or i is Ellipsis:
            yield i, None
        else:
            yield i, dim
            dim += 1


def _cut(a, template, positions):
    """(a cut to the template's ranges, the index of the rest, the start of the cut in each dimension)."""
    index, starts = [], [0] * a.ndim
    for i, dim in _with_dims(decode_index(template), a.ndim):
        if isinstance(i, tuple) and i[0] == "range":
            _, j, span, step = i
            starts[dim] = positions[j]
            a = jax.lax.dynamic_slice_in_dim(a, positions[j], span, axis=dim)
            index.append(slice(None, None, step))
        else:
            index.append(positions[i[1]] if isinstance(i, tuple) else i)
    return a, tuple(index), starts


def _view_at(a, *positions, template):
    cut, index, _ = _cut(a, template, positions)
    return cut[index]


def _put_at(a, v, *positions, template):
    cut, index, starts = _cut(a, template, positions)
    cut = cut.at[index].set(v.astype(a.dtype))
    return jax.lax.dynamic_update_slice(a, cut, [jnp.asarray(s, jnp.int64) for s in starts])


def _view_step(name, operands, *, template):
    """The view step of a basic index with operand positions: the same index with the positions in it."""
    return _static_step(name, template, tuple(operands[1:]))


@functools.lru_cache(maxsize=4096)
def _static_step(name, template, positions):
    return _BASIC[name], (("index", encode_index(_placed(template, positions))),)


def _placed(template, positions):
    """The basic index of a template with its positions in it."""
    return tuple(
        [
            i
            if not isinstance(i, tuple)
            else positions[i[1]]
            if i[0] == "int"
            else slice(positions[i[1]], positions[i[1]] + i[2], i[3])
            for i in decode_index(template)
        ]
    )


def _view_on_host(a, *positions, template):
    # with an Ellipsis NumPy gives an element as a 0-d view of a's memory, not a copy: a write into a view of host
    # data reaches its base as torch's does (lean._shared_with_views)
    index = _placed(template, [int(p) for p in positions])
    return a[index if any([i is Ellipsis for i in index]) else (*index, Ellipsis)]


def _view_host_vjp(ct, operands, avals, *, template):
    grad = np.zeros(*avals[0])
    grad[_placed(template, [int(p) for p in operands[1:]])] = ct
    return (grad,) + (None,) * (len(operands) - 1)


_DYNAMIC_BASIC = {
    name: Op(
        op.name,
        _view_at,
        linear=True,
        view=True,
        view_step=functools.partial(_view_step, name),
        backward_name=name,
        host=_view_on_host,
        host_vjp=_view_host_vjp,
        inputs=1,  # the positions are numbers: torch's node has one edge
    )
    for name, op in _BASIC.items()
}
_INDEX = Op("index", _index_fn, linear=True, host=_index_on_host, host_vjp=_index_host_vjp)
_INDEX_PUT = writes("index_put", _index_put_fn, linear=True, backward_name="IndexPutBackward0")
_COPY_SLICES = writes("index_put", _index_put_fn, linear=True, backward_name="torch::autograd::CopySlices")
_DYNAMIC_COPY_SLICES = Op("index_put", _put_at, linear=True, backward_name="torch::autograd::CopySlices")


def getitem(input, index):
    """input[index] with ints, slices, None, Ellipsis, bools, integer tensors/lists and boolean masks."""
    structure, arrays, name = _parse(input.shape, index)
    if arrays:
        return apply(_INDEX, [input] + arrays, structure=structure)
    template, positions = _template(structure[0], tuple(input.shape))
    if not positions:
        return apply(_BASIC[name], [input], index=structure[0])
    return apply(_DYNAMIC_BASIC[name], [input, *positions], template=template)


def select(input, dim, index):
    """The slice at `index` of dimension `dim`, which is removed (input.select(0, i) is input[i])."""
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input.ndim)
    size, index = input.shape[d], int(index)
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {d}"
        )
    return getitem(input, (slice(None),) * d + (index % size,))


def _indexed_shape(shape, structure, arrays):
    if any(isinstance(a, jax.core.Tracer) for a in arrays):
        return jax.eval_shape(lambda *idx: _index_fn(jnp.zeros(shape), *idx, structure=structure), *arrays).shape
    return _index_fn(
        np.broadcast_to(np.zeros((), np.int8), shape), *[np.asarray(a) for a in arrays], structure=structure
    ).shape


def _masked_put_fn(a, v, mask):
    mask = mask.reshape(mask.shape + (1,) * (a.ndim - mask.ndim))
    return jnp.where(mask, v.astype(a.dtype), a)


# input[mask] = value, where the value broadcasts to the elements of one masked position: a `where`, whose shapes do
# not depend on how many elements are masked
_MASKED_PUT = Op("index_put", _masked_put_fn, linear=True, backward_name="IndexPutBackward0")


def _single_mask(index):
    """The boolean Tensor that is the whole index, if it is one (not a tracer, of at least one dimension)."""
    if isinstance(index, tuple) and len(index) == 1:
        index = index[0]
    if (
        isinstance(index, Tensor)
        and index.dtype is _dtypes.bool
        and index.ndim
        and not isinstance(index._v, jax.core.Tracer)
    ):
        return index
    return None


def _refuse_uint8_mask_fill(index, value):
    """torch writes a single value through an index whose only tensor is a mask with masked_fill_, which refuses a
    uint8 mask (a bool one is accepted)."""
    items = index if isinstance(index, tuple) else (index,)
    arrays = [i for i in items if isinstance(i, (Tensor, np.ndarray, list, tuple, range))]
    if len(arrays) != 1 or (isinstance(value, Tensor) and value.numel() != 1):
        return
    mask = arrays[0]
    if isinstance(mask, (Tensor, np.ndarray)) and mask.ndim and np.dtype(_host_dtype(mask)) == np.uint8:
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype unsigned char")


def _host_dtype(array):
    return array.dtype.np if isinstance(array, Tensor) else array.dtype


def setitem(input, index, value):
    """input[index] = value, recorded as an in-place op (CopySlices for basic indices, IndexPut otherwise)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        kind = "numpy.ndarray" if isinstance(value, np.ndarray) else type(value).__name__
        raise TypeError(f"can't assign a {kind} to a {type_name(input.dtype.np)}")
    _refuse_uint8_mask_fill(index, value)
    structure, arrays, _ = _parse(input.shape, index)
    target = tuple(_indexed_shape(tuple(input.shape), structure, arrays))
    vshape = tuple(value.shape) if isinstance(value, Tensor) else ()
    if arrays and isinstance(value, Tensor) and value.dtype is not input.dtype:
        raise RuntimeError(
            f"Index put requires the source and destination dtypes match, got "
            f"{input.dtype.type_name} for the destination and {value.dtype.type_name} "
            "for the source."
        )
    lead = 0
    while len(vshape) - lead > len(target) and vshape[lead] == 1:  # torch drops leading size-1 dims of the value
        lead += 1
    v = vshape[lead:]
    if arrays and any(i > len(target) or v[-i] not in (1, target[-i]) for i in range(1, len(v) + 1)):
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(vshape)} cannot be broadcast to indexing "
            f"result of shape {list(target)}"
        )
    if lead:
        value = reshape(value, v)
    if not arrays and isinstance(value, Tensor):
        expanded_shape(value, target)  # torch copies the value into the slice by expand: its errors
    mask = _single_mask(index)
    if mask is not None and len(v) <= input.ndim - mask.ndim:  # one value for every element masked: no new shape
        input._assign(apply(_MASKED_PUT, [input, value, mask]), "index_put_")
        return
    if arrays:
        input._assign(apply(_INDEX_PUT, [input, value] + arrays, structure=structure), "index_put_")
        return
    template, positions = _template(structure[0], tuple(input.shape))
    if positions:
        input._assign(apply(_DYNAMIC_COPY_SLICES, [input, value, *positions], template=template), "copy_")
    else:
        input._assign(apply(_COPY_SLICES, [input, value], structure=structure), "copy_")


# ---- gather / scatter family --------------------------------------------------------------------


def bools_as_integers(kernel):
    """`kernel` run on integers where its first operand is bool (JAX neither adds nor multiplies bools), its result
    made bool again: a sum of bools is their `or`, a product their `and`, as torch's bool kernels give."""

    @functools.wraps(kernel)
    def run(*operands, **params):
        if operands[0].dtype != jnp.bool_:
            return kernel(*operands, **params)
        operands = [x.astype(jnp.int32) if x.dtype == jnp.bool_ else x for x in operands]
        return kernel(*operands, **params) != 0

    return run


def on_vectors(kernel, *, promoted, like):
    """`kernel` seeing each 0-dim operand at a position in `promoted` as a 1-element vector, as torch's gather and
    scatter kernels do (ensure_nonempty_dim); its result takes the shape of operand `like`. Bool inputs are
    computed as integers (bools_as_integers)."""
    kernel = bools_as_integers(kernel)

    @functools.wraps(kernel)
    def run(*operands, **params):
        shape = operands[like].shape
        operands = [x.reshape(1) if k in promoted and x.ndim == 0 else x for k, x in enumerate(operands)]
        return kernel(*operands, **params).reshape(shape)

    return run


def _gather_fn(a, idx, *, axis):
    if idx.size == 0:
        return jnp.zeros(idx.shape, a.dtype)
    a = a[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(idx.shape))]
    return jnp.take_along_axis(a, idx, axis=axis)


def _scatter_fn(a, idx, src, *, axis, reduce, derivative=False):
    if idx.size == 0:
        return a
    grids = jnp.meshgrid(*[jnp.arange(n) for n in idx.shape], indexing="ij")
    grids[axis] = idx
    src = jnp.broadcast_to(src, idx.shape) if src.ndim == 0 else src[tuple(slice(0, n) for n in idx.shape)]
    if reduce is None:
        return _written(a, tuple(grids), src.astype(a.dtype), derivative)
    at = a.at[tuple(grids)]
    return {"add": at.add, "multiply": at.multiply}[reduce](src.astype(a.dtype))


def _take_along_fn(a, idx, *, axis, shape):
    in_shape = shape[:axis] + (a.shape[axis],) + shape[axis + 1 :]
    return jnp.take_along_axis(jnp.broadcast_to(a, in_shape), jnp.broadcast_to(idx, shape), axis=axis)


def _index_select_fn(a, idx, *, axis):
    if a.ndim == 0:
        return jnp.take(a.reshape(1), idx.reshape(-1), axis=0).reshape(())
    return jnp.take(a, idx.reshape(-1), axis=axis)


_INDEX_SELECT = Op("index_select", _index_select_fn, linear=True)
_GATHER = Op("gather", on_vectors(_gather_fn, promoted=(0, 1), like=1), linear=True)
_SCATTER = {
    name: writes("scatter", on_vectors(_scatter_fn, promoted=(0, 1), like=0), linear=True, backward_name=name)
    for name in ("ScatterBackward0", "ScatterBackward1", "ScatterAddBackward0")
}
_TAKE_ALONG = Op("take_along_dim", _take_along_fn, linear=True, backward_name="GatherBackward0")


def _check_index(index, message):
    if not isinstance(index, Tensor) or index.dtype not in (_dtypes.int64, _dtypes.int32):
        raise RuntimeError(message)


def _check_range(index, size, dim, error=RuntimeError):
    values = _concrete(index)
    bad = None if values is None else _first_out_of_range(values, size)
    if bad is None and values is not None and values.size and values.min() < 0:
        bad = int(values[values < 0].flat[0])
    if bad is not None:
        raise error(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def index_select(input, dim, index):
    """The entries of `input` at the 1-D `index` along `dim`."""
    _check_index(index, "index_select(): Expected dtype int32 or int64 for index")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = _wrap_dim(dim, input.ndim)
    if input.ndim == 0 and index.numel() != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {index.numel()} value(s)")
    values = _concrete(index)
    n = input.shape[d] if input.ndim else 1
    if values is not None and values.size and (values.min() < 0 or values.max() >= n):
        raise IndexError("index out of range in self")
    return apply(_INDEX_SELECT, [input, index], axis=d)


def _same_ndim(index, other, what):
    if max(index.ndim, 1) != max(other.ndim, 1):
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {what} tensor")


def gather(input, dim, index, *, sparse_grad=False):
    """out[i][j] = input[index[i][j]][j] for dim=0 (and so on). With sparse_grad=True torch makes input's gradient
    a sparse tensor; batched_grad has only dense tensors, so it is the same values, dense (x.grad.to_dense() is
    x.grad)."""
    if not isinstance(sparse_grad, bool):
        raise TypeError(f"gather(): argument 'sparse_grad' must be bool, not {type(sparse_grad).__name__}")
    _check_index(index, "gather(): Expected dtype int32/int64 for index")
    d = _wrap_dim(dim, input.ndim)
    if index.numel() == 0:  # torch skips every shape check: the result is index-shaped and empty
        return apply(_GATHER, [input, index], axis=d)
    _same_ndim(index, input, "input")
    for k, (i, s) in enumerate(zip(index.shape, input.shape)):
        if k != d and i > s:
            raise RuntimeError(
                f"Size does not match at dimension {k} expected index {list(index.shape)} to be no "
                f"larger than self {list(input.shape)} apart from dimension {d}"
            )
    _check_range(index, input.shape[d] if input.ndim else 1, d)
    return apply(_GATHER, [input, index], axis=d)


def check_scatter_shapes(input, d, index, source=None):
    """torch's shape checks of a scatter of the tensor `source` (None: a number) at `index` along `d` of `input`, a
    0-dim operand counting as a 1-element vector; an empty index passes them all."""
    if index.numel() == 0:
        return
    _same_ndim(index, input, "self")
    for k, i in enumerate(index.shape):
        if source is not None and k >= max(source.ndim, 1):
            _wrap_dim(k, source.ndim)  # torch reads src.size(k) first: IndexError, dimension out of range
        if (k != d and i > input.shape[k]) or (source is not None and i > (source.shape[k] if source.ndim else 1)):
            src = f" and to be no larger size than src {list(source.shape)}" if source is not None else ""
            raise RuntimeError(
                f"Expected index {list(index.shape)} to be no larger than self {list(input.shape)} "
                f"apart from dimension {d}{src}"
            )
    if source is not None:
        _same_ndim(index, source, "src")


def _scatter(name, input, dim, index, source, reduce):
    _check_index(index, f"{name}(): Expected dtype int32/int64 for index")
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    d = _wrap_dim(dim, input.ndim)
    is_tensor = isinstance(source, Tensor)
    if is_tensor and source.dtype is not input.dtype:
        raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
    check_scatter_shapes(input, d, index, source if is_tensor else None)
    _check_range(index, input.shape[d] if input.ndim else 1, d)
    backward = (
        "ScatterAddBackward0" if name == "scatter_add" else "ScatterBackward0" if is_tensor else "ScatterBackward1"
    )
    return apply(_SCATTER[backward], [input, index, source], axis=d, reduce=reduce)


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of `input` with `src` (or the number `value`) written at `index` along `dim`."""
    source = value if src is None else src
    if not isinstance(source, (Tensor, int, float, complex, np.number)):
        raise TypeError(
            f"scatter(): expected `src` to be a Tensor or `value` a number, but got {type(source).__name__}"
        )
    return _scatter("scatter", input, dim, index, source, reduce)


def scatter_add(input, dim, index, src):
    """A copy of `input` with `src` added at `index` along `dim` (repeated indices accumulate)."""
    if not isinstance(src, Tensor):
        raise not_a_tensor("scatter_add", "src", src, 4)
    return _scatter("scatter_add", input, dim, index, src, "add")


def take_along_dim(input, indices, dim=None):
    """input's values at `indices` along `dim` (input and indices broadcast against each other elsewhere)."""
    if indices.dtype is not _dtypes.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got {indices.dtype.type_name}")
    if dim is None:
        input, indices, d = reshape(input, -1), reshape(indices, -1), 0
    else:
        if input.ndim != indices.ndim:
            raise RuntimeError(
                f"torch.take_along_dim(): input and indices should have the same number of "
                f"dimensions, but got {input.ndim} dimensions for input, and {indices.ndim} "
                "dimensions for indices"
            )
        d = _wrap_dim(dim, input.ndim)
        if input.ndim == 0:
            raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    sizes = list(input.shape)
    sizes[d] = indices.shape[d]
    shape = broadcast_shapes(sizes, indices.shape)
    return apply(_TAKE_ALONG, [input, indices], axis=d, shape=shape)


# ---- masks --------------------------------------------------------------------------------------

_MASKED_FILL = {
    name: Op("masked_fill", lambda a, m, v: jnp.where(m, v.astype(a.dtype), a), linear=True, backward_name=name)
    for name in ("MaskedFillBackward0", "MaskedFillBackward1")
}


def _masked_select_host_vjp(ct, operands, avals, *, shape):
    grad = np.zeros(shape, ct.dtype)
    grad[tuple(operands[1:])] = ct  # the positions of a mask: no repeats
    return (sum_to(grad, avals[0][0]),) + (None,) * (len(operands) - 1)


_MASKED_SELECT = Op(
    "masked_select",
    lambda a, *idx, shape: jnp.broadcast_to(a, shape)[idx],
    linear=True,
    host=lambda a, *idx, shape: np.broadcast_to(a, shape)[idx],
    host_vjp=_masked_select_host_vjp,
)


def masked_fill(input, mask, value):
    """`value` where `mask` is True (mask and input broadcast against each other)."""
    if not isinstance(mask, Tensor) or mask.dtype is not _dtypes.bool:
        raise RuntimeError(
            "masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{mask.dtype.cpp_name if isinstance(mask, Tensor) else type(mask).__name__}"
        )
    is_tensor = isinstance(value, Tensor)
    if is_tensor and value.ndim:
        raise RuntimeError(
            f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.ndim} dimension(s)."
        )
    broadcast_shapes(mask.shape, input.shape)
    return apply(_MASKED_FILL["MaskedFillBackward1" if is_tensor else "MaskedFillBackward0"], [input, mask, value])


def masked_select(input, mask):
    """The elements of `input` where `mask` is True, as a 1-D tensor (the two broadcast)."""
    if not isinstance(mask, Tensor) or mask.dtype is not _dtypes.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    refuse_dynamic_shape(mask, "masked_select", MASKED_SELECT_MASK)
    shape = broadcast_shapes(input.shape, mask.shape) or (1,)
    where = np.nonzero(np.broadcast_to(np.asarray(mask._value), shape))
    return apply(_MASKED_SELECT, [input] + [w.astype(np.int64) for w in where], shape=shape)


def nonzero(input, *, as_tuple=False):
    """Indices of the non-zero elements: an (n, ndim) int64 tensor, or a tuple of 1-D tensors."""
    refuse_dynamic_shape(input, "nonzero_numpy" if as_tuple else "nonzero", NO_RULE if as_tuple else DYNAMIC_SHAPE)
    a = np.asarray(input._value)
    if as_tuple:
        return tuple(Tensor._wrap(i.astype(np.int64)) for i in np.nonzero(a.reshape(a.shape or (1,))))
    return Tensor._wrap(np.argwhere(a).astype(np.int64))  # host data, moved to the device when first used


# ---- sorting ------------------------------------------------------------------------------------


def _sort_fn(a, *, axis, descending, k):
    if a.ndim == 0:
        values, idx = _sort_fn(a[None], axis=0, descending=descending, k=k)
        return values[0], idx[0]
    idx = jnp.argsort(a, axis=axis, stable=True, descending=descending)
    if k is not None:
        idx = jnp.moveaxis(jnp.moveaxis(idx, axis, 0)[:k], 0, axis)
    return jnp.take_along_axis(a, idx, axis=axis), idx.astype(jnp.int64)


_SORT = Op("sort", _sort_fn, multi=True, torch_saves=SAVES_INDICES)  # torch's derivative reads the indices
_TOPK = Op("topk", _sort_fn, multi=True, torch_saves=SAVES_INDICES)


def _values_at(a, idx, *, axis):
    return jnp.take_along_axis(a, idx, axis=axis), idx


# sort and topk with their indices chosen on the host (the orders of torch's CPU kernels, _cpu_selection.py)
_SORT_AT = Op("sort", _values_at, multi=True, torch_saves=SAVES_INDICES)
_TOPK_AT = Op("topk", _values_at, multi=True, torch_saves=SAVES_INDICES)
# above this many elements an unstable sort keeps equal elements in their order (the host replay is Python)
UNSTABLE_SORT_LIMIT = 1 << 16


def _rows_with_ties(input, axis):
    """`input`'s values with `axis` moved last where some row holds equal elements (two nan count as equal); None
    where none does, while a transform traces it, or past UNSTABLE_SORT_LIMIT elements."""
    values = None if not input.ndim or input.numel() > UNSTABLE_SORT_LIMIT else _concrete(input)
    if values is None or values.dtype == np.bool_:
        return None
    rows = np.moveaxis(values, axis, -1)
    ordered = np.sort(rows, axis=-1)
    ties = (ordered[..., 1:] == ordered[..., :-1]).any()
    if rows.dtype.kind in "fc":
        ties = ties or (np.isnan(rows).sum(-1) > 1).any()
    return rows if ties else None


def _unstable_sort_order(input, axis, descending):
    """The indices of torch's std::sort where `input` has equal elements along `axis` (else a stable sort gives
    them); None where _rows_with_ties finds none."""
    rows = _rows_with_ties(input, axis)
    return None if rows is None else np.moveaxis(unstable_sort_order(rows, bool(descending)), -1, axis)


def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along `dim`; with stable=True ties keep their order, else they take the order torch's
    CPU sort gives them (_unstable_sort_order)."""
    d = _wrap_dim(dim, input.ndim)
    order = None if stable else _unstable_sort_order(input, d, descending)
    if order is not None:
        return values_indices["sort"](*apply(_SORT_AT, [input, order], axis=d))
    return values_indices["sort"](*apply(_SORT, [input], axis=d, descending=bool(descending), k=None))


def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort `input` along `dim` (sort(...).indices)."""
    return sort(input, dim, descending, stable).indices


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """The k largest (or smallest) elements along `dim` and their indices: in order, equal elements where torch's CPU
    kernel places them, or with sorted=False in the order that kernel leaves them (_cpu_selection.py; in order, equal
    elements first to last, while a transform traces the values)."""
    d = _wrap_dim(dim, input.ndim)
    if not 0 <= k <= (input.shape[d] if input.ndim else 1):
        raise RuntimeError("selected index k out of range")
    if sorted:
        rows = _rows_with_ties(input, d)
    else:
        values = None if not input.ndim else _concrete(input)
        rows = None if values is None or values.dtype == np.bool_ else np.moveaxis(values, d, -1)
    if rows is not None:
        order = topk_order(rows, int(k), bool(largest), bool(sorted))
        return values_indices["topk"](*apply(_TOPK_AT, [input, np.moveaxis(order, -1, d)], axis=d))
    return values_indices["topk"](*apply(_TOPK, [input], axis=d, descending=bool(largest), k=int(k)))
