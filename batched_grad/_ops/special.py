"""Elementwise math beyond the basics, with torch's dtypes and derivatives: xlogy, logaddexp(2), copysign, fmax,
fmin, float_power, ldexp, nextafter, heaviside, igamma(c), polygamma, mvlgamma, logit, nan_to_num, frexp, positive,
the integer ops gcd, lcm, bitwise_not and the shifts, and the bool-valued signbit, isposinf, isneginf, isreal."""

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp

from .. import _dtypes
from .._dtypes import not_implemented
from .._tensor import Tensor
from . import _derivatives
from ._core import SAVES_INPUT, SAVES_NOTHING, SAVES_RESULT, Op, apply
from ._derivatives import raises_in_backward, without_derivative
from ._forward_refused import not_implemented_forward, unsupported_forward
from ._fused_backward import Fused
from .elementwise import PREDICATES, _binary_op, _named, in_float64, pow
from .placement import to
from .return_types import return_type

frexp_result = return_type("frexp", ["mantissa", "exponent"])


def _xlogy(a, b):
    # torch: 0 where a == 0 unless b is nan; the inner `where` keeps log's unselected branch out of the gradient
    zero = (a == 0) & ~jnp.isnan(b)
    return jnp.where(zero, 0, a * jnp.log(jnp.where(zero, 1, b)))


def _fmax(a, b):  # nan loses; at a tie the whole gradient goes to `a`, as torch's
    return jnp.where((a >= b) | jnp.isnan(b), a, b)


def _fmin(a, b):
    return jnp.where((a <= b) | jnp.isnan(b), a, b)


def _nextafter(a, b):  # torch's derivative: 1 for `a` where a != b (0 at a tie), 0 for `b`
    a0, b0 = jax.lax.stop_gradient(a), jax.lax.stop_gradient(b)
    step = jnp.nextafter(a0, b0)
    return jnp.where(a0 != b0, a + (step - a0), step)


_heaviside = without_derivative(
    lambda a, v: jnp.where(a == 0, v, (a > 0).astype(a.dtype)),
    lambda: RuntimeError("derivative for aten::heaviside is not implemented"),
)


def _first_not_differentiable(name, f):
    """f(a, x), whose backward raises torch's NotImplementedError for its first operand."""
    message = f"the derivative for '{name}: input' is not implemented."
    return lambda a, x: f(raises_in_backward(a, lambda: NotImplementedError(message)), x)


def _kernel_for(kernel, kinds, d):
    """torch's NotImplementedError when its kernel has no version for dtype d (of a kind in `kinds`)."""
    if d.np.kind in kinds:
        raise not_implemented(kernel, d)


def _checked(fn, check):
    """fn(input, other) after check(input, other)."""

    def public(input, other):
        check(input, other)
        return fn(input, other)

    return _named(public, fn.__name__, fn.__doc__)


def _kernel_check(kernel, kinds):
    return lambda input, other: _kernel_for(kernel, kinds, _dtypes.result_type(input, other))


def _same_dtype(name):
    def check(input, other):
        if input.dtype is not other.dtype:
            raise RuntimeError(f"{name} is not yet implemented for tensors with different dtypes.")

    return check


