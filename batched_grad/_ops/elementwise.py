"""Elementwise ops: unary math, binary arithmetic with torch's promotion, comparisons (clamp, where and lerp are in
ternary.py)."""

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np

from .. import _dtypes
from .._dtypes import not_implemented
from .._foreign import not_a_tensor
from .._host import host_array
from .._tensor import Tensor
from . import _derivatives
from ._core import SAVES_BOTH, SAVES_INPUT, SAVES_RESULT, Op, apply, apply_in_place
from ._fused_backward import FUSED_ZEROS, Fused
from ._host_forms import ARITHMETIC_VJPS, in_float64_host, small_float_vjp, small_floats
from ._mixed_dtype import HALF_ARRAY_DTYPES, halves_in_float32
from .rounding import divide
from .scaled_sum import FUSED_DTYPES, alpha_number, fusable, scaled_sum, scaled_sum_in_place
from .shape import broadcast_shapes


def _dtype_of(x):
    return x.dtype if isinstance(x, Tensor) else _dtypes.scalar_dtype(x)


def broadcast_shape(*shapes):
    """The shape `shapes` broadcast to, or torch's RuntimeError when they do not broadcast: like torch's
    TensorIterator, the shapes are folded in pairwise from the left, each pair compared from its last dimension."""
    return functools.reduce(broadcast_shapes, shapes, ())


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
class Unary(NamedTuple):
    """One unary op. `fn`: its function on arrays. `float_result`: integer and bool inputs promote to the default
    float dtype, as torch's (else the result keeps the input dtype, or takes `result_dtype(input dtype)`).
    `saves_result`: torch's derivative reads the result, not the input (Op.torch_saves). `backward_name`: torch's
    node name, where it is not the op's. `no_kernel`: the dtype kinds torch has no kernel for (NotImplementedError).
    `bool_error`: torch's error for a bool input. `linear`: Op.linear. `host`: a NumPy form for small floats.
    `fused`: Op.fused."""

    fn: Callable
    float_result: bool = True
    saves_result: bool = False
    backward_name: str | None = None
    no_kernel: str = ""
    result_dtype: Callable | None = None
    bool_error: str | None = None
    linear: bool = False
    host: Callable | None = None
    fused: Fused | None = None


def in_float64(fn):
    """`fn` computed in float64 for a float32 operand and rounded back to float32. For the functions whose float32
    XLA form is several ulp off (measured on 100k points against float64, max ulp, XLA / torch: tanh 4.4 / 0.6,
    sinh and cosh 8.7 / 1.0, expm1 4.9 / 0.5, erfc 62 / 0.8, erfinv 3.4 / 0.5, lgamma and digamma far off near
    their zeros): the rounded float64 value is within 0.5-1 ulp, and being a rounding of an accurate value, the same
    in every tier (host form, kernel, fused or vmapped program, where XLA's float32 forms differ by fusion). On the
    CPU it costs 2-5x a float32 kernel on large arrays, nothing measurable on small ones."""

    def wide(a):
        return fn(a.astype(jnp.float64)).astype(a.dtype) if a.dtype == jnp.float32 else fn(a)

    return wide


def _sign(a):
    return a if a.dtype == jnp.bool_ else _on_floats(_derivatives.sign, jnp.sign)(a)


def _unit(z):
    # z / |z|, 0 at 0 (lax.sign of a complex number has a zero derivative)
    zero = z == 0
    return jnp.where(zero, 0, z / jnp.where(zero, 1, jnp.abs(z)))


_NEG_BOOL = (
    "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` "
    "or `logical_not()` operator instead."
)
_SUB_BOOLS = (
    "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator "
    "instead."
)
_SUB_BOOL = (
    "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the "
    "`~` or `logical_not()` operator instead."
)


def _square_dtype(d):
    return _dtypes.int64 if d is _dtypes.bool else d  # torch computes bool ** 2 in int64


