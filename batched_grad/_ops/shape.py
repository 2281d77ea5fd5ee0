"""Shape ops: views (reshape, permute, squeeze, expand, ...), joins and splits, flips, rolls and repeats."""

import math
import operator

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._autocast import autocast_policy
from .._grad_mode import is_recording, is_view_replay_enabled
from .._inplace import scatter_through
from .._int_args import int_or_ints, sizes_also_by_keyword
from .._tensor import Tensor, _wrap_dim, type_string
from .._transform_levels import in_functionalize
from .._vmap_levels import is_batched
from ._core import Op, apply


def _sizes(size):
    """Accept f(2, 3), f((2, 3)) and f([2, 3]) like torch."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    try:
        return tuple(operator.index(s) for s in size)
    except TypeError:
        raise TypeError(f"size must be a tuple of ints, but got {tuple(type(s).__name__ for s in size)}") from None


def _dims(dims):
    return int_or_ints(dims)


def _check_unique(dims):
    for d in dims:
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")


def broadcast_shapes(a, b):
    """torch's infer_size: the broadcast of two shapes, with torch's message when they do not broadcast."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    # torch compares from the last dimension, so the mismatch it names is the rightmost one
    for i in reversed(range(n)):
        x, y = a[i], b[i]
        if x != y and x != 1 and y != 1:
            raise RuntimeError(
                f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton dimension {i}"
            )
    return tuple(y if x == 1 else x for x, y in zip(a, b))


