"""Shape functions torch composes from views, joins and flips (atleast_nd, column_stack, dstack, the splits, fliplr,
flipud, cartesian_prod, combinations, repeat_interleave, ravel, vander, broadcast_tensors) and the ones it
has kernels for (rot90, block_diag, kron, cross, Tensor.unfold), each with torch's node names."""

import itertools
import warnings

import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._int_args import int_or_ints
from .._tensor import Size, Tensor, _wrap_dim
from ._core import Op, apply
from .grids import meshgrid
from .indexing import bools_as_integers, index_select
from .linalg import require_tensors
from .reduction import cumprod
from .shape import broadcast_shapes as _broadcast_pair
from .shape import cat, expand, flatten, flip, narrow, reshape, split, stack, unsqueeze, view, vstack


def _tensors(name, tensors):
    return tuple(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)) else tensors


def _atleast(n, tensors):
    def lift(t):
        if t.ndim >= n:
            return t
        if n == 3 and t.ndim == 2:
            return unsqueeze(t, -1)
        if n == 3 and t.ndim == 1:
            return unsqueeze(unsqueeze(t, 0), -1)
        return reshape(t, (1,) * (n - t.ndim) + tuple(t.shape))

    out = tuple(lift(t) for t in _tensors(f"atleast_{n}d", tensors))
    return out[0] if len(tensors) == 1 and isinstance(tensors[0], Tensor) else out


def atleast_1d(*tensors):
    """Each tensor with at least 1 dimension (0-D ones become 1-D); a tuple for several tensors."""
    return _atleast(1, tensors)


def atleast_2d(*tensors):
    """Each tensor with at least 2 dimensions (leading unit dims added)."""
    return _atleast(2, tensors)


def atleast_3d(*tensors):
    """Each tensor with at least 3 dimensions: (n) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    return _atleast(3, tensors)


def column_stack(tensors):
    """The tensors as columns, side by side: 0-D and 1-D ones become (n, 1) columns first."""
    return cat([reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in tensors], 1)


def dstack(tensors):
    """The tensors stacked depth-wise (along dim 2), after atleast_3d."""
    return cat(atleast_3d(*tensors), 2)


def tensor_split(input, indices_or_sections, dim=0):
    """Views of `input` split along `dim` into n near-equal parts (the first n % size one larger), or at the given
    indices."""
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        lengths = [size // sections + (1 if i < size % sections else 0) for i in range(sections)]
        bounds = list(itertools.accumulate([0] + lengths))
    else:
        bounds = [0] + [min(max(int(i), 0), size) for i in indices_or_sections] + [size]
    return tuple(narrow(input, d, lo, max(hi - lo, 0)) for lo, hi in zip(bounds, bounds[1:]))


def _split_along(name, input, sections, dim, min_ndim):
    if input.ndim < min_ndim:
        raise RuntimeError(
            f"torch.{name} requires a tensor with at least {min_ndim} dimension, but got a tensor with "
            f"{input.ndim} dimensions!"
        )
    if isinstance(sections, int):
        if sections == 0 or input.shape[dim] % sections:
            raise RuntimeError(
                f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
                f"{input.shape[dim]} is not divisible by the split_size {sections}!"
            )
    return tensor_split(input, sections, dim)


def hsplit(input, indices_or_sections):
    """tensor_split along dim 1 (dim 0 for 1-D tensors); a number of sections must divide the size."""
    return _split_along("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


def vsplit(input, indices_or_sections):
    """tensor_split along dim 0 of a tensor of at least 2 dims."""
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    """tensor_split along dim 2 of a tensor of at least 3 dims."""
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


def split_with_sizes(input, split_sizes, dim=0):
    """Views of `input` of the given sizes along `dim` (they must add up to its size)."""
    d = _wrap_dim(dim, input.ndim)
    if sum(split_sizes) != input.shape[d]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {input.shape[d]} (input tensor's "
            f"size at dimension {d}), but got split_sizes={list(split_sizes)}"
        )
    return split(input, list(split_sizes), d)


def fliplr(input):
    """input flipped left to right (dim 1)."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


