"""F.interpolate (and the deprecated upsample names): nearest, nearest-exact, (bi/tri)linear and bicubic resizing,
and the anti-aliased bilinear, bicubic and lanczos resizing, as one linear op per call, a product with one (out, in)
matrix per spatial dim that holds torch's source indices and weights; area resizing is adaptive average pooling."""

import functools
import math
import warnings

import jax.numpy as jnp
import numpy as np

from ._core import Op, apply
from .nn import _check_tensor
from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d

_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "lanczos", "area", "nearest-exact")
_LINEAR_DIMS = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}
_CUBIC_A = -0.75


def _cubic_weights(t):
    """torch's cubic convolution coefficients (A = -0.75) for the 4 taps around a source position t in [0, 1)."""

    def near(x):
        return ((_CUBIC_A + 2) * x - (_CUBIC_A + 3)) * x * x + 1

    def far(x):
        return ((_CUBIC_A * x - 5 * _CUBIC_A) * x + 8 * _CUBIC_A) * x - 4 * _CUBIC_A

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], -1)


def _triangle(x):
    return np.maximum(1 - np.abs(x), 0)


def _keys_cubic(x):
    """The cubic convolution kernel with a = -0.5, which torch's anti-aliased bicubic uses (as PIL does)."""
    x = np.abs(x)
    near = (1.5 * x - 2.5) * x * x + 1
    far = ((-0.5 * x + 2.5) * x - 4) * x + 2
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def _lanczos3(x):
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


# mode -> (the filter's half width in source pixels at unit scale, the filter)
_ANTIALIAS_FILTERS = {"bilinear": (1, _triangle), "bicubic": (2, _keys_cubic), "lanczos": (3, _lanczos3)}


def _antialias_matrix(mode, size, out, scale, align_corners):
    """Rows of the filter stretched by the downscale factor (when it exceeds 1) around each output pixel's centre,
    cut to the input and normalised to sum 1, as torch's _upsample_*_aa kernels compute them."""
    s = ((size - 1) / (out - 1) if out > 1 else 0.0) if align_corners else (size / out if scale is None else scale)
    half_width, kernel = _ANTIALIAS_FILTERS[mode]
    support = half_width * s if s >= 1 else half_width
    stretch = 1 / s if s >= 1 else 1.0
    m = np.zeros((out, size))
    for i in range(out):
        center = s * (i + 0.5)
        # int() truncates toward zero, as the C++ casts do
        low, high = max(int(center - support + 0.5), 0), min(int(center + support + 0.5), size)
        weights = kernel((np.arange(low, high) - center + 0.5) * stretch)
        total = weights.sum()
        m[i, low:high] = weights / total if total != 0 else weights
    return m


@functools.lru_cache(maxsize=512)
def _matrix(mode, size, out, scale, align_corners, antialias):
    """The (out, size) matrix resizing one dim as torch does; `scale` is torch's input-per-output scale, or None."""
    if antialias:
        return _antialias_matrix(mode, size, out, scale, align_corners)
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


def _resize(a, *, mode, outs, scales, align_corners, antialias):
    n = len(outs)
    for d, (out, scale) in enumerate(zip(outs, scales)):
        axis = a.ndim - n + d
        m = jnp.asarray(_matrix(mode, a.shape[axis], out, scale, align_corners, antialias), a.dtype)
        a = jnp.moveaxis(jnp.tensordot(a, m, axes=((axis,), (1,))), -1, axis)
    return a


_BACKWARD = {
    "nearest": "UpsampleNearest{}DBackward0",
    "nearest-exact": "UpsampleNearestExact{}DBackward0",
    "linear": "UpsampleLinear1DBackward0",
    "bilinear": "UpsampleBilinear2DBackward0",
    "trilinear": "UpsampleTrilinear3DBackward0",
    "bicubic": "UpsampleBicubic2DBackward0",
    "lanczos": "UpsampleLanczos2DAaBackward0",
}


def _backward_name(sig):
    static = dict(sig.static)
    name = _BACKWARD[static["mode"]].format(len(static["outs"]))
    return name.replace("2DBackward0", "2DAaBackward0") if static["antialias"] else name


_RESIZE = Op("upsample", _resize, linear=True, backward_name=_backward_name)


def _sizes(input, n, size, scale_factor, recompute_scale_factor):
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if size is not None:
        outs = (size,) * n if isinstance(size, int) else tuple(size)
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


def _unsupported(input, mode):
    return NotImplementedError(
        f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the modes: nearest | "
        f"linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact (got {mode})"
    )


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
        raise _unsupported(input, mode)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the interpolating modes: linear | bilinear | "
                "bicubic | trilinear"
            )
    elif align_corners is None:
        align_corners = False
    _check_antialias(input, mode, align_corners, antialias)
    n = input.ndim - 2
    if n not in (1, 2, 3):
        raise _unsupported(input, mode)
    if mode in _LINEAR_DIMS and _LINEAR_DIMS[mode] != n:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_LINEAR_DIMS[mode] + 2}D input")
    outs, scales = _sizes(input, n, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[n - 1](input, outs)
    return apply(
        _RESIZE,
        [input],
        mode=mode,
        outs=outs,
        scales=scales,
        align_corners=bool(align_corners),
        antialias=bool(antialias),
    )


def _check_antialias(input, mode, align_corners, antialias):
    if antialias and not (mode in _ANTIALIAS_FILTERS and input.ndim == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D tensor as input"
        )
    if mode == "lanczos" and input.ndim != 4:
        raise _unsupported(input, mode)
    if mode == "lanczos":
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")


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
