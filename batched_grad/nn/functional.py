"""torch.nn.functional's names: the nn ops of the op table, plus the losses, each one pure JAX op with torch's
formula (so its VJP and higher derivatives are JAX's and it vectorizes under is_grads_batched)."""

import math
import types
import warnings

import jax
import jax.numpy as jnp

from .. import _dtypes
from .._autocast import autocast_policy, wrapped_stacklevel
from .._dtypes import not_implemented
from .._grad_mode import no_grad
from .._ops import (
    UNARY,
    _derivatives,
    attention,
    conv_transpose,
    dropouts,
    embeddings,
    layers,
    norms,
    pooling,
    spatial,
)
from .._ops import interpolate as _interpolate
from .._ops._core import SAVES_NOTHING, Op, apply
from .._ops._fused_backward import FUSED_ZEROS, Fused, last_operand_if
from .._ops._mixed_dtype import check_norm_parameters, compute_dtype
from .._ops.activations import FUNCTIONAL as _ACTIVATIONS
from .._ops.activations import _inplace_of
from .._ops.distances import cosine_similarity, normalize, pairwise_distance, pdist
from .._ops.elementwise import _check_broadcast
from .._ops.nn import (
    _check_tensor,
    _host,
    _is_concrete,
    conv1d,
    conv2d,
    conv3d,
    dropout,
    elu,
    embedding,
    gelu,
    layer_norm,
    leaky_relu,
    linear,
    log_softmax,
    one_hot,
    pad,
    silu,
    softmax,
    softplus,
)
from .._subclass import dispatching_later
from .._tensor import Tensor
from .._vmap_levels import is_batched
from .ctc import ctc_loss
from .losses import FUNCTIONS as _LOSSES
from .losses import check_class_weight_dtype, legacy_reduction

tanh, sigmoid = UNARY["tanh"], UNARY["sigmoid"]


def relu(input, inplace=False):
    """max(x, 0)."""
    return input.relu_() if inplace else UNARY["relu"](input)


globals().update(_ACTIVATIONS)
globals().update(_LOSSES)
_OPS = {
    **pooling.FUNCTIONAL,
    **norms.FUNCTIONAL,
    **conv_transpose.FUNCTIONAL,
    **layers.FUNCTIONAL,
    **embeddings.FUNCTIONAL,
    **_interpolate.FUNCTIONAL,
    **dropouts.FUNCTIONAL,
    **attention.FUNCTIONAL,
    **spatial.FUNCTIONAL,
}
globals().update(_OPS)
relu_, elu_, leaky_relu_ = (_inplace_of(f) for f in (relu, elu, leaky_relu))


# ---- reductions ---------------------------------------------------------------------------------------------
_REDUCE = {"none": lambda loss: loss, "mean": jnp.mean, "sum": jnp.sum}


def _check_reduction(reduction):
    if reduction not in _REDUCE:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _promoted(fn, input, target):
    _check_tensor(fn, "input", input)
    _check_tensor(fn, "target", target, 2)
    d = _dtypes.result_type(input, target)
    if not d.is_floating_point:
        raise RuntimeError(f"{fn}: expected floating point input and target, but got {input.dtype} and {target.dtype}")
    return d


# ---- regression losses --------------------------------------------------------------------------------------
def _smooth_l1(d, *, beta):
    z = jnp.abs(d)
    if beta == 0:  # the quadratic branch is empty (and 0.5 z^2 / 0 would poison the gradient with nan)
        return z
    return jnp.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta)


def _distance_op(name, f, **kwargs):
    return Op(
        name,
        lambda a, b, *, dtype, reduction, **static: _REDUCE[reduction](f(a.astype(dtype) - b.astype(dtype), **static)),
        **kwargs,
    )


_L1_NAMES = {"mean": "MeanBackward0", "sum": "SumBackward0", "none": "AbsBackward0"}
_DISTANCE_OPS = {
    "mse_loss": _distance_op("mse_loss", jnp.square),
    "smooth_l1_loss": _distance_op("smooth_l1_loss", _smooth_l1),
    # torch composes l1_loss: its last node is the reduction's (or abs's), and its derivative reads the difference
    "l1_loss": _distance_op(
        "l1_loss",
        _derivatives.abs_,
        torch_saves=SAVES_NOTHING,
        backward_name=lambda sig: _L1_NAMES[dict(sig.static)["reduction"]],
    ),
}


