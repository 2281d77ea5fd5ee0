"""Element maps of array operations, as NumPy index arrays over flattened (C order) elements: which element of the
reduced array an element falls into (reductions, contractions), and which input elements a window or a prefix
reads (convolutions, pooling, cumulative ops)."""

import itertools

import numpy as np


def size_of(shape):
    return int(np.prod(shape, dtype=np.int64))


def group_map(shape, kept):
    """For each element of an array of `shape`, the flat index of the element it falls into in the array made of
    the dims `kept` (in that order): a reduction over the other dims."""
    sizes = [shape[d] for d in kept]
    reduced = np.arange(size_of(sizes), dtype=np.int64).reshape(sizes)
    reduced = reduced.transpose(np.argsort(kept)) if len(kept) > 1 else reduced
    expanded = [shape[d] if d in kept else 1 for d in range(len(shape))]
    return np.broadcast_to(reduced.reshape(expanded), shape).ravel()


def window_pairs(in_shape, out_shape, window, strides, padding, base_dilation, window_dilation):
    """The (output element, input element, window offset) triples of a sliding window over every dim
    (reduce_window's semantics, and a convolution's spatial dims): per window offset, the input element each output
    element reads, where it is inside the (dilated) input. Returns three flat index arrays."""
    ndim = len(in_shape)
    out_coords = np.indices(out_shape, dtype=np.int64).reshape(ndim, -1)
    out_flat = np.arange(out_coords.shape[1], dtype=np.int64)
    outs, ins, offsets = [], [], []
    for w, offset in enumerate(itertools.product(*[range(w) for w in window])):
        valid = np.ones(out_coords.shape[1], bool)
        coords = []
        for d in range(ndim):
            # position in the dilated, padded input; an input element sits at multiples of base_dilation
            pos = out_coords[d] * strides[d] + offset[d] * window_dilation[d] - padding[d][0]
            valid &= (pos >= 0) & (pos % base_dilation[d] == 0)
            pos = pos // base_dilation[d]
            valid &= pos < in_shape[d]
            coords.append(pos)
        if not valid.any():
            continue
        coords = np.stack(coords)[:, valid]
        outs.append(out_flat[valid])
        ins.append(np.ravel_multi_index(tuple(coords), in_shape))
        offsets.append(np.full(len(outs[-1]), w, np.int64))
    if not outs:
        return (np.zeros(0, np.int64),) * 3
    return np.concatenate(outs), np.concatenate(ins).astype(np.int64), np.concatenate(offsets)


def prefix_pairs(shape, axis, reverse):
    """The (output element, input element) pairs of a cumulative op along `axis`: element k of a line reads the
    elements up to k (from k on when `reverse`)."""
    n = shape[axis]
    k, j = np.tril_indices(n) if not reverse else np.triu_indices(n)
    iota = np.arange(size_of(shape), dtype=np.int64).reshape(shape)
    lines = np.moveaxis(iota, axis, -1).reshape(-1, n)
    return lines[:, k].ravel(), lines[:, j].ravel()


def line_map(shape, axis):
    """group_map over `axis` alone: the line (along `axis`) each element is on."""
    return group_map(shape, [d for d in range(len(shape)) if d != axis])
