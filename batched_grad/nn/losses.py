"""torch.nn.functional's other losses: kl_div, huber_loss, soft_margin_loss, margin_ranking_loss,
hinge_embedding_loss, poisson_nll_loss, gaussian_nll_loss, cosine_embedding_loss, multilabel_soft_margin_loss,
multi_margin_loss, multilabel_margin_loss (each one op with torch's formula, whose node is named after the last op
torch records) and the triplet losses (compositions, as torch's)."""

import math
import warnings

import jax
import jax.numpy as jnp

from .. import _dtypes
from .._autocast import autocast_policy, wrapped_stacklevel
from .._ops._core import Op, apply
from .._ops._derivatives import first_order_only
from .._ops._forward_refused import not_implemented_forward
from .._ops.distances import pairwise_distance
from .._ops.elementwise import _check_broadcast, minimum
from .._ops.nn import _check_tensor, _host, _is_concrete
from .._ops.special import _xlogy
from .._ops.ternary import clamp_min
from .._tensor import Tensor

_REDUCE = {"none": lambda loss: loss, "mean": jnp.mean, "sum": jnp.sum}
_KL_MEAN = (
    "reduction: 'mean' divides the total loss by both the batch size and the support size.'batchmean' divides "
    "only by the batch size, and aligns with the KL div math definition.'mean' will be changed to behave the "
    "same as 'batchmean' in the next major release."
)


def _check_reduction(reduction, message="{} is not a valid value for reduction"):
    if reduction not in _REDUCE:
        raise ValueError(message.format(reduction))


def legacy_reduction(size_average, reduce, reduction):
    """`reduction`, or, where either of torch's deprecated size_average and reduce is given, the reduction they name
    (each None counts as True: reduce=False is 'none', else size_average picks 'mean' or 'sum'), with torch's
    warning."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is not None and not reduce:
        reduction = "none"
    else:
        reduction = "sum" if size_average is not None and not size_average else "mean"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.",
        UserWarning,
        stacklevel=wrapped_stacklevel(3),
    )
    return reduction


def _clamp_min0(z):  # max(z, 0) with torch's clamp_min derivative: 1 where z >= 0
    return jnp.where(z >= 0, z, 0)


def _named_by_reduction(none, **others):
    """A backward name per reduction: the reduction's node, or `none` (torch's last elementwise node)."""
    names = {"mean": "MeanBackward0", "sum": "SumBackward0", "none": none, **others}
    return lambda sig: names[dict(sig.static)["reduction"]]


def _loss_op(name, f, none_name=None, forward_error=None, **names):
    """An op computing the elementwise loss f(*arrays, **static), reduced by the static `reduction`."""
    backward_name = _named_by_reduction(none_name, **names) if none_name else None
    return Op(
        name,
        lambda *arrays, reduction, **static: _REDUCE[reduction](f(*arrays, **static)),
        backward_name,
        forward_error=forward_error,
    )


def _kl(x, t, *, log_target):
    return jnp.exp(t) * (t - x) if log_target else _xlogy(t, t) - t * x


_KL_DIV = Op(
    "kl_div",
    lambda x, t, *, reduction, log_target: _kl_reduced(_kl(x, t, log_target=log_target), reduction, x.ndim),
    _named_by_reduction("SubBackward0", batchmean="DivBackward0"),
)
_KL_DIV_LOG = Op("kl_div", _KL_DIV.fn, _named_by_reduction("MulBackward0", batchmean="DivBackward0"))


def _kl_reduced(loss, reduction, ndim):
    if reduction == "batchmean":
        return jnp.sum(loss) / loss.shape[0] if ndim else jnp.sum(loss)
    return _REDUCE[reduction](loss)


@autocast_policy("fp32")
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """The Kullback-Leibler divergence of `target` from `input` (log-probabilities; `target` too when
    log_target); reduction 'batchmean' divides the sum by the batch size."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn(_KL_MEAN, UserWarning, stacklevel=wrapped_stacklevel(2))
    if reduction != "batchmean":
        _check_reduction(reduction)
    if isinstance(input, Tensor) and isinstance(target, Tensor):
        _check_broadcast([target, input])  # torch's formula reads target first: target * (log(target) - input)
    d = _floating("kl_div", input, target)
    if not all(t.dtype.is_floating_point or t.dtype.is_complex for t in (input, target)):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    return apply(
        _KL_DIV_LOG if log_target else _KL_DIV,
        [input.to(d), target.to(d)],
        reduction=reduction,
        log_target=bool(log_target),
    )


