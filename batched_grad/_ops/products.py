"""Products beyond matmul: the fused beta * input + alpha * product ops (addmm, addmv, addbmm, baddbmm, addr),
inner, vdot, multi_dot (and the deprecated chain_matmul), linalg.vecdot, matrix_power and matrix_exp."""

import warnings

import jax.numpy as jnp
import jax.scipy.linalg as jsl

from .. import _dtypes
from .._autocast import autocast_policy
from .._factories import eye
from .._tensor import Tensor, _wrap_dim
from ._core import Op, apply
from .linalg import _NDIM_ERRORS, _check_product, _matrix, inv, matmul, outer, require_tensors
from .shape import expanded_shape

_PRODUCT_OF = {
    "addmm": jnp.matmul,
    "addmv": jnp.matmul,
    "baddbmm": jnp.matmul,
    "addr": jnp.outer,
    "addbmm": lambda a, b: jnp.sum(jnp.matmul(a, b), 0),
}


def _fused(name):
    def fn(input, a, b, beta, alpha, *, unit_alpha, zero_beta, unit_beta):
        dtype = jnp.result_type(input, a, b)
        if dtype in _HALF_FLOATS and name in _GEMMS:  # torch's GEMMs accumulate and scale in float32, round once
            input, a, b = (x.astype(jnp.float32) for x in (input, a, b))
        product = _PRODUCT_OF[name](a, b)
        scaled = product if unit_alpha else product * _scale(alpha, product.dtype)
        if zero_beta:  # torch ignores input then (its nan and inf do not propagate)
            out = jnp.broadcast_to(scaled, jnp.broadcast_shapes(input.shape, scaled.shape))
        else:
            out = (input if unit_beta else input * _scale(beta, input.dtype)) + scaled
        return out.astype(dtype)

    # torch's node saves each factor only for the other's gradient, and never the input; beta and alpha are numbers
    # passed as operands (a new value compiles nothing), without edges
    return Op(name, fn, multilinear=True, added=lambda sig: (0,), inputs=3)


def _scale(number, dtype):
    """beta or alpha (a 0-d operand) in the dtype it multiplies, as torch casts a Scalar to the op's type; a complex
    one keeps its type (it promotes a real product, as a Python complex would)."""
    return (
        number if jnp.iscomplexobj(number) and not jnp.issubdtype(dtype, jnp.complexfloating) else number.astype(dtype)
    )


_HALF_FLOATS = (jnp.bfloat16, jnp.float16)
_GEMMS = ("addmm", "addmv", "baddbmm")


_FUSED = {name: _fused(name) for name in _PRODUCT_OF}


def _number(name, argument, value):
    """A Number argument as torch reads it: a 0-dim Tensor that does not require grad stands for the number it
    holds (an optimizer's step size computed by tensor ops)."""
    if not isinstance(value, Tensor):
        return value
    if value.ndim or value.requires_grad:
        raise TypeError(
            f"{name}(): argument '{argument}' must be a Number, or a 0-dim Tensor that does not require grad, but got "
            f"a Tensor of shape {tuple(value.shape)}{' that requires grad' if value.requires_grad else ''}"
        )
    return value.item()


def _scalars(name, input, beta, alpha):
    """beta and alpha as torch's kernel reads them: on integer tensors addr refuses fractional ones, the other fused
    products truncate them toward zero."""
    beta, alpha = _number(name, "beta", beta), _number(name, "alpha", alpha)
    if input.dtype.is_floating_point or input.dtype.is_complex:
        return beta, alpha
    if name == "addr":
        if isinstance(beta, bool) and input.dtype is not _dtypes.bool:
            raise RuntimeError("Boolean beta only supported for Boolean results.")
        for argument, value in (("beta", beta), ("alpha", alpha)):
            if isinstance(value, float) and value != int(value):
                raise RuntimeError(
                    f"For integral input tensors, argument {argument} must not be a floating point number."
                )
    return tuple(int(value) if isinstance(value, float) else value for value in (beta, alpha))


