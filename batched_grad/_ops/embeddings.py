"""Bags of embeddings: F.embedding_bag (rows of a table looked up by index and reduced per bag by sum, mean or max,
the bags given by offsets or by the rows of a 2-D input) as one op with torch's node name, and embedding_renorm_,
the in-place max_norm renormalization that embedding and embedding_bag apply to the rows they look up."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes, _host
from .._factories import arange, zeros
from .._grad_mode import is_recording, no_grad
from .._tensor import Tensor
from . import _derivatives
from ._core import Op, apply
from .nn import _check_tensor, _embedding, _is_concrete
from .nn import _host as _values
from .shape import cat

_MODES = ("sum", "mean", "max")
_RENORM_EPS = 1e-7  # torch's embedding_renorm_ divides max_norm by norm + 1e-7


def _bag_of_each_index(offsets, n):
    # offsets are non-decreasing from 0: index p belongs to the last bag starting at or before p; with
    # include_last_offset, indices at or past the closing offset get the id `bags`, which the segment sums drop
    return jnp.searchsorted(offsets, jnp.arange(n), side="right") - 1


def _bag_max(rows, kept, bag, bags):
    """Per bag and feature, the row of the first index holding the largest value (torch's max_indices), so the
    gradient goes to that one row; an empty bag (or one of padding only) gives zeros."""
    n = rows.shape[0]
    fixed = jax.lax.stop_gradient(rows)
    if kept is not None:
        fixed = jnp.where(kept[:, None], fixed, -jnp.inf)
    top = jax.ops.segment_max(fixed, bag, bags)
    # an index past the closing offset (bag id `bags`) reads nan, which equals nothing
    hit = fixed == jnp.take(top, bag, axis=0, mode="fill", fill_value=jnp.nan)
    if kept is not None:
        hit &= kept[:, None]
    first = jax.ops.segment_min(jnp.where(hit, jnp.arange(n)[:, None], n), bag, bags)
    padded = jnp.concatenate([rows, jnp.zeros((1,) + rows.shape[1:], rows.dtype)])
    return jnp.take_along_axis(padded, jnp.minimum(first, n), axis=0)


def _embedding_bag(w, indices, offsets, *sample_weights, mode, bags, padding_idx, by_frequency=False):
    rows = jnp.take(w, indices, axis=0)
    if by_frequency:
        rows = _derivatives.with_gradient_scaled(rows, _frequency_scales(indices, w.shape[0], w.dtype)[:, None])
    if sample_weights:
        rows = rows * sample_weights[0][:, None]
    bag = _bag_of_each_index(offsets, indices.shape[0])
    kept = None if padding_idx is None else indices != padding_idx  # padding entries leave their bag
    if mode == "max":
        return _bag_max(rows, kept, bag, bags)
    if kept is not None:
        rows = jnp.where(kept[:, None], rows, 0)
    total = jax.ops.segment_sum(rows, bag, bags)
    if mode == "sum":
        return total
    counted = jnp.ones(indices.shape, w.dtype) if kept is None else kept.astype(w.dtype)
    sizes = jax.ops.segment_sum(counted, bag, bags)
    return total / jnp.maximum(sizes, 1)[:, None]


def _scaled_by_frequency(out, indices, rows):
    # the value of `out`, whose gradient at each lookup is divided by how often its index occurs in `indices`
    counts = jnp.zeros(rows, out.dtype).at[indices.ravel()].add(1)
    return _derivatives.with_gradient_scaled(out, (1 / counts[indices])[..., None])


def _sparse_frequency_error():
    return RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")


def _frequency_double_backward_error():
    return NotImplementedError(
        "embedding: the double backward of scale_grad_by_freq=True is not supported (torch's is the unscaled "
        "lookup); differentiate it once, or leave scale_grad_by_freq at its default."
    )


def _frequency_forward_error(*operands, **static):
    return NotImplementedError(
        "embedding: forward-mode AD with scale_grad_by_freq=True is not supported (torch's tangent is the unscaled "
        "lookup); use reverse mode, or leave scale_grad_by_freq at its default."
    )


def _embedding_by_frequency(w, indices, *, padding_idx, sparse):
    def lookup(w, indices):
        out = _scaled_by_frequency(_embedding(w, indices, padding_idx=padding_idx), indices, w.shape[0])
        return _derivatives.raises_in_backward(out, _sparse_frequency_error) if sparse else out

    return _derivatives.first_order_only(lookup, _frequency_double_backward_error)(w, indices)


# scale_grad_by_freq: torch's backward divides each row's gradient by its index's count in the input; its forward-mode
# and double-backward derivatives are the unscaled lookup, which one JAX function cannot give alongside the scaled
# backward, so those two are refused
_EMBEDDING_BY_FREQUENCY = Op(
    "embedding",
    _embedding_by_frequency,
    "EmbeddingBackward0",
    forward_error=_frequency_forward_error,
)


def embedding_by_frequency(weight, indices, padding_idx, sparse):
    """embedding's lookup with scale_grad_by_freq, for a weight that gets a gradient."""
    return apply(_EMBEDDING_BY_FREQUENCY, [weight, indices], padding_idx=padding_idx, sparse=bool(sparse))


def _frequency_scales(indices, rows, dtype):
    """Per index, the factor scale_grad_by_freq puts on its row's gradient in torch's embedding_bag (CPU, dense):
    torch walks the distinct indices in sorted order and divides the k-th one's gradient by the count of the k-th
    entry of the sorted indices (not of its own value: the counts of the smaller indices and repeats shift it)."""
    counts = jnp.zeros(rows, jnp.int32).at[indices].add(1)
    rank = jnp.cumsum(counts > 0) - 1  # a looked-up row's place among the distinct indices
    return 1 / jnp.take(counts, jnp.take(jnp.sort(indices), rank[indices])).astype(dtype)


def _embedding_bag_by_frequency(w, indices, offsets, *sample_weights, sparse, **static):
    def bags(w, indices, offsets, *sample_weights):
        out = _embedding_bag(w, indices, offsets, *sample_weights, **static, by_frequency=True)
        return _derivatives.raises_in_backward(out, _sparse_frequency_error) if sparse else out

    return _derivatives.first_order_only(bags, _frequency_double_backward_error)(w, indices, offsets, *sample_weights)


def _host_layout(w, indices, offsets, mode, bags, padding_idx):
    """With NumPy: each index's bag (`bags` past the closing offset), which indices count, and for mode 'max' the
    position of the first largest value per bag and feature (-1 for an empty bag)."""
    bag = np.searchsorted(offsets, np.arange(indices.shape[0]), side="right") - 1
    kept = bag < bags
    if padding_idx is not None:
        kept &= indices != padding_idx
    if mode != "max":
        return bag, kept, None
    first = np.full((bags, w.shape[1]), -1)
    for b in range(bags):
        members = np.flatnonzero(kept & (bag == b))
        if members.size:
            first[b] = members[np.argmax(w[indices[members]], axis=0)]
    return bag, kept, first


def _on_host(w, indices):
    """Whether the host forms take these operands: the rows they gather are small (larger ones run as kernels)."""
    return indices.size * w.shape[1] <= _host.HOST_ELEMENTS


def _host_embedding_bag(w, indices, offsets, *sample_weights, mode, bags, padding_idx):
    if not _on_host(w, indices):
        return None
    bag, kept, first = _host_layout(w, indices, offsets, mode, bags, padding_idx)
    out = np.zeros((bags, w.shape[1]), w.dtype)
    if mode == "max":
        found = first >= 0
        out[found] = w[indices[first[found]], np.nonzero(found)[1]]
        return out
    rows = w[indices[kept]]
    if sample_weights:
        rows = rows * sample_weights[0][kept][:, None]
    np.add.at(out, bag[kept], rows)
    if mode == "mean":
        out /= np.maximum(np.bincount(bag[kept], minlength=bags)[:bags], 1).astype(w.dtype)[:, None]
    return out


def _host_embedding_bag_vjp(ct, operands, avals, *, mode, bags, padding_idx):
    """The gradients of the table and of the per-sample weights, with NumPy, from the bags' cotangent."""
    w, indices, offsets, *sample_weights = operands
    if w is None or indices is None or offsets is None or any(x is None for x in sample_weights):
        return None
    if not _on_host(w, indices):
        return None
    bag, kept, first = _host_layout(w, indices, offsets, mode, bags, padding_idx)
    grad = np.zeros(*avals[0])
    if mode == "max":
        found = first >= 0
        np.add.at(grad, (indices[first[found]], np.nonzero(found)[1]), ct[found])
        return (grad, None, None)
    rows = ct[bag[kept]]
    if mode == "mean":
        rows = rows / np.maximum(np.bincount(bag[kept], minlength=bags)[:bags], 1).astype(ct.dtype)[bag[kept], None]
    if not sample_weights:
        np.add.at(grad, indices[kept], rows)
        return (grad, None, None)
    np.add.at(grad, indices[kept], rows * sample_weights[0][kept][:, None])
    weights_grad = np.zeros(*avals[3])
    weights_grad[kept] = (rows * w[indices[kept]]).sum(axis=1)
    return (grad, None, None, weights_grad)


_EMBEDDING_BAG = Op("embedding_bag", _embedding_bag, host=_host_embedding_bag, host_vjp=_host_embedding_bag_vjp)
# scale_grad_by_freq=True with a weight that requires grad: the backward as torch's; forward mode and the double
# backward refused, as embedding's
_EMBEDDING_BAG_BY_FREQUENCY = Op(
    "embedding_bag", _embedding_bag_by_frequency, "EmbeddingBagBackward0", forward_error=_frequency_forward_error
)


def _checked_index_tensor(name, x):
    if not x.dtype.is_floating_point and not x.dtype.is_complex and x.dtype is not _dtypes.bool:
        return x
    raise RuntimeError(
        f"Expected tensor for argument #1 '{name}' to have one of the following scalar types: Long, Int; but got "
        f"torch.{x.dtype.type_name}Tensor instead (while checking arguments for embedding_bag)"
    )


def _bags_of(input, offsets, per_sample_weights, include_last_offset):
    """(flat indices, offsets, flat per-sample weights, include_last_offset) from torch's two input forms: a 2-D
    input is one bag per row; a 1-D input is cut into bags at `offsets`."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length "
                f"sequences. However, found offsets of type {type(offsets)}"
            )
        if input.shape[1] == 0:
            raise RuntimeError("step must be nonzero")
        offsets = Tensor._wrap(np.arange(0, input.numel(), input.shape[1], dtype=input.dtype.np))
        flat_weights = None if per_sample_weights is None else per_sample_weights.reshape(-1)
        return input.reshape(-1), offsets, flat_weights, False
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    _check_tensor("embedding_bag", "offsets", offsets, 3)
    if offsets.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    return input, offsets, per_sample_weights, include_last_offset


_INDEX_SIZE = (
    "Expected i < index_size to be true, but got false.  (Could this error message be improved?  If so, please "
    "report an enhancement request to PyTorch.)"
)


def _check_values(indices, offsets, rows):
    """torch's checks of the index and offset values (skipped for traced values, as every value check here)."""
    if _is_concrete(offsets) and offsets.numel():
        bounds = _values(offsets)
        if bounds[0] != 0:
            raise RuntimeError(
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. "
                f"However, got {bounds[0]}"
            )
        if bounds[-1] > indices.shape[0]:
            raise RuntimeError(
                f"offsets[-1] can not be greater than input's length {indices.shape[0]} but got offsets[-1] of "
                f"{bounds[-1]}"
            )
        if np.any(np.diff(bounds) < 0):
            raise RuntimeError(_INDEX_SIZE)
    if _is_concrete(indices) and indices.numel():
        values = _values(indices)
        bad = np.flatnonzero((values < 0) | (values >= rows))
        if bad.size:
            raise RuntimeError(
                f"Index {bad[0]} of input takes value {values[bad[0]]} which is not in the valid range [0, {rows})"
            )


def _checked_mode(mode, scale_grad_by_freq, sparse):
    if mode not in _MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")


def _checked_padding_idx(padding_idx, rows):
    if padding_idx is None:
        return None
    if not -rows <= padding_idx < rows:
        raise RuntimeError(
            f"padding_idx must be within the number of embeddings, -{rows} through {rows - 1}, but got {padding_idx}"
        )
    return padding_idx % rows


def _check_weights(weight, per_sample_weights, mode):
    if not weight.dtype.is_floating_point:
        raise RuntimeError(
            "Expected tensor for argument #1 'weight' to have one of the following scalar types: Half, BFloat16, "
            f"Float, Double; but got torch.{weight.dtype.type_name}Tensor instead (while checking arguments for "
            "embedding_bag)"
        )
    if per_sample_weights is None:
        return
    if mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' "
            f"(got mode='{mode}'). Please open a feature request on GitHub."
        )
    if per_sample_weights.dtype is not weight.dtype:
        raise RuntimeError(
            "Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
            f"'per_sample_weights'; but type torch.{weight.dtype.type_name}Tensor does not equal "
            f"torch.{per_sample_weights.dtype.type_name}Tensor (while checking arguments for embedding_bag)"
        )