_SAME = {"float_result": False}  # the result keeps the input dtype
_UNARY_ROWS = {
    "exp": Unary(jnp.exp, saves_result=True),
    "expm1": Unary(in_float64(jnp.expm1), saves_result=True),
    "log": Unary(jnp.log),
    "log1p": Unary(jnp.log1p, backward_name="Log1PBackward0"),
    "log2": Unary(jnp.log2),
    "log10": Unary(jnp.log10),
    "sqrt": Unary(jnp.sqrt, saves_result=True),
    "rsqrt": Unary(_derivatives.rsqrt, saves_result=True),
    "reciprocal": Unary(jnp.reciprocal, saves_result=True),
    "sin": Unary(jnp.sin),
    "cos": Unary(jnp.cos),
    "tan": Unary(jnp.tan, saves_result=True),
    "asin": Unary(jnp.arcsin),
    "acos": Unary(jnp.arccos),
    "atan": Unary(jnp.arctan),
    "sinh": Unary(in_float64(jnp.sinh)),
    "cosh": Unary(in_float64(jnp.cosh)),
    "tanh": Unary(in_float64(jnp.tanh), saves_result=True, host=in_float64_host(np.tanh)),
    "asinh": Unary(jnp.arcsinh),
    "acosh": Unary(jnp.arccosh),
    "atanh": Unary(jnp.arctanh),
    "sigmoid": Unary(halves_in_float32(jax.nn.sigmoid), saves_result=True),
    "erf": Unary(jsp.erf),
    "erfc": Unary(in_float64(jsp.erfc)),
    "exp2": Unary(jnp.exp2, saves_result=True),
    "sinc": Unary(jnp.sinc),
    "deg2rad": Unary(jnp.deg2rad, backward_name="Deg2RadBackward0"),
    "rad2deg": Unary(jnp.rad2deg, backward_name="Rad2DegBackward0"),
    "lgamma": Unary(in_float64(jsp.gammaln)),
    "digamma": Unary(in_float64(_derivatives.digamma)),
    "erfinv": Unary(in_float64(jsp.erfinv)),
    "i0": Unary(jsp.i0),
    "neg": Unary(jnp.negative, **_SAME, bool_error=_NEG_BOOL, linear=True, host=np.negative),
    "abs": Unary(_on_floats(_derivatives.abs_, jnp.abs), **_SAME, no_kernel="b"),
    "sign": Unary(_sign, **_SAME),
    # torch computes bool ** 2 in int64
    "square": Unary(
        jnp.square,
        **_SAME,
        backward_name="PowBackward0",
        result_dtype=lambda d: _dtypes.int64 if d is _dtypes.bool else d,
    ),
    "floor": Unary(jnp.floor, **_SAME, no_kernel="b"),
    "ceil": Unary(jnp.ceil, **_SAME, no_kernel="b"),
    "trunc": Unary(jnp.trunc, **_SAME, no_kernel="b"),
    "frac": Unary(lambda a: a - jnp.trunc(a), **_SAME, no_kernel="biu"),
    "relu": Unary(
        _on_floats(_derivatives.relu, jax.nn.relu), **_SAME, saves_result=True, no_kernel="b", fused=FUSED_ZEROS
    ),
    "sgn": Unary(lambda a: _unit(a) if jnp.issubdtype(a.dtype, jnp.complexfloating) else _sign(a), **_SAME),
}


def _check_dtype(kernel, d, no_kernel="", bool_error=None, complex_error=False):
    """torch's errors for a dtype its kernel lacks: a kind in `no_kernel` (NotImplementedError), bool, complex."""
    if d.np.kind in no_kernel:
        raise not_implemented(f"{kernel}_cpu", d)
    if d is _dtypes.bool and bool_error is not None:
        raise RuntimeError(bool_error)
    if d.is_complex and complex_error:
        raise RuntimeError(f"{kernel} not implemented for complex tensors.")


def _unary_op(name, row):
    op = Op(
        name,
        lambda a, *, dtype: row.fn(a.astype(dtype)),
        row.backward_name,
        linear=row.linear,
        diagonal=True,
        torch_saves=SAVES_RESULT if row.saves_result else SAVES_INPUT,
        fused=row.fused,
        host=row.host and small_floats(row.host),
        host_vjp=ARITHMETIC_VJPS.get(name),
        saved_names=() if row.linear else ("self",),
    )
    rule = _dtypes.float_result if row.float_result else row.result_dtype or (lambda d: d)

    results = {}  # {NumPy dtype of a float or complex input: of the result}: what the row gives for it

    def public(input):
        result = results.get(input._v.dtype)
        if result is None:
            dtype = input.dtype
            _check_dtype(name, dtype, row.no_kernel, row.bool_error)
            result = rule(dtype).np
            if dtype.is_floating_point or dtype.is_complex:  # an integer's result follows the default dtype
                results[input._v.dtype] = result
        return apply(op, [input], dtype=result)

    def in_place(input):
        result = results.get(input._v.dtype)  # a dtype not met yet: the general path checks it
        return None if result is None else apply_in_place(op, input, dtype=result)

    public.in_place = in_place
    # the NumPy function computing the op on host data of a float dtype it keeps, with the results met so far
    # (lean.unary)
    public.host_numpy = (op.numpy, results) if op.numpy is not None and op.forward_error is None else None

    return _named(public, name, f"Elementwise {name} of `input` (torch.{name}).")