def check_fused_dtypes(name, input, a, b):
    """torch's refusals of operands of different dtypes, in the order it checks them (before the shapes); addr
    promotes them instead."""
    if name in ("addmm", "addbmm"):
        for first, second, label in ((input, b, "self"), (a, b, "mat1")):
            if first.dtype != second.dtype:
                raise RuntimeError(
                    f"{label} and mat2 must have the same dtype, but got {first.dtype.type_name} and "
                    f"{second.dtype.type_name}"
                )
    elif name == "baddbmm" and input.dtype != a.dtype:
        raise RuntimeError(
            f"Input dtypes must be the same, got: input {input.dtype.cpp_name}, batch1: {a.dtype.cpp_name}, "
            f"batch2: {b.dtype.cpp_name}"
        )
    elif name == "addmv" and not input.dtype == a.dtype == b.dtype:
        raise RuntimeError(
            f"addmv input tensors must have the same dtype, but got {input.dtype.type_name}, {a.dtype.type_name}, "
            f"and {b.dtype.type_name}"
        )


def _fused_product(name, input, shape, operands, beta, alpha):
    """beta * input + alpha * product, with the product and the dtypes already checked (`shape` is its shape)."""
    expanded_shape(input, tuple(shape))
    if name == "addr":
        common = _dtypes.result_type(input, *operands)
        input, operands = input.to(common), [t.to(common) for t in operands]
    beta, alpha = _scalars(name, input, beta, alpha)
    return apply(
        _FUSED[name], [input, *operands, beta, alpha], unit_alpha=alpha == 1, zero_beta=beta == 0, unit_beta=beta == 1
    )


_SHAPES = {
    "mm": lambda a, b: (a[0], b[1]),
    "mv": lambda a, b: (a[0],),
    "bmm": lambda a, b: (a[0], a[1], b[2]),
    "outer": lambda a, b: (a[0], b[0]),
}


def _shape_of(kind, a, b):
    """The shape of the product `kind` of a and b, after torch's checks of that product."""
    if kind == "outer":
        for name, t in (("self", a), ("vec2", b)):
            if t.ndim != 1:
                raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.ndim}-D")
    else:
        error = _NDIM_ERRORS[kind](a, b)
        if error:
            raise RuntimeError(error)
        _check_product(kind, a, b, tuple(a.shape), tuple(b.shape))
    return _SHAPES[kind](a.shape, b.shape)


@autocast_policy("lower")
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2) for matrices (input broadcast to the product's shape)."""
    check_fused_dtypes("addmm", input, mat1, mat2)
    return _fused_product("addmm", input, _shape_of("mm", mat1, mat2), [mat1, mat2], beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    check_fused_dtypes("addmv", input, mat, vec)
    rows = input.shape[0] if input.ndim == 1 else None
    if mat.ndim == 2 and vec.ndim == 1 and (mat.shape[1] != vec.shape[0] or rows not in (None, 1, mat.shape[0])):
        raise RuntimeError(
            f"size mismatch, got input ({input.shape[0] if input.ndim else 1}), mat "
            f"({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})"
        )
    return _fused_product("addmv", input, _shape_of("mv", mat, vec), [mat, vec], beta, alpha)


@autocast_policy("lower")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), batch by batch."""
    check_fused_dtypes("baddbmm", input, batch1, batch2)
    return _fused_product("baddbmm", input, _shape_of("bmm", batch1, batch2), [batch1, batch2], beta, alpha)


@autocast_policy("lower")
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * sum over the batch of batch1[i] @ batch2[i]."""
    check_fused_dtypes("addbmm", input, batch1, batch2)
    shape = _shape_of("bmm", batch1, batch2)[1:]
    return _fused_product("addbmm", input, shape, [batch1, batch2], beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    return _fused_product("addr", input, _shape_of("outer", vec1, vec2), [vec1, vec2], beta, alpha)


_INNER = Op("inner", lambda a, b: jnp.inner(a, b), multilinear=True, backward_name="ViewBackward0")
_VDOT = Op("vdot", lambda a, b: jnp.vdot(a, b), multilinear=True)


@autocast_policy("lower")
def inner(input, other):
    """The sum of products over the last dim of both (a product with a number for 0-D operands)."""
    require_tensors("inner", ("input", "other"), (input, other))
    if input.ndim and other.ndim and input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors but got shapes "
            f"{list(input.shape)} and {list(other.shape)}"
        )
    d = _dtypes.result_type(input, other)
    return apply(_INNER, [input.to(d), other.to(d)])


def vdot(input, other):
    """conj(input) . other for 1-D tensors."""
    require_tensors("vdot", ("input", "other"), (input, other))
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.dtype is not other.dtype:
        raise RuntimeError(
            f"vdot : expected both vectors to have same dtype, but found {input.dtype.type_name} "
            f"and {other.dtype.type_name}"
        )
    if input.shape != other.shape:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src [{other.shape[0]}] "
            f"to have the same number of elements, but got {input.shape[0]} and {other.shape[0]} "
            "elements respectively"
        )
    return apply(_VDOT, [input, other])