def _distance_loss(name, input, target, reduction, **static):
    d = _promoted(name, input, target)
    _check_reduction(reduction)
    if input.shape != target.shape:
        warnings.warn(
            f"Using a target size ({target.shape!r}) that is different to the input size "
            f"({input.shape!r}). This will likely lead to incorrect results due to broadcasting. Please "
            "ensure they have the same size.",
            UserWarning,
            stacklevel=wrapped_stacklevel(3),
        )
        _check_broadcast([input, target])
    return apply(_DISTANCE_OPS[name], [input, target], dtype=d.np, reduction=reduction, **static)


@autocast_policy("fp32")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean (or sum, or none) of the squared differences."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if weight is None:
        return _distance_loss("mse_loss", input, target, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")
    weighted = (input - target) ** 2 * weight
    if reduction == "none":
        return weighted
    return weighted.sum() if reduction == "sum" else weighted.sum() / weight.sum()


@autocast_policy("fp32")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum, or none) of the absolute differences."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    return _distance_loss("l1_loss", input, target, reduction)


@autocast_policy("fp32")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Huber-like loss: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return _distance_loss("smooth_l1_loss", input, target, reduction, beta=float(beta))


# ---- classification losses ----------------------------------------------------------------------------------
def _nll(logp, target, weight, *, ignore_index, reduction):
    """torch's nll_loss on arrays: logp (N, C, ...) or (C,), target (N, ...) or ()."""
    valid = target != ignore_index
    safe = jnp.where(valid, target, 0)
    if logp.ndim == 1:
        picked = logp[safe]
    else:
        picked = jnp.take_along_axis(logp, jnp.expand_dims(safe, 1), axis=1).squeeze(1)
    weights = valid.astype(logp.dtype) if weight is None else jnp.where(valid, weight[safe], 0)
    loss = -picked * weights
    if reduction == "mean":
        return jnp.sum(loss) / jnp.sum(weights)
    return _REDUCE[reduction](loss)


def _class_weight(weight, logp):
    """`weight` shaped to broadcast along the class dim of logp."""
    return weight.reshape((-1,) + (1,) * (logp.ndim - 2)) if logp.ndim > 1 else weight


