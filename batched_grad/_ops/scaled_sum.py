"""add and sub with an alpha other than one: input + alpha * other as one op, as torch records it (one AddBackward0
or SubBackward0 node whose edges are input and other) and computes it on the CPU for float32 and float64 (a fused
multiply-add: one rounding of the exact input + alpha * other), and for bfloat16 and float16 (in float32, alpha
rounded to the half dtype, one rounding)."""

import struct

import jax.numpy as jnp
import numpy as np

from .. import _host
from .._host import host_array
from .._simd_math import scaled_sum as scaled_sum32
from .._tensor import Tensor
from ._core import SAVES_NOTHING, Op, apply, apply_in_place
from ._mixed_dtype import HALF_ARRAY_DTYPES
from .rounding import fma64, fused_multiply_add, fused_multiply_add_host

FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _fn(a, b, alpha, *, dtype):
    if dtype in HALF_ARRAY_DTYPES:  # torch's kernel: alpha in the half dtype, a + alpha * b in float32, one rounding
        a, b, alpha = (x.astype(dtype).astype(jnp.float32) for x in (a, b, alpha))
        return (a + alpha * b).astype(dtype)
    return fused_multiply_add(alpha.astype(dtype), b.astype(dtype), a.astype(dtype))


def _host_form(a, b, alpha, *, dtype):
    """The op on the host (small operands): fused_multiply_add's rounding with NumPy."""
    dtype = np.dtype(dtype)
    if dtype not in FUSED_DTYPES or a.size > _host.HOST_ELEMENTS or b.size > _host.HOST_ELEMENTS:
        return None
    a, b = np.broadcast_arrays(a.astype(dtype), b.astype(dtype))
    return fused_multiply_add_host(np.full(a.shape, alpha, dtype), b, a)


def fused_host(a, b, alpha):
    """_host_form where `a` and `b` are arrays of one dtype, float32 or float64, or one of them a Python number, and
    `alpha` a Python number (the eager path's call, Op.numpy): alpha cast to that dtype as a scalar, with no array
    of it nor cast of the operands of the same shape."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.shape != b.shape:
        dtype = (a if type(a) is np.ndarray else b).dtype
        a, b = np.broadcast_arrays(np.asarray(a, dtype), np.asarray(b, dtype))
    return scaled_sum_host(a, b, alpha)


def scaled_sum_host(a, b, alpha):
    """a + alpha * b rounded once, for float32 or float64 arrays `a` and `b` of one dtype and shape and a Python
    number `alpha` (cast to their dtype)."""
    if a.dtype == np.float32:
        return scaled_sum32(float32_value(alpha), b, a)
    return fma64(np.float64(alpha), b, a)


_FLOAT32 = struct.Struct("f")


def float32_value(number):
    """A Python float rounded to float32, as a Python float (a C cast: a seventh of np.float32's cost)."""
    return _FLOAT32.unpack(_FLOAT32.pack(number))[0]


_host_form.numpy = fused_host
_OPS = {
    name: Op(
        name,
        _fn,
        f"{name.capitalize()}Backward0",
        linear=True,
        diagonal=True,
        torch_saves=SAVES_NOTHING,
        host=_host_form,
        inputs=2,
    )
    for name in ("add", "sub")
}


def alpha_number(alpha):
    """alpha as the Python number torch reads it as (a one-element Tensor by its value), or None where it is not
    known on the host (a traced value)."""
    if not isinstance(alpha, Tensor):
        return alpha
    value = alpha._v
    if type(value) is not np.ndarray or value.base is not None:  # else host data, unshared
        value = host_array(value)
    return value.item() if value is not None and value.size == 1 else None


def fusable(dtype, alpha):
    """Whether input + alpha * other of result dtype `dtype` is the fused op: a float result (float32 or float64, or
    bfloat16 or float16, computed in float32) and a real alpha known on the host."""
    return (dtype.np in FUSED_DTYPES or dtype.np in HALF_ARRAY_DTYPES) and type(alpha) in (int, float)


def scaled_sum(name, input, other, alpha, dtype):
    """input + alpha * other ("add") or input - alpha * other ("sub") as one op computing in `dtype`."""
    return apply(_OPS[name], [input, other, alpha if name == "add" else -alpha], dtype=dtype.np)


def scaled_sum_in_place(name, input, other, alpha, dtype):
    """The in-place lane of scaled_sum (None where the general in-place path must take it)."""
    return apply_in_place(_OPS[name], input, other, alpha if name == "add" else -alpha, dtype=dtype.np)
