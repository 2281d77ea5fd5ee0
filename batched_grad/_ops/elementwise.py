"""Elementwise ops: unary math, binary arithmetic with torch's promotion, comparisons, clamp, where, lerp."""
import jax
import jax.numpy as jnp
import jax.scipy.special as jsp

from .. import _dtypes
from .._tensor import Tensor
from ._core import Op, apply

_FLOAT_UNARY = {  # integer inputs promote to the default float dtype, like torch
    "exp": jnp.exp, "expm1": jnp.expm1, "log": jnp.log, "log1p": jnp.log1p, "log2": jnp.log2,
    "log10": jnp.log10, "sqrt": jnp.sqrt, "rsqrt": jax.lax.rsqrt, "reciprocal": jnp.reciprocal,
    "sin": jnp.sin, "cos": jnp.cos, "tan": jnp.tan, "asin": jnp.arcsin, "acos": jnp.arccos,
    "atan": jnp.arctan, "sinh": jnp.sinh, "cosh": jnp.cosh, "tanh": jnp.tanh, "asinh": jnp.arcsinh,
    "acosh": jnp.arccosh, "atanh": jnp.arctanh, "sigmoid": jax.nn.sigmoid, "erf": jsp.erf, "erfc": jsp.erfc,
}
_SAME_UNARY = {  # the result keeps the input dtype
    "neg": jnp.negative, "sign": jnp.sign, "square": jnp.square, "floor": jnp.floor, "ceil": jnp.ceil,
    "trunc": jnp.trunc, "frac": lambda a: a - jnp.trunc(a), "relu": jax.nn.relu,
}
_LINEAR = {"neg"}


def _abs(a):
    # d|x|/dx = sign(x), 0 at 0 (torch's convention; JAX gives 1 at 0)
    return jnp.abs(a) if jnp.iscomplexobj(a) else jnp.sign(a) * a


def _unary_op(name, f, float_result):
    def fn(a, *, dtype):
        return f(a.astype(dtype))

    op = Op(name, fn, linear=name in _LINEAR)

    def public(input):
        dtype = _dtypes.float_result(input.dtype) if float_result else input.dtype
        return apply(op, [input], dtype=dtype.np)

    public.__name__ = public.__qualname__ = name
    public.__doc__ = f"Elementwise {name} of `input` (torch.{name})."
    return public


UNARY = {name: _unary_op(name, f, True) for name, f in _FLOAT_UNARY.items()}
UNARY.update({name: _unary_op(name, f, False) for name, f in _SAME_UNARY.items()})
UNARY["abs"] = _unary_op("abs", _abs, False)
_ROUND = Op("round", lambda a, *, decimals: jnp.round(a, decimals))


def round(input, *, decimals=0):  # noqa: A001  (torch's name)
    """Round half to even, to `decimals` decimal places."""
    return apply(_ROUND, [input], decimals=int(decimals))


def _binary_op(name, f, *, float_result=False, linear=False, multilinear=False, backward_name=None):
    op = Op(name, lambda a, b, *, dtype: f(a.astype(dtype), b.astype(dtype)), linear=linear,
            multilinear=multilinear, backward_name=backward_name)

    def public(input, other):
        if not isinstance(input, Tensor) and not isinstance(other, Tensor):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        dtype = _dtypes.result_type(input, other)
        if float_result:
            dtype = _dtypes.float_result(dtype)
        return apply(op, [input, other], dtype=dtype.np)

    public.__name__ = public.__qualname__ = name
    return public


def _torch_remainder(a, b):
    return a - jnp.floor_divide(a, b) * b if jnp.issubdtype(a.dtype, jnp.floating) else jnp.remainder(a, b)