def _infer(shape, numel):
    """Resolve one -1 in `shape` so that it holds `numel` elements (torch's infer_size)."""
    for i, s in enumerate(shape):
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {list(shape)}")
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0:
            raise RuntimeError(
                f"cannot reshape tensor of 0 elements into shape {list(shape)} because the "
                "unspecified dimension size -1 can be any value and is ambiguous"
            )
        if numel % known == 0:
            shape = tuple(numel // known if s == -1 else s for s in shape)
    if math.prod(shape) != numel or -1 in shape:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def sum_to(a, shape, kept=0):
    """`a` (a NumPy array) summed down to `shape`, which broadcasts to its shape: the gradient of a broadcast. With
    `kept`, its first `kept` axes (rows of batched cotangents) are kept: `shape` begins with their sizes."""
    lead = a.ndim - len(shape)
    axes = tuple(range(kept, kept + lead))
    axes += tuple(kept + lead + i for i, n in enumerate(shape[kept:]) if n == 1 and a.shape[kept + lead + i] != 1)
    return a.sum(axis=axes).reshape(shape) if axes else a


# Shape-only ops run on the host on the CPU backend (Op.host): a new shape compiles no kernel there. Their gradients
# are the inverse moves of the cotangent.
def _reshape_host_vjp(ct, operands, avals, *, shape):
    return (ct.reshape(avals[0][0]),)


def _permute_host_vjp(ct, operands, avals, *, axes):
    return (np.transpose(ct, np.argsort(axes)),)


def _expand_host_vjp(ct, operands, avals, *, shape):
    return (sum_to(ct, avals[0][0]),)


def _index_host(a, *, index):
    return a[decode_index(index)]


def _slice_host_vjp(ct, operands, avals, *, index):
    grad = np.zeros(*avals[0])
    grad[decode_index(index)] = ct
    return (grad,)


def _view_op(backward_name, view=True):
    return Op(
        "reshape",
        lambda a, *, shape: jnp.reshape(a, shape),
        linear=True,
        view=view,
        backward_name=backward_name,
        diagonal=True,
        host=lambda a, *, shape: np.reshape(a, shape),
        host_vjp=_reshape_host_vjp,
    )


_UNSAFE_VIEW = _view_op("UnsafeViewBackward0", view=False)  # the reshape of a copy: torch tracks no view
# forward_ad's make_dual and unpack_dual primal: a view for reverse mode, but none for forward mode (as torch's
# _make_dual and _fw_primal): its tangent is its own, and an in-place write into it leaves its base's alone
PRIMAL_VIEW = _view_op("ViewBackward0")


# reshape-like views differ only in the name torch gives their backward
_RESHAPE = {
    name: _view_op(name)
    for name in (
        "ViewBackward0",
        "SqueezeBackward0",
        "SqueezeBackward1",
        "SqueezeBackward2",
        "UnsqueezeBackward0",
        "AliasBackward0",
        "ReshapeAliasBackward0",  # reshape's view of an input that is not contiguous
        # the in-place forms (squeeze_, unsqueeze_)
        "SqueezeBackward3",
        "SqueezeBackward4",
        "SqueezeBackward5",
        "UnsqueezeBackward1",
        # functionalize's write-back of an input's new shape (torch's as_strided_)
        "AsStridedBackward0",
    )
}
_PERMUTE = {
    name: Op(
        "permute",
        lambda a, *, axes: jnp.transpose(a, axes),
        linear=True,
        view=True,
        backward_name=name,
        host=lambda a, *, axes: np.transpose(a, axes),
        host_vjp=_permute_host_vjp,
    )
    for name in ("PermuteBackward0", "TransposeBackward0", "TBackward0", "TransposeBackward1", "TBackward1")
}
_EXPAND = Op(
    "expand",
    lambda a, *, shape: jnp.broadcast_to(a, shape),
    linear=True,
    view=True,
    host=lambda a, *, shape: np.broadcast_to(a, shape),
    host_vjp=_expand_host_vjp,
)
_SLICE = Op(
    "slice",
    lambda a, *, index: a[decode_index(index)],
    linear=True,
    view=True,
    backward_name="SliceBackward0",
    host=_index_host,
    host_vjp=_slice_host_vjp,
)
_SELECT = Op(
    "select",
    lambda a, *, index: a[decode_index(index)],
    linear=True,
    view=True,
    backward_name="SelectBackward0",
    host=_index_host,
    host_vjp=_slice_host_vjp,
)


def encode_index(index):
    """A hashable form of a basic index (slices are not hashable before Python 3.12)."""
    return tuple(("slice", i.start, i.stop, i.step) if isinstance(i, slice) else i for i in index)


def decode_index(index):
    return tuple(slice(*i[1:]) if isinstance(i, tuple) and i[0] == "slice" else i for i in index)


_UNBIND = Op("unbind", lambda a, *, axis: tuple(jnp.moveaxis(a, axis, 0)), linear=True, view=True, multi=True)
_SPLIT = {
    name: Op(
        "split",
        lambda a, *, bounds, axis: tuple(jax.lax.slice_in_dim(a, lo, hi, axis=axis) for lo, hi in bounds),
        linear=True,
        view=True,
        multi=True,
        backward_name=name,
    )
    for name in ("SplitBackward0", "SplitWithSizesBackward0", "UnsafeSplitBackward0", "UnsafeSplitWithSizesBackward0")
}


def _reshaped(input, shape, name="ViewBackward0"):
    return apply(_RESHAPE[name], [input], shape=tuple(shape))


@sizes_also_by_keyword("shape")
def reshape(input, *shape):
    """A tensor with the same elements in `shape` (one entry may be -1): a view where the input's strides allow one,
    else (as torch) a reshaped copy that writes do not share."""
    return _reshaped_or_copied(input, _infer(_sizes(shape), input.numel()))


def _reshaped_or_copied(input, shape):
    from .._layout import may_be_strided

    if not input.numel() or not may_be_strided(input):
        return _reshaped(input, shape)
    if not _viewable(input, shape):
        from . import clone

        return apply(_UNSAFE_VIEW, [clone(input)], shape=tuple(shape))
    from .._layout import is_contiguous

    return _reshaped(input, shape, "ViewBackward0" if is_contiguous(input) else "ReshapeAliasBackward0")


def _view_overload(shape, size, dtype):
    # torch's keyword forms, each alone: view(size=...) and view(dtype=...)
    if shape or (size is not None and dtype is not None):
        raise TypeError(
            "view() received an invalid combination of arguments: give the shape, size=(...) or dtype=... alone"
        )
    if dtype is not None:
        return (dtype,)
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"view(): argument 'size' must be tuple of ints, not {type(size).__name__}")
    return (size,)


def view(input, *shape, size=None, dtype=None):
    """Like reshape, refused as torch refuses it where the input's strides (a transpose's, a strided slice's) cannot
    give the new shape without a copy. The shape may be given as size=(...)."""
    if size is not None or dtype is not None:
        shape = _view_overload(shape, size, dtype)
    if len(shape) == 1 and isinstance(shape[0], _dtypes.dtype):
        raise NotImplementedError(
            "view(dtype), which reinterprets the bits of the elements, is not supported; "
            "to(dtype) converts their values"
        )
    shape = _infer(_sizes(shape), input.numel())
    if input.numel() and not _viewable(input, shape):
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans across "
            "two contiguous subspaces). Use .reshape(...) instead."
        )
    return _reshaped(input, shape)