UNARY = {name: _unary_op(name, row) for name, row in _UNARY_ROWS.items()}
# torch records its `decimals` overload (RoundBackward1) whenever decimals is given, even as 0
_ROUND = Op("round", lambda a, *, decimals: jnp.round(a, decimals))
_ROUND_DECIMALS = Op("round", lambda a, *, decimals: jnp.round(a, decimals), backward_name="RoundBackward1")


def round(input, *, decimals=None):  # noqa: A001  (torch's name)
    """Round half to even, to `decimals` decimal places."""
    _check_dtype("round", input.dtype, no_kernel="b")
    return apply(_ROUND if decimals is None else _ROUND_DECIMALS, [input], decimals=int(decimals or 0))


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
    fused=None,
    kernel=None,
    no_kernel="",
    complex_error=False,
    tensors_only=False,
    host=None,
    saved_names=("self", "other"),
    forward_error=None,
    scalar_in_float32=False,
):
    """`overloads`: {(input is a Tensor, other is a Tensor): (torch's backward name, Op.torch_saves)} where torch
    records another overload of the op (`2 ** x` is PowBackward2, and its derivative reads the result). `kernel`:
    torch's kernel name in its dtype errors, when it differs from `name`; `no_kernel` and `complex_error`: the dtypes
    it lacks (_check_dtype). `tensors_only`: torch takes no number for either operand. `fused`: Op.fused. `host`: a
    NumPy function computing it (Op.host, for small float operands). `saved_names`: torch's names of the operands
    (Op.saved_names; a linear op's node saves neither). `forward_error`: Op.forward_error. `scalar_in_float32`: for a
    bfloat16 or float16 result, `other` keeps its float32 value (torch's kernels for a scalar `other`)."""
    kernel = kernel or name
    host = host and small_floats(host)
    checked = no_kernel or complex_error
    plain = not (checked or float_result)  # two Tensors of one dtype compute in it, unchecked
    numbers = not tensors_only  # a Python number may be an operand

    def compute(a, b, *, dtype):
        if scalar_in_float32 and dtype in HALF_ARRAY_DTYPES:
            # torch's CPU kernel reads `other` (a number or a one-element operand) as a float32 value, computes in
            # float32 and rounds once; with a half-float `other` that is the op rounded once, as before
            return f(a.astype(dtype).astype(jnp.float32), b.astype(jnp.float32)).astype(dtype)
        return f(a.astype(dtype), b.astype(dtype))

    def make(backward_name=None, saves=torch_saves):
        return Op(
            name,
            compute,
            backward_name,
            linear=linear,
            multilinear=multilinear,
            diagonal=True,
            torch_saves=saves,
            fused=fused,
            host=host,
            host_vjp=host and ARITHMETIC_VJPS.get(name),
            saved_names=() if linear else saved_names,
            forward_error=forward_error,
        )

    op, ops = make(), {kinds: make(*overload) for kinds, overload in dict(overloads).items()}

    def resolved(input, other):
        """(the input, a Tensor where both operands are numbers; the NumPy dtype the op computes in; the op to apply),
        torch's errors for what it refuses. The common cases take no promotion call: promotion keeps the Tensor
        input's dtype with a Tensor of that dtype, or with a float or an int where it is float or complex."""
        if (
            plain
            and isinstance(input, Tensor)
            and (
                other._v.dtype == input._v.dtype
                if isinstance(other, Tensor)
                else numbers and (type(other) is float or type(other) is int) and input._v.dtype.kind in "fc"
            )
        ):
            return input, input._v.dtype, ops.get((True, isinstance(other, Tensor)), op) if ops else op
        if tensors_only:
            for position, (argument, value) in enumerate((("input", input), ("other", other)), 1):
                if not isinstance(value, Tensor):
                    raise not_a_tensor(name, argument, value, position)
        if not isinstance(input, Tensor) and not isinstance(other, Tensor):
            if not two_numbers:
                raise not_a_tensor(name, "input", input)
            input = Tensor._wrap(np.asarray(input, _dtypes.scalar_dtype(input).np))  # torch.add(1, 2) is tensor(3)
        dtype = _dtypes.result_type(input, other)
        if checked:
            _check_dtype(kernel, dtype, no_kernel, complex_error=complex_error)
        chosen = ops.get((isinstance(input, Tensor), isinstance(other, Tensor)), op) if ops else op
        return input, _dtypes.float_result(dtype).np if float_result else dtype.np, chosen

    def public(input, other):
        input, dtype, chosen = resolved(input, other)
        try:
            return apply(chosen, [input, other], dtype=dtype)
        except (TypeError, ValueError):
            _check_broadcast([input, other])
            raise

    def in_place(input, other):
        input, dtype, chosen = resolved(input, other)
        return apply_in_place(chosen, input, other, dtype=dtype)

    public.in_place = in_place
    # the NumPy functions (ufuncs) computing the op on host operands of one float dtype, with a Tensor operand and
    # with a number (lean.in_place), where no check of the operands' dtypes comes before them
    forms = tuple((ops.get((True, kind), op) if ops else op).numpy for kind in (True, False))
    plain_forms = not checked and forward_error is None and all(type(f) is np.ufunc for f in forms)
    public.host_ufuncs = forms if plain_forms else None
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


