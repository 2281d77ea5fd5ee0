"""F.interpolate (and the deprecated upsample names): nearest, nearest-exact, (bi/tri)linear and bicubic resizing,
and the antialiased bilinear, bicubic and lanczos ones, as one linear op per call, a product with one (out, in)
matrix per spatial dim that holds torch's source indices and weights; area resizing is adaptive average pooling."""

import functools
import math
import warnings

import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._dtypes import not_implemented
from .._int_args import int_or_ints
from ._core import Op, apply
from .nn import _check_tensor, _require_inexact
from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d

_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "lanczos", "area", "nearest-exact")
_LINEAR_DIMS = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2, "lanczos": 2}
_CUBIC_A = -0.75
_MODE_LIST = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"


def _cubic_weights(t):
    """torch's cubic convolution coefficients (A = -0.75) for the 4 taps around a source position t in [0, 1)."""

    def near(x):
        return ((_CUBIC_A + 2) * x - (_CUBIC_A + 3)) * x * x + 1

    def far(x):
        return ((_CUBIC_A * x - 5 * _CUBIC_A) * x + 8 * _CUBIC_A) * x - 4 * _CUBIC_A

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], -1)


@functools.lru_cache(maxsize=512)
def _matrix(mode, size, out, scale, align_corners):
    """The (out, size) matrix resizing one dim as torch does; `scale` is torch's input-per-output scale, or None."""
    m = np.zeros((out, size))
    dst = np.arange(out, dtype=np.float64)
    if mode in ("nearest", "nearest-exact"):
        s = size / out if scale is None else scale
        src = np.floor((dst + 0.5) * s if mode == "nearest-exact" else dst * s).astype(int)
        m[np.arange(out), np.minimum(src, size - 1)] = 1
        return m
    if align_corners:
        s = (size - 1) / (out - 1) if out > 1 else 0.0
        src = s * dst
    else:
        s = size / out if scale is None else scale
        src = s * (dst + 0.5) - 0.5
    if mode == "bicubic":
        base = np.floor(src).astype(int)
        for k, w in enumerate(np.moveaxis(_cubic_weights(src - base), -1, 0)):
            np.add.at(m, (np.arange(out), np.clip(base - 1 + k, 0, size - 1)), w)
        return m
    src = np.maximum(src, 0) if not align_corners else src
    low = np.minimum(np.floor(src).astype(int), size - 1)
    high = np.minimum(low + 1, size - 1)
    frac = src - low
    np.add.at(m, (np.arange(out), low), 1 - frac)
    np.add.at(m, (np.arange(out), high), frac)
    return m


