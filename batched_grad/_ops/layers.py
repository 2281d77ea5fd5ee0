"""Layer ops that rearrange or combine features: pixel_shuffle, pixel_unshuffle, channel_shuffle, unfold (im2col),
fold (col2im) and bilinear; each one op with torch's node name."""

import itertools
import math

import jax.numpy as jnp

from ._core import Op, apply
from .nn import _check_tensor, _tuple


def _pixel_shuffle(a, *, r):
    *lead, c, h, w = a.shape
    a = a.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    n = len(lead)
    a = jnp.transpose(a, tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return a.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


def _pixel_unshuffle(a, *, r):
    *lead, c, h, w = a.shape
    a = a.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    n = len(lead)
    a = jnp.transpose(a, tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return a.reshape(tuple(lead) + (c * r * r, h // r, w // r))


def _channel_shuffle(a, *, groups):
    n, c = a.shape[:2]
    a = a.reshape((n, groups, c // groups) + a.shape[2:])
    return jnp.swapaxes(a, 1, 2).reshape(a.shape[:1] + (c,) + a.shape[3:])


_PIXEL_SHUFFLE = Op("pixel_shuffle", _pixel_shuffle, linear=True)
_PIXEL_UNSHUFFLE = Op("pixel_unshuffle", _pixel_unshuffle, linear=True)
_CHANNEL_SHUFFLE = Op("channel_shuffle", _channel_shuffle, linear=True)


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r): each channel block of r^2 becomes an r x r patch."""
    _check_tensor("pixel_shuffle", "input", input)
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(
            f"pixel_shuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    if input.shape[-3] % (r * r):
        raise RuntimeError(
            f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
            f"upscale_factor, but input.size(-3)={input.shape[-3]} is not divisible by {r * r}"
        )
    return apply(_PIXEL_SHUFFLE, [input], r=r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W): the inverse of pixel_shuffle."""
    _check_tensor("pixel_unshuffle", "input", input)
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(
            f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    for name, size in (("height", input.shape[-2]), ("width", input.shape[-1])):
        if size % r:
            raise RuntimeError(
                f"pixel_unshuffle expects {name} to be divisible by downscale_factor, but input.size"
                f"({-2 if name == 'height' else -1})={size} is not divisible by {r}"
            )
    if input.numel() == 0:  # torch gives an empty input back in its own shape
        return input.clone()
    return apply(_PIXEL_UNSHUFFLE, [input], r=r)


def channel_shuffle(input, groups):
    """Interleave the channels (dim 1) of `groups` groups: (N, g, C / g, *) transposed to (N, C / g, g, *)."""
    _check_tensor("channel_shuffle", "input", input)
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    if input.ndim < 3:
        raise RuntimeError(
            f"channel_shuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if input.shape[1] % groups:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {input.shape[1]} channels and {groups} groups."
        )
    return apply(_CHANNEL_SHUFFLE, [input], groups=int(groups))


# ---- im2col / col2im ---------------------------------------------------------------------------------------------
def _taps(kernel, dilation, stride, out):
    """For each kernel tap (row-major), the slices of the padded input it reads for every output position."""
    for tap in itertools.product(*map(range, kernel)):
        yield tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dilation, out, stride))


def _sizes(spatial, kernel, dilation, padding, stride):
    return [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, d, p, s in zip(spatial, kernel, dilation, padding, stride)]


def _unfold(a, *, kernel, dilation, padding, stride, unbatched=False):
    if unbatched:  # torch's kernel takes an unbatched input itself (no unsqueeze node)
        return _unfold(a[None], kernel=kernel, dilation=dilation, padding=padding, stride=stride)[0]
    a = jnp.pad(a, ((0, 0), (0, 0)) + tuple((p, p) for p in padding))
    out = _sizes([n - 2 * p for n, p in zip(a.shape[2:], padding)], kernel, dilation, padding, stride)
    blocks = jnp.stack([a[(..., *view)] for view in _taps(kernel, dilation, stride, out)], 2)
    return blocks.reshape(a.shape[0], a.shape[1] * math.prod(kernel), math.prod(out))


def _fold(a, *, size, kernel, dilation, padding, stride, unbatched=False):
    if unbatched:
        return _fold(a[None], size=size, kernel=kernel, dilation=dilation, padding=padding, stride=stride)[0]
    n, k = a.shape[0], math.prod(kernel)
    out = _sizes(size, kernel, dilation, padding, stride)
    blocks = a.reshape((n, a.shape[1] // k, k) + tuple(out))
    image = jnp.zeros((n, a.shape[1] // k) + tuple(s + 2 * p for s, p in zip(size, padding)), a.dtype)
    for i, view in enumerate(_taps(kernel, dilation, stride, out)):
        image = image.at[(..., *view)].add(blocks[:, :, i])
    return image[(...,) + tuple(slice(p, p + s) for p, s in zip(padding, size))]


_UNFOLD = Op("im2col", _unfold, "Im2ColBackward0", linear=True)
_FOLD = Op("col2im", _fold, "Col2ImBackward0", linear=True)


def _geometry(kernel_size, dilation, padding, stride):
    return dict(
        kernel=_tuple(kernel_size, 2, "kernel_size"),
        dilation=_tuple(dilation, 2, "dilation"),
        padding=_tuple(padding, 2, "padding"),
        stride=_tuple(stride, 2, "stride"),
    )


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding blocks of a (N, C, H, W) input as columns: (N, C * kh * kw, L) for L block positions (im2col)."""
    _check_tensor("unfold", "input", input)
    if input.ndim not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    geometry = _geometry(kernel_size, dilation, padding, stride)
    x = input.unsqueeze(0) if input.ndim == 3 else input
    if min(_sizes(x.shape[2:], **{k: geometry[k] for k in ("kernel", "dilation", "padding", "stride")})) < 1:
        raise RuntimeError(
            f"Given input with spatial size ({x.shape[2]}, {x.shape[3]}), kernel_size="
            f"({geometry['kernel'][0]}, {geometry['kernel'][1]}), dilation=({geometry['dilation'][0]}, "
            f"{geometry['dilation'][1]}), padding=({geometry['padding'][0]}, {geometry['padding'][1]}), "
            f"calculated shape of the array of sliding blocks as (0, 0), but its components must be at "
            f"least one."
        )
    return apply(_UNFOLD, [input], unbatched=input.ndim == 3, **geometry)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The inverse arrangement of unfold: columns (N, C * kh * kw, L) summed back into a (N, C, H, W) image
    (overlapping blocks add)."""
    _check_tensor("fold", "input", input)
    if input.ndim not in (2, 3):
        raise NotImplementedError(
            f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got {input.ndim}D)"
        )
    geometry = _geometry(kernel_size, dilation, padding, stride)
    size = _tuple(output_size, 2, "output_size")
    x = input.unsqueeze(0) if input.ndim == 2 else input
    k = math.prod(geometry["kernel"])
    if x.shape[1] % k:
        raise RuntimeError(
            f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
            f"got input.size(1)={x.shape[1]} and kernel_size=({geometry['kernel'][0]}, "
            f"{geometry['kernel'][1]})."
        )
    counts = _sizes(size, **geometry)
    blocks = math.prod(counts)
    if x.shape[2] != blocks:
        raise RuntimeError(
            f"Given output_size=({size[0]}, {size[1]}), kernel_size=({geometry['kernel'][0]}, "
            f"{geometry['kernel'][1]}), dilation=({geometry['dilation'][0]}, "
            f"{geometry['dilation'][1]}), padding=({geometry['padding'][0]}, {geometry['padding'][1]}), "
            f"stride=({geometry['stride'][0]}, {geometry['stride'][1]}), expected size of input's "
            f"dimension 2 to match the calculated number of sliding blocks {counts[0]} * {counts[1]} = "
            f"{blocks}, but got input.size(2)={x.shape[2]}."
        )
    return apply(_FOLD, [input], size=size, unbatched=input.ndim == 2, **geometry)


# ---- bilinear --------------------------------------------------------------------------------------------------
def _bilinear(a, b, w, *bias):
    out = jnp.einsum("...i,oij,...j->...o", a, w, b)
    return out + bias[0] if bias else out


_BILINEAR = Op(
    "bilinear",
    _bilinear,
    multilinear=True,
    added=lambda sig: (3,) if len(sig.avals) == 4 else (),  # the bias
    backward_name=lambda sig: "AddBackward0" if len(sig.avals) == 4 else "ViewBackward0",
)


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]."""
    for i, (name, t) in enumerate((("input1", input1), ("input2", input2), ("weight", weight)), 1):
        _check_tensor("bilinear", name, t, i)
    operands = (("input1", input1), ("input2", input2), ("weight", weight), ("bias", bias))
    if any(t is not None and t.dtype != input1.dtype for _, t in operands):
        given = ", ".join(f"{name}: {t.dtype.cpp_name}" for name, t in operands if t is not None)
        raise RuntimeError(f"All tensors must have the same dtype, got {given}")
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}")
    for i in range(input1.ndim - 1):
        if input1.shape[i] != input2.shape[i]:
            raise RuntimeError(
                f"bilinear(): input batch dimensions do not match: got {input1.shape[i]} and {input2.shape[i]}"
            )
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but expected {weight.shape[1]}"
        )
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(
            f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but expected {weight.shape[2]}"
        )
    return apply(_BILINEAR, [input1, input2, weight] + ([] if bias is None else [bias]))


FUNCTIONAL = {f.__name__: f for f in (pixel_shuffle, pixel_unshuffle, channel_shuffle, unfold, fold, bilinear)}
TORCH = {name: FUNCTIONAL[name] for name in ("pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "bilinear")}