def embedding_bag(
    input,
    weight,
    offsets=None,
    max_norm=None,
    norm_type=2,
    scale_grad_by_freq=False,
    mode="mean",
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=None,
):
    """Sums, means or maxima of bags of rows of `weight`: one bag per row of a 2-D `input`, or the bags of a 1-D
    `input` starting at each of `offsets` (with include_last_offset, the last offset ends the last bag: torch
    documents it as the input's length, and its kernels disagree on a smaller one; here indices past it are left
    out). Entries
    at `padding_idx` are left out of their bag (and its count); an empty bag gives zeros. `per_sample_weights`
    (mode 'sum') scales each looked-up row; `max_norm` first renormalizes the looked-up rows of `weight` in place.
    With sparse=True the weight's gradient is a sparse tensor (each looked-up row once per lookup, padding entries
    left out, as torch's). With scale_grad_by_freq the weight's gradient is scaled per index as torch's CPU kernel
    scales it (reverse mode, first order; not with sparse=True, whose backward raises torch's error)."""
    _check_tensor("embedding_bag", "input", input)
    _check_tensor("embedding_bag", "weight", weight, 2)
    if weight.dtype in (_dtypes.int64, _dtypes.int32) and input.dtype.is_floating_point:
        warnings.warn(
            "Argument order of nn.functional.embedding_bag was changed. Usage `embedding_bag(weight, input, ...)` is "
            "deprecated, and should now be `embedding_bag(input, weight, ...)`.",
            stacklevel=2,
        )
        weight, input = input, weight
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it must have the "
            f"same shape as the input ({input.shape})"
        )
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    indices, offsets, sample_weights, include_last_offset = _bags_of(
        input, offsets, per_sample_weights, include_last_offset
    )
    _checked_mode(mode, scale_grad_by_freq, sparse)
    if max_norm is not None:
        renorm_rows_(weight, indices, max_norm, norm_type)
    _check_weights(weight, sample_weights, mode)
    _checked_index_tensor("indices", indices)
    _checked_index_tensor("offsets", offsets)
    padding_idx = _checked_padding_idx(padding_idx, weight.shape[0])
    _check_values(indices, offsets, weight.shape[0])
    bags = max(offsets.shape[0] - bool(include_last_offset), 0)
    extra = [] if sample_weights is None else [sample_weights]
    if scale_grad_by_freq and weight.requires_grad and is_recording():
        return apply(
            _EMBEDDING_BAG_BY_FREQUENCY,
            [weight, indices, offsets, *extra],
            sparse=bool(sparse),
            mode=mode,
            bags=bags,
            padding_idx=padding_idx,
        )
    if sparse and weight.requires_grad and is_recording():
        weight, indices, padding_idx = _looked_up_rows(weight, indices, padding_idx)
    return apply(_EMBEDDING_BAG, [weight, indices, offsets, *extra], mode=mode, bags=bags, padding_idx=padding_idx)