xlogy = _binary_op(
    "xlogy",
    _xlogy,
    "input * log(other), and 0 where input is 0 (unless other is nan).",
    float_result=True,
    overloads={(False, True): ("XlogyBackward1", SAVES_INPUT), (True, False): ("XlogyBackward2", SAVES_INPUT)},
)
logaddexp = _binary_op(
    "logaddexp", jnp.logaddexp, "log(exp(input) + exp(other)), computed stably.", float_result=True, tensors_only=True
)
logaddexp2 = _binary_op(
    "logaddexp2",
    jnp.logaddexp2,
    "log2(2 ** input + 2 ** other), computed stably.",
    float_result=True,
    tensors_only=True,
)
copysign = _binary_op(
    "copysign",
    jnp.copysign,
    "The magnitude of `input` with the sign of `other`.",
    float_result=True,
    # torch's derivative in the input reads the input and the result; in `other` it is zeros
    fused=Fused(apart=lambda sig: (1,), zeros=True),
    overloads={(True, False): ("CopysignBackward1", SAVES_INPUT)},
)
fmax = _binary_op(
    "fmax", _fmax, "The larger of input and other, elementwise; a nan loses to a number.", tensors_only=True
)
fmin = _binary_op(
    "fmin", _fmin, "The smaller of input and other, elementwise; a nan loses to a number.", tensors_only=True
)
ldexp = _binary_op("ldexp", lambda a, b: a * jnp.exp2(b), "input * 2 ** other.", float_result=True, tensors_only=True)
nextafter = _binary_op(
    "nextafter", _nextafter, "The next floating point value after input towards other.", tensors_only=True
)
heaviside = _checked(
    _binary_op(
        "heaviside",
        _heaviside,
        "The step function: 0 below zero, 1 above, `values` at zero.",
        tensors_only=True,
        forward_error=unsupported_forward("heaviside"),
    ),
    _same_dtype("heaviside"),
)
igamma = _checked(
    _binary_op(
        "igamma",
        _first_not_differentiable("igamma", jsp.gammainc),
        "The regularized lower incomplete gamma function P(input, other).",
        float_result=True,
        tensors_only=True,
        forward_error=not_implemented_forward("igamma"),
    ),
    _kernel_check("igamma_cpu", "biuc"),
)
igammac = _checked(
    _binary_op(
        "igammac",
        _first_not_differentiable("igammac", jsp.gammaincc),
        "The regularized upper incomplete gamma function Q(input, other).",
        float_result=True,
        tensors_only=True,
        forward_error=not_implemented_forward("igammac"),
    ),
    _kernel_check("igammac_cpu", "biuc"),
)
gcd = _checked(
    _binary_op("gcd", jnp.gcd, "The greatest common divisor of input and other (integers).", tensors_only=True),
    _kernel_check("gcd_cpu", "fcb"),
)
lcm = _checked(
    _binary_op("lcm", jnp.lcm, "The least common multiple of input and other (integers).", tensors_only=True),
    _kernel_check("lcm_cpu", "fcb"),
)
bitwise_left_shift = _checked(
    _binary_op("bitwise_left_shift", jnp.left_shift, "input << other (integers).", two_numbers=True),
    _kernel_check("lshift_cpu", "fcb"),
)
bitwise_right_shift = _checked(
    _binary_op("bitwise_right_shift", jnp.right_shift, "input >> other (arithmetic, integers).", two_numbers=True),
    _kernel_check("rshift_cpu", "fcb"),
)


def float_power(input, exponent):
    """input ** exponent computed in double precision (complex128 for complex operands)."""
    complex_ = any(
        isinstance(x, (Tensor, complex)) and (x.dtype.is_complex if isinstance(x, Tensor) else True)
        for x in (input, exponent)
    )
    dtype = _dtypes.complex128 if complex_ else _dtypes.float64
    return pow(
        to(input, dtype) if isinstance(input, Tensor) else input,
        to(exponent, dtype) if isinstance(exponent, Tensor) else exponent,
    )


# ---- unary ops with parameters ------------------------------------------------------------------------------
def _logit(a, *, dtype):
    a = a.astype(dtype)
    return jnp.log(a / (1 - a))


def _logit_clamped(a, eps, *, dtype):  # eps is an operand (a 0-d array): a new value compiles nothing
    a, eps = a.astype(dtype), eps.astype(dtype)
    # torch clamps into [eps, 1 - eps]: the derivative is 0 outside
    return _logit(jnp.where(a < eps, eps, jnp.where(a > 1 - eps, 1 - eps, a)), dtype=dtype)


def _polygamma(a, *, n, dtype):
    # in float64 for float32 (elementwise.in_float64): XLA's float32 polygamma(1, x) is 19 ulp off, torch's 3
    return in_float64(lambda a: _derivatives.digamma(a) if n == 0 else jsp.polygamma(n, a))(a.astype(dtype))


def _mvlgamma(a, *, p, dtype):
    # in float64 for float32: XLA's float32 form is 36 ulp off, torch's 1.3
    return in_float64(lambda a: jsp.multigammaln(a, p))(a.astype(dtype))


def _frexp(a):
    mantissa, exponent = jnp.frexp(a)
    # mantissa = a * 2 ** -exponent exactly: torch's derivative 2 ** -exponent
    return a * jax.lax.stop_gradient(jnp.where(jnp.isfinite(a), mantissa / jnp.where(a == 0, 1, a), 1)), exponent


_LOGIT = Op("logit", _logit, diagonal=True)
_LOGIT_CLAMPED = Op("logit", _logit_clamped, diagonal=True, inputs=1)
_POLYGAMMA = Op("polygamma", _polygamma, diagonal=True)
_MVLGAMMA = Op("mvlgamma", _mvlgamma, diagonal=True)
_NAN_TO_NUM = Op(
    "nan_to_num",
    lambda a, *, nan, posinf, neginf: jnp.nan_to_num(a, nan=nan, posinf=posinf, neginf=neginf),
    diagonal=True,
)
_FREXP = Op("frexp", _frexp, multi=True, torch_saves=SAVES_RESULT)
_BITWISE_NOT = Op("bitwise_not", jnp.invert)


