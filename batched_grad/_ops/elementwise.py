"""Elementwise ops: unary math, binary arithmetic with torch's promotion, comparisons, clamp, where, lerp."""

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np

from .. import _dtypes
from .._dtypes import not_implemented
from .._foreign import not_a_tensor
from .._tensor import Tensor
from . import _derivatives
from ._core import SAVES_BOTH, SAVES_INPUT, SAVES_RESULT, Op, apply
from ._host_forms import ARITHMETIC_VJPS, small_floats
from .indexing import nonzero


def _dtype_of(x):
    return x.dtype if isinstance(x, Tensor) else _dtypes.scalar_dtype(x)


def broadcast_shape(*shapes):
    """The shape `shapes` broadcast to, or torch's RuntimeError when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n != 1 and out[i] != 1 and n != out[i]:
                raise RuntimeError(
                    f"The size of tensor a ({out[i]}) must match the size of tensor b ({n}) at "
                    f"non-singleton dimension {i}"
                )
            out[i] = n if n != 1 else out[i]
    return tuple(out)


def _check_broadcast(operands):
    """Raise torch's RuntimeError when the operands' shapes do not broadcast."""
    broadcast_shape(*[tuple(x.shape) for x in operands if isinstance(x, Tensor)])


def _named(public, name, doc):
    """`public` as the module function `name`, documented by `doc`."""
    public.__name__ = public.__qualname__ = name
    public.__doc__ = doc
    return public


def _apply(op, operands, **static):
    try:
        return apply(op, operands, **static)
    except (TypeError, ValueError):
        _check_broadcast(operands)
        raise


def _on_floats(torch_derivative, plain):
    """`torch_derivative` (_derivatives.py) for real floating operands, `plain` for the others."""
    return lambda *arrays: (torch_derivative if jnp.issubdtype(arrays[0].dtype, jnp.floating) else plain)(*arrays)


# ---- unary ------------------------------------------------------------------------------------------------
_FLOAT_UNARY = {  # integer and bool inputs promote to the default float dtype, like torch
    "exp": jnp.exp,
    "expm1": jnp.expm1,
    "log": jnp.log,
    "log1p": jnp.log1p,
    "log2": jnp.log2,
    "log10": jnp.log10,
    "sqrt": jnp.sqrt,
    "rsqrt": _derivatives.rsqrt,
    "reciprocal": jnp.reciprocal,
    "sin": jnp.sin,
    "cos": jnp.cos,
    "tan": jnp.tan,
    "asin": jnp.arcsin,
    "acos": jnp.arccos,
    "atan": jnp.arctan,
    "sinh": jnp.sinh,
    "cosh": jnp.cosh,
    "tanh": jnp.tanh,
    "asinh": jnp.arcsinh,
    "acosh": jnp.arccosh,
    "atanh": jnp.arctanh,
    "sigmoid": jax.nn.sigmoid,
    "erf": jsp.erf,
    "erfc": jsp.erfc,
    "exp2": jnp.exp2,
    "sinc": jnp.sinc,
    "deg2rad": jnp.deg2rad,
    "rad2deg": jnp.rad2deg,
    "lgamma": jsp.gammaln,
    "digamma": _derivatives.digamma,
    "erfinv": jsp.erfinv,
    "i0": jsp.i0,
}


def _sign(a):
    return a if a.dtype == jnp.bool_ else _on_floats(_derivatives.sign, jnp.sign)(a)


def _unit(z):
    # z / |z|, 0 at 0 (lax.sign of a complex number has a zero derivative)
    zero = z == 0
    return jnp.where(zero, 0, z / jnp.where(zero, 1, jnp.abs(z)))


_SAME_UNARY = {  # the result keeps the input dtype
    "neg": jnp.negative,
    "abs": _on_floats(_derivatives.abs_, jnp.abs),
    "sign": _sign,
    "square": jnp.square,
    "floor": jnp.floor,
    "ceil": jnp.ceil,
    "trunc": jnp.trunc,
    "frac": lambda a: a - jnp.trunc(a),
    "relu": _on_floats(_derivatives.relu, jax.nn.relu),
    "sgn": lambda a: _unit(a) if jnp.issubdtype(a.dtype, jnp.complexfloating) else _sign(a),
}
_HOST_UNARY = {name: small_floats(f) for name, f in {"neg": np.negative, "tanh": np.tanh}.items()}
_RESULT_DTYPE = {"square": lambda d: _dtypes.int64 if d is _dtypes.bool else d}  # torch computes bool**2 in int64
_UNARY_NAMES = {
    "log1p": "Log1PBackward0",
    "square": "PowBackward0",
    "deg2rad": "Deg2RadBackward0",
    "rad2deg": "Rad2DegBackward0",
}  # torch's names, where not the op's name
# torch's derivative of these reads the result, not the input (Op.torch_saves)
_RESULT_SAVED = {"exp", "expm1", "sqrt", "rsqrt", "reciprocal", "tan", "tanh", "sigmoid", "relu", "exp2"}
_NO_KERNEL = {  # dtype kinds torch has no kernel for (by kernel name): NotImplementedError
    "abs": "b",
    "floor": "b",
    "ceil": "b",
    "round": "b",
    "trunc": "b",
    "frac": "biu",
    "relu": "b",
    "div_floor": "bc",
    "remainder": "bc",
    "fmod": "bc",
    "hypot": "biuc",
    "atan2": "c",
}
_COMPLEX_ERRORS = {name: f"{name} not implemented for complex tensors." for name in ("maximum", "minimum")}
_BOOL_ERRORS = {
    "neg": "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
    "use the `~` or `logical_not()` operator instead.",
    "sub": "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
    "mask, use the `~` or `logical_not()` operator instead.",
}


def _check_dtype(name, d):
    if d.np.kind in _NO_KERNEL.get(name, ""):
        raise not_implemented(f"{name}_cpu", d)
    if d is _dtypes.bool and name in _BOOL_ERRORS:
        raise RuntimeError(_BOOL_ERRORS[name])
    if d.is_complex and name in _COMPLEX_ERRORS:
        raise RuntimeError(_COMPLEX_ERRORS[name])


def _unary_op(name, f, float_result):
    op = Op(
        name,
        lambda a, *, dtype: f(a.astype(dtype)),
        _UNARY_NAMES.get(name),
        linear=name == "neg",
        diagonal=True,
        torch_saves=SAVES_RESULT if name in _RESULT_SAVED else SAVES_INPUT,
        host=_HOST_UNARY.get(name),
        host_vjp=ARITHMETIC_VJPS.get(name),
    )
    rule = _dtypes.float_result if float_result else _RESULT_DTYPE.get(name, lambda d: d)

    def public(input):
        dtype = input.dtype
        _check_dtype(name, dtype)
        return apply(op, [input], dtype=rule(dtype).np)

    return _named(public, name, f"Elementwise {name} of `input` (torch.{name}).")


UNARY = {name: _unary_op(name, f, True) for name, f in _FLOAT_UNARY.items()}
UNARY.update({name: _unary_op(name, f, False) for name, f in _SAME_UNARY.items()})
_ROUND = Op("round", lambda a, *, decimals: jnp.round(a, decimals))


def round(input, *, decimals=0):  # noqa: A001  (torch's name)
    """Round half to even, to `decimals` decimal places."""
    _check_dtype("round", input.dtype)
    return apply(_ROUND, [input], decimals=int(decimals))


# ---- binary arithmetic ------------------------------------------------------------------------------------
def _binary_op(
    name,
    f,
    doc=None,
    *,
    float_result=False,
    linear=False,
    multilinear=False,
    two_numbers=False,
    overloads=(),
    torch_saves=SAVES_INPUT,
    kernel=None,
    tensors_only=False,
    host=None,
):
    """`overloads`: {(input is a Tensor, other is a Tensor): (torch's backward name, Op.torch_saves)} where torch
    records another overload of the op (`2 ** x` is PowBackward2, and its derivative reads the result). `kernel`:
    torch's kernel name, when it differs from `name`, for the dtypes it lacks (_NO_KERNEL). `tensors_only`: torch
    takes no number for either operand. `host`: a NumPy function computing it (Op.host, for small float operands)."""
    kernel = kernel or name
    host = host and small_floats(host)
    checked = kernel in _NO_KERNEL or kernel in _COMPLEX_ERRORS

    def make(backward_name=None, saves=torch_saves):
        return Op(
            name,
            lambda a, b, *, dtype: f(a.astype(dtype), b.astype(dtype)),
            backward_name,
            linear=linear,
            multilinear=multilinear,
            diagonal=True,
            torch_saves=saves,
            host=host,
            host_vjp=host and ARITHMETIC_VJPS.get(name),
        )

    op, ops = make(), {kinds: make(*overload) for kinds, overload in dict(overloads).items()}

    def public(input, other):
        if tensors_only:
            for position, (argument, value) in enumerate((("input", input), ("other", other)), 1):
                if not isinstance(value, Tensor):
                    raise not_a_tensor(name, argument, value, position)
        if not isinstance(input, Tensor) and not isinstance(other, Tensor):
            if not two_numbers:
                raise not_a_tensor(name, "input", input)
            input = Tensor._wrap(np.asarray(input, _dtypes.scalar_dtype(input).np))  # torch.add(1, 2) is tensor(3)
        if isinstance(input, Tensor) and isinstance(other, Tensor) and input._v.dtype == other._v.dtype:
            dtype = input.dtype  # the common case, without promotion
        else:
            dtype = _dtypes.result_type(input, other)
        if checked:
            _check_dtype(kernel, dtype)
        if float_result:
            dtype = _dtypes.float_result(dtype)
        chosen = ops.get((isinstance(input, Tensor), isinstance(other, Tensor)), op) if ops else op
        return _apply(chosen, [input, other], dtype=dtype.np)

    return _named(public, name, doc)


def _float_remainder(a, b):
    # torch's formula (the sign of the divisor), so values agree bit for bit; d/db = -floor(a / b)
    mod = jnp.fmod(a, b)
    return jnp.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


def _remainder(a, b):
    return _float_remainder(a, b) if jnp.issubdtype(a.dtype, jnp.inexact) else jnp.remainder(a, b)


def _trunc_divide(a, b):
    if jnp.issubdtype(a.dtype, jnp.inexact):
        return jnp.trunc(a / b)
    return jnp.sign(a) * jnp.sign(b) * (jnp.abs(a) // jnp.abs(b))


def _pow_fn(a, b):
    if jnp.issubdtype(a.dtype, jnp.floating):
        return _derivatives.pow_(*jnp.broadcast_arrays(a, b))
    if jnp.issubdtype(a.dtype, jnp.complexfloating):
        return jnp.power(a, b)
    # integers to negative powers: 1 for 1, +-1 for -1, else 0 (torch's integer semantics)
    neg = b < 0
    odd = (b % 2) != 0
    small = jnp.where(a == 1, 1, jnp.where(a == -1, jnp.where(odd, -1, 1), 0)).astype(a.dtype)
    return jnp.where(neg, small, jnp.power(a, jnp.where(neg, 0, b)))


_mul = _binary_op("mul", jnp.multiply, multilinear=True, two_numbers=True, host=np.multiply)
_add = _binary_op("add", jnp.add, linear=True, two_numbers=True, host=np.add)
_sub = _binary_op(
    "sub",
    jnp.subtract,
    linear=True,
    two_numbers=True,
    overloads={(False, True): ("RsubBackward1", SAVES_INPUT)},
    host=np.subtract,
)
_true_div = _binary_op(
    "div", jnp.true_divide, float_result=True, two_numbers=True, multilinear=(0,), host=np.true_divide
)
_trunc_div = _binary_op("div", _trunc_divide)
# torch raises "derivative for aten::floor_divide is not implemented"; we give its a.e. derivative, zero
floor_divide = _binary_op(
    "floor_divide",
    jnp.floor_divide,
    "floor(input / other), elementwise (zero gradient).",
    kernel="div_floor",
    two_numbers=True,
)
remainder = _binary_op("remainder", _remainder, "Python's modulus, elementwise: the result has the sign of `other`.")
fmod = _binary_op("fmod", jnp.fmod, "C's remainder, elementwise: the result has the sign of `input`.")
atan2 = _binary_op(
    "atan2",
    _derivatives.atan2,
    "The angle of the point (other, input), elementwise, in [-pi, pi].",
    float_result=True,
    tensors_only=True,
)
maximum = _binary_op(
    "maximum",
    _on_floats(_derivatives.maximum, jnp.maximum),
    "The larger of `input` and `other`, elementwise (at ties each gets half the gradient).",
    tensors_only=True,
)
minimum = _binary_op(
    "minimum",
    _on_floats(_derivatives.minimum, jnp.minimum),
    "The smaller of `input` and `other`, elementwise (at ties each gets half the gradient).",
    tensors_only=True,
)
hypot = _binary_op(
    "hypot",
    _derivatives.hypot,
    "sqrt(input ** 2 + other ** 2), elementwise.",
    float_result=True,
    torch_saves=SAVES_BOTH,
    tensors_only=True,
)
_pow = _binary_op(
    "pow", _pow_fn, overloads={(True, True): ("PowBackward1", SAVES_BOTH), (False, True): ("PowBackward2", SAVES_BOTH)}
)


def _scaled(other, alpha, input):
    if alpha == 1:
        return other
    if isinstance(alpha, float) and not _dtypes.result_type(input, other).is_floating_point:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    return mul(other, alpha) if isinstance(other, Tensor) else other * alpha


def add(input, other, *, alpha=1):
    """input + alpha * other, with torch's type promotion."""
    return _add(input, _scaled(other, alpha, input))


def sub(input, other, *, alpha=1):
    """input - alpha * other."""
    if _dtypes.bool in (_dtype_of(input), _dtype_of(other)):
        raise RuntimeError(_BOOL_ERRORS["sub"])
    return _sub(input, _scaled(other, alpha, input))


def mul(input, other):
    """Elementwise product."""
    return _mul(input, other)


def div(input, other, *, rounding_mode=None):
    """True division; rounding_mode "trunc" or "floor" rounds the quotient (zero gradient)."""
    if rounding_mode is None:
        return _true_div(input, other)
    if rounding_mode == "trunc":
        return _trunc_div(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")


def true_divide(input, other):
    """input / other with a floating point result (div without rounding_mode)."""
    return _true_div(input, other)


# The exponents torch computes by a formula of their own (x * x, a square root, a reciprocal, ...) are part of the
# program, as constants: XLA then simplifies the power as torch does. Any other number exponent is an operand, so
# that a new value compiles nothing.
_POW_SCALAR = Op(
    "pow", lambda a, *, exponent, dtype: _pow_fn(a.astype(dtype), jnp.asarray(exponent, dtype)), diagonal=True
)
_CONSTANT_EXPONENTS = frozenset({-2, -1, -0.5, 0, 0.5, 1, 2, 3})
_POW_NUMBER = Op("pow", lambda a, b, *, dtype: _pow_fn(a.astype(dtype), b.astype(dtype)), diagonal=True, inputs=1)


def pow(input, exponent):  # noqa: A001
    """input ** exponent (either may be a number)."""
    if isinstance(exponent, int) and exponent < 0 and isinstance(input, Tensor) and _dtypes.category(input.dtype) < 2:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if isinstance(input, Tensor) and type(exponent) in (int, float) and exponent in _CONSTANT_EXPONENTS:
        return _apply(_POW_SCALAR, [input], exponent=exponent, dtype=_dtypes.result_type(input, exponent).np)
    if isinstance(input, Tensor) and type(exponent) in (int, float):
        return _apply(_POW_NUMBER, [input, exponent], dtype=_dtypes.result_type(input, exponent).np)
    return _pow(input, exponent)


def rsub(input, other, *, alpha=1):
    """other - alpha * input (sub with the operands swapped)."""
    return sub(other, input, alpha=alpha)


# ---- comparisons and logic ---------------------------------------------------------------------------------
def _compare(name, f, doc):
    op = Op(name, lambda a, b, *, dtype: f(a.astype(dtype), b.astype(dtype)))

    def public(input, other):
        return _apply(op, [input, other], dtype=_dtypes.result_type(input, other).np)

    return _named(public, name, doc)


COMPARISONS = {
    name: _compare(name, f, doc)
    for name, (f, doc) in {
        "eq": (jnp.equal, "input == other, elementwise (broadcast), as a bool tensor."),
        "ne": (jnp.not_equal, "input != other, elementwise (broadcast), as a bool tensor."),
        "lt": (jnp.less, "input < other, elementwise (broadcast), as a bool tensor."),
        "le": (jnp.less_equal, "input <= other, elementwise (broadcast), as a bool tensor."),
        "gt": (jnp.greater, "input > other, elementwise (broadcast), as a bool tensor."),
        "ge": (jnp.greater_equal, "input >= other, elementwise (broadcast), as a bool tensor."),
        "logical_and": (jnp.logical_and, "Elementwise logical and of the operands' truth values, as a bool tensor."),
        "logical_or": (jnp.logical_or, "Elementwise logical or of the operands' truth values, as a bool tensor."),
        "logical_xor": (jnp.logical_xor, "Elementwise logical xor of the operands' truth values, as a bool tensor."),
        "bitwise_and": (jnp.bitwise_and, "input & other, elementwise, for integer and bool tensors."),
        "bitwise_or": (jnp.bitwise_or, "input | other, elementwise, for integer and bool tensors."),
        "bitwise_xor": (jnp.bitwise_xor, "input ^ other, elementwise, for integer and bool tensors."),
    }.items()
}


def _predicate(name, f, doc):
    op = Op(name, f)

    def public(input):
        return apply(op, [input])

    return _named(public, name, doc)


PREDICATES = {
    name: _predicate(name, f, doc)
    for name, (f, doc) in {
        "isnan": (jnp.isnan, "Whether each element is NaN, as a bool tensor."),
        "isfinite": (jnp.isfinite, "Whether each element is finite (neither inf nor NaN), as a bool tensor."),
        "isinf": (jnp.isinf, "Whether each element is +inf or -inf, as a bool tensor."),
        "logical_not": (jnp.logical_not, "Elementwise logical not: True where `input` is zero, as a bool tensor."),
    }.items()
}


# ---- clamp, where, lerp ------------------------------------------------------------------------------------
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
        return nonzero(condition, as_tuple=True)
    if condition.dtype is not _dtypes.bool:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype {condition.dtype.type_name}"
        )
    return _apply(_WHERE, [condition, input, other], dtype=_dtypes.result_type(input, other).np)


def _lerp_fn(a, b, w, *, dtype):
    # torch's two-sided formula (exact at both ends); both branches have the same derivatives
    a, b, w = a.astype(dtype), b.astype(dtype), w.astype(dtype)
    return jnp.where(jnp.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


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