def _looked_up_rows(weight, indices, padding_idx):
    """(rows, positions, padding position) that give the bags of weight[indices] with the weight's gradient sparse:
    the rows are the lookups, recorded by embedding's sparse node, and the bags read them at their positions (a
    padding entry at an extra zero row, which the bags leave out as they leave out padding_idx)."""
    from ..sparse._grads import embedding_with_sparse_grad

    rows = embedding_with_sparse_grad(weight, indices, padding_idx, lambda w: w.index_select(0, indices))
    positions = arange(indices.shape[0], dtype=_dtypes.int64)
    if padding_idx is None:
        return rows, positions, None
    end = indices.shape[0]
    positions = positions.masked_fill(indices == padding_idx, end)
    return cat([rows, zeros((1, weight.shape[1]), dtype=weight.dtype)]), positions, end


def embedding_renorm_(input, indices, max_norm, norm_type):
    """In place: each row of `input` looked up by `indices` whose `norm_type`-norm exceeds `max_norm` is scaled by
    max_norm / (norm + 1e-7), the scale in float64 as torch's. torch has no derivative of it: on a tensor that
    requires grad, under grad mode, it raises (torch raises at the backward for a non-leaf)."""
    _check_tensor("embedding_renorm_", "input", input)
    _check_tensor("embedding_renorm_", "indices", indices, 2)
    if is_recording() and input.requires_grad:
        if input.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        raise RuntimeError("the derivative for 'embedding_renorm' is not implemented.")
    return renorm_rows_(input, indices, max_norm, norm_type)