def _huber(d, *, delta):
    z = jnp.abs(d)
    return jnp.where(z < delta, 0.5 * d * d, delta * (z - 0.5 * delta))


_HUBER = _loss_op("huber_loss", lambda x, t, *, delta: _huber(x - t, delta=delta))
_SOFT_MARGIN = _loss_op("soft_margin_loss", lambda x, t: jnp.log1p(jnp.exp(-x * t)))


def _floating(fn, input, target):
    _check_tensor(fn, "input", input)
    _check_tensor(fn, "target", target, 2)
    _check_broadcast([input, target])
    return _dtypes.float_result(_dtypes.result_type(input, target))


@autocast_policy("fp32")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), for d = input - target; `weight` scales each
    element's loss."""
    _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = _floating("huber_loss", input, target)
    if weight is not None and weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    if weight is None:
        return apply(_HUBER, [input.to(d), target.to(d)], reduction=reduction, delta=float(delta))
    loss = apply(_HUBER, [input.to(d), target.to(d)], reduction="none", delta=float(delta)) * weight
    return _reduced(loss, reduction)


def _reduced(loss, reduction):
    return loss if reduction == "none" else loss.mean() if reduction == "mean" else loss.sum()


@autocast_policy("fp32")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), for targets of +-1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    d = _floating("soft_margin_loss", input, target)
    return apply(_SOFT_MARGIN, [input.to(d), target.to(d)], reduction=reduction)


_MARGIN_RANKING = _loss_op(
    "margin_ranking_loss", lambda a, b, y, *, margin: _clamp_min0(-y * (a - b) + margin), "ClampMinBackward0"
)


@autocast_policy("fp32")
def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), for targets of +-1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} "
        )
    d = _dtypes.float_result(_dtypes.result_type(input1, input2, target))
    _check_broadcast([input1, input2, target])
    return apply(_MARGIN_RANKING, [input1.to(d), input2.to(d), target.to(d)], reduction=reduction, margin=float(margin))


def _hinge(x, y, *, margin):
    return jnp.where(y != 1, _clamp_min0(margin - x), 0) + jnp.where(y != -1, x, 0)


_HINGE = _loss_op("hinge_embedding_loss", _hinge, "AddBackward0")


@autocast_policy("fp32")
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    d = _floating("hinge_embedding_loss", input, target)
    return apply(_HINGE, [input.to(d), target.to(d)], reduction=reduction, margin=float(margin))


def _poisson_nll(x, t, *, log_input, full, eps):
    loss = jnp.exp(x) - t * x if log_input else x - t * jnp.log(x + eps)
    if full:  # Stirling's approximation of log(target!), where target > 1
        big = t > 1
        safe = jnp.where(big, t, 2)
        loss = loss + jnp.where(big, safe * jnp.log(safe) - safe + 0.5 * jnp.log(2 * math.pi * safe), 0)
    return loss


_POISSON = {
    full: _loss_op("poisson_nll_loss", _poisson_nll, "AddBackward0" if full else "SubBackward0")
    for full in (False, True)
}