_mul = _binary_op("mul", jnp.multiply, multilinear=True, two_numbers=True, host=np.multiply, scalar_in_float32=True)
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
    "div", divide, float_result=True, two_numbers=True, multilinear=(0,), host=np.true_divide, scalar_in_float32=True
)
_trunc_div = _binary_op("div", _trunc_divide)


def _floor_divide(a, b):
    q = jnp.floor_divide(a, b)
    if jnp.issubdtype(q.dtype, jnp.inexact):  # torch's zero quotient takes the sign of a / b (-0.0 // 2 is -0.0)
        q = jnp.where(q == 0, jnp.copysign(jnp.zeros_like(q), a / b), q)
    return q


# torch raises "derivative for aten::floor_divide is not implemented"; we give its a.e. derivative, zero
floor_divide = _binary_op(
    "floor_divide",
    _floor_divide,
    "floor(input / other), elementwise (zero gradient).",
    kernel="div_floor",
    no_kernel="bc",
    two_numbers=True,
)
remainder = _binary_op(
    "remainder", _remainder, "Python's modulus, elementwise: the result has the sign of `other`.", no_kernel="bc"
)
fmod = _binary_op("fmod", jnp.fmod, "C's remainder, elementwise: the result has the sign of `input`.", no_kernel="bc")
atan2 = _binary_op(
    "atan2",
    _derivatives.atan2,
    "The angle of the point (other, input), elementwise, in [-pi, pi].",
    float_result=True,
    no_kernel="c",
    tensors_only=True,
)
maximum = _binary_op(
    "maximum",
    _on_floats(_derivatives.maximum, jnp.maximum),
    "The larger of `input` and `other`, elementwise (at ties each gets half the gradient).",
    complex_error=True,
    tensors_only=True,
)
minimum = _binary_op(
    "minimum",
    _on_floats(_derivatives.minimum, jnp.minimum),
    "The smaller of `input` and `other`, elementwise (at ties each gets half the gradient).",
    complex_error=True,
    tensors_only=True,
)
hypot = _binary_op(
    "hypot",
    _derivatives.hypot,
    "sqrt(input ** 2 + other ** 2), elementwise.",
    float_result=True,
    no_kernel="biuc",
    torch_saves=SAVES_BOTH,
    tensors_only=True,
)
_pow = _binary_op(
    "pow",
    _pow_fn,
    overloads={(True, True): ("PowBackward1", SAVES_BOTH), (False, True): ("PowBackward2", SAVES_BOTH)},
    saved_names=("self", "exponent"),
)


