"""The NumPy rows of XLA's window reductions (reduce_window_sum, _max, _min: pooling, and their gradients) for
_numpy_rows.ROWS: every parameter XLA's takes (window sizes, strides, padding that may crop, base and window
dilation), the holes and the padding holding the reduction's identity. The window's taps are combined one by one in
row-major order; a sum in another order than XLA's gives the same value up to a few ulp of its scale, as the
reduce_sum row does."""

import itertools

import numpy as np


def _dilated(a, dilation, fill):
    if all(d == 1 for d in dilation):
        return a
    out = np.full(tuple([(n - 1) * d + 1 if n else 0 for n, d in zip(a.shape, dilation)]), fill, a.dtype)
    out[tuple([slice(None, None, d) for d in dilation])] = a
    return out


def _padded(a, padding, fill):
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    if any(lo or hi for lo, hi in grow):
        a = np.pad(a, grow, constant_values=fill)
    return a[tuple([slice(-lo if lo < 0 else 0, n + hi if hi < 0 else n) for (lo, hi), n in zip(padding, a.shape)])]


def reduce_window(ufunc, identity):
    """The row of the window reduction by `ufunc` whose identity `identity(dtype)` gives."""

    def row(a, *, window_dimensions, window_strides, padding, base_dilation, window_dilation, **_):
        fill = identity(a.dtype)
        a = _padded(_dilated(a, base_dilation, fill), padding, fill)
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
