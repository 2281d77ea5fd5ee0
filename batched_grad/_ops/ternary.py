"""Elementwise ops of three operands: clamp, where, lerp."""

import jax
import jax.numpy as jnp

from .. import _dtypes
from .._dtypes import not_implemented
from .._foreign import not_a_tensor
from .._tensor import Tensor, warn_at_caller
from .._vmap_levels import refuse_dynamic_shape
from ._core import Op
from ._mixed_dtype import HALF_ARRAY_DTYPES
from .elementwise import _apply
from .indexing import nonzero
from .rounding import lerp as fused_lerp


def _clamp_fn(x, lo, hi, *, dtype, has_lo, has_hi):
    # min(max(x, lo), hi) as torch (hi wins when lo > hi); the gradient flows to x where lo <= x <= hi
    # (inclusive) and to a tensor bound where it is active
    x = x.astype(dtype)
    if jnp.issubdtype(dtype, jnp.floating):  # torch's derivative is 0 at nan (it is outside every range)
        x = jnp.where(jnp.isnan(x), jax.lax.stop_gradient(x), x)
    if has_lo:
        x = jnp.where(x < lo.astype(dtype), lo.astype(dtype), x)
    if has_hi:
        x = jnp.where(x > hi.astype(dtype), hi.astype(dtype), x)
    return x


# by whether a bound is a Tensor: torch's two overloads (clamp.Tensor, clamp) have their own backward names
_CLAMP = {
    tensors: Op("clamp", _clamp_fn, f"ClampBackward{0 if tensors else 1}", diagonal=True) for tensors in (True, False)
}


def clamp(input, min=None, max=None):  # noqa: A002
    """Clamp into [min, max]; either bound may be None, a number or a Tensor."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    dtype = _dtypes.result_type(input, *[b for b in (min, max) if b is not None])
    op = _CLAMP[isinstance(min, Tensor) or isinstance(max, Tensor)]
    return _apply(
        op,
        [input, 0 if min is None else min, 0 if max is None else max],
        dtype=dtype.np,
        has_lo=min is not None,
        has_hi=max is not None,
    )


# torch's clamp_min and clamp_max: their nodes are named ClampMinBackward0 for a number bound, 1 for a Tensor
_ONE_BOUND = {
    (name, tensor): Op(
        name, _clamp_fn, f"{''.join(p.capitalize() for p in name.split('_'))}Backward{int(tensor)}", diagonal=True
    )
    for name in ("clamp_min", "clamp_max")
    for tensor in (False, True)
}


def _one_bound(name, input, bound):
    dtype = _dtypes.result_type(input, bound)
    lower = name == "clamp_min"
    return _apply(
        _ONE_BOUND[name, isinstance(bound, Tensor)],
        [input, bound, 0] if lower else [input, 0, bound],
        dtype=dtype.np,
        has_lo=lower,
        has_hi=not lower,
    )


def clamp_min(input, min):  # noqa: A002
    """max(input, min), elementwise: clamp(input, min=min)."""
    return _one_bound("clamp_min", input, min)


def clamp_max(input, max):  # noqa: A002
    """min(input, max), elementwise: clamp(input, max=max)."""
    return _one_bound("clamp_max", input, max)


clip = clamp
_WHERE = Op(
    "where", lambda c, a, b, *, dtype: jnp.where(c, a.astype(dtype), b.astype(dtype)), linear=True, diagonal=True
)  # linear in the values: its derivative reads the condition only


def where(condition, input=None, other=None):
    """Elements of `input` where `condition`, else of `other`; `where(condition)` is nonzero(as_tuple=True)."""
    if input is None and other is None:
        refuse_dynamic_shape(condition, "where")
        return nonzero(condition, as_tuple=True)
    if condition.dtype is _dtypes.uint8:
        warn_at_caller(WHERE_UINT8, once=True)
    elif condition.dtype is not _dtypes.bool:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype {condition.dtype.type_name}"
        )
    return _apply(_WHERE, [condition, input, other], dtype=_dtypes.result_type(input, other).np)


WHERE_UINT8 = (
    "where received a uint8 condition tensor. This behavior is deprecated and will be removed in a future version of "
    "PyTorch. Use a boolean condition instead."
)


def _lerp_fn(a, b, w, *, dtype):
    # torch's two-sided formula (exact at both ends); both branches have the same derivatives. A bfloat16 or float16
    # lerp computes in float32 (a number weight kept as a float32 value) and rounds once, as torch's kernel
    if dtype in HALF_ARRAY_DTYPES:
        wide = jnp.float32
        return fused_lerp(a.astype(dtype).astype(wide), b.astype(dtype).astype(wide), w.astype(wide)).astype(dtype)
    return fused_lerp(a.astype(dtype), b.astype(dtype), w.astype(dtype))


_LERP = Op("lerp", _lerp_fn, diagonal=True)


def lerp(input, end, weight):
    """input + weight * (end - input); `end` (and a weight tensor that is not 0-dim) must match input's dtype."""
    if not isinstance(end, Tensor):
        raise not_a_tensor("lerp", "end", end, 2)
    for arg, x in (("end", end), ("weight", weight)):
        if isinstance(x, Tensor) and x.dtype is not input.dtype and (arg == "end" or x.ndim > 0):
            raise RuntimeError(f"expected dtype {input.dtype.cpp_name} for `{arg}` but got dtype {x.dtype.cpp_name}")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise not_implemented("lerp_kernel_scalar", input.dtype)
    return _apply(_LERP, [input, end, weight], dtype=input.dtype.np)
