"""NumPy forms (Op.host) of common float ops, which `apply` runs instead of a kernel on the CPU backend: a new shape
compiles nothing. Only for float32/float64 results of small operands (large ones run as kernels, as before)."""

import numpy as np

from .. import _host
from .._float_errors import ignoring_float_errors
from .._host import HOST_FLOATS
from .shape import sum_to

_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)


def small_floats(f):
    """The host form of the NumPy function `f`: operands cast to the op's `dtype` param (or all of one float dtype
    where it has none), as its kernel casts them; None (a kernel) for other dtypes or large operands. Its `numpy`
    attribute is `f`, which the eager path calls directly on operands that already have the op's dtype (Op.numpy)."""

    def host(*arrays, dtype=None):
        given = dtype is not None
        dtype = dtype if given else arrays[0].dtype
        if dtype not in HOST_FLOATS:
            dtype = np.dtype(dtype)
            if dtype not in HOST_FLOATS:
                return None
        for a in arrays:
            if a.dtype != dtype or a.size > _host.HOST_ELEMENTS:
                return _cast(f, arrays, dtype, given)
        return f(*arrays)  # the common case, operands of the op's dtype; computed_on_host ignores float errors

    host.numpy = f
    return host


def _cast(f, arrays, dtype, given):
    """small_floats' host form on operands of which some are not of `dtype`: cast to it where the op names it."""
    operands = []
    for a in arrays:
        if a.size > _host.HOST_ELEMENTS:
            return None
        if a.dtype != dtype:
            if not given:
                return None
            a = a.astype(dtype)
        operands.append(a)
    return f(*operands)


def in_float64_host(f):
    """The NumPy function `f` computed in float64 for a float32 operand and rounded back: the host form of an op
    whose kernel does the same (elementwise.in_float64), so both round the same accurate value."""

    def wide(a):
        return f(a.astype(_FLOAT64)).astype(_FLOAT32) if a.dtype == _FLOAT32 else f(a)

    return wide


def small_float_vjp(rule):
    """The host VJP (Op.host_vjp) of an elementwise op whose gradients are `rule(ct, *operands)` (one per operand,
    None where the operand is not saved), each of the output's shape: operands cast to the cotangent's dtype, as the
    kernel computes, and the gradients summed down to their operands' shapes. None (a kernel) for other dtypes or
    large cotangents."""

    def host_vjp(ct, operands, avals, **static):
        if ct.dtype not in HOST_FLOATS or ct.size > _host.HOST_ELEMENTS:
            return None
        operands = [None if o is None else o.astype(ct.dtype, copy=False) for o in operands]
        grads = ignoring_float_errors(rule, ct, *operands)
        return [
            None if g is None else np.array(sum_to(np.broadcast_to(g, ct.shape), shape), dtype)
            for g, (shape, dtype) in zip(grads, avals)
        ]

    return host_vjp


def _tanh_vjp(ct, x):
    # JAX's VJP of tanh computed in float64 and rounded (elementwise.in_float64), operation for operation: with
    # t = tanh(x), g = ct (1 - t), then g + g t
    wide = ct.dtype == np.float32
    ct, x = (ct.astype(np.float64), x.astype(np.float64)) if wide else (ct, x)
    t = np.tanh(x)
    g = ct * (1 - t)
    grad = g + g * t
    return (grad.astype(np.float32) if wide else grad,)


def _mul_vjp(ct, a, b):
    return (None if b is None else ct * b), (None if a is None else ct * a)


def _div_vjp(ct, a, b):
    return ct / b, (None if a is None else -ct * a / (b * b))


ARITHMETIC_VJPS = {  # by op name
    "add": small_float_vjp(lambda ct, a, b: (ct, ct)),
    "sub": small_float_vjp(lambda ct, a, b: (ct, -ct)),
    "mul": small_float_vjp(_mul_vjp),
    "div": small_float_vjp(_div_vjp),
    "neg": small_float_vjp(lambda ct, a: (-ct,)),
    "tanh": small_float_vjp(_tanh_vjp),
}
