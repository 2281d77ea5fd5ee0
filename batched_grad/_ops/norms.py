"""Normalizations beyond layer and batch norm: group_norm (one op), and instance_norm, rms_norm and
local_response_norm as torch composes them (so their nodes and derivatives are those of its ops)."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from .._grad_mode import no_grad
from .._int_args import int_or_ints
from ._core import Op, apply
from ._fused_backward import Fused, last_operand_if
from ._mixed_dtype import REDUCED_FLOATS, check_norm_parameters, compute_dtype
from .nn import _check_tensor, _require_inexact, pad
from .pooling import avg_pool2d, avg_pool3d


def _group_norm(input, *affine, groups, eps, has_weight):
    x = input.astype(compute_dtype(input, affine))
    n, c = x.shape[:2]
    grouped = x.reshape(n, groups, -1)
    mean = jnp.mean(grouped, -1, keepdims=True)
    var = jnp.mean(jnp.square(grouped - mean), -1, keepdims=True)
    out = ((grouped - mean) * jax.lax.rsqrt(var + eps)).reshape(x.shape)
    channel = (1, c) + (1,) * (x.ndim - 2)
    if has_weight:
        out, affine = out * affine[0].reshape(channel), affine[1:]
    return (out + affine[0].reshape(channel) if affine else out).astype(input.dtype)


# torch's backward under create_graph reads the input, the weight and the statistics (which require grad when any
# operand does) for the input's and weight's gradients, and sums the cotangent apart for the bias's
_GROUP_NORM_BIAS = last_operand_if(lambda sig: len(sig.avals) == 2 + dict(sig.static)["has_weight"])
_GROUP_NORM = Op(
    "native_group_norm",
    _group_norm,
    fused=Fused(bias=_GROUP_NORM_BIAS, apart=lambda sig: (_GROUP_NORM_BIAS(sig),)),
)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize each of num_groups groups of channels (dim 1) of each sample by its own mean and biased variance,
    then scale by `weight` and shift by `bias` (per channel)."""
    _check_tensor("group_norm", "input", input)
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    channels = input.shape[1]
    if channels % num_groups:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got input of "
            f"shape {list(input.shape)} and num_groups={num_groups}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != channels):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in input, but "
                f"got {name} of shape {list(t.shape)} and input of shape {list(input.shape)}"
            )
    _require_inexact("group_norm", input.dtype)
    check_norm_parameters(input, weight, bias)
    affine = [p for p in (weight, bias) if p is not None]
    return apply(_GROUP_NORM, [input] + affine, groups=int(num_groups), eps=float(eps), has_weight=weight is not None)


def instance_norm(
    input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-5
):
    """Normalize each channel of each sample over its spatial dims (torch's batch norm of the (1, N * C, ...)
    reshaped input); running statistics, when given, move by the batch's average."""
    from ..nn.functional import batch_norm

    _check_tensor("instance_norm", "input", input)
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape!r}")
    n, c = input.shape[:2]
    repeated = [None if t is None else t.repeat(n) for t in (running_mean, running_var, weight, bias)]
    stats = [None if t is None else t.detach() for t in repeated[:2]]
    out = batch_norm(
        input.reshape(1, n * c, *input.shape[2:]),
        stats[0],
        stats[1],
        repeated[2],
        repeated[3],
        use_input_stats,
        momentum,
        eps,
    )
    with no_grad():
        for running, moved in zip((running_mean, running_var), stats):
            if running is not None and use_input_stats:
                running.copy_(moved.reshape(n, c).mean(0))
    return out.view(input.shape)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2 over the trailing normalized_shape dims) + eps), times `weight`; eps defaults to the
    dtype's machine epsilon."""
    _check_tensor("rms_norm", "input", input)
    shape = int_or_ints(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape) :]) != shape or len(shape) > input.ndim:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*{', '.join(map(str, shape))}], but got input of size{list(input.shape)}"
        )
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(
            f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
            f"{list(weight.shape)} and normalized_shape = {list(shape)}"
        )
    eps = float(np.finfo(np.float64 if input.dtype.name == "float64" else np.float32).eps) if eps is None else eps
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    x = input.float() if input.dtype in REDUCED_FLOATS else input
    out = x * ((x**2).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        out = out * (weight.float() if weight.dtype in REDUCED_FLOATS else weight)
    return out.type_as(input)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of x^2 over `size` neighbouring channels) ** beta."""

    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality{' ' * 26}input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    squares = input * input
    if input.ndim == 3:
        padded = pad(squares.unsqueeze(1), (0, 0, size // 2, (size - 1) // 2))
        window = avg_pool2d(padded, (size, 1), stride=1).squeeze(1)
    else:
        n, c = input.shape[:2]
        padded = pad(squares.view(n, 1, c, input.shape[2], -1), (0, 0, 0, 0, size // 2, (size - 1) // 2))
        window = avg_pool3d(padded, (size, 1, 1), stride=1).squeeze(1).view(input.shape)
    return input / (window * alpha + k) ** beta


FUNCTIONAL = {f.__name__: f for f in (group_norm, instance_norm, rms_norm, local_response_norm)}
TORCH = {"rms_norm": rms_norm}
