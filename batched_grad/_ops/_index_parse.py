"""Parsing an index (ints, slices, None, Ellipsis, bools, integer arrays, boolean masks) into torch's two passes."""

import jax
import numpy as np

from .._host import unshared
from .._meta import MetaValue
from .._tensor import Tensor, warn_at_caller
from .._vmap_levels import BOOLEAN_MASK, refuse_dynamic_shape
from .shape import encode_index

_INDEX_TYPES = "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices"
_INDEX_DTYPES = "tensors used as indices must be long, int, byte or bool tensors"
UINT8_INDEX = "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead."


def check_index_dtype(a, from_tensor):
    """torch's checks of an index array's dtype: a tensor index must be int64, int32, uint8 or bool (a NumPy array
    may be any integer dtype); a uint8 one, a mask, warns as deprecated."""
    if a.dtype == np.uint8 and a.ndim:
        warn_at_caller(UINT8_INDEX)
    allowed = (np.int64, np.int32, np.uint8, np.bool_) if from_tensor else None
    if (allowed is not None and a.dtype not in allowed) or a.dtype.kind not in "iub":
        raise IndexError(_INDEX_DTYPES)


def _concrete(x):
    """x's values as a NumPy array, or None while tracing or on the meta device (value checks are skipped then)."""
    if isinstance(x, Tensor) and type(x._v) is MetaValue:
        return None
    v = x._value if isinstance(x, Tensor) else x
    return None if isinstance(v, jax.core.Tracer) else np.asarray(v)


def _first_out_of_range(values, size):
    bad = values[(values < -size) | (values >= size)] if values.size else values
    return int(bad.flat[0]) if bad.size else None


SEQUENCE_AS_TUPLE = (
    "Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed in pytorch 2.9; use "
    "x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be interpreted as tensor index, x[torch.tensor(seq)], "
    "which will result either in an error or a different result"
)


def _index_tuple(index):
    """torch's treatSequenceAsTuple: a short list holding tensors, sequences, slices, None or ... is a tuple (with
    torch's deprecation warning)."""
    if isinstance(index, tuple):
        return index
    if (
        isinstance(index, list)
        and len(index) < 32
        and any(
            isinstance(i, (Tensor, list, tuple, range, np.ndarray, slice)) or i is None or i is Ellipsis for i in index
        )
    ):
        warn_at_caller(SEQUENCE_AS_TUPLE)
        return tuple(index)
    return (index,)


def _kind(i):
    """Classify one index item: (kind, value) with kind in none/ellipsis/bool/int/slice/array/mask."""
    if i is None or i is Ellipsis:
        return ("none" if i is None else "ellipsis"), i
    if isinstance(i, (bool, np.bool_)):
        return "bool", bool(i)
    if isinstance(i, (int, np.integer)):
        return "int", int(i)
    if isinstance(i, slice):
        return "slice", slice(*(None if v is None else int(v) for v in (i.start, i.stop, i.step)))
    if isinstance(i, (Tensor, list, tuple, range, np.ndarray)):  # a range is a sequence of ints, as in torch
        a = unshared(i._held) if isinstance(i, Tensor) else np.asarray(i)  # a host index stays on the host
        a = a.astype(np.int64) if a.size == 0 and not isinstance(i, Tensor) else a  # [] indexes nothing
        check_index_dtype(a, isinstance(i, Tensor))
        if a.dtype == np.bool_ or a.dtype == np.uint8:
            if isinstance(a, jax.core.Tracer):
                if isinstance(i, Tensor):
                    refuse_dynamic_shape(i, None, BOOLEAN_MASK)
                return "array", a  # JAX raises NonConcreteBooleanIndexError: the trigger for the per-row fallback
            return ("bool", bool(a)) if a.ndim == 0 else ("mask", np.asarray(a, bool))
        if a.ndim == 0 and not isinstance(a, jax.core.Tracer):
            return "int", int(a)
        return "array", a
    raise IndexError(f"{_INDEX_TYPES} (got {type(i).__name__})")