def _scaled(other, alpha, input):
    """alpha * other for add and sub, after torch's check of alpha against their result's dtype (an int suits
    every dtype, and a float or a Tensor any float or complex result: checked without promotion where `input` is
    one)."""
    if type(alpha) is not int and not (
        (type(alpha) is float or isinstance(alpha, Tensor) and alpha.dtype.is_floating_point)
        and isinstance(input, Tensor)
        and input._v.dtype.kind in "fc"
    ):
        _check_alpha(alpha, _dtypes.result_type(input, other))
    elif type(alpha) is float:
        check_alpha_fits(alpha, input._v.dtype)
    if _is_one(alpha):
        return other
    other_is_bool = other.dtype is _dtypes.bool if isinstance(other, Tensor) else isinstance(other, bool)
    if other_is_bool and not isinstance(alpha, Tensor) and getattr(input, "dtype", _dtypes.bool) is _dtypes.bool:
        return mul(other, bool(alpha)) if isinstance(other, Tensor) else other and bool(alpha)  # a bool result
    return mul(other, alpha) if isinstance(other, Tensor) else other * alpha


def _is_one(alpha):
    """bool(alpha == 1); a one-element Tensor alpha with its value on the host (a step size computed by the ops
    before, as CG's) is read as it is, without the comparison op and its result."""
    if isinstance(alpha, Tensor):
        value = host_array(alpha._v)
        if value is not None and value.size == 1:
            return value.item() == 1
    return bool(alpha == 1)


def _check_alpha(alpha, dtype):
    """torch's checks of alpha: a bool one only for a bool result, a float one only for a float or complex result, a
    complex one only for a complex result. A Tensor alpha is checked as a number of its kind, as torch reads a 0-d
    tensor alpha as the number it holds."""
    if isinstance(alpha, Tensor):
        number = alpha_number(alpha) if alpha.dtype.is_floating_point else None
        if type(number) is float:
            check_alpha_fits(number, dtype.np)
        alpha = _number_of_kind(alpha.dtype)
    if isinstance(alpha, (bool, np.bool_)) and dtype is not _dtypes.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if not (dtype.is_floating_point or dtype.is_complex or isinstance(alpha, (int, np.integer, np.bool_))):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if not dtype.is_complex and isinstance(alpha, (complex, np.complexfloating)):
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")
    if isinstance(alpha, (int, float)):
        check_alpha_fits(alpha, dtype.np)


def check_alpha_fits(alpha, dtype):
    """torch's check that a finite real number `alpha` fits the float dtype `dtype` (a NumPy dtype) it is cast to."""
    limit = _ALPHA_LIMITS.get(dtype)
    if limit is not None and limit[0] < abs(alpha) < math.inf:
        raise RuntimeError(f"value cannot be converted to type {limit[1]} without overflow")


# the float dtypes a Python number can overflow: their largest value and torch's name of their C type
_ALPHA_LIMITS = {
    np.dtype(np.float32): (float(np.finfo(np.float32).max), "float"),
    np.dtype(np.float16): (float(np.finfo(np.float16).max), "c10::Half"),
    np.dtype(jnp.bfloat16): (float(jnp.finfo(jnp.bfloat16).max), "c10::BFloat16"),
}


def _number_of_kind(dtype):
    """A Python number of `dtype`'s kind: bool, int, float or complex."""
    if dtype is _dtypes.bool:
        return True
    if dtype.is_complex:
        return 1j
    return 1.0 if dtype.is_floating_point else 1


def add(input, other, *, alpha=1):
    """input + alpha * other, with torch's type promotion."""
    fused = _fused_dtype(input, other, alpha)
    if fused is not None:
        return scaled_sum("add", input, other, alpha_number(alpha), fused)
    return _add(input, _scaled(other, alpha, input))


def _add_in_place(input, other, *, alpha=1):
    if type(alpha) is int and alpha == 1:
        return _add.in_place(input, other)
    fused = _fused_dtype(input, other, alpha)
    if fused is not None:
        return scaled_sum_in_place("add", input, other, alpha_number(alpha), fused)
    return _add.in_place(input, _scaled(other, alpha, input))


def sub(input, other, *, alpha=1):
    """input - alpha * other."""
    _check_no_bool(input, other)
    fused = _fused_dtype(input, other, alpha)
    if fused is not None:
        return scaled_sum("sub", input, other, alpha_number(alpha), fused)
    return _sub(input, _scaled(other, alpha, input))


def _sub_in_place(input, other, *, alpha=1):
    _check_no_bool(input, other)
    fused = _fused_dtype(input, other, alpha)
    if fused is not None:
        return scaled_sum_in_place("sub", input, other, alpha_number(alpha), fused)
    return _sub.in_place(input, _scaled(other, alpha, input))


def _check_no_bool(input, other):
    bools = [_dtype_of(input), _dtype_of(other)].count(_dtypes.bool)
    if bools:
        raise RuntimeError(_SUB_BOOLS if bools == 2 else _SUB_BOOL)


