"""The NumPy rows of XLA's window reductions (reduce_window_sum, _max, _min: pooling, and their gradients) for
_numpy_rows.ROWS: every parameter XLA's takes (window sizes, strides, padding that may crop, base and window
dilation), the holes and the padding holding the reduction's identity. The window's taps are combined one by one in
row-major order; a sum in another order than XLA's gives the same value up to a few ulp of its scale, as the
reduce_sum row does."""

import itertools

import numpy as np


def reduce_window(ufunc, identity, pad):
    """The row of the window reduction by `ufunc` whose identity `identity(dtype)` gives; `pad` is the pad primitive's
    row, whose interior padding is the base dilation."""

    def row(a, *, window_dimensions, window_strides, padding, base_dilation, window_dilation, **_):
        fill = identity(a.dtype)
        a = pad(a, fill, [(lo, hi, d - 1) for (lo, hi), d in zip(padding, base_dilation)])
        reach = [(w - 1) * d + 1 for w, d in zip(window_dimensions, window_dilation)]
        shape = [max(0, (n - r) // s + 1) if n >= r else 0 for n, r, s in zip(a.shape, reach, window_strides)]
        if 0 in shape:
            return np.full(shape, fill, a.dtype)
        out = None
        for offsets in itertools.product(*[range(w) for w in window_dimensions]):
            starts = [o * d for o, d in zip(offsets, window_dilation)]
            tap = a[tuple([slice(b, b + (n - 1) * s + 1, s) for b, n, s in zip(starts, shape, window_strides)])]
            out = np.array(tap) if out is None else ufunc(out, tap, out=out)
        return out

    return row
