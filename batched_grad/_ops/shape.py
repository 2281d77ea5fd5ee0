"""Shape ops: views (reshape, permute, squeeze, expand, ...), joins and splits, flips, rolls and repeats."""
import math

import jax
import jax.numpy as jnp

from .. import _dtypes
from .._tensor import Tensor, _wrap_dim
from ._core import Op, apply


def _sizes(size):
    """Accept f(2, 3), f((2, 3)) and f([2, 3]) like torch."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return tuple(int(s) for s in size)


def _infer(shape, numel):
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if math.prod(shape) != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


_RESHAPE = Op("reshape", lambda a, *, shape: jnp.reshape(a, shape), linear=True, view=True,
              backward_name="ViewBackward0")
_PERMUTE = Op("permute", lambda a, *, axes: jnp.transpose(a, axes), linear=True, view=True)
_EXPAND = Op("expand", lambda a, *, shape: jnp.broadcast_to(a, shape), linear=True, view=True)
_SLICE = Op("slice", lambda a, *, index: a[decode_index(index)], linear=True, view=True, backward_name="SliceBackward0")


def encode_index(index):
    """A hashable form of a basic index (slices are not hashable before Python 3.12)."""
    return tuple(("slice", i.start, i.stop, i.step) if isinstance(i, slice) else i for i in index)


def decode_index(index):
    return tuple(slice(*i[1:]) if isinstance(i, tuple) and i[0] == "slice" else i for i in index)
_UNBIND = Op("unbind", lambda a, *, axis: tuple(jnp.moveaxis(a, axis, 0)), linear=True, view=True, multi=True)
_SPLIT = Op("split", lambda a, *, bounds, axis: tuple(
    jax.lax.slice_in_dim(a, lo, hi, axis=axis) for lo, hi in bounds), linear=True, view=True, multi=True,
    backward_name="SplitWithSizesBackward0")


def reshape(input, *shape):
    """A tensor with the same elements in `shape` (one entry may be -1)."""
    return apply(_RESHAPE, [input], shape=_infer(_sizes(shape), input.numel()))


view = reshape


def view_as(input, other):
    return reshape(input, other.shape)


def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return reshape(input, 1)
    s, e = _wrap_dim(start_dim, input.ndim), _wrap_dim(end_dim, input.ndim)
    shape = input.shape
    return reshape(input, shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])


def unflatten(input, dim, sizes):
    d = _wrap_dim(dim, input.ndim)
    sizes = _infer(tuple(sizes), input.shape[d])
    return reshape(input, input.shape[:d] + sizes + input.shape[d + 1:])


def squeeze(input, dim=None):
    """Drop size-1 dimensions (all, or those in `dim`)."""
    axes = range(input.ndim) if dim is None else [_wrap_dim(d, input.ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
    drop = {a for a in axes if input.ndim and input.shape[a] == 1}
    return reshape(input, tuple(s for i, s in enumerate(input.shape) if i not in drop))


def unsqueeze(input, dim):
    d = _wrap_dim(dim, input.ndim + 1)
    return reshape(input, input.shape[:d] + (1,) + input.shape[d:])


def permute(input, *dims):
    dims = tuple(_wrap_dim(d, input.ndim) for d in _sizes(dims))
    if sorted(dims) != list(range(input.ndim)):
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
                           f"of the desired ordering of dimensions i.e. input.dim() = {input.ndim} is not equal to "
                           f"len(dims) = {len(dims)}")
    return apply(_PERMUTE, [input], axes=dims)


def transpose(input, dim0, dim1):
    axes = list(range(input.ndim))
    if input.ndim:
        d0, d1 = _wrap_dim(dim0, input.ndim), _wrap_dim(dim1, input.ndim)
        axes[d0], axes[d1] = axes[d1], axes[d0]
    return apply(_PERMUTE, [input], axes=tuple(axes))


swapaxes = transpose


def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else input.view_as(input)


def movedim(input, source, destination):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    axes = tuple(jnp.moveaxis(jnp.arange(input.ndim), [_wrap_dim(s, input.ndim) for s in src],
                              [_wrap_dim(d, input.ndim) for d in dst]).tolist()) if input.ndim else ()
    return apply(_PERMUTE, [input], axes=axes)


def expand(input, *sizes):
    """Broadcast size-1 dimensions to `sizes` without copying (-1 keeps a dimension)."""
    sizes = _sizes(sizes)
    lead = len(sizes) - input.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({input.ndim})")
    shape = tuple(input.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    for i, s in enumerate(input.shape):
        if s != 1 and s != shape[i + lead]:
            raise RuntimeError(f"The expanded size of the tensor ({shape[i + lead]}) must match the existing size "
                               f"({s}) at non-singleton dimension {i + lead}.  Target sizes: {list(sizes)}.  Tensor "
                               f"sizes: {list(input.shape)}")
    return apply(_EXPAND, [input], shape=shape)


def expand_as(input, other):
    return expand(input, other.shape)


def broadcast_to(input, size):
    return expand(input, tuple(size))


def narrow(input, dim, start, length):
    d = _wrap_dim(dim, input.ndim)
    start = start + input.shape[d] if start < 0 else start
    return apply(_SLICE, [input], index=encode_index((slice(None),) * d + (slice(start, start + length),)))


def select(input, dim, index):
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {d}")
    return apply(_SLICE, [input], index=encode_index((slice(None),) * d + (index % size,)))


def unbind(input, dim=0):
    return apply(_UNBIND, [input], axis=_wrap_dim(dim, input.ndim))


def split(tensor, split_size_or_sections, dim=0):
    """Split into chunks of `split_size` (the last may be smaller) or of the listed sizes."""
    d = _wrap_dim(dim, tensor.ndim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        sizes = [min(step, n - lo) for lo in range(0, n, step)] if step else [n]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                               f"dimension {d}), but got split_sizes={sizes}")
    bounds, lo = [], 0
    for s in sizes:
        bounds.append((lo, lo + s))
        lo += s
    return apply(_SPLIT, [tensor], bounds=tuple(bounds), axis=d)


def chunk(input, chunks, dim=0):
    n = input.shape[_wrap_dim(dim, input.ndim)]
    return split(input, max(-(-n // chunks), 1) if n else 1, dim)


def _join_op(name, f):
    return Op(name, lambda *arrays, axis, dtype: f([a.astype(dtype) for a in arrays], axis=axis), linear=True)


_CAT = _join_op("cat", jnp.concatenate)
_STACK = _join_op("stack", jnp.stack)


def cat(tensors, dim=0):
    """Concatenate along an existing dimension (1-D empty tensors are skipped, as in torch)."""
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors)[:1]
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    dtype = _dtypes.result_type(*tensors)
    return apply(_CAT, tensors, axis=_wrap_dim(dim, tensors[0].ndim), dtype=dtype.np)


concat = concatenate = cat


def stack(tensors, dim=0):
    """Stack along a new dimension."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    dtype = _dtypes.result_type(*tensors)
    return apply(_STACK, tensors, axis=_wrap_dim(dim, tensors[0].ndim + 1), dtype=dtype.np)