@autocast_policy("fp32")
def poisson_nll_loss(
    input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"
):
    """exp(input) - target * input (log_input), or input - target * log(input + eps); with `full`, plus Stirling's
    approximation of log(target!)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    d = _floating("poisson_nll_loss", input, target)
    return apply(
        _POISSON[bool(full)],
        [input.to(d), target.to(d)],
        reduction=reduction,
        log_input=bool(log_input),
        full=bool(full),
        eps=float(eps),
    )


def _clamped_var(v, eps):
    # torch clamps var in place outside the graph: the derivative is that of var itself
    return v + jax.lax.stop_gradient(jnp.maximum(v, eps) - v)


def _gaussian_nll(x, t, v, *, full, eps):
    v = _clamped_var(v, eps)
    loss = 0.5 * (jnp.log(v) + (x - t) ** 2 / v)
    return loss + 0.5 * math.log(2 * math.pi) if full else loss


_GAUSSIAN = {
    full: _loss_op("gaussian_nll_loss", _gaussian_nll, "AddBackward0" if full else "MulBackward0")
    for full in (False, True)
}


def _gaussian_var(input, var):
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        return var * input.new_ones(input.shape)
    if _is_concrete(var) and (_host(var) < 0).any():
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            return var.unsqueeze(-1)
        mismatched = [v for i, v in zip(input.shape, var.shape) if i != v]
        if not (input.ndim == var.ndim and sum(mismatched) == 1):
            raise ValueError("var is of incorrect size")
    return var


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log(var) + (input - target)^2 / var), with var clamped at eps (without changing its derivative); `var`
    may have one dimension fewer than input, or a size 1 in one of them."""
    var = _gaussian_var(input, var)
    if reduction not in _REDUCE:
        raise ValueError(reduction + " is not valid")
    return apply(_GAUSSIAN[bool(full)], [input, target, var], reduction=reduction, full=bool(full), eps=float(eps))


def _cosine_embedding(a, b, y, *, margin, axis):
    tiny = 1e-12  # torch's EPSILON on the squared magnitudes
    cos = jnp.sum(a * b, axis) / jnp.sqrt((jnp.sum(a * a, axis) + tiny) * (jnp.sum(b * b, axis) + tiny))
    return jnp.where(y == 1, 1 - cos, 0) + jnp.where(y == -1, _clamp_min0(cos - margin), 0)


_COSINE_EMBEDDING = _loss_op("cosine_embedding_loss", _cosine_embedding, "AddBackward0")


@autocast_policy("fp32")
def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1 (cosines along dim 1, or 0
    for 1-D inputs)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.ndim not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if not input1.ndim == input2.ndim == target.ndim + 1:
        raise RuntimeError(
            f"{target.ndim}D target tensor expects {target.ndim + 1}D input tensors, but found inputs "
            f"with sizes {list(input1.shape)} and {list(input2.shape)}."
        )
    d = _dtypes.float_result(_dtypes.result_type(input1, input2))
    return apply(
        _COSINE_EMBEDDING,
        [input1.to(d), input2.to(d), target],
        reduction=reduction,
        margin=float(margin),
        axis=input1.ndim - 1,
    )


def _multilabel_soft_margin(x, t, *weight):
    loss = -(t * jax.nn.log_sigmoid(x) + (1 - t) * jax.nn.log_sigmoid(-x))
    loss = loss * weight[0] if weight else loss
    return jnp.sum(loss, -1) / x.shape[-1]


_MULTILABEL_SOFT_MARGIN = _loss_op("multilabel_soft_margin_loss", _multilabel_soft_margin, "DivBackward0")


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """The mean over classes (the last dim) of the binary logistic losses of `input` against 0/1 `target`."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "{} is not valid")
    d = _floating("multilabel_soft_margin_loss", input, target)
    extra = [] if weight is None else [weight]
    return apply(_MULTILABEL_SOFT_MARGIN, [input.to(d), target.to(d)] + extra, reduction=reduction)


def _multi_margin(x, y, *weight, p, margin):
    x2 = x if x.ndim == 2 else x[None]
    y = y.reshape(-1)
    picked = jnp.take_along_axis(x2, y[:, None], 1)
    terms = _clamp_min0(margin - picked + x2)
    terms = terms**p if p == 2 else terms
    if weight:
        terms = terms * weight[0][y][:, None]
    terms = jnp.where(jnp.arange(x2.shape[1]) == y[:, None], 0, terms)
    loss = jnp.sum(terms, 1) / x2.shape[1]
    return loss if x.ndim == 2 else loss[0]


def _first_order(f, name):
    error = lambda: RuntimeError(f"derivative for aten::{name}_backward is not implemented")  # noqa: E731
    return lambda *arrays, **static: first_order_only(lambda *a: f(*a, **static), error)(*arrays)


_MULTI_MARGIN = _loss_op(
    "multi_margin_loss",
    _first_order(_multi_margin, "multi_margin_loss"),
    forward_error=not_implemented_forward("multi_margin_loss"),
)


def _check_classes(input, target):
    samples = input.shape[0] if input.ndim == 2 else 1
    if input.ndim not in (1, 2) or target.ndim > 1 or target.numel() != samples:
        raise RuntimeError(
            f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
            f"samples (batch size). Expected target size [{samples}], but got {list(target.shape)}. "
            f"Input has shape {list(input.shape)}."
        )
    if _is_concrete(target) and target.numel():
        values = _host(target)
        if values.min() < 0 or values.max() >= input.shape[-1]:
            raise RuntimeError("target out of range")


@autocast_policy("fp32")
def check_class_weight_dtype(input, weight):
    """torch's class-index losses read the class weights in the input's dtype, refusing another."""
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {input.dtype.type_name} but found {weight.dtype.type_name}")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    """The multi-class hinge loss: the mean over classes j != y of max(0, margin - x[y] + x[j]) ** p."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    _check_classes(input, target)
    check_class_weight_dtype(input, weight)
    extra = [] if weight is None else [weight]
    return apply(_MULTI_MARGIN, [input, target] + extra, reduction=reduction, p=int(p), margin=float(margin))


