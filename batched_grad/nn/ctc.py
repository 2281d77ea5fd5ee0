"""Connectionist temporal classification (F.ctc_loss): the negative log-likelihood of a target sequence summed over
its alignments with the input frames (blanks between and around the labels, repeats merged), by the forward
recursion in log space over the extended label sequence, one op whose VJP JAX derives. Batches are padded to the
longest target and masked by each sample's input and target lengths."""

import itertools

import jax
import jax.numpy as jnp

from .. import _dtypes, _factories
from .._autocast import autocast_policy
from .._ops._core import Op, apply
from .._ops.nn import pad
from .._ops.shape import stack
from .._tensor import Tensor


def _logsumexp(*terms):
    """log(sum(exp(terms))) that is -inf, with a zero gradient, where every term is -inf."""
    stacked = jnp.stack(terms)
    top = jnp.max(stacked, axis=0)
    finite_top = jnp.where(jnp.isfinite(top), top, 0)
    total = jnp.sum(jnp.exp(stacked - finite_top), axis=0)
    return jnp.where(total > 0, finite_top + jnp.log(jnp.where(total > 0, total, 1)), -jnp.inf)


def _ctc_losses(log_probs, targets, input_lengths, target_lengths, *, blank, zero_infinity):
    """Per-sample losses: log_probs (T, N, C), targets (N, S) padded, lengths (N,)."""
    steps, batch, _ = log_probs.shape
    width = 2 * targets.shape[1] + 1
    positions = jnp.arange(width)
    labels = jnp.where(positions % 2 == 1, targets[:, jnp.clip((positions - 1) // 2, 0, None)], blank)  # (N, L)
    skip = (positions >= 2) & (labels != blank) & (labels != jnp.roll(labels, 2, axis=1))  # may jump over a blank
    emissions = jnp.take_along_axis(log_probs, jnp.broadcast_to(labels, (steps, batch, width)), axis=2)  # (T, N, L)
    ninf = jnp.full((batch, 1), -jnp.inf, log_probs.dtype)
    start = jnp.where(positions < 2, emissions[0], -jnp.inf)

    def step(alpha, inputs):
        t, emission = inputs
        previous = jnp.concatenate([ninf, alpha[:, :-1]], axis=1)
        before_previous = jnp.where(skip, jnp.concatenate([ninf, ninf, alpha[:, :-2]], axis=1), -jnp.inf)
        advanced = _logsumexp(alpha, previous, before_previous) + emission
        return jnp.where((t < input_lengths)[:, None], advanced, alpha), None

    alpha, _ = jax.lax.scan(step, start, (jnp.arange(1, steps), emissions[1:]))
    last = 2 * target_lengths
    end_blank = jnp.take_along_axis(alpha, last[:, None], axis=1)[:, 0]
    end_label = jnp.take_along_axis(alpha, jnp.clip(last - 1, 0, None)[:, None], axis=1)[:, 0]
    losses = -_logsumexp(end_blank, jnp.where(last > 0, end_label, -jnp.inf))
    if zero_infinity:
        return jnp.where(jnp.isinf(losses), 0, losses)
    live = (jnp.arange(steps)[:, None] < input_lengths).astype(log_probs.dtype)  # (T, N): frames read
    return _nan_gradient_where_infinite(losses, log_probs, live)


@jax.custom_vjp
def _nan_gradient_where_infinite(losses, log_probs, live):
    """The losses; their gradient to the log-probabilities of the frames a sample reads (`live`) is NaN where its
    loss is infinite (no alignment fits its input length), as torch's backward gives it."""
    return losses


def _poison_forward(losses, log_probs, live):
    return losses, (jnp.isinf(losses), log_probs, live)


def _poison_backward(saved, g):
    infinite, log_probs, live = saved
    poison = jnp.where(infinite[None, :] & (live > 0), jnp.nan, 0).astype(log_probs.dtype)[..., None]
    return g, jnp.broadcast_to(poison, log_probs.shape), jnp.zeros_like(live)


_nan_gradient_where_infinite.defvjp(_poison_forward, _poison_backward)


_CTC = Op("ctc_loss", _ctc_losses, backward_name="CtcLossBackward0")


def _lengths(name, lengths, batch):
    """Lengths given as a Tensor, a sequence or a number, as an int64 Tensor of the batch's size."""
    values = lengths if isinstance(lengths, Tensor) else _factories.tensor(lengths, dtype=_dtypes.int64)
    values = values.reshape(-1).long()
    if values.shape[0] != batch:
        raise RuntimeError(f"{name} must be of size batch_size")
    return values


def _padded_targets(targets, target_lengths):
    """Targets as (N, S): as given, or the 1-D concatenation of every sample's labels split and padded."""
    targets = targets.long()
    if targets.ndim == 2:
        return targets
    counts = [int(n) for n in target_lengths.tolist()]
    width = max(counts, default=0)
    ends = itertools.accumulate(counts)
    rows = [pad(targets[end - n : end], (0, width - n)) for n, end in zip(counts, ends)]
    return stack(rows) if rows else _factories.zeros(0, width, dtype=_dtypes.int64)


@autocast_policy("fp32")
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """The CTC loss of log_probs (T, N, C), or (T, C) for one sequence, against targets (N, S) padded or the 1-D
    concatenation of the targets; reduction 'mean' divides each loss by its target length, then averages."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs, targets = log_probs.unsqueeze(1), targets.unsqueeze(0)
    steps, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    input_lengths = _lengths("input_lengths", input_lengths, batch)
    target_lengths = _lengths("target_lengths", target_lengths, batch)
    longest_input = int(input_lengths.max()) if batch else 0
    if longest_input > steps:
        raise RuntimeError(
            f"Expected input_lengths to have value at most {steps}, but got value {longest_input} (while checking "
            "arguments for ctc_loss_allocate_outputs)"
        )
    padded = _padded_targets(targets, target_lengths)
    longest_target = int(target_lengths.max()) if batch else 0
    if padded.shape[1] < longest_target:
        raise RuntimeError(
            f"Expected tensor to have size at least {longest_target} at dimension 1, but got size {padded.shape[1]} "
            "for argument #2 'targets' (while checking arguments for ctc_loss_allocate_outputs)"
        )
    losses = apply(
        _CTC,
        [log_probs, padded, input_lengths, target_lengths],
        blank=int(blank),
        zero_infinity=bool(zero_infinity),
    )
    if reduction == "none":
        return losses[0] if unbatched else losses
    if reduction == "sum":
        return losses.sum()
    return (losses / target_lengths.clamp_min(1).to(losses.dtype)).mean()
