"""NumPy forms (Op.host) of common float ops, which `apply` runs instead of a kernel on the CPU backend: a new shape
compiles nothing. Only for float32/float64 results of small operands (large ones run as kernels, as before)."""

import numpy as np

from .. import _host
from .._float_errors import ignoring_float_errors
from .._host import HOST_FLOATS
from .._numpy_rows import ROWS
from .shape import sum_to

_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)
dot_general = ROWS["dot_general"]  # the derived forms' row: the same NumPy calls, the same bits


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


def small_float_vjp(rule, rows_dtypes=HOST_FLOATS, reads=None):
    """The host VJP (Op.host_vjp) of an elementwise op whose gradients are `rule(ct, *operands)` (one per operand,
    None where the operand is not saved), each of the output's shape: operands cast to the cotangent's dtype, as the
    kernel computes, and the gradients summed down to their operands' shapes. Batched cotangents (rows leading the
    output's shape) broadcast against the operands, as jax.vmap of the VJP computes them, in `rows_dtypes` (those
    where the rule gives the derived form's bits). None (the derived form) for other dtypes or large cotangents.
    `reads`: per operand, the operands its gradient reads besides the cotangent (host_vjp.reads, read by a recorded
    backward instead of walking the VJP's jaxpr), where no gradient is the cotangent itself; None: walked."""

    def host_vjp(ct, operands, avals, **static):
        if ct.dtype not in HOST_FLOATS or ct.size > _host.HOST_ELEMENTS:
            return None
        rows = ct.shape[: ct.ndim - len(np.broadcast_shapes(*[shape for shape, _ in avals]))]
        if rows and ct.dtype not in rows_dtypes:
            return None
        operands = [None if o is None else o.astype(ct.dtype, copy=False) for o in operands]
        grads = ignoring_float_errors(rule, ct, *operands)
        return [
            None if g is None else np.array(sum_to(np.broadcast_to(g, ct.shape), rows + shape, len(rows)), dtype)
            for g, (shape, dtype) in zip(grads, avals)
        ]

    host_vjp.rows = True
    host_vjp.reads = lambda static: reads
    return host_vjp


def matmul_vjp(ct, operands, avals):
    """The host VJP of a product of vectors and matrices (dot, mv, a vector times a matrix, mm), rows of batched
    cotangents leading: each gradient the dot_general (and transpose) that JAX's VJP of jnp.matmul gives, by the
    same NumPy row as the derived form, so the bits are the derived form's; but mm's second operand's, which is
    torch's formula a.T @ ct (JAX's gives its transpose, ct.T @ a, transposed: a sum in another order), so that it
    equals a user's own a.T @ ct bit for bit, as torch's does (hand-written backward passes compare them exactly).
    None (the derived form) for operands of more dimensions, other dtypes or large cotangents."""
    (a, b), ((sa, _), (sb, _)) = operands, avals
    if ct.dtype not in HOST_FLOATS or ct.size > _host.HOST_ELEMENTS or len(sa) > 2 or len(sb) > 2:
        return None
    for o in operands:
        if o is not None and o.dtype != ct.dtype:
            return None
    lead = ct.ndim - (len(sa) - 1) - (len(sb) - 1)  # 1 for batched cotangents, else 0
    outer = (((), ()), ((), ()))
    grad_a = grad_b = None
    if b is not None:  # a's gradient: the cotangent times b, contracted over b's columns
        grad_a = dot_general(ct, b, outer if len(sb) == 1 else (((ct.ndim - 1,), (1,)), ((), ())))
    if a is not None and lead == 0 and len(sa) == len(sb) == 2:
        grad_b = np.matmul(a.T, ct)  # torch's mat1.t().mm(grad): the bits of a user's own a.T @ ct, as torch's are
    elif a is not None:  # b's gradient: a's rows contracted with the cotangent's, or an outer product
        grad_b = dot_general(ct, a, outer if len(sa) == 1 else (((lead,), (0,)), ((), ())))
        if len(sb) == 2:
            grad_b = np.swapaxes(grad_b, -1, -2)
    return grad_a, grad_b


matmul_vjp.rows = True
matmul_vjp.reads = lambda static: ((1,), (0,))  # each gradient reads the other operand


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
    "mul": small_float_vjp(_mul_vjp, reads=((1,), (0,))),
    "div": small_float_vjp(_div_vjp, reads=((1,), (0, 1))),
    "neg": small_float_vjp(lambda ct, a: (-ct,), reads=((),)),
    # float64 tanh by NumPy, an ulp from the derived form's XLA tanh: its batched rows keep the derived form
    "tanh": small_float_vjp(_tanh_vjp, rows_dtypes=frozenset({_FLOAT32}), reads=((0,),)),
}