def _aa_filter(mode, x):
    """torch's antialiasing filters: the triangle, Keys' cubic (A = -0.5) and Lanczos-3."""
    x = np.abs(x)
    if mode == "bilinear":
        return np.where(x < 1, 1 - x, 0)
    if mode == "bicubic":
        a = -0.5
        return np.where(
            x < 1, ((a + 2) * x - (a + 3)) * x * x + 1, np.where(x < 2, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0)
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        sinc = np.where(x == 0, 1, np.sin(np.pi * x) / (np.pi * x))
        sinc3 = np.where(x == 0, 1, np.sin(np.pi * x / 3) / (np.pi * x / 3))
    return np.where(x < 3, sinc * sinc3, 0)


_AA_TAPS = {"bilinear": 2, "bicubic": 4, "lanczos": 6}


@functools.lru_cache(maxsize=512)
def _aa_matrix(mode, size, out, scale, align_corners, dtype):
    """The (out, size) antialiased resizing matrix, computed as torch's kernel computes it in `dtype`: a downscaling
    filter widens by the scale, and each output's weights over its input window sum to 1."""
    one = np.dtype(dtype).type
    if align_corners:
        s = one((size - 1) / (out - 1)) if out > 1 else one(0)
    else:
        s = one(size / out if scale is None else scale)
    support = one(_AA_TAPS[mode] * 0.5) * s if s >= 1 else one(_AA_TAPS[mode] * 0.5)
    invscale = one(1) / s if s >= 1 else one(1)
    m = np.zeros((out, size), dtype)
    for i in range(out):
        center = s * one(i + 0.5)
        low = max(int(center - support + one(0.5)), 0)
        high = min(int(center + support + one(0.5)), size)
        w = _aa_filter(mode, (np.arange(low, high, dtype=dtype) - center + one(0.5)) * invscale).astype(dtype)
        total = w.sum(dtype=dtype)
        m[i, low:high] = w / total if total != 0 else w
    return m


def _resize(a, *, mode, outs, scales, align_corners, antialias=False):
    n = len(outs)
    order = range(n - 1, -1, -1) if antialias else range(n)  # torch's antialiased kernel resizes the width first
    for d in order:
        axis, out, scale = a.ndim - n + d, outs[d], scales[d]
        if antialias:
            m = jnp.asarray(_aa_matrix(mode, a.shape[axis], out, scale, align_corners, np.dtype(a.dtype).name))
        else:
            m = jnp.asarray(_matrix(mode, a.shape[axis], out, scale, align_corners), a.dtype)
        a = jnp.moveaxis(jnp.tensordot(a, m, axes=((axis,), (1,))), -1, axis)
    return a


_BACKWARD = {
    "nearest": "UpsampleNearest{}DBackward0",
    "nearest-exact": "UpsampleNearestExact{}DBackward0",
    "linear": "UpsampleLinear1DBackward0",
    "bilinear": "UpsampleBilinear2DBackward0",
    "trilinear": "UpsampleTrilinear3DBackward0",
    "bicubic": "UpsampleBicubic2DBackward0",
}
_AA_BACKWARD = {"bilinear": "UpsampleBilinear2DAaBackward0", "bicubic": "UpsampleBicubic2DAaBackward0"}


def _backward_name(sig):
    static = dict(sig.static)
    if static.get("antialias"):
        return _AA_BACKWARD.get(static["mode"], "UpsampleLanczos2DAaBackward0")
    return _BACKWARD[static["mode"]].format(len(static["outs"]))


_RESIZE = Op(
    "upsample",
    _resize,
    linear=True,
    backward_name=_backward_name,
)


# the kernels whose names torch's errors give for an integer input
_WEIGHT_KERNELS = {
    "linear": "compute_indices_weights_linear",
    "trilinear": "compute_indices_weights_linear",
    "bilinear": "upsample_bilinear2d_channels_last",
    "bicubic": "compute_indices_weights_cubic",
}


def _check_dtype(mode, antialias, dtype):
    """torch's refusals of integer inputs by the interpolating modes, and of half inputs by the antialiased ones.
    uint8, which torch's bilinear and bicubic kernels resize in integer arithmetic of their own, is refused here."""
    if antialias and dtype not in (_dtypes.float32, _dtypes.float64, _dtypes.uint8):
        raise not_implemented("compute_index_ranges_weights", dtype)
    if dtype == _dtypes.uint8 and mode in ("bilinear", "bicubic", "lanczos"):
        raise NotImplementedError(
            f"interpolate: mode='{mode}' on a torch.uint8 input (torch resizes it in integer arithmetic) is not "
            f"supported here; resize a floating copy, e.g. input.float(), and round that"
        )
    if mode in _WEIGHT_KERNELS:
        _require_inexact(_WEIGHT_KERNELS[mode], dtype)


def _sizes(input, n, size, scale_factor, recompute_scale_factor):
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if size is not None:
        outs = int_or_ints(size, n)
        if len(outs) != n:
            raise ValueError(
                f"Input and output must have the same number of spatial dimensions, but got input with "
                f"spatial dimensions of {list(input.shape[2:])} and output size of {size}. Please "
                f"provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, "
                f"...,oK) format."
            )
        return tuple(int(o) for o in outs), (None,) * n
    factors = (float(scale_factor),) * n if isinstance(scale_factor, (int, float)) else tuple(map(float, scale_factor))
    if len(factors) != n:
        raise ValueError(
            f"Input and scale_factor must have the same number of spatial dimensions, but got input "
            f"with spatial dimensions of {list(input.shape[2:])} and scale_factor of shape "
            f"{list(factors)}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
            f"scale_factor in (s1, s2, ...,sK) format."
        )
    outs = tuple(int(math.floor(s * f)) for s, f in zip(input.shape[2:], factors))
    # torch resizes by the given factors unless asked to recompute them from the sizes
    return outs, (None,) * n if recompute_scale_factor else tuple(1.0 / f for f in factors)


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    """Resize the spatial dims (all after the first two) of `input` to `size`, or by `scale_factor`, with torch's
    source positions for each mode."""
    _check_tensor("interpolate", "input", input)
    if mode not in _MODES:
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the modes: {_MODE_LIST} "
            f"(got {mode})"
        )
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the interpolating modes: linear | bilinear | "
                "bicubic | trilinear"
            )
    elif align_corners is None:
        align_corners = False
    if antialias and not (mode in _AA_TAPS and input.ndim == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D tensor as input"
        )
    if mode == "lanczos" and input.ndim == 4:
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    n = input.ndim - 2
    if n not in (1, 2, 3) or mode == "lanczos" and n != 2:  # torch has no lanczos kernel for other ranks
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the modes: {_MODE_LIST} "
            f"(got {mode})"
        )
    if mode in _LINEAR_DIMS and _LINEAR_DIMS[mode] != n:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_LINEAR_DIMS[mode] + 2}D input")
    outs, scales = _sizes(input, n, size, scale_factor, recompute_scale_factor)
    _check_dtype(mode, antialias, input.dtype)
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[n - 1](input, outs)
    aa = {"antialias": True} if antialias else {}
    return apply(_RESIZE, [input], mode=mode, outs=outs, scales=scales, align_corners=bool(align_corners), **aa)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """interpolate under its deprecated name."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """interpolate(mode='nearest') under its deprecated name."""
    warnings.warn(
        "`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """interpolate(mode='bilinear', align_corners=True) under its deprecated name."""
    warnings.warn(
        "`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2
    )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


FUNCTIONAL = {f.__name__: f for f in (interpolate, upsample, upsample_nearest, upsample_bilinear)}