def _multilabel_margin(x, y):
    x2, y2 = (x, y) if x.ndim == 2 else (x[None], y[None])
    classes = x2.shape[1]
    # the target classes are y's entries before its first -1
    listed = jnp.cumprod(y2 >= 0, axis=1).astype(bool)
    is_target = jnp.any((y2[:, :, None] == jnp.arange(classes)) & listed[:, :, None], axis=1)
    picked = jnp.take_along_axis(x2, jnp.where(listed, y2, 0), 1)
    terms = _clamp_min0(1 - picked[:, :, None] + x2[:, None, :])
    terms = jnp.where(listed[:, :, None] & ~is_target[:, None, :], terms, 0)
    loss = jnp.sum(terms, (1, 2)) / classes
    return loss if x.ndim == 2 else loss[0]


_MULTILABEL_MARGIN = _loss_op(
    "multilabel_margin_loss",
    _first_order(_multilabel_margin, "multilabel_margin_loss"),
    forward_error=not_implemented_forward("multilabel_margin_loss_forward"),
)


@autocast_policy("fp32")
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The multi-label hinge loss: for each target class y (listed before the first -1 of `target`) and each
    other class j, max(0, 1 - (x[y] - x[j])), summed and divided by the number of classes."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape or input.ndim not in (1, 2):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    return apply(_MULTILABEL_MARGIN, [input, target], reduction=reduction)


@autocast_policy("fp32")
def triplet_margin_loss(
    anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"
):
    """max(d(a, p) - d(a, n) + margin, 0) with d the pairwise p-norm distance (with `swap`, d(a, n) is the smaller
    of it and d(p, n))."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(
            f"The anchor, positive, and negative tensors are expected to have the same number of "
            f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
            f"{negative.ndim}D inputs"
        )
    return _triplet(lambda a, b: pairwise_distance(a, b, p, eps), anchor, positive, negative, margin, swap, reduction)


def _triplet(distance, anchor, positive, negative, margin, swap, reduction):
    dist_pos, dist_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        dist_neg = minimum(dist_neg, distance(positive, negative))
    return _reduced(clamp_min(margin + dist_pos - dist_neg, 0), reduction)


def triplet_margin_with_distance_loss(
    anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False, reduction="mean"
):
    """triplet_margin_loss with any distance function (pairwise_distance by default)."""
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    return _triplet(distance_function or pairwise_distance, anchor, positive, negative, margin, swap, reduction)


FUNCTIONS = {
    f.__name__: f
    for f in (
        kl_div,
        huber_loss,
        soft_margin_loss,
        margin_ranking_loss,
        hinge_embedding_loss,
        poisson_nll_loss,
        gaussian_nll_loss,
        cosine_embedding_loss,
        multilabel_soft_margin_loss,
        multi_margin_loss,
        multilabel_margin_loss,
        triplet_margin_loss,
        triplet_margin_with_distance_loss,
    )
}
