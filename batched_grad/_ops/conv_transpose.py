"""Transposed convolution over 1, 2 or 3 dims: the gradient of a convolution with respect to its input, computed as
a convolution of the stride-dilated input with the flipped, transposed kernel (XLA's lhs dilation)."""

import jax
import jax.numpy as jnp

from .._autocast import autocast_policy
from ._core import Op, apply
from ._mixed_dtype import conv_bias_of_input_dtype
from .nn import CONV_BACKWARD, _check_tensor, _tuple, batched_input

_NAMES = {1: ("width",), 2: ("height", "width"), 3: ("depth", "height", "width")}


def _conv_transpose(x, w, *bias, stride, padding, output_padding, dilation, groups):
    n = w.ndim - 2
    c_in, c_out = w.shape[0], w.shape[1] * groups
    # (C_in, C_out / g, k...) -> (C_out, C_in / g, k...), flipped in space
    kernel = w.reshape((groups, c_in // groups) + w.shape[1:])
    kernel = jnp.swapaxes(kernel, 1, 2).reshape((c_out, c_in // groups) + w.shape[2:])
    kernel = jnp.flip(kernel, tuple(range(2, n + 2)))
    pads = [
        (d * (k - 1) - p, d * (k - 1) - p + o) for k, p, o, d in zip(w.shape[2:], padding, output_padding, dilation)
    ]
    spatial = "DHW"[-n:]
    out = jax.lax.conv_general_dilated(
        x,
        kernel,
        (1,) * n,
        pads,
        lhs_dilation=stride,
        rhs_dilation=dilation,
        feature_group_count=groups,
        dimension_numbers=("NC" + spatial, "OI" + spatial, "NC" + spatial),
    )
    return out + bias[0].reshape((-1,) + (1,) * n) if bias else out


_CONV_TRANSPOSE = Op("convolution", _conv_transpose, multilinear=True, fused=CONV_BACKWARD)


def _transposed(n, input, weight, bias, stride, padding, output_padding, groups, dilation):
    fn = f"conv_transpose{n}d"
    _check_tensor(fn, "input", input)
    _check_tensor(fn, "weight", weight, 2)
    if weight.ndim != n + 2:
        raise RuntimeError(f"Expected {n + 2}-dimensional weight for {fn}, but got weight of size {list(weight.shape)}")
    x, unbatched = batched_input(fn, input, n)
    if x.shape[1] != weight.shape[0]:
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected input{list(x.shape)} "
            f"to have {weight.shape[0]} channels, but got {x.shape[1]} channels instead"
        )
    stride, padding = _tuple(stride, n, "stride"), _tuple(padding, n, "padding")
    output_padding, dilation = _tuple(output_padding, n, "output_padding"), _tuple(dilation, n, "dilation")
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
        names = _NAMES[n]
        raise RuntimeError(
            "output padding must be smaller than either stride or dilation, but got "
            + " ".join(
                [f"output_padding_{k}: {v}" for k, v in zip(names, output_padding)]
                + [f"stride_{k}: {v}" for k, v in zip(names, stride)]
                + [f"dilation_{k}: {v}" for k, v in zip(names, dilation)]
            )
        )
    bias = conv_bias_of_input_dtype(x, weight, bias, groups, transposed_dims=n)
    out = apply(
        _CONV_TRANSPOSE,
        [x, weight] + ([] if bias is None else [bias]),
        stride=stride,
        padding=padding,
        output_padding=output_padding,
        dilation=dilation,
        groups=int(groups),
    )
    return out.squeeze(0) if unbatched else out


@autocast_policy("lower")
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 1-D convolution of (N, C_in, L) with (C_in, C_out / groups, k)."""
    return _transposed(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


@autocast_policy("lower")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 2-D convolution of (N, C_in, H, W) with (C_in, C_out / groups, kh, kw)."""
    return _transposed(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


@autocast_policy("lower")
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed 3-D convolution of (N, C_in, D, H, W) with (C_in, C_out / groups, kd, kh, kw)."""
    return _transposed(3, input, weight, bias, stride, padding, output_padding, groups, dilation)


FUNCTIONAL = {f.__name__: f for f in (conv_transpose1d, conv_transpose2d, conv_transpose3d)}