def _cross_entropy(x, target, *weight, ignore_index, reduction, label_smoothing, probabilities):
    axis = min(1, x.ndim - 1)
    classes = x.shape[axis]
    logp = jax.nn.log_softmax(x, axis=axis)
    w = weight[0] if weight else None
    wc = _class_weight(w, logp) if weight else 1
    if probabilities:
        t = target * (1 - label_smoothing) + label_smoothing / classes if label_smoothing else target
        loss = -jnp.sum(logp * t * wc, axis)
        return jnp.sum(loss) / (x.size / classes) if reduction == "mean" else _REDUCE[reduction](loss)
    nll = _nll(logp, target, w, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    valid = target != ignore_index
    smooth = jnp.where(valid, -jnp.sum(logp * wc, axis), 0)
    if reduction == "mean":
        total = jnp.sum(jnp.where(valid, w[jnp.where(valid, target, 0)], 0)) if weight else jnp.sum(valid)
        smooth = jnp.sum(smooth) / total
    else:
        smooth = _REDUCE[reduction](smooth)
    return (1 - label_smoothing) * nll + smooth * (label_smoothing / classes)


def _nll_name(sig):
    # torch's nll_loss2d takes 4-d input; other ranks above 2 are reshaped to it, and back without a reduction
    rank, reduction = len(sig.avals[0][0]), dict(sig.static)["reduction"]
    return (
        "NllLossBackward0"
        if rank <= 2
        else "ViewBackward0"
        if rank != 4 and reduction == "none"
        else "NllLoss2DBackward0"
    )


def _cross_entropy_name(sig):  # the last op torch records: the division of the mean, the sum's negation, ...
    static = dict(sig.static)
    if static["probabilities"]:
        return "DivBackward1" if static["reduction"] == "mean" else "NegBackward0"
    return "AddBackward0" if static["label_smoothing"] else _nll_name(sig)


_NLL = Op(
    "nll_loss",
    lambda logp, target, *weight, **static: _nll(logp, target, weight[0] if weight else None, **static),
    backward_name=_nll_name,
    fused=FUSED_ZEROS,  # nll_loss_backward reads the input; its derivative in it is zeros
)
# torch composes cross_entropy: its derivative reads intermediates (log-probabilities), not the input
_CROSS_ENTROPY = Op("cross_entropy", _cross_entropy, backward_name=_cross_entropy_name, torch_saves=SAVES_NOTHING)


def _check_classes(fn, input, target, weight, probabilities=False):
    """The shapes of input, target (class indices, or probabilities) and weight, as torch checks them."""
    _check_tensor(fn, "input", input)
    _check_tensor(fn, "target", target, 2)
    if not input.dtype.is_floating_point:
        raise not_implemented(fn, input.dtype)
    if input.ndim == 0:
        raise ValueError(f"{fn}: expected input of shape (C,), (N, C) or (N, C, d1, ...), but got a 0-dim tensor")
    expected = tuple(input.shape[:1] + input.shape[2:]) if input.ndim > 1 else ()
    if not probabilities and tuple(target.shape) != expected:
        _refuse_class_target(fn, input, target, expected)
    classes = input.shape[min(1, input.ndim - 1)]
    if weight is not None and (not isinstance(weight, Tensor) or tuple(weight.shape) != (classes,)):
        shape = list(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__
        raise RuntimeError(
            f"weight tensor should be defined either for all {classes} classes or no classes but got "
            f"weight tensor of shape: {shape}"
        )
    return classes


def _unbatched_class_target(input, target):
    """An unbatched input's class index: torch takes it 0-dim or as a 1-D target of one element."""
    if isinstance(input, Tensor) and isinstance(target, Tensor) and input.ndim == 1 and target.ndim == 1:
        if target.shape[0] != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {target.shape[0]}")
        return target.reshape(())
    return target


def _refuse_class_target(fn, input, target, expected):
    """torch's error for a target of class indices whose shape does not fit the input's, in torch's order: the batch
    sizes first (a 0-dim target counts as 0), then the kernel's own check for the input's rank."""
    if input.ndim > 1 and (target.shape[0] if target.ndim else 0) != input.shape[0]:
        raise ValueError(
            f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
            f"({target.shape[0] if target.ndim else 0})."
        )
    if input.ndim == 2:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input.ndim == 4 and target.ndim != 3:
        raise RuntimeError(
            f"only batches of spatial targets supported (3D tensors) but got targets of dimension: {target.ndim}"
        )
    if input.ndim == 4:
        raise RuntimeError(f"size mismatch (got input: {list(input.shape)} , target: {list(target.shape)}")
    if input.ndim > 2:
        raise RuntimeError(f"Expected target size {list(expected)}, got {list(target.shape)}")
    raise ValueError(
        f"{fn}: expected target of shape {list(expected)} for input of shape {list(input.shape)}, but got "
        f"{list(target.shape)}"
    )


def _check_targets(target, classes, ignore_index):
    if target.dtype not in (_dtypes.int64, _dtypes.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {target.dtype.type_name}")
    if _is_concrete(target):
        values = _host(target)
        bad = values[(values != ignore_index) & ((values < 0) | (values >= classes))]
        if bad.size:
            raise IndexError(f"Target {bad.flat[0]} is out of bounds.")


@autocast_policy("fp32")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """The negative log-likelihood of class indices `target` under log-probabilities `input` (classes in dim 1)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    target = _unbatched_class_target(input, target)
    classes = _check_classes("nll_loss", input, target, weight)
    _check_targets(target, classes, ignore_index)
    check_class_weight_dtype(input, weight)
    return apply(
        _NLL,
        [input, target] + ([] if weight is None else [weight]),
        ignore_index=int(ignore_index),
        reduction=reduction,
    )


@autocast_policy("fp32")
def cross_entropy(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0
):
    """log_softmax + nll_loss over dim 1 (dim 0 for unbatched input); `target` holds class indices, or class
    probabilities of input's shape; `label_smoothing` mixes in the uniform distribution."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    _check_tensor("cross_entropy", "input", input)
    _check_tensor("cross_entropy", "target", target, 2)
    probabilities = target.shape == input.shape  # torch's rule: a target of the input's shape holds probabilities
    if probabilities and not target.dtype.is_floating_point:
        raise RuntimeError(
            f"Expected floating point type for target with class probabilities, got {target.dtype.type_name}"
        )
    target = target if probabilities else _unbatched_class_target(input, target)
    classes = _check_classes("cross_entropy", input, target, weight, probabilities)
    if not probabilities:
        _check_targets(target, classes, ignore_index)
        check_class_weight_dtype(input, weight)
    return apply(
        _CROSS_ENTROPY,
        [input, target] + ([] if weight is None else [weight]),
        ignore_index=int(ignore_index),
        reduction=reduction,
        label_smoothing=float(label_smoothing),
        probabilities=probabilities,
    )


# ---- binary losses ------------------------------------------------------------------------------------------
def _bce(x, t, *weight, reduction):
    loss = _derivatives.bce(*jnp.broadcast_arrays(x, t))
    return _REDUCE[reduction](loss * weight[0].astype(x.dtype) if weight else loss)  # torch reads weight as x's dtype


def _bce_with_logits(x, t, *extra, reduction, has_weight):
    # torch's steps, each written in place into a tensor of the target's dtype (which the result keeps): (1 - t) * x,
    # minus log_weight * log_sigmoid(x), times weight; with an input of another dtype each step computes in the wider
    # one and rounds. Differentiated as the smooth formula, weighted and reduced in the wider dtype as torch's
    # backward (which divides by the count last).
    weight, pos_weight = (extra[0], extra[1:]) if has_weight else (None, extra)
    log_weight = (pos_weight[0] - 1) * t + 1 if pos_weight else jnp.ones((), x.dtype)
    smooth = _derivatives.bce_with_logits(*jnp.broadcast_arrays(x, t, log_weight))
    term = jax.nn.log_sigmoid(x) * (log_weight if pos_weight else 1)
    loss = (((1 - t) * x).astype(t.dtype) - term).astype(t.dtype)
    if weight is not None:
        loss, smooth = (loss * weight).astype(t.dtype), smooth * weight
    reduce = _REDUCE[reduction]
    return _derivatives.with_derivative_of(reduce(loss), reduce(smooth))


_BCE = Op("binary_cross_entropy", _bce)
_BCE_WITH_LOGITS = Op("binary_cross_entropy_with_logits", _bce_with_logits)


def _check_binary(fn, input, target, message):
    _promoted(fn, input, target)
    if target.shape != input.shape:
        raise ValueError(message.format(target=target.shape, input=input.shape))


@autocast_policy("fp32")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t log(x) + (1 - t) log(1 - x)) for probabilities `input` in [0, 1], each log clamped at -100."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_binary(
        "binary_cross_entropy",
        input,
        target,
        "Using a target size ({target!r}) that is different to the input size ({input!r}) is deprecated. "
        "Please ensure they have the same size.",
    )
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {target.dtype.type_name} but expected {input.dtype.type_name}")
    for name, probabilities in (("input", input), ("target", target)):
        if _is_concrete(probabilities) and probabilities.numel():
            values = _host(probabilities)
            if not ((values >= 0) & (values <= 1)).all():
                raise RuntimeError(f"all elements of {name} should be between 0 and 1")
    if weight is not None:
        for i, (w, s) in enumerate(zip(reversed(weight.shape), reversed(input.shape))):
            if w not in (1, s) or weight.ndim > input.ndim:
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {w} at {-1 - i}! Mismatching "
                    f"argument at index 1 had torch.Size({list(weight.shape)}); but expected shape "
                    f"should be broadcastable to {list(input.shape)}"
                )
    return apply(_BCE, [input, target] + ([] if weight is None else [weight]), reduction=reduction)