def _viewable(input, shape):
    """torch's computeStride: whether each run of the new shape falls inside one chunk of the input's dims that
    lies evenly spaced in storage."""
    from .._layout import _view_layout

    strides = _view_layout(input)[1]
    if strides is None or input.ndim == 0:
        return True
    sizes, view_d, chunk_stride = tuple(input.shape), len(shape) - 1, strides[-1]
    tensor_numel = view_numel = 1
    for d in reversed(range(len(sizes))):
        tensor_numel *= sizes[d]
        if d == 0 or (sizes[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_stride):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return False
            if d > 0:
                chunk_stride, tensor_numel, view_numel = strides[d - 1], 1, 1
    return view_d == -1


def view_as(input, other):
    """A view of `input` with `other`'s shape."""
    return view(input, other.shape)


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dimensions start_dim..end_dim into one (a 0-dim input becomes 1-D)."""
    if input.ndim == 0:
        _wrap_dim(start_dim, 1), _wrap_dim(end_dim, 1)  # a scalar's dims are -1 or 0
        return _reshaped(input, (1,))
    s, e = _wrap_dim(start_dim, input.ndim), _wrap_dim(end_dim, input.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = input.shape
    return _reshaped_or_copied(input, shape[:s] + (math.prod(shape[s : e + 1]),) + shape[e + 1 :])


def unflatten(input, dim, sizes):
    """Split dimension `dim` into `sizes` (one entry may be -1)."""
    d = _wrap_dim(dim, input.ndim)
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = input.shape[d] if input.ndim else 1
    try:
        sizes = _infer(sizes, n)
    except RuntimeError as e:
        if "inferred" in str(e):
            raise RuntimeError(f"unflatten got an unexpected error:\n{e}") from None
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {d} "
            f"({n}) in the input tensor"
        ) from None
    return _reshaped(input, input.shape[:d] + sizes + input.shape[d + 1 :])


def squeeze(input, dim=None):
    """Drop size-1 dimensions (all, or those in `dim`)."""
    name = "SqueezeBackward0" if dim is None else "SqueezeBackward1" if isinstance(dim, int) else "SqueezeBackward2"
    if dim is not None and input.ndim == 0 and is_batched(input._v):  # torch's batching rule's own check and words
        dims = list(_dims(dim))
        if dims not in ([], [0]):
            raise RuntimeError(f"Dimension is out of range (expected to be in range of [-1, 0], but got {dims}")
    return _reshaped(input, squeezed_shape(input, dim), name)


def squeezed_shape(input, dim):
    """The shape of squeeze(input, dim)."""
    axes = range(input.ndim) if dim is None else [_wrap_dim(d, input.ndim) for d in _dims(dim)]
    drop = {a for a in axes if input.ndim and input.shape[a] == 1}
    return tuple(s for i, s in enumerate(input.shape) if i not in drop)


def unsqueeze(input, dim):
    """A view with a size-1 dimension inserted at `dim`."""
    return _reshaped(input, unsqueezed_shape(input, dim), "UnsqueezeBackward0")


def unsqueezed_shape(input, dim):
    """The shape of unsqueeze(input, dim)."""
    d = _wrap_dim(dim, input.ndim + 1)
    return input.shape[:d] + (1,) + input.shape[d:]


def _permuted(input, axes, name="PermuteBackward0"):
    return apply(_PERMUTE[name], [input], axes=tuple(axes))


@sizes_also_by_keyword("dims")
def permute(input, *dims):
    """A view with the dimensions reordered as `dims`."""
    dims = _sizes(dims)
    if len(dims) != input.ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
            f"of the desired ordering of dimensions i.e. input.dim() = {input.ndim} is not equal to "
            f"len(dims) = {len(dims)}"
        )
    dims = tuple(_wrap_dim(d, input.ndim) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return _permuted(input, dims)


def transpose(input, dim0, dim1):
    """A view with dimensions `dim0` and `dim1` swapped."""
    axes = transposed_axes(input, dim0, dim1)
    if not axes and is_batched(input._v):  # torch's batching rule returns a row of scalars as it is
        return input
    return _permuted(input, axes, "TransposeBackward0")


def transposed_axes(input, dim0, dim1):
    """The axes (of permute) of transpose(input, dim0, dim1)."""
    axes = list(range(input.ndim))
    d0, d1 = _wrap_dim(dim0, input.ndim), _wrap_dim(dim1, input.ndim)
    if input.ndim:
        axes[d0], axes[d1] = axes[d1], axes[d0]
    return axes


def swapaxes(input, axis0, axis1):
    """Alias of transpose."""
    return transpose(input, axis0, axis1)


def t(input):
    """The transpose of a matrix; 0-D and 1-D tensors are returned as they are."""
    axes = matrix_transposed_axes(input, "t()")
    if not axes and is_batched(input._v):  # as transpose's batching rule
        return input
    return _permuted(input, axes, "TBackward0")


def matrix_transposed_axes(input, name):
    """The axes (of permute) of t(input); `name` is the function's in torch's error for more than 2 dimensions."""
    if input.ndim > 2:
        raise RuntimeError(f"{name} expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return tuple(reversed(range(input.ndim)))


def movedim(input, source, destination):
    """Move the dimension(s) `source` to position(s) `destination`, keeping the others' order."""
    n = input.ndim
    src, dst = [_wrap_dim(d, n) for d in _dims(source)], [_wrap_dim(d, n) for d in _dims(destination)]
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(_dims(source))} dims) should "
            f"contain the same number of dims as destination ({list(_dims(destination))} dims)"
        )
    for name, given, wrapped in (("source", source, src), ("destination", destination, dst)):
        if len(set(wrapped)) != len(wrapped):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(_dims(given))})")
    rest = iter(d for d in range(n) if d not in src)
    placed = dict(zip(dst, src))
    return _permuted(input, [placed[i] if i in placed else next(rest) for i in range(n)])


