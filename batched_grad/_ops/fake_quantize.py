"""Fake quantization, as torch's CPU kernels: each value rounded onto a quantization grid and mapped back to a float
(quantize, then dequantize), with the straight-through gradient (1 where the rounded value fell inside [quant_min,
quant_max], else 0). No quantized dtype is involved: input and output are float tensors.

With scale s, zero point z and the reciprocal r = 1 / s taken in float32: q = z + round_half_even(x * r), computed
in float64 for float64 inputs and in float32 otherwise; the result is (clamp(q, quant_min, quant_max) - z) * s, in
float32 per tensor and in float64 per channel. Per channel with a float zero point the point is added before
rounding: q = round_half_even(float32(x * r + z))."""

import functools

import jax.numpy as jnp
import numpy as np

from .._dtypes import not_implemented
from .._tensor import Tensor, _wrap_dim
from . import _derivatives
from ._core import Op, apply
from .nn import _check_tensor


def _computed_in(a):
    return jnp.float64 if a.dtype == jnp.float64 else jnp.float32


def _grid(a, scale, zero_point, quant_min, quant_max, axis=None, float_point=False):
    """(q, its clamp, the zero point, the scale), each in the dtype the kernel computes in, broadcast along `axis`
    (per channel) when it is given."""
    if axis is not None:
        shape = [1] * a.ndim
        shape[axis] = -1
        scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
    dtype = _computed_in(a)
    scale = scale.astype(np.float32)
    inverse = (np.float32(1) / scale).astype(dtype)
    point = zero_point.astype(dtype) if float_point else zero_point.astype(jnp.int64).astype(dtype)
    scaled = a.astype(dtype) * inverse
    # a float zero point is added before rounding, in float32 (torch's lrintf)
    q = jnp.round((scaled + point).astype(np.float32)).astype(dtype) if float_point else point + jnp.round(scaled)
    if axis is not None:  # torch's per-channel kernel converts q to int64 before clamping: x86 gives INT64_MIN
        q = jnp.where(jnp.abs(q) < 2.0**63, q, -(2.0**63))  # for values out of range (and nan)
    return q, jnp.fmin(jnp.fmax(q, quant_min.astype(dtype)), quant_max.astype(dtype)), point, scale  # nan: quant_min


def _per_tensor_values(a, scale, zero_point, quant_min, quant_max):
    _, clamped, point, scale = _grid(a, scale, zero_point, quant_min, quant_max)
    return ((clamped - point).astype(np.float32) * scale).astype(a.dtype)  # (int64 - int64) * float, as torch's


def _per_channel_values(a, scale, zero_point, quant_min, quant_max, *, axis, float_point):
    _, clamped, point, scale = _grid(a, scale, zero_point, quant_min, quant_max, axis, float_point)
    wide = np.float64  # in double, as torch's
    return ((clamped.astype(wide) - point.astype(wide)) * scale.astype(wide)).astype(a.dtype)


def _inside(a, scale, zero_point, quant_min, quant_max, out, **per_channel):
    """The straight-through derivative: 1 where q fell inside [quant_min, quant_max]."""
    q = _grid(a, scale, zero_point, quant_min, quant_max, **per_channel)[0]
    return ((q >= quant_min) & (q <= quant_max)).astype(a.dtype)


_PER_TENSOR = _derivatives.with_partials(_per_tensor_values, _inside)


@functools.cache
def _per_channel(axis, float_point):
    return _derivatives.with_partials(
        functools.partial(_per_channel_values, axis=axis, float_point=float_point),
        functools.partial(_inside, axis=axis, float_point=float_point),
    )