def flipud(input):
    """input flipped upside down (dim 0)."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


_ROT90 = Op("rot90", lambda a, *, k, axes: jnp.rot90(a, k, axes), linear=True)


def rot90(input, k=1, dims=(0, 1)):
    """input rotated by k quarter turns in the plane of `dims`, from the first towards the second."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = (_wrap_dim(d, input.ndim) for d in dims)
    if a == b:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}")
    return apply(_ROT90, [input], k=int(k) % 4, axes=(a, b))


def cartesian_prod(*tensors):
    """Every combination of one element from each 1-D tensor, as rows (the tensor itself for one tensor)."""
    tensors = _tensors("cartesian_prod", tensors)
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    return stack([flatten(g) for g in meshgrid(*tensors, indexing="ij")], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-r combinations of the elements of a 1-D tensor, as rows, in itertools' order."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_zeros(0)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(pick(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    return stack([index_select(input, 0, Tensor._wrap(rows[:, k])) for k in range(r)], 1)


def _block_diag(*blocks, dtype):
    rows, cols = sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)
    out, r, c = jnp.zeros((rows, cols), dtype), 0, 0
    for b in blocks:
        out = out.at[r : r + b.shape[0], c : c + b.shape[1]].set(b.astype(dtype))
        r, c = r + b.shape[0], c + b.shape[1]
    return out


_BLOCK_DIAG = Op("block_diag", _block_diag, linear=True)


def block_diag(*tensors):
    """A block-diagonal matrix of the tensors (0-D ones are 1 x 1, 1-D ones a row)."""
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(
                f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {t.ndim} dimensions"
            )
    blocks = [reshape(t, (1, 1)) if t.ndim == 0 else reshape(t, (1, -1)) if t.ndim == 1 else t for t in tensors]
    dtype = _dtypes.result_type(*tensors) if tensors else _dtypes.get_default_dtype()
    return apply(_BLOCK_DIAG, blocks, dtype=dtype.np)


_KRON = Op("kron", bools_as_integers(jnp.kron), multilinear=True, backward_name="UnsafeViewBackward0")


def kron(input, other):
    """The Kronecker product: every element of input times the whole of other, in blocks."""
    require_tensors("kron", ("input", "other"), (input, other))
    d = _dtypes.result_type(input, other)
    return apply(_KRON, [input.to(d), other.to(d)])


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along `dim`) repeated `repeats` times (an int, or one count per element);
    repeat_interleave(counts) gives each index i counts[i] times."""
    if repeats is None:  # torch.repeat_interleave(repeats)
        counts = np.asarray(input.detach().numpy())
        return Tensor._wrap(np.repeat(np.arange(len(counts), dtype=np.int64), counts))
    x = flatten(input) if dim is None else input
    d = 0 if dim is None else _wrap_dim(dim, input.ndim)
    if isinstance(repeats, int):
        if repeats < 0:
            raise RuntimeError("repeats can not be negative")
        shape = tuple(x.shape)
        grown = expand(unsqueeze(x, d + 1), shape[: d + 1] + (repeats,) + shape[d + 1 :])
        # torch's expand, clone and view (ViewBackward0 of CloneBackward0)
        return view(grown.clone(), shape[:d] + (shape[d] * repeats,) + shape[d + 1 :])
    counts = np.asarray(repeats.detach().numpy()).reshape(-1)
    if counts.size == 1:
        counts = np.repeat(counts, x.shape[d])
    if counts.size != x.shape[d]:
        raise RuntimeError(
            "repeats must have the same size as input along dim, but got repeats.size(0) = "
            f"{counts.size} and input.size({d}) = {x.shape[d]}"
        )
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    return index_select(x, d, Tensor._wrap(np.repeat(np.arange(x.shape[d], dtype=np.int64), counts)))


def ravel(input):
    """The elements as a 1-D tensor (a view)."""
    return reshape(input, (-1,))


def vander(x, N=None, increasing=False):
    """Columns of powers of the 1-D `x`: x^(N-1), ..., x^0 (x^0 first when `increasing`); N defaults to len(x)."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    d = x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else _dtypes.int64
    ones = x.new_ones((x.shape[0], min(n, 1)), dtype=d)
    columns = [ones]
    if n > 1:
        columns.append(cumprod(expand(unsqueeze(x.to(d), 1), (x.shape[0], n - 1)), 1))
    out = cat(columns, 1)
    return out if increasing else flip(out, (1,))


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (a tensor already of that shape is returned as is)."""
    tensors = _tensors("broadcast_tensors", tensors)
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(t if tuple(t.shape) == shape else expand(t, shape) for t in tensors)


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to."""
    out = ()
    for s in shapes:
        out = _broadcast_pair(out, int_or_ints(s))
    return Size(out)