def hstack(tensors):
    tensors = [atleast_1d(t) for t in tensors]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([t if t.ndim >= 2 else reshape(t, 1, -1) for t in tensors], 0)


def atleast_1d(t):
    return reshape(t, 1) if t.ndim == 0 else t


_FLIP = Op("flip", lambda a, *, axes: jnp.flip(a, axes), linear=True)
_ROLL = Op("roll", lambda a, *, shifts, axes: jnp.roll(a, shifts, axes), linear=True)
_TILE = Op("repeat", lambda a, *, reps: jnp.tile(a, reps), linear=True)


def flip(input, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return apply(_FLIP, [input], axes=tuple(_wrap_dim(d, input.ndim) for d in dims))


def roll(input, shifts, dims=None):
    if dims is None:
        return reshape(roll(flatten(input), shifts, 0), input.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return apply(_ROLL, [input], shifts=shifts, axes=tuple(_wrap_dim(d, input.ndim) for d in dims))


def repeat(input, *sizes):
    """Tile the tensor `sizes` times along each dimension (torch's Tensor.repeat)."""
    sizes = _sizes(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    return apply(_TILE, [input], reps=sizes)


def tile(input, dims):
    dims = tuple(dims)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


# ---- views written in place ---------------------------------------------------------------------

def _view_fn(chain):
    def f(base):
        for op, static, k in chain:
            out = op.fn(base, **dict(static))
            base = out[k] if op.multi else out
        return base

    return f


def _scatter_fn(base, src, *, chain):
    # the view is a selection of base's elements: replace that selection with src
    view_of = _view_fn(chain)
    view, pullback = jax.vjp(view_of, base)
    (old,) = pullback(view)
    (new,) = pullback(src.astype(base.dtype))
    return base - old + new


_SCATTER_INTO_VIEW = Op("copy_slices", _scatter_fn, linear=True, backward_name="CopySlices")


def scatter_into_view(base, src, chain):
    """The new value of `base` after its view `chain` was overwritten by `src` (recorded)."""
    return apply(_SCATTER_INTO_VIEW, [base, src], chain=chain)


def replay_view(base, chain):
    """Re-derive a view of `base` (after `base` changed in place)."""
    out = base
    for op, static, k in chain:
        res = apply(op, [out], **dict(static))
        out = res[k] if op.multi else res
    return out