_OPS = {
    "fake_quantize_per_tensor_affine": Op(
        "fake_quantize_per_tensor_affine", _PER_TENSOR, "FakeQuantizePerTensorAffineCachemaskBackward0", inputs=1
    ),
    "tensor_qparams": Op(
        "fake_quantize_per_tensor_affine",  # its tensor_qparams overload
        _PER_TENSOR,
        "FakeQuantizePerTensorAffineCachemaskTensorQparamsBackward0",
        inputs=1,
    ),
    "fake_quantize_per_channel_affine": Op(
        "fake_quantize_per_channel_affine",
        lambda *operands, axis, float_point: _per_channel(axis, float_point)(*operands),
        "FakeQuantizePerChannelAffineCachemaskBackward0",
        inputs=1,
    ),
}


def _check(input, quant_min, quant_max, kernel):
    if not input.dtype.is_floating_point:
        raise not_implemented(kernel, input.dtype)
    if quant_min > quant_max:
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`.")


def _not_differentiable(function, **qparams):
    for name, value in qparams.items():
        if isinstance(value, Tensor) and value.requires_grad:
            raise RuntimeError(
                f"The function '{function}' is not differentiable with respect to argument '{name}'. This input "
                "cannot have requires_grad True."
            )


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):
    """input rounded to the grid of `scale` and `zero_point` (numbers, or one-element tensors) within [quant_min,
    quant_max], as floats; its gradient passes where the rounded value was inside the range."""
    _check_tensor("fake_quantize_per_tensor_affine", "input", input)
    _check(input, quant_min, quant_max, "fake_quantize_tensor_cachemask_kernel_type_handling")
    tensors = isinstance(scale, Tensor) or isinstance(zero_point, Tensor)
    if tensors:
        _not_differentiable(
            "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams", scale=scale, zero_point=zero_point
        )
    scale = scale.item() if isinstance(scale, Tensor) else scale
    zero_point = int(zero_point.item()) if isinstance(zero_point, Tensor) else zero_point
    if not quant_min <= zero_point <= quant_max:
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
    op = _OPS["tensor_qparams" if tensors else "fake_quantize_per_tensor_affine"]
    return apply(op, [input, float(scale), int(zero_point), int(quant_min), int(quant_max)])


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):
    """input rounded, along dimension `axis`, to the grid of each channel's `scale` and `zero_point` (1-D tensors of
    the size of that dimension) within [quant_min, quant_max], as floats; the gradient passes inside the range."""
    _check_tensor("fake_quantize_per_channel_affine", "input", input)
    _not_differentiable("fake_quantize_per_channel_affine_cachemask", scale=scale, zero_point=zero_point)
    if scale.dtype.type_name not in ("Float", "BFloat16"):
        raise RuntimeError(f"Scale must be Float or BFloat16, found {scale.dtype.type_name}")
    if zero_point.dtype.type_name not in ("Int", "Float", "Half"):
        raise RuntimeError(f"Zero-point must be Int32, Float or Half, found {zero_point.dtype.type_name}")
    if scale.ndim != 1:
        raise RuntimeError("scale should be a 1-D tensor")
    if zero_point.ndim != 1:
        raise RuntimeError("zero point should be a 1-D tensor")
    if scale.numel() != zero_point.numel():
        raise RuntimeError("scale and zero-point need to have the same dimensions")
    if axis < 0:
        raise RuntimeError("`axis` must be between 0 and number of dimensions of input")
    axis = _wrap_dim(axis, input.ndim)
    if scale.numel() != input.shape[axis]:
        raise RuntimeError("dimensions of scale and zero-point are not consistent with input tensor")
    _check(input, quant_min, quant_max, "fake_quantize_channel_cachemask_cpu_type_handling")
    if bool(((zero_point < quant_min) | (zero_point > quant_max)).any()):
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
    float_point = zero_point.dtype.is_floating_point
    op = _OPS["fake_quantize_per_channel_affine"]
    return apply(op, [input, scale, zero_point, int(quant_min), int(quant_max)], axis=axis, float_point=float_point)


FUNCTIONS = {f.__name__: f for f in (fake_quantize_per_tensor_affine, fake_quantize_per_channel_affine)}