_MULTI_DOT = Op("multi_dot", lambda *ms: jnp.linalg.multi_dot(ms), multilinear=True, backward_name="ViewBackward0")


@autocast_policy("lower")
def multi_dot(tensors):
    """The product of two or more matrices (the first and last may be vectors), in the cheapest order."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        allowed = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if t.ndim not in allowed:
            where = "first" if i == 0 else "last" if i == len(tensors) - 1 else None
            raise RuntimeError(
                f"multi_dot(): the {where} tensor must be 1D or 2D but got {t.ndim}D"
                if where
                else f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D"
            )
    for i, (a, b) in enumerate(zip(tensors, tensors[1:])):
        if a.shape[-1] != b.shape[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes {list(a.shape)} and "
                f"{list(b.shape)} cannot be multiplied"
            )
    return apply(_MULTI_DOT, tensors)


def chain_matmul(*matrices):
    """The product of the matrices (deprecated: linalg.multi_dot)."""
    warnings.warn(
        "torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
        "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
        "parameters.",
        UserWarning,
        stacklevel=2,
    )
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


@autocast_policy("lower")
def vecdot(x, y, *, dim=-1):
    """sum(conj(x) * y) over `dim` (the operands broadcast)."""
    d = _wrap_dim(dim, max(x.ndim, y.ndim))
    return (x.conj() * y).sum(d - max(x.ndim, y.ndim))


@autocast_policy("lower")
def matrix_power(input, n):
    """input multiplied by itself n times (the identity for 0, powers of the inverse for negative n)."""
    _matrix("matrix_power", input, integers=True)  # an integer matrix has powers, not inverses (inv refuses)
    if n == 0:
        return eye(input.shape[-1], dtype=input.dtype).expand(input.shape).clone()
    base = inv(input) if n < 0 else input
    if abs(n) == 1:
        return base.clone() if n > 0 else base
    result, power, k = None, base, abs(n)
    while k:  # binary powering, as torch: the fewest products
        if k & 1:
            result = power if result is None else matmul(result, power)
        k >>= 1
        if k:
            power = matmul(power, power)
    return result


_MATRIX_EXP = Op("linalg_matrix_exp", lambda a: jsl.expm(a))


def matrix_exp(A):
    """The matrix exponential: sum over k of A^k / k!."""
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            f"linalg.matrix_exp: A must be batches of square matrices, but they are "
            f"{A.shape[-2] if A.ndim > 1 else A.shape[-1]} by {A.shape[-1]} matrices"
        )
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(
            f"linalg.matrix_exp: Expected a floating point or complex tensor as input. Got {A.dtype.type_name}"
        )
    return apply(_MATRIX_EXP, [A])


def ger(input, vec2):
    """outer under its deprecated name."""
    return outer(input, vec2)


FUNCTIONS = {
    f.__name__: f
    for f in (addmm, addmv, addbmm, baddbmm, addr, inner, vdot, chain_matmul, matrix_power, matrix_exp, ger)
}
METHODS = {
    name: FUNCTIONS[name]
    for name in ("addmm", "addmv", "addbmm", "baddbmm", "addr", "inner", "vdot", "matrix_power", "matrix_exp", "ger")
}
LINALG = {
    "multi_dot": multi_dot,
    "vecdot": vecdot,
    "matrix_power": matrix_power,
    "matrix_exp": matrix_exp,
    "matmul": matmul,
}
