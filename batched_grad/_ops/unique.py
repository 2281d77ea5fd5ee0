"""unique: the distinct elements (or slices along a dim) of a tensor, with inverse indices and counts."""

import jax
import jax.numpy as jnp
import numpy as np

from .._dtypes import not_implemented
from .._dual import tangent_of
from .._grad_mode import is_recording
from .._tensor import Tensor, _wrap_dim
from .._vmap_levels import refuse_dynamic_shape
from ._core import Op, apply
from ._derivatives import raises_in_backward
from ._forward_refused import not_implemented_forward

_TRACED = (
    "unique() needs the values of the tensor, which a trace (vmap.vmap, a compiled function, forward mode) "
    "does not have: the size of its result depends on them"
)


def _pick(a, positions, *, axis, name):
    message = f"the derivative for '{name}' is not implemented."
    return raises_in_backward(jnp.take(a, positions, axis=axis), lambda: NotImplementedError(message))


# the distinct values are elements of the input taken at their first positions; torch records them, without a
# derivative
_UNIQUE = {
    name: Op(name, _pick, backward_name=backward, forward_error=not_implemented_forward(name))
    for name, backward in (
        ("_unique", "UniqueBackward0"),
        ("_unique2", "Unique2Backward0"),
        ("unique_dim", "UniqueDimBackward0"),
        ("unique_consecutive", "UniqueConsecutiveBackward0"),
        ("unique_dim_consecutive", "UniqueDimConsecutiveBackward0"),
    )
}


def _host_values(input):
    v = input._value
    if isinstance(v, jax.core.Tracer):
        raise RuntimeError(_TRACED)
    return np.asarray(v)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct elements of `input` (flattened), or its distinct slices along `dim`, in ascending order; with
    `return_inverse` also where each element (slice) of `input` went, with `return_counts` how often each occurs.
    NaNs are distinct from each other. The values are not differentiable (backward raises, as torch's)."""
    if input.dtype.is_complex:
        raise not_implemented("unique", input.dtype)
    refuse_dynamic_shape(input, "_unique2" if dim is None else "unique_dim")
    a = _host_values(input)
    if dim is None:
        values, inverse, counts = _flat_unique(input, a, "_unique2")
    else:
        if input.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        axis = _wrap_dim(dim, input.ndim)
        rows = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
        _, first, inverse, counts = np.unique(rows, axis=0, return_index=True, return_inverse=True, return_counts=True)
        values = _taken(input, first, axis, "unique_dim")
    results = (values,)
    if return_inverse:
        results += (Tensor._wrap(inverse.reshape(-1 if dim is not None else a.shape).astype(np.int64)),)
    if return_counts:
        results += (Tensor._wrap(counts.astype(np.int64)),)
    return results if len(results) > 1 else values


def _flat_unique(input, a, name):
    """(distinct values, inverse indices in the input's shape, counts) of the elements of `input` (whose values are
    the array `a`), the values recorded as torch's op `name`."""
    _, first, inverse, counts = np.unique(
        a.reshape(-1), return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    return _taken(input.reshape(-1), first, 0, name), inverse.reshape(a.shape), counts


def _unique_parts(input, name, wanted):
    """torch's _unique and _unique2: the distinct elements of `input` and, per flag of `wanted` (return_inverse,
    return_counts), those indices, or an empty int64 tensor where the flag is off."""
    if input.dtype.is_complex:
        raise not_implemented("unique", input.dtype)
    refuse_dynamic_shape(input, name)
    values, *extras = _flat_unique(input, _host_values(input), name)
    empty = np.zeros(0, np.int64)
    return (values,) + tuple(Tensor._wrap(e.astype(np.int64) if w else empty) for e, w in zip(extras, wanted))


def _unique(input, sorted=True, return_inverse=False):  # noqa: A002  (torch's names)
    """torch._unique: (the distinct elements in ascending order, sorted or not as on torch's CPU, the inverse
    indices or an empty tensor)."""
    return _unique_parts(input, "_unique", (return_inverse,))


def _unique2(input, sorted=True, return_inverse=False, return_counts=False):  # noqa: A002
    """torch._unique2: (the distinct elements in ascending order, sorted or not as on torch's CPU, the inverse
    indices or an empty tensor, the counts or an empty tensor)."""
    return _unique_parts(input, "_unique2", (return_inverse, return_counts))


def _taken(input, positions, axis, name):
    positions = positions.astype(np.int64)
    if (input.requires_grad and is_recording()) or tangent_of(input) is not None:
        return apply(_UNIQUE[name], [input, positions], axis=axis, name=name)
    return Tensor._wrap(np.take(_host_values(input), positions, axis=axis))