def _fused_dtype(input, other, alpha):
    """The result dtype where input +- alpha * other is one fused op (scaled_sum.fusable, a Tensor operand and an
    alpha other than one), after torch's checks of alpha; else None."""
    if type(alpha) is not int and isinstance(input, Tensor) and isinstance(other, Tensor):
        same = input._v.dtype  # the common case, Tensors of one float dtype and a real alpha (a float or a Tensor of
        if same == other._v.dtype and same in FUSED_DTYPES:  # a float or int dtype): torch's checks pass, no promotion
            number = alpha_number(alpha)
            if type(number) is float or type(number) is int:
                check_alpha_fits(number, same)
                return _dtypes.from_numpy_dtype(same) if number != 1 else None
    if type(alpha) is int and alpha == 1 or not (isinstance(input, Tensor) or isinstance(other, Tensor)):
        return None
    dtype = _dtypes.result_type(input, other)
    _check_alpha(alpha, dtype)
    number = alpha_number(alpha)
    return dtype if number is not None and number != 1 and fusable(dtype, number) else None


add.in_place, sub.in_place = _add_in_place, _sub_in_place


mul = _named(_mul, "mul", "Elementwise product.")


def div(input, other, *, rounding_mode=None):
    """True division; rounding_mode "trunc" or "floor" rounds the quotient (zero gradient)."""
    if rounding_mode is None:
        return _true_div(input, other)
    if rounding_mode == "trunc":
        return _trunc_div(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")


def _div_in_place(input, other, *, rounding_mode=None):
    return _true_div.in_place(input, other) if rounding_mode is None else None


div.in_place = _div_in_place


def true_divide(input, other):
    """input / other with a floating point result (div without rounding_mode)."""
    return _true_div(input, other)


# The exponents torch computes by a formula of their own (x * x, a square root, a reciprocal, ...) are part of the
# program, as constants: XLA then simplifies the power as torch does. Any other number exponent is an operand, so
# that a new value compiles nothing.
_SQUARE = small_floats(lambda a: a * a)  # XLA's simplifier computes pow(a, 2) so
_SQUARE_VJP = small_float_vjp(lambda ct, a: (ct * (2 * a),), reads=((0,),))  # 2 pow(a, 1) ct, pow(a, 1) being a


def _square_host(a, *, exponent, dtype):
    """pow's host form for the exponent 2; None (the derived form) for the others."""
    return _SQUARE(a, dtype=dtype) if exponent == 2 else None


def _square_host_vjp(ct, operands, avals, *, exponent, dtype):
    return _SQUARE_VJP(ct, operands, avals) if exponent == 2 else None


_square_host_vjp.rows = True
_square_host_vjp.reads = lambda static: ((0,),) if dict(static)["exponent"] == 2 else None


def _pow_scalar(a, *, exponent, dtype):
    a = a.astype(dtype)
    out = _pow_fn(a, jnp.asarray(exponent, dtype))
    if dtype == jnp.bfloat16 and exponent in (3, -2):
        # torch's bfloat16 kernel rounds the square to bfloat16 before its last multiply (x ** 3) or its reciprocal
        # (x ** -2); its float16 kernel computes the cube in float32 and rounds once
        square = a * a
        exact = square * a if exponent == 3 else 1 / square
    elif dtype == jnp.float16 and exponent == 3:
        wide = a.astype(jnp.float32)
        exact = (wide * wide * wide).astype(dtype)
    else:
        return out
    # the values are those, the derivative stays pow's
    return out + jax.lax.stop_gradient(jnp.where(exact == out, 0, exact - out).astype(dtype))


_POW_SCALAR = Op(
    "pow",
    _pow_scalar,
    diagonal=True,
    saved_names=("self",),
    saved_static=("exponent",),
    host=_square_host,
    host_vjp=_square_host_vjp,
    shapes=lambda avals, *, exponent, dtype: ((tuple(avals[0][0]), np.dtype(dtype)),),  # the operand's, in `dtype`
)
_CONSTANT_EXPONENTS = frozenset({-2, -1, -0.5, 0, 0.5, 1, 2, 3})
_POW_NUMBER = Op(
    "pow",
    lambda a, b, *, dtype: _pow_fn(a.astype(dtype), b.astype(dtype)),
    diagonal=True,
    inputs=1,
    saved_names=("self", "exponent"),
)


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