def logit(input, eps=None):
    """log(p / (1 - p)), with p clamped into [eps, 1 - eps] when eps is given."""
    dtype = _dtypes.float_result(input.dtype).np
    if eps is None:
        return apply(_LOGIT, [input], dtype=dtype)
    return apply(_LOGIT_CLAMPED, [input, float(eps)], dtype=dtype)


def polygamma(n, input):
    """The n-th derivative of digamma (digamma itself for n = 0)."""
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return apply(_POLYGAMMA, [input], n=int(n), dtype=_dtypes.float_result(input.dtype).np)


def mvlgamma(input, p):
    """The multivariate log-gamma function of dimension p."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if not input.dtype.is_floating_point:
        raise RuntimeError("mvlgamma is not implemented for " + input.dtype.type_name)
    return apply(_MVLGAMMA, [input], p=int(p), dtype=input.dtype.np)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """nan, +inf and -inf replaced by `nan`, `posinf` and `neginf` (the dtype's largest and lowest by default)."""
    if not input.dtype.is_floating_point:
        return to(input, input.dtype, copy=True)
    return apply(
        _NAN_TO_NUM,
        [input],
        nan=float(nan),
        posinf=None if posinf is None else float(posinf),
        neginf=None if neginf is None else float(neginf),
    )


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2 ** exponent and 0.5 <= |mantissa| < 1 (int32 exponent)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    return frexp_result(*apply(_FREXP, [input]))


def positive(input):
    """`input` itself (+input); refused for bool tensors."""
    if input.dtype is _dtypes.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def bitwise_not(input):
    """~input: the bitwise complement of an integer tensor, logical not of a bool one."""
    if input.dtype is _dtypes.bool:
        return PREDICATES["logical_not"](input)
    _kernel_for("bitwise_not_cpu", "fc", input.dtype)
    return apply(_BITWISE_NOT, [input])


def _bool_predicate(name, f, doc):
    op = Op(name, f, torch_saves=SAVES_NOTHING)
    return _named(lambda input: apply(op, [input]), name, doc)


signbit = _bool_predicate("signbit", jnp.signbit, "Whether the sign bit is set (negative numbers and -0.0).")
isposinf = _bool_predicate(
    "isposinf",
    lambda a: a == jnp.inf if jnp.issubdtype(a.dtype, jnp.floating) else jnp.zeros(a.shape, bool),
    "Whether each element is +inf.",
)
isneginf = _bool_predicate(
    "isneginf",
    lambda a: a == -jnp.inf if jnp.issubdtype(a.dtype, jnp.floating) else jnp.zeros(a.shape, bool),
    "Whether each element is -inf.",
)
isreal = _bool_predicate(
    "isreal",
    lambda a: jnp.imag(a) == 0 if jnp.iscomplexobj(a) else jnp.ones(a.shape, bool),
    "Whether each element has a zero imaginary part (always, for a real tensor).",
)

FUNCTIONS = {
    f.__name__: f
    for f in (
        xlogy,
        logaddexp,
        logaddexp2,
        copysign,
        fmax,
        fmin,
        ldexp,
        nextafter,
        heaviside,
        igamma,
        igammac,
        gcd,
        lcm,
        bitwise_left_shift,
        bitwise_right_shift,
        float_power,
        logit,
        polygamma,
        mvlgamma,
        nan_to_num,
        frexp,
        positive,
        bitwise_not,
        signbit,
        isposinf,
        isneginf,
        isreal,
    )
}


def _polygamma_method(self, n):
    """polygamma(n, self): the n-th derivative of digamma."""
    return polygamma(n, self)


def _float_power_(self, exponent):
    """In-place float_power: self must already be double (or complex double)."""
    if self.dtype not in (_dtypes.float64, _dtypes.complex128):
        wanted = (
            "ComplexDouble"
            if isinstance(exponent, complex)
            or self.dtype.is_complex
            or (isinstance(exponent, Tensor) and exponent.dtype.is_complex)
            else "Double"
        )
        raise RuntimeError(
            f"the base given to float_power_ has dtype {self.dtype.type_name} but the "
            f"operation's result requires dtype {wanted}"
        )
    return self._assign(float_power(self, exponent), "float_power_", (exponent,))


_polygamma_method.__name__ = "polygamma"
_float_power_.__name__ = "float_power_"
METHODS = dict(FUNCTIONS, polygamma=_polygamma_method, float_power_=_float_power_)