def renorm_rows_(input, indices, max_norm, norm_type):
    """embedding_renorm_ without recording: what embedding and embedding_bag do with max_norm."""
    if input.ndim != 2:
        raise RuntimeError(f"embedding_renorm_: self must be 2-D, but got {input.ndim}-D")
    if not (_is_concrete(indices) and _is_concrete(input)):
        raise ValueError(
            "embedding_renorm_ (max_norm): which rows are scaled depends on the values of the indices and the "
            "weight, which are not known inside a transform; renormalize the weight before it, or pass max_norm=None"
        )
    rows = np.unique(_values(indices).reshape(-1))
    if not rows.size:
        return input
    with no_grad():
        looked_up = input[Tensor._wrap(rows)]
        norms = _row_norms(_values(looked_up), float(norm_type)).astype(np.float64)
        scale = np.where(norms > max_norm, max_norm / (norms + _RENORM_EPS), 1.0)
        input[Tensor._wrap(rows)] = looked_up * Tensor._wrap(scale.astype(input.dtype.np)[:, None])
    return input


def _row_norms(rows, p):
    """The p-norm of each row, computed in the rows' dtype as torch's Tensor.norm."""
    magnitudes = np.abs(rows)
    if p == np.inf:
        return magnitudes.max(axis=1)
    if p == -np.inf:
        return magnitudes.min(axis=1)
    if p == 0:
        return (magnitudes != 0).sum(axis=1).astype(rows.dtype)
    return np.power(np.power(magnitudes, p).sum(axis=1), 1 / p)


FUNCTIONAL = {"embedding_bag": embedding_bag}
TORCH = {"embedding_renorm_": embedding_renorm_}