@autocast_policy("fp32")
def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None
):
    """binary_cross_entropy(sigmoid(input), target), computed stably; `pos_weight` weighs the positive term."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_binary(
        "binary_cross_entropy_with_logits",
        input,
        target,
        "Target size ({target!r}) must be the same as input size ({input!r})",
    )
    extra = [w for w in (weight, pos_weight) if w is not None]
    _check_broadcast([input] + ([] if weight is None else [weight]))
    _check_broadcast(([] if pos_weight is None else [pos_weight]) + [input])
    return apply(_BCE_WITH_LOGITS, [input, target] + extra, reduction=reduction, has_weight=weight is not None)


# ---- batch normalization --------------------------------------------------------------------------------
def _batch_norm(input, *params, eps, training, has_weight, has_bias):
    """Normalize each channel (dim 1) by the batch's statistics (biased variance) when `training`, else by the
    running mean and variance that lead `params`; then scale by the weight and shift by the bias."""
    x = input.astype(compute_dtype(input, params))
    shape = (1, -1) + (1,) * (x.ndim - 2)  # a per-channel vector against x
    if training:
        axes = (0,) + tuple(range(2, x.ndim))
        mean = jnp.mean(x, axes, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axes, keepdims=True)
    else:
        (mean, var), params = [p.reshape(shape) for p in params[:2]], params[2:]
    out = (x - mean) * jax.lax.rsqrt(var + eps)
    if has_weight:
        out, params = out * params[0].reshape(shape), params[1:]
    return (out + params[0].reshape(shape) if has_bias else out).astype(input.dtype)


# native_batch_norm_backward reads the input and the weight, not the bias
_BATCH_NORM = Op(
    "native_batch_norm",
    _batch_norm,
    fused=Fused(bias=last_operand_if(lambda sig: dict(sig.static)["has_bias"]), reads_bias=False),
)


def _batch_statistics(x):
    """Each channel's mean and unbiased variance over the batch (and the spatial dims), outside the graph."""
    dims = (0,) + tuple(range(2, x.ndim))
    x = x.detach()
    return x.mean(dims), x.var(dims, correction=1)