def _cross(a, b, *, axis):
    return jnp.cross(a, b, axis=axis)


_CROSS = Op("linalg_cross", _cross, multilinear=True)


def linalg_cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along `dim` (the operands broadcast)."""
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    shape = _broadcast_pair(input.shape, other.shape)
    d = _wrap_dim(dim, len(shape))
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[d]} and {other.shape[d]}"
        )
    t = _dtypes.result_type(input, other)
    return apply(_CROSS, [input.to(t), other.to(t)], axis=d)


def cross(input, other, dim=None):
    """The cross product along `dim` (the first dim of size 3 when None, with torch's deprecation warning)."""
    require_tensors("cross", ("input", "other"), (input, other))
    if dim is None:
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
            "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
            "with that of linalg.cross in a future release.",
            UserWarning,
            stacklevel=2,
        )
        shape = _broadcast_pair(input.shape, other.shape)
        dim = next((i for i, s in enumerate(shape) if s == 3), -1)
    return linalg_cross(input, other, dim=dim)


def _unfold(a, *, axis, size, step):
    count = (a.shape[axis] - size) // step + 1
    windows = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    taken = jnp.take(a, windows.reshape(-1), axis=axis)
    taken = taken.reshape(a.shape[:axis] + (count, size) + a.shape[axis + 1 :])
    return jnp.moveaxis(taken, axis + 1, -1)


_UNFOLD = Op("unfold", _unfold, linear=True, view=True)


def unfold(input, dimension, size, step):
    """Tensor.unfold: the windows of `size` elements every `step` along `dimension`, as a new last dim."""
    d = _wrap_dim(dimension, max(input.ndim, 1))
    length = input.shape[d] if input.ndim else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    x = reshape(input, (1,)) if input.ndim == 0 else input
    return apply(_UNFOLD, [x], axis=d, size=int(size), step=int(step))


FUNCTIONS = {
    f.__name__: f
    for f in (
        atleast_1d,
        atleast_2d,
        atleast_3d,
        column_stack,
        dstack,
        tensor_split,
        hsplit,
        vsplit,
        dsplit,
        split_with_sizes,
        fliplr,
        flipud,
        rot90,
        cartesian_prod,
        combinations,
        block_diag,
        kron,
        repeat_interleave,
        ravel,
        vander,
        broadcast_tensors,
        broadcast_shapes,
        cross,
    )
}
FUNCTIONS.update(row_stack=vstack)
METHODS = {
    name: FUNCTIONS[name]
    for name in (
        "tensor_split",
        "hsplit",
        "vsplit",
        "dsplit",
        "split_with_sizes",
        "fliplr",
        "flipud",
        "rot90",
        "kron",
        "repeat_interleave",
        "ravel",
        "cross",
    )
}
METHODS["unfold"] = unfold
