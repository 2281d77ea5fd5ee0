"""Dropout's other forms, drawn from batched_grad's generator: channel-wise dropout1d/2d/3d, alpha_dropout and
feature_alpha_dropout (which keep SELU's mean and variance), and gumbel_softmax."""

import math
import warnings

import numpy as np

from ._core import Op, apply
from .nn import _check_tensor, check_dropped_dtype, dropout, kept_scale, softmax
from .random_draws import sample

_ALPHA = 1.7580993408473766  # -SELU's negative saturation value
_SCALE = Op("dropout", lambda a, keep: a * keep.astype(a.dtype), multilinear=True, backward_name="MulBackward0")


def _check_p(p):
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep(input, p, per_channel, fn):
    """Bernoulli(1 - p) draws: one per element, or one per (sample, channel) broadcast over the rest."""
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if per_channel else tuple(input.shape)
    return sample(None, fn, shape, lambda bits, size: bits.bernoulli(size, 1 - p).astype(input.dtype.np))


def _feature_dropout(input, p, training, inplace, fn):
    if not training or p == 0 or input.numel() == 0:
        return input
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    check_dropped_dtype(input)
    keep = _keep(input, p, True, fn) * kept_scale(p, input.dtype)
    out = apply(_SCALE, [input, keep])
    return input._assign(out, "mul_") if inplace else out


def _channel_dropout(n, input, p, training, inplace):
    fn = f"dropout{n}d"
    _check_tensor(fn, "input", input)
    _check_p(p)
    if n == 1 and input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
            "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs)."
        )
    if n > 1 and input.ndim not in (n + 1, n + 2):
        warnings.warn(
            f"dropout{n}d: Received a {input.ndim}-D input to dropout{n}d, which is deprecated and will "
            "result in an error in a future release. To retain the behavior and silence this warning, "
            f"please use dropout instead. Note that dropout{n}d exists to provide channel-wise dropout on "
            f"inputs with {n} spatial dimensions, a channel dimension, and an optional batch dimension "
            f"(i.e. {n + 1}D or {n + 2}D inputs).",
            stacklevel=3,
        )
    if n == 2:  # torch reads a 3-D input as (N, C, L), and never adds a batch dim
        if input.ndim == 3:
            warnings.warn(
                "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel "
                "dim. This behavior will change in a future release to interpret the input as one without "
                "a batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout "
                "behavior, please switch to using dropout1d instead.",
                stacklevel=3,
            )
        return _feature_dropout(input, p, training, inplace, fn)
    if input.ndim == n + 2:
        return _feature_dropout(input, p, training, inplace, fn)
    if not training or p == 0:
        return input
    out = _feature_dropout(input.unsqueeze(0), p, training, False, fn).squeeze(0)
    return input._assign(out, "mul_") if inplace else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, L) or (C, L) input with probability p, scaling the rest by 1 / (1 - p)."""
    return _channel_dropout(1, input, p, training, inplace)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, H, W) input with probability p, scaling the rest by 1 / (1 - p)."""
    return _channel_dropout(2, input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, D, H, W) or (C, D, H, W) input with probability p."""
    return _channel_dropout(3, input, p, training, inplace)


def _alpha(input, p, training, inplace, per_channel, fn):
    _check_tensor(fn, "input", input)
    _check_p(p)
    if not training or p == 0 or input.numel() == 0:
        return input
    if per_channel and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 1:
        return input * 0 if not inplace else input.mul_(0)
    check_dropped_dtype(input)
    keep = _keep(input, p, per_channel, fn)
    a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
    # kept values become a x + b, dropped ones SELU's saturation value, mapped the same way
    shift = (keep - 1) * (_ALPHA * a) + _ALPHA * a * p
    out = apply(_SCALE, [input, keep * a]) + shift
    return input._assign(out, "mul_") if inplace else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped elements take SELU's negative saturation value, and an affine map keeps
    the mean and variance."""
    return _alpha(input, p, training, inplace, False, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels (dim 1)."""
    return _alpha(input, p, training, inplace, True, "feature_alpha_dropout")


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau) for Gumbel(0, 1) noise g; with `hard`, the one-hot of its maximum in the forward
    pass and the soft sample's gradient (straight through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = sample(
        None,
        "gumbel_softmax",
        logits.shape,
        lambda bits, size: -np.log(bits.exponential(size, logits.dtype.np, 1.0)),
    )
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = y_soft.new_zeros(y_soft.shape).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


FUNCTIONAL = {
    f.__name__: f for f in (dropout1d, dropout2d, dropout3d, alpha_dropout, feature_alpha_dropout, gumbel_softmax)
}


def feature_dropout(input, p, train):
    """torch.feature_dropout: zero whole channels (dim 1) with probability p while `train`."""
    _check_p(p)
    return _feature_dropout(input, p, train, False, "feature_dropout")


def feature_dropout_(input, p, train):
    """In-place torch.feature_dropout."""
    _check_p(p)
    return _feature_dropout(input, p, train, True, "feature_dropout_")


def _torch_form(fn, inplace):
    """torch's (input, p, train) form of a dropout function (in place when `inplace`)."""

    def form(input, p, train):
        return fn(input, p, train, inplace)

    form.__name__ = form.__qualname__ = fn.__name__ + ("_" if inplace else "")
    form.__doc__ = f"torch.{form.__name__}(input, p, train): {fn.__name__}{' in place' if inplace else ''}."
    return form


TORCH = {
    f.__name__: f
    for f in (
        _torch_form(dropout, False),
        _torch_form(dropout, True),
        _torch_form(alpha_dropout, False),
        _torch_form(alpha_dropout, True),
        _torch_form(feature_alpha_dropout, False),
        _torch_form(feature_alpha_dropout, True),
        feature_dropout,
        feature_dropout_,
    )
}