BATCHED_INPUT_UNBATCHED_STATS = (
    "Batch norm got a batched tensor as input while the running_mean or running_var, which will be updated in place, "
    "were not batched.\nIf you are using a module and do not need eval mode, please set `track_running_stats` to be "
    "False.If you are using a prebuilt module and do not need eval mode, please see the functorch website for "
    "resources on how to patch your module to work with vmap"
)


def _check_running_stats_batched_with(input, running_mean, running_var, training):
    """torch.func.vmap's refusal to move unmapped running statistics by a training batch norm of mapped rows."""
    stats = [t for t in (running_mean, running_var) if t is not None]
    if training and stats and is_batched(input._v) and not all(is_batched(t._v) for t in stats):
        raise RuntimeError(BATCHED_INPUT_UNBATCHED_STATS)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalize each channel (dim 1) of `input` by the batch's mean and biased variance when `training` (moving
    the running statistics, when given, by `momentum`: in place, with the unbiased variance), else by the running
    statistics; then scale by `weight` and shift by `bias` (per channel)."""
    _check_tensor("batch_norm", "input", input)
    if training:
        size = input.shape
        if size[0] * math.prod(size[2:]) == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {size!r}")
        if eps <= 0.0:
            raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    elif eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    channels = input.size(1)
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError(
            f"{'running_mean' if running_mean is None else 'running_var'} must be defined in evaluation mode"
        )
    named = (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias))
    for name, t in named:
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")
    _check_running_stats_batched_with(input, running_mean, running_var, training)
    check_norm_parameters(input, weight, bias, running_mean, running_var)
    if training and running_mean is not None and running_var is not None:
        mean, var = _batch_statistics(input)
        with no_grad():
            running_mean.copy_(mean * momentum + running_mean * (1 - momentum))
            running_var.copy_(var * momentum + running_var * (1 - momentum))
    stats = [] if training else [running_mean.detach(), running_var.detach()]
    affine = [p for p in (weight, bias) if p is not None]
    return apply(
        _BATCH_NORM,
        [input] + stats + affine,
        eps=float(eps),
        training=bool(training),
        has_weight=weight is not None,
        has_bias=bias is not None,
    )


# the multi-head attention port composes this module's functions, so it is imported once they are defined
from .attention import multi_head_attention_forward  # noqa: E402

__all__ = [
    "ctc_loss",
    *_ACTIVATIONS,
    *_LOSSES,
    *_OPS,
    "conv3d",
    "relu_",
    "elu_",
    "leaky_relu_",
    "cosine_similarity",
    "normalize",
    "pairwise_distance",
    "pdist",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "cross_entropy",
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "mse_loss",
    "multi_head_attention_forward",
    "nll_loss",
    "one_hot",
    "pad",
    "relu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softplus",
    "tanh",
]

# every public function takes part in the protocol of Tensor subclasses (_subclass.py), as torch's functions do
dispatching_later(
    globals(),
    [name for name, value in globals().items() if not name.startswith("_") and isinstance(value, types.FunctionType)],
    "torch.nn.functional",
    python_level=True,
)
