"""Comparing whole tensors: isclose, allclose, equal; and the type predicates is_tensor, is_floating_point,
is_complex, numel."""

import jax.numpy as jnp

from .. import _dtypes
from .._foreign import not_a_tensor
from .._tensor import Tensor
from .._vmap_levels import is_batched
from ._core import Op, apply
from .elementwise import COMPARISONS, broadcast_shape


def _require_tensor(name, argument, position, value):
    if not isinstance(value, Tensor):
        raise not_a_tensor(name, argument, value, position)


def _isclose_fn(a, b, *, rtol, atol, equal_nan, work):
    # torch's formula: |a - b| <= atol + |rtol * b|, where |a - b| is finite; integers and bools are measured in
    # the default float dtype (`work`), floats in their own
    close = a == b
    inexact = jnp.issubdtype(a.dtype, jnp.inexact)
    if equal_nan and inexact:
        close = close | (jnp.isnan(a) & jnp.isnan(b))
    if rtol == 0 and atol == 0:
        return close
    if inexact:
        allowed, actual = atol + jnp.abs(rtol * b), jnp.abs(a - b)
    else:
        a = a.astype(work) if a.dtype == jnp.bool_ else a
        b = b.astype(work) if b.dtype == jnp.bool_ else b
        allowed = jnp.asarray(atol, work) + jnp.abs(jnp.asarray(rtol, work) * b.astype(work))
        actual = jnp.abs(a - b).astype(work)
    return close | (jnp.isfinite(actual) & (actual <= allowed))


_ISCLOSE = Op("isclose", _isclose_fn)


def _tolerance(name, value):
    value = float(value)
    if value < 0:
        raise RuntimeError(f"{name} must be greater than or equal to zero, but got {value:g}")
    return value


def _check_close_args(name, input, other):
    _require_tensor(name, "input", 1, input)
    _require_tensor(name, "other", 2, other)
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{input.dtype.type_name} did not match {other.dtype.type_name}")


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |input - other| <= atol + rtol * |other| (broadcast), as a bool tensor; NaNs are close to each
    other only with `equal_nan`. Both tensors must have the same dtype."""
    _check_close_args("isclose", input, other)
    rtol, atol = _tolerance("rtol", rtol), _tolerance("atol", atol)
    broadcast_shape(tuple(input.shape), tuple(other.shape))
    return apply(
        _ISCLOSE, [input, other], rtol=rtol, atol=atol, equal_nan=bool(equal_nan), work=_dtypes.get_default_dtype().np
    )


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of `input` is close to `other`'s (isclose(...).all()), as a Python bool."""
    _check_close_args("allclose", input, other)
    if is_batched(input._v) or is_batched(other._v):
        raise RuntimeError(
            "vmap over torch.allclose isn't supported yet. Please file an issue at "
            "https://github.com/pytorch/pytorch/issues if you need this feature."
        )
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other):
    """Whether the two tensors have the same shape and the same values (compared after type promotion; NaN is not
    equal to NaN), as a Python bool."""
    _require_tensor("equal", "input", 1, input)
    _require_tensor("equal", "other", 2, other)
    if is_batched(input._v) or is_batched(other._v):  # a Python bool cannot vary across the rows
        raise RuntimeError("Batching rule not implemented for aten::equal. We could not generate a fallback.")
    if input.shape != other.shape:
        return False
    return bool(COMPARISONS["eq"](input, other).all())


def is_tensor(obj):
    """Whether `obj` is a batched_grad Tensor."""
    return isinstance(obj, Tensor)


def is_floating_point(input):
    """Whether the tensor's dtype is a floating point type."""
    _require_tensor("is_floating_point", "input", 1, input)
    return input.dtype.is_floating_point


def is_complex(input):
    """Whether the tensor's dtype is a complex type."""
    _require_tensor("is_complex", "input", 1, input)
    return input.dtype.is_complex


def numel(input):
    """The number of elements of the tensor."""
    _require_tensor("numel", "input", 1, input)
    return input.numel()