_mul = _binary_op("mul", jnp.multiply, multilinear=True)
_add = _binary_op("add", jnp.add, linear=True)
_sub = _binary_op("sub", jnp.subtract, linear=True)
_true_div = _binary_op("div", jnp.true_divide, float_result=True)
_trunc_div = _binary_op("div", lambda a, b: jnp.trunc(a / b) if jnp.issubdtype(a.dtype, jnp.floating)
                        else jnp.sign(a) * jnp.sign(b) * (jnp.abs(a) // jnp.abs(b)))
floor_divide = _binary_op("floor_divide", jnp.floor_divide, backward_name="FloorDivideBackward0")
remainder = _binary_op("remainder", _torch_remainder)
fmod = _binary_op("fmod", jnp.fmod)
atan2 = _binary_op("atan2", jnp.arctan2, float_result=True)
maximum = _binary_op("maximum", jnp.maximum)
minimum = _binary_op("minimum", jnp.minimum)
hypot = _binary_op("hypot", jnp.hypot, float_result=True)
_pow = _binary_op("pow", jnp.power)


def add(input, other, *, alpha=1):
    """input + alpha * other, with torch's type promotion."""
    return _add(input, other if alpha == 1 else mul(other, alpha))


def sub(input, other, *, alpha=1):
    """input - alpha * other."""
    return _sub(input, other if alpha == 1 else mul(other, alpha))


def mul(input, other):
    """Elementwise product."""
    return _mul(input, other)


def div(input, other, *, rounding_mode=None):
    """True division; rounding_mode "trunc" or "floor" rounds the quotient."""
    if rounding_mode is None:
        return _true_div(input, other)
    if rounding_mode == "trunc":
        return _trunc_div(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")


def true_divide(input, other):
    return _true_div(input, other)


def pow(input, exponent):  # noqa: A001
    """input ** exponent (either may be a number)."""
    return _pow(input, exponent)


def rsub(input, other, *, alpha=1):
    return sub(other, input, alpha=alpha)


def _compare(name, f):
    op = Op(name, lambda a, b, *, dtype: f(a.astype(dtype), b.astype(dtype)))

    def public(input, other):
        return apply(op, [input, other], dtype=_dtypes.result_type(input, other).np)

    public.__name__ = public.__qualname__ = name
    return public


COMPARISONS = {name: _compare(name, f) for name, f in {
    "eq": jnp.equal, "ne": jnp.not_equal, "lt": jnp.less, "le": jnp.less_equal, "gt": jnp.greater,
    "ge": jnp.greater_equal, "logical_and": jnp.logical_and, "logical_or": jnp.logical_or,
    "logical_xor": jnp.logical_xor}.items()}
_PREDICATES = {"isnan": jnp.isnan, "isfinite": jnp.isfinite, "isinf": jnp.isinf, "logical_not": jnp.logical_not}
PREDICATES = {}
for _name, _f in _PREDICATES.items():
    _op = Op(_name, _f)
    PREDICATES[_name] = (lambda op: lambda input: apply(op, [input]))(_op)
    PREDICATES[_name].__name__ = _name


def _clamp_fn(x, lo, hi, *, dtype, has_lo, has_hi):
    x = x.astype(dtype)
    # gradient flows to x where lo <= x <= hi (inclusive), to the bound where it is active, as in torch
    if has_hi:
        hi = hi.astype(dtype)
        x = jnp.where(x > hi, hi, x)
    if has_lo:
        lo = lo.astype(dtype)
        x = jnp.where(x < lo, lo, x)
    return x


_CLAMP = Op("clamp", _clamp_fn)


def clamp(input, min=None, max=None):  # noqa: A002
    """Clamp into [min, max]; either bound may be None, a number or a Tensor."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    dtype = _dtypes.result_type(input, *[b for b in (min, max) if b is not None])
    return apply(_CLAMP, [input, 0 if min is None else min, 0 if max is None else max], dtype=dtype.np,
                 has_lo=min is not None, has_hi=max is not None)


clip = clamp
_WHERE = Op("where", lambda c, a, b, *, dtype: jnp.where(c, a.astype(dtype), b.astype(dtype)))


def where(condition, input=None, other=None):
    """Elements of `input` where `condition`, else of `other`; `where(condition)` is nonzero(as_tuple=True)."""
    if input is None and other is None:
        from .indexing import nonzero

        return nonzero(condition, as_tuple=True)
    return apply(_WHERE, [condition, input, other], dtype=_dtypes.result_type(input, other).np)


_LERP = Op("lerp", lambda a, b, w, *, dtype: a.astype(dtype) + w.astype(dtype) * (b.astype(dtype) - a.astype(dtype)))


def lerp(input, end, weight):
    """input + weight * (end - input)."""
    return apply(_LERP, [input, end, weight], dtype=_dtypes.result_type(input, end).np)
