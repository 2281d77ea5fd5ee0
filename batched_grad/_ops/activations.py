"""The activations beyond relu, elu, gelu, silu and softplus, with torch's derivatives at the kinks (each piecewise
function selects a constant outside its open interval, so its derivative there is 0, as torch's) and torch's node
names: hardtanh and relu6, hardsigmoid, hardswish, hardshrink, softshrink, threshold, logsigmoid, mish, selu, celu,
glu, prelu, rrelu; softsign, tanhshrink and softmin are torch's compositions of other ops."""

import jax
import jax.numpy as jnp
import numpy as np

from .._autocast import autocast_policy
from .._tensor import Tensor, _wrap_dim
from . import _derivatives
from ._core import Op, apply
from ._fused_backward import FUSED_ZEROS
from ._mixed_dtype import halves_in_float32
from .elementwise import UNARY
from .nn import _check_tensor, _require_inexact, _softmax_dim, softmax
from .random_draws import sample
from .rounding import divide

_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _hardtanh(a, low, high):  # the bounds are operands (0-d arrays): new bounds compile nothing
    low, high = low.astype(a.dtype), high.astype(a.dtype)
    return jnp.where(a <= low, low, jnp.where(a >= high, high, a))


_ONE_SIXTH = np.float32(1 / 6)  # torch's hardsigmoid backward scales by 1/6 rounded to float32, in every dtype


def _hardsigmoid_values(a):
    """torch's min(max(x + 3, 0), 6) / 6, whose derivative is float32(1/6) strictly inside (-3, 3), else 0."""
    out = jax.lax.stop_gradient(divide(jnp.clip(a + 3, 0, 6), np.asarray(6, a.dtype)))
    inside = (a > -3) & (a < 3)
    return out + jnp.where(inside, a - jax.lax.stop_gradient(a), 0) * _ONE_SIXTH.astype(a.dtype)


# torch has no derivative of hardsigmoid's backward: its double backward raises
_hardsigmoid = _derivatives.first_order_only(
    _hardsigmoid_values,
    lambda: RuntimeError("derivative for aten::hardsigmoid_backward is not implemented"),
)


# torch's derivative: 0 up to -3, x / 3 + 1/2 below 3, then 1
_hardswish = _derivatives.with_partials(
    lambda a: a * jnp.clip(a + 3, 0, 6) / 6,
    lambda a, out: jnp.where(a <= -3, 0, jnp.where(a < 3, divide(a, np.asarray(3, a.dtype)) + 0.5, 1)).astype(a.dtype),
)


def _hardshrink(a, lambd):  # the numbers are operands (0-d arrays), in the input's dtype as torch compares them
    lambd = lambd.astype(a.dtype)
    return jnp.where((a >= -lambd) & (a <= lambd), 0, a).astype(a.dtype)


def _threshold(a, threshold, value):
    return jnp.where(a > threshold.astype(a.dtype), a, value.astype(a.dtype))


_KERNELS = {  # name: (JAX function of the array and static parameters, torch's kernel name for dtype errors)
    "hardtanh": (_hardtanh, "hardtanh_backward_cpu"),
    "hardsigmoid": (_hardsigmoid, "hardsigmoid_cpu"),
    "hardswish": (_hardswish, "hardswish_cpu"),
    "hardshrink": (_hardshrink, "hardshrink_cpu"),
    "softshrink": (
        lambda a, *, lambd: jnp.where(a > lambd, a - lambd, jnp.where(a < -lambd, a + lambd, 0)).astype(a.dtype),
        "softshrink_cpu",
    ),
    "threshold": (_threshold, "threshold_cpu"),
    "log_sigmoid": (jax.nn.log_sigmoid, "log_sigmoid_cpu"),
    "mish": (lambda a: a * jnp.tanh(jax.nn.softplus(a)), "mish_cpu"),
    "selu": (lambda a: _derivatives.elu_like(a, alpha=_SELU_ALPHA, scale=_SELU_SCALE), "elu_cpu"),
    "celu": (lambda a, *, alpha: _derivatives.elu_like(a, alpha=alpha, inner=alpha), "elu_cpu"),
    "leaky_rrelu": (lambda a, *, slope: jnp.where(a > 0, a, a * slope), "leaky_relu_cpu"),
}
_NAMES = {
    "log_sigmoid": "LogSigmoidBackward0",
    "selu": "EluBackward0",
    "celu": "CeluBackward0",
    "leaky_rrelu": "RreluWithNoiseBackward0",
}
# torch's backward of each is a kernel (hardtanh_backward, ...) that reads the input, and its derivative in the
# input is zeros where the math has none
_OPS = {
    name: Op(name, halves_in_float32(f), _NAMES.get(name), diagonal=True, inputs=1, fused=FUSED_ZEROS)
    for name, (f, _) in _KERNELS.items()
}


