"""The row of lax.conv_general_dilated (_numpy_rows.py): a convolution as one matrix product of the input's windows
(a strided view of the dilated, padded input, copied once into rows) with the kernel, as NumPy's matmul computes the
dot_general row's products. It gives convolutions and their VJPs (transposed convolutions: input dilation; the
kernel's gradient: batch groups) derived host forms, so a new size of a small convolution compiles nothing."""

import numpy as np


def _dilated(x, dilation):
    """x (N, C, *spatial) with dilation - 1 zeros between neighbours along each spatial dimension."""
    if all([d == 1 for d in dilation]):
        return x
    shape = x.shape[:2] + tuple([(s - 1) * d + 1 if s else 0 for s, d in zip(x.shape[2:], dilation)])
    out = np.zeros(shape, x.dtype)
    out[(slice(None), slice(None)) + tuple([slice(None, None, d) for d in dilation])] = x
    return out


def _padded(x, padding):
    """x (N, C, *spatial) padded with zeros (low, high) per spatial dimension; a negative amount crops."""
    crop = tuple([slice(max(-lo, 0), s - max(-hi, 0)) for (lo, hi), s in zip(padding, x.shape[2:])])
    x = x[(slice(None), slice(None)) + crop]
    return np.pad(x, ((0, 0), (0, 0)) + tuple([(max(lo, 0), max(hi, 0)) for lo, hi in padding]))


def _windows(x, kernel, strides, dilation):
    """A view (N, C, *out_spatial, *kernel) of x (N, C, *spatial): each output position's window, and the output's
    spatial shape."""
    size = tuple([max((s - d * (k - 1) - 1) // t + 1, 0) for s, k, d, t in zip(x.shape[2:], kernel, dilation, strides)])
    spatial = x.strides[2:]
    steps = tuple([a * t for a, t in zip(spatial, strides)]) + tuple([a * d for a, d in zip(spatial, dilation)])
    return np.lib.stride_tricks.as_strided(x, x.shape[:2] + size + kernel, x.strides[:2] + steps, writeable=False), size


def conv_general_dilated(
    lhs,
    rhs,
    window_strides,
    padding,
    lhs_dilation,
    rhs_dilation,
    dimension_numbers,
    feature_group_count,
    batch_group_count,
    preferred_element_type=None,
    **_,
):
    if preferred_element_type is not None:
        lhs, rhs = lhs.astype(preferred_element_type, copy=False), rhs.astype(preferred_element_type, copy=False)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    x, w = np.transpose(lhs, lhs_spec), np.transpose(rhs, rhs_spec)  # (N, C, *spatial), (O, I, *kernel)
    x = _padded(_dilated(x, lhs_dilation), padding)
    kernel = w.shape[2:]
    windows, size = _windows(x, kernel, window_strides, rhs_dilation)
    n, out_channels, dims = x.shape[0], w.shape[0], len(kernel)
    groups, batches = feature_group_count, batch_group_count
    positions = int(np.prod(size, dtype=np.int64))
    # rows (batch, position), columns (channel, tap): feature groups split the channels (and the kernel's outputs),
    # batch groups split the batch (and the outputs); one matrix product per group
    rows = windows.transpose((0, *range(2, 2 + dims), 1, *range(2 + dims, 2 + 2 * dims)))
    columns = x.shape[1] // groups * int(np.prod(kernel, dtype=np.int64))  # not -1: an empty batch has no rows
    rows = rows.reshape(batches, n // batches * positions, groups, columns).transpose(0, 2, 1, 3)
    per_group = out_channels // (groups * batches)
    out = np.matmul(rows, w.reshape(batches, groups, per_group, -1).transpose(0, 1, 3, 2))
    out = out.reshape(batches, groups, n // batches, positions, per_group).transpose(2, 0, 1, 4, 3)
    out = out.reshape((n // batches, out_channels) + size)
    return np.transpose(out, np.argsort(out_spec))