def _parse_new_axis(kind, v, basic, advanced, arrays, names):
    """None, or a bool: an axis of length 1 (True) or 0 (False), as an advanced index."""
    basic.append(None)
    names.append("UnsqueezeBackward0")
    advanced.append(("array", len(arrays)) if kind == "bool" else slice(None))
    if kind == "bool":
        arrays.append(np.zeros(int(v), np.int64))


def _parse_int(v, dim, size, basic, names):
    if not -size <= v < size:
        raise IndexError(f"index {v} is out of bounds for dimension {dim} with size {size}")
    basic.append(v % size)
    names.append("SelectBackward0")


def _parse_slice(v, size, single_slice, basic, advanced, names):
    if v.step is not None and v.step <= 0:
        raise ValueError("slice step cannot be zero" if v.step == 0 else "step must be greater than zero")
    basic.append(v)
    advanced.append(slice(None))
    if single_slice or v.indices(size) != (0, size, 1):
        names.append("SliceBackward0")


def _parse_mask(v, shape, dim, basic, advanced, arrays):
    """A boolean mask over the dimensions from `dim`: its nonzero positions, one integer array per dimension."""
    for j, (m, s) in enumerate(zip(v.shape, shape[dim:])):
        if m != s:
            raise IndexError(
                f"The shape of the mask {list(v.shape)} at index {j} does not match the shape of "
                f"the indexed tensor {list(shape)} at index {dim + j}"
            )
    basic.extend([slice(None)] * v.ndim)
    for nz in np.nonzero(v):
        advanced.append(("array", len(arrays)))
        arrays.append(nz.astype(np.int64))


def _parse_array(v, size, n_adv, basic, advanced, arrays):
    values = _concrete(v)
    bad = None if values is None else _first_out_of_range(values, size)
    if bad is not None:
        raise IndexError(f"index {bad} is out of bounds for dimension {n_adv} with size {size}")
    basic.append(slice(None))
    advanced.append(("array", len(arrays)))
    arrays.append(v)


def _check_scalar_index(index):
    """torch's errors for a lone int or slice indexing a 0-dim tensor (old code's `loss.data[0]`)."""
    if isinstance(index, (int, np.integer)) and not isinstance(index, (bool, np.bool_)):
        raise IndexError(
            "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert "
            "a 0-dim tensor to a number"
        )
    if isinstance(index, slice):
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")


def _parse(shape, index):
    """Split an index into torch's two passes: a basic index (ints select, slices, None/bools add axes), then an
    advanced index of the result, with ("array", k) placeholders for the integer arrays, which are returned
    separately. Also torch's name for the node of a basic index."""
    single_slice = isinstance(index, slice)
    ndim = len(shape)
    if ndim == 0:
        _check_scalar_index(index)
    items = [_kind(i) for i in _index_tuple(index)]
    consumed = sum(1 for k, _ in items if k in ("int", "slice", "array")) + sum(v.ndim for k, v in items if k == "mask")
    basic, advanced, arrays, names = [], [], [], []
    dim = n_adv = 0
    seen_ellipsis = False
    for kind, v in items:
        if kind == "ellipsis":
            if not seen_ellipsis:
                skip = max(ndim - consumed, 0)
                basic.append(Ellipsis)
                advanced.extend([slice(None)] * skip)
                dim, seen_ellipsis = dim + skip, True
            continue
        if kind in ("none", "bool"):
            _parse_new_axis(kind, v, basic, advanced, arrays, names)
            continue
        width = v.ndim if kind == "mask" else 1
        if dim + width > ndim:
            raise IndexError(f"too many indices for tensor of dimension {ndim}")
        size = shape[dim]
        if kind == "int":
            _parse_int(v, dim, size, basic, names)
        elif kind == "slice":
            _parse_slice(v, size, single_slice, basic, advanced, names)
        elif kind == "mask":
            _parse_mask(v, shape, dim, basic, advanced, arrays)
            n_adv += width
        else:
            _parse_array(v, size, n_adv, basic, advanced, arrays)
            n_adv += 1
        dim += width
    name = "IndexBackward0" if arrays else names[-1] if names else "AliasBackward0"
    return (encode_index(basic), encode_index(advanced) if arrays else None), arrays, name