@sizes_also_by_keyword("size")
def expand(input, *sizes):
    """Broadcast size-1 dimensions to `sizes` without copying (-1 keeps a dimension)."""
    return apply(_EXPAND, [input], shape=expanded_shape(input, _sizes(sizes)))


def expanded_shape(input, sizes):
    """The shape of expand(input, *sizes), or torch's error when the sizes do not fit."""
    lead = len(sizes) - input.ndim
    if lead < 0:
        raise RuntimeError(
            f"expand({type_string(input.dtype.np)}{{{list(input.shape)}}}, size={list(sizes)}): the "
            f"number of sizes provided ({len(sizes)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({input.ndim})"
        )
    for i, s in enumerate(sizes[:lead]):
        if s < 0:
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) isn't allowed in a leading, non-existing dimension {i}"
            )
    shape = tuple(input.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    for i, s in reversed(list(enumerate(input.shape))):  # torch checks the last dims first
        if s != 1 and s != shape[i + lead]:
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[i + lead]}) must match the existing size "
                f"({s}) at non-singleton dimension {i + lead}.  Target sizes: {list(sizes)}.  Tensor "
                f"sizes: {list(input.shape)}"
            )
    return shape


def expand_as(input, other):
    """expand(input, other.shape): broadcast to `other`'s shape without copying."""
    return expand(input, other.shape)


def broadcast_to(input, size):
    """expand(input, size): broadcast to `size` without copying."""
    return expand(input, tuple(size))


def narrow(input, dim, start, length):
    """A view of `length` elements of dimension `dim` starting at `start`."""
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input.ndim)
    n, start, length = input.shape[d], int(start), int(length)
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    start = start + n if start < 0 else start
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return apply(_SLICE, [input], index=encode_index((slice(None),) * d + (slice(start, start + length),)))


def unbind(input, dim=0):
    """The slices along `dim`, as a tuple of tensors without that dimension."""
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return apply(_UNBIND, [input], axis=_wrap_dim(dim, input.ndim))


def _split(tensor, sizes, d, name):
    bounds, lo = [], 0
    for s in sizes:
        bounds.append((lo, lo + s))
        lo += s
    return apply(_SPLIT[name], [tensor], bounds=tuple(bounds), axis=d)


def split(tensor, split_size_or_sections, dim=0):
    """Split into chunks of `split_size` (the last may be smaller) or of the listed sizes."""
    return split_named(tensor, split_size_or_sections, dim, "Split")


def split_named(tensor, split_size_or_sections, dim, kind):
    """split, its outputs' node named `kind`Backward0, or `kind`WithSizesBackward0 for listed sizes."""
    d = _wrap_dim(dim, tensor.ndim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes):
            raise RuntimeError(
                f"split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={sizes}"
            )
        if sum(sizes) != n:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                f"dimension {d}), but got split_sizes={sizes}"
            )
        return _split(tensor, sizes, d, f"{kind}WithSizesBackward0")
    step = int(split_size_or_sections)
    if step < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={step}")
    if step == 0 and n:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
    sizes = [min(step, n - lo) for lo in range(0, n, step)] if n else [0]
    return _split(tensor, sizes, d, f"{kind}Backward0")


