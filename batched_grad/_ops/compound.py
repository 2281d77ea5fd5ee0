"""Fused elementwise ops: addcmul and addcdiv (input + value * tensor1 * or / tensor2)."""

import jax.numpy as jnp

from .. import _dtypes
from .._dtypes import not_implemented
from .._foreign import not_a_tensor
from .._tensor import Tensor
from ._core import SAVES_NOTHING, Op, apply
from ._mixed_dtype import HALF_ARRAY_DTYPES
from .elementwise import broadcast_shape
from .rounding import fused_multiply_add

_INTEGER_ADDCDIV = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a true "
    "division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * "
    "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) "
    "for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / "
    "tensor2), for all dtypes."
)


def _in_float32(fn, a, t1, t2, value, dtype):
    """fn of a bfloat16 or float16 op as torch's kernel computes it: the operands widened to float32, the value
    kept as a float32 number, one rounding at the end."""
    wide = [x.astype(dtype).astype(jnp.float32) for x in (a, t1, t2)]
    return fn(*wide, value.astype(jnp.float32)).astype(dtype)


def _addcmul_fn(a, t1, t2, value, *, dtype):
    if dtype in HALF_ARRAY_DTYPES:
        return _in_float32(lambda a, t1, t2, v: a + v * t1 * t2, a, t1, t2, value, dtype)
    a, t1, t2, value = a.astype(dtype), t1.astype(dtype), t2.astype(dtype), value.astype(dtype)
    return fused_multiply_add(value * t1, t2, a)  # torch's kernel: (value * tensor1) * tensor2 + input, one rounding


def _addcdiv_fn(a, t1, t2, value, *, dtype):
    if dtype in HALF_ARRAY_DTYPES:
        return _in_float32(lambda a, t1, t2, v: a + v * t1 / t2, a, t1, t2, value, dtype)
    a, t1, t2, value = a.astype(dtype), t1.astype(dtype), t2.astype(dtype), value.astype(dtype)
    return a + value * t1 / t2  # torch's order: tensor1 scaled first


# torch's derivatives read tensor1 and tensor2, never input; addcmul's each only for the other's gradient
_ADDCMUL = Op(
    "addcmul",
    _addcmul_fn,
    diagonal=True,
    torch_saves=SAVES_NOTHING,
    inputs=3,
    multilinear=True,
    added=lambda sig: (0,),
)
_ADDCDIV = Op("addcdiv", _addcdiv_fn, diagonal=True, torch_saves=SAVES_NOTHING, inputs=3)


def _operands(name, input, tensor1, tensor2, value):
    for position, (argument, x) in enumerate((("input", input), ("tensor1", tensor1), ("tensor2", tensor2)), 1):
        if not isinstance(x, Tensor):
            raise not_a_tensor(name, argument, x, position)
    dtype = _dtypes.result_type(input, tensor1, tensor2)
    broadcast_shape(tuple(input.shape), tuple(tensor1.shape), tuple(tensor2.shape))
    value = value.item() if isinstance(value, Tensor) else value
    if not dtype.is_floating_point and not dtype.is_complex:
        value = int(value)  # torch casts the value to an integer result's type
    return dtype, value


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2, elementwise (broadcast)."""
    dtype, value = _operands("addcmul", input, tensor1, tensor2, value)
    if dtype is _dtypes.bool:
        raise not_implemented("addcmul_cpu_out", dtype)
    return apply(_ADDCMUL, [input, tensor1, tensor2, value], dtype=dtype.np)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2, elementwise (broadcast); tensor1 and tensor2 may not both be integers."""
    dtype, value = _operands("addcdiv", input, tensor1, tensor2, value)
    if _dtypes.category(tensor1.dtype) < 2 and _dtypes.category(tensor2.dtype) < 2:
        raise RuntimeError(_INTEGER_ADDCDIV)
    return apply(_ADDCDIV, [input, tensor1, tensor2, value], dtype=dtype.np)