def _activation(name, input, inplace=False, numbers=(), **static):
    _check_tensor(name, "input", input)
    _require_inexact(_KERNELS[name][1], input.dtype)
    out = apply(_OPS[name], [input, *numbers], **static)
    return input._assign(out, f"{name}_") if inplace else out


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """input clamped into [min_val, max_val]; the derivative is 1 strictly inside, else 0."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _activation("hardtanh", input, inplace, numbers=(float(min_val), float(max_val)))


def relu6(input, inplace=False):
    """min(max(0, x), 6): hardtanh(input, 0, 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6."""
    return _activation("hardsigmoid", input, inplace)


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6."""
    return _activation("hardswish", input, inplace)


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0."""
    return _activation("hardshrink", input, numbers=(float(lambd),))


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, else 0."""
    if lambd < 0:
        raise RuntimeError(
            f"lambda must be in range [0, {np.finfo(input.dtype.np).max:g}] for input dtype "
            f"{input.dtype.type_name}, but found {lambd:g}"
        )
    return _activation("softshrink", input, lambd=float(lambd))


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value."""
    return _activation("threshold", input, inplace, numbers=(float(threshold), float(value)))


def logsigmoid(input):
    """log(sigmoid(x)), computed stably."""
    return _activation("log_sigmoid", input)


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    return _activation("mish", input, inplace)


def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalizing constants of Klambauer et al."""
    return _activation("selu", input, inplace)


def celu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _activation("celu", input, inplace, alpha=float(alpha))


def _slopes(bits, size, lower, upper, dtype):
    return bits.uniform(size, np.float64, lower, upper, fused=False).astype(dtype)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky relu with slope (lower + upper) / 2; while training, each non-positive element gets its own slope
    drawn uniformly from [lower, upper] (torch's double uniform; torch draws only for the non-positive elements,
    this draws one per element, so the two agree when all are non-positive, to 2 ulps: torch multiplies by the
    double slope)."""
    if not training:
        return _activation("leaky_rrelu", input, inplace, slope=(float(lower) + float(upper)) / 2)
    _check_tensor("rrelu", "input", input)
    _require_inexact("rrelu_with_noise_out_cpu", input.dtype)
    slopes = sample(
        None,
        "rrelu",
        input.shape,
        lambda b, size: b.uniform(size, np.float64, lower, upper, fused=False).astype(input.dtype.np),
    )
    out = apply(_RRELU_NOISE, [input, slopes])
    return input._assign(out, "rrelu_with_noise_") if inplace else out


_RRELU_NOISE = Op(
    "rrelu",
    lambda a, slopes: jnp.where(a > 0, a, a * slopes.astype(a.dtype)),
    "RreluWithNoiseBackward0",
    diagonal=True,
    fused=FUSED_ZEROS,
)


def _glu(a, *, axis):
    first, second = jnp.split(a, 2, axis)
    return first * jax.nn.sigmoid(second)


_GLU = Op("glu", _glu)


def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the two halves of `input` along `dim`."""
    _check_tensor("glu", "input", input)
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    axis = _wrap_dim(dim, input.ndim)
    if input.shape[axis] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {axis} is size {input.shape[axis]}")
    _require_inexact("glu_cpu", input.dtype)
    return apply(_GLU, [input], axis=axis)


def _prelu(a, w):
    # w holds one slope, or one per channel (dim 1, or dim 0 of a 1-D input)
    w = w.reshape(()) if w.size == 1 else w.reshape((-1,) + (1,) * (a.ndim - 2)) if a.ndim >= 2 else w
    # torch's derivative for `a` at 0 is w, but its own derivative for w is 0 there
    slope = jnp.where(a < 0, w, jax.lax.stop_gradient(w))
    return jnp.where(a > 0, a, a * slope)


_PRELU = Op("prelu", _prelu, "PreluKernelBackward0", fused=FUSED_ZEROS)


@autocast_policy("lower")
def prelu(input, weight):
    """x where x > 0, else weight * x; `weight` holds one slope or one per channel (dim 1)."""
    _check_tensor("prelu", "input", input)
    _check_tensor("prelu", "weight", weight, 2)
    channels = input.shape[1] if input.ndim >= 2 else (input.shape[0] if input.ndim == 1 else 1)
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    if input.dtype is not weight.dtype:
        raise RuntimeError(
            f"prelu: Type promoting not supported. Got {input.dtype.type_name} and {weight.dtype.type_name}"
        )
    if weight.numel() not in (1, channels):
        raise RuntimeError(
            f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
            f"{weight.numel()} and channel size = {channels}."
        )
    return apply(_PRELU, [input, weight])


def softsign(input):
    """x / (1 + |x|) (torch's composition: its last node divides)."""
    return input / (UNARY["abs"](input) + 1)


def tanhshrink(input):
    """x - tanh(x) (torch's composition)."""
    return input - UNARY["tanh"](input)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input) along `dim` (torch's composition)."""
    dim = dim if dim is not None or not isinstance(input, Tensor) else _softmax_dim("softmin", input.ndim, dim)
    return softmax(UNARY["neg"](input), dim, dtype=dtype)


def _inplace_of(fn):
    def inplace(input, *args, **kwargs):
        return fn(input, *args, inplace=True, **kwargs)

    inplace.__name__ = inplace.__qualname__ = f"{fn.__name__}_"
    inplace.__doc__ = f"In-place {fn.__name__}."
    return inplace


hardtanh_, threshold_, selu_, celu_, rrelu_ = (_inplace_of(f) for f in (hardtanh, threshold, selu, celu, rrelu))
FUNCTIONAL = {
    f.__name__: f
    for f in (
        hardtanh,
        hardtanh_,
        relu6,
        hardsigmoid,
        hardswish,
        hardshrink,
        softshrink,
        threshold,
        threshold_,
        logsigmoid,
        mish,
        selu,
        selu_,
        celu,
        celu_,
        rrelu,
        rrelu_,
        glu,
        prelu,
        softsign,
        tanhshrink,
        softmin,
    )
}
# torch's own functions (torch.selu, ...) and Tensor methods among them
TORCH = {
    name: FUNCTIONAL[name]
    for name in ("selu", "selu_", "celu", "celu_", "threshold", "threshold_", "prelu", "rrelu", "rrelu_", "hardshrink")
}
METHODS = {"prelu": prelu, "hardshrink": hardshrink}