def split_method(self, split_size, dim=0):
    """Tensor.split: as torch.split, but torch's method names its sizes `split_size`."""
    return split(self, split_size, dim)


split_method.__name__, split_method.__qualname__ = "split", "Tensor.split"


def chunk(input, chunks, dim=0):
    """Split into `chunks` pieces of equal size along `dim` (the last may be smaller, and fewer may come)."""
    return chunk_named(input, chunks, dim, "Split")


def chunk_named(input, chunks, dim, kind):
    """chunk, its outputs' node named as split_named's of `kind`."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = _wrap_dim(dim, input.ndim)
    n = input.shape[d]
    if n == 0:
        return _split(input, [0] * chunks, d, f"{kind}WithSizesBackward0")
    return split_named(input, -(-n // chunks), d, kind)


def _join_op(name, f, host_f, host_vjp):
    return Op(
        name,
        lambda *arrays, axis, dtype: f([a.astype(dtype) for a in arrays], axis=axis),
        linear=True,
        host=lambda *arrays, axis, dtype: host_f([a.astype(dtype, copy=False) for a in arrays], axis=axis),
        host_vjp=host_vjp,
    )


def _cat_host_vjp(ct, operands, avals, *, axis, dtype):
    ends = np.cumsum([shape[axis] for shape, _ in avals])
    return np.split(ct, ends[:-1], axis=axis)


def _stack_host_vjp(ct, operands, avals, *, axis, dtype):
    return [np.take(ct, i, axis=axis) for i in range(len(avals))]


_CAT = _join_op("cat", jnp.concatenate, np.concatenate, _cat_host_vjp)
_STACK = _join_op("stack", jnp.stack, np.stack, _stack_host_vjp)


def _tensor_list(name, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(
            f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, not {type(tensors).__name__}"
        )
    return list(tensors)


@autocast_policy("promote")
def cat(tensors, dim=0):
    """Concatenate along an existing dimension (1-D empty tensors are skipped, as in torch)."""
    tensors = _tensor_list("cat", tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    kept = [(i, t) for i, t in enumerate(tensors) if t.shape != (0,)] or [(0, tensors[0])]
    first = kept[0][1]
    d = _wrap_dim(dim, first.ndim)
    for i, t in kept[1:]:
        if t.ndim != first.ndim:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {first.ndim} and {t.ndim}")
        for k, (x, y) in enumerate(zip(first.shape, t.shape)):
            if k != d and x != y:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size {x} but got "
                    f"size {y} for tensor number {i} in the list."
                )
    dtype = _dtypes.result_type(*tensors)
    operands = [t for _, t in kept]
    if len(kept) < len(tensors) and any(t.requires_grad for t in tensors):
        # a skipped tensor that requires grad stays an input of the node (the result requires grad through it), as
        # an empty block of the others' shape
        empty = first.shape[:d] + (0,) + first.shape[d + 1 :]
        operands = [t if t.shape != (0,) or t is first else t.reshape(empty) for t in tensors]
    return apply(_CAT, operands, axis=d, dtype=dtype.np)


def concat(tensors, dim=0):
    """Alias of cat."""
    return cat(tensors, dim)


concatenate = concat


@autocast_policy("promote")
def stack(tensors, dim=0):
    """Stack along a new dimension."""
    tensors = _tensor_list("stack", tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at "
                f"entry 0 and {list(t.shape)} at entry {i}"
            )
    dtype = _dtypes.result_type(*tensors)
    return apply(_STACK, tensors, axis=_wrap_dim(dim, tensors[0].ndim + 1), dtype=dtype.np)


def hstack(tensors):
    """Concatenate horizontally: along dim 1, or dim 0 for 1-D tensors (0-D ones become 1-D)."""
    tensors = [_reshaped(t, (1,)) if t.ndim == 0 else t for t in _tensor_list("hstack", tensors)]
    return cat(tensors, 0 if tensors and tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """Concatenate vertically: along dim 0, with 0-D and 1-D tensors made (1, n) rows first."""
    return cat([t if t.ndim >= 2 else _reshaped(t, (1, t.numel())) for t in _tensor_list("vstack", tensors)], 0)


_FLIP = Op("flip", lambda a, *, axes: jnp.flip(a, axes), linear=True)
_ROLL = Op("roll", lambda a, *, shifts, axes: jnp.roll(a, shifts, axes), linear=True)
_TILE = Op("repeat", lambda a, *, reps: jnp.tile(a, reps), linear=True)


def flip(input, dims):
    """Reverse the order of the elements along each dimension in `dims`."""
    dims = tuple(_wrap_dim(d, input.ndim) for d in _dims(dims))
    _check_unique(dims)
    return apply(_FLIP, [input], axes=dims if input.ndim else ())


def roll(input, shifts, dims=None):
    """Shift elements cyclically by `shifts` along `dims` (the flattened tensor when dims is None)."""
    shifts, dims = _dims(shifts), () if dims is None else _dims(dims)
    if len(shifts) != len(dims) and not (len(shifts) == 1 and not dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    if dims and input.ndim == 0:
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    axes = tuple(_wrap_dim(d, input.ndim) for d in dims) if dims else None  # None: roll the flattened tensor
    return apply(_ROLL, [input], shifts=tuple(int(s) for s in shifts), axes=axes)


@sizes_also_by_keyword("repeats")
def repeat(input, *sizes):
    """Tile the tensor `sizes` times along each dimension (torch's Tensor.repeat)."""
    sizes = _sizes(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    shape = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
    target = [s * r for s, r in zip(shape, sizes)]
    for s in target:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {target}")
    return apply(_TILE, [input], reps=sizes)


def tile(input, dims):
    """Repeat the tensor `dims` times along each dimension (leading 1s fill a short `dims`)."""
    dims = _dims(dims)
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
    return scatter_through(base, src, chain)


_SCATTER_INTO_VIEW = Op("copy_slices", _scatter_fn, linear=True, backward_name="torch::autograd::CopySlices")


_MULTI_VIEW = (
    "This view is the output of a function that returns multiple views. Such functions do not allow the "
    "output views to be modified inplace. You should replace the inplace operation by an out-of-place one."
)


def scatter_into_view(base, src, chain):
    """The new value of `base` after its view `chain` was overwritten by `src` (recorded)."""
    check_multi_view(base, chain, src.requires_grad)
    return apply(_SCATTER_INTO_VIEW, [base, src], chain=chain)


def check_multi_view(base, chain, requires_grad):
    """torch's error for an in-place change (that requires grad) of one of several views an op returned."""
    if any(op is not None and op.multi for op, _, _ in chain) and requires_grad and is_recording():  # None: detach
        op, _, k = chain[-1]  # torch names the view's own node
        where = (
            f"Output {k} of {op.backward_name.replace('Backward0', '')} is a view and is being modified inplace."
            if base.requires_grad
            else "A view was created in no_grad mode and is being modified inplace with grad mode enabled."
        )
        raise RuntimeError(f"{where} {_MULTI_VIEW}")


def _chain_view(a, *, chain):
    for op, static, k in chain:
        out = op.fn(a, **dict(static))
        a = out[k] if op.multi else out
    return a


# a view re-derived at once from its base, as torch's as_strided of the base
_AS_STRIDED_VIEW = Op("as_strided", _chain_view, linear=True, view=True, backward_name="AsStridedBackward0")


def regenerated_view(base, chain):
    """A view of `base` made again after one of them changed in place, as torch's: one as_strided node of the base;
    its chain of view ops replayed with view replay on (_force_original_view_tracking), inside functionalize (whose
    views torch always replays) and for an output of a multi-output view op (which keeps refusing in-place
    writes)."""
    if is_view_replay_enabled() or in_functionalize() or any(op.multi for op, _, _ in chain):
        return replay_view(base, chain)
    first = next((i for i, (op, _, _) in enumerate(chain) if op.replayed), None)
    if first is None:
        return apply(_AS_STRIDED_VIEW, [base], chain=tuple(chain))
    # torch's view function: the steps before the first replayed op as one as_strided, then that op, and each later
    # step as a replayed op or one as_strided
    out = apply(_AS_STRIDED_VIEW, [base], chain=tuple(chain[:first])) if first else base
    for step in chain[first:]:
        op, static, _ = step
        out = apply(op, [out], **dict(static)) if op.replayed else apply(_AS_STRIDED_VIEW, [out], chain=(step,))
    return out


def replay_view(base, chain):
    """Re-derive a view of `base` (after `base` changed in place)."""
    out = base
    for op, static, k in chain:
        res = apply(op, [out], **dict(static))
        out = res[k] if op.multi else res
    return out
