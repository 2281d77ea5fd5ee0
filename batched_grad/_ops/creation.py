"""Factories beyond zeros/ones/arange/linspace: logspace, scalar_tensor, asarray, tril_indices/triu_indices, the
window functions (hann, hamming, blackman, bartlett, kaiser), and torch's detach functions."""

import math

import numpy as np

from .. import _dtypes
from .._factories import as_tensor, range_ends, tensor
from .._layout_types import takes_layout
from .._tensor import Tensor


def _made(values, dtype, requires_grad, default=None):
    d = _dtypes.to_dtype(dtype) if dtype is not None else (default or _dtypes.get_default_dtype())
    out = Tensor._wrap(np.asarray(values).astype(d.np))
    return out._requires_grad_() if requires_grad else out


@takes_layout
def logspace(start, end, steps, base=10.0, *, dtype=None, requires_grad=False, device=None):
    """`steps` values base ** x for x evenly spaced from start to end."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    d = _dtypes.to_dtype(dtype) if dtype is not None else _dtypes.get_default_dtype()
    start, end = range_ends("logspace", start, end, d)
    if d.is_complex:
        return _made(np.power(float(base), np.linspace(float(start), float(end), int(steps))), dtype, requires_grad)
    with np.errstate(invalid="ignore"):  # a power past an integer dtype's range wraps, as C's cast does in torch
        return _made(_logspace_values(start, end, int(steps), float(base), d.np), dtype, requires_grad)


def _logspace_values(start, end, steps, base, work):
    """torch's CPU loop: the ends cast to the result's type, the exponents in double with each half counted from
    its own end, and C's pow (math.pow; NumPy's vectorized power rounds some results otherwise by an ulp)."""
    first, last = np.asarray(start).astype(work), np.asarray(end).astype(work)
    if steps == 1:
        return np.full(1, math.pow(base, float(start)))  # torch fills base ** start, start not cast
    step = float(np.float64(last - first)) / max(steps - 1, 1)
    i = np.arange(steps)
    exponents = np.where(i < steps // 2, float(first) + step * i, float(last) - step * (steps - 1 - i))
    powers = np.array([math.pow(base, x) for x in exponents.tolist()], np.float64)
    return powers.astype(np.float32) if np.dtype(work).itemsize == 2 else powers  # c10::Half converts via float


@takes_layout
def scalar_tensor(s, *, dtype=None, requires_grad=False, device=None):
    """A 0-dim tensor holding the number s (of the default float dtype unless `dtype`)."""
    return _made(s, dtype, requires_grad)


def _triangle_indices(name, row, col, offset, dtype, lower):
    if row < 0 or col < 0:
        raise RuntimeError(f"row must be non-negative, got{row}" if row < 0 else f"col must be non-negative, got{col}")
    rows, cols = np.tril_indices(row, offset, col) if lower else np.triu_indices(row, offset, col)
    return _made(np.stack([rows, cols]), dtype, False, _dtypes.int64)


@takes_layout
def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (2, N) coordinates of the lower triangle (on and below diagonal `offset`) of a row x col matrix."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, True)


@takes_layout
def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (2, N) coordinates of the upper triangle (on and above diagonal `offset`) of a row x col matrix."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, False)


def _window(name, length, periodic, formula, dtype, requires_grad):
    if length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={length}")
    d = _dtypes.to_dtype(dtype) if dtype is not None else _dtypes.get_default_dtype()
    if not d.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {d}")
    if length <= 1:
        return _made(np.ones(length), d, requires_grad)
    span = length if periodic else length - 1  # a periodic window is the symmetric one of length + 1, cut
    return _made(formula(np.arange(length) / span), d, requires_grad)


@takes_layout
def hann_window(window_length, periodic=True, *, dtype=None, requires_grad=False, device=None):
    """The Hann window 0.5 - 0.5 cos(2 pi n / N) (periodic: N = window_length, else window_length - 1)."""
    return _window(
        "hann_window",
        window_length,
        periodic,
        lambda x: 0.5 - 0.5 * np.cos(2 * np.pi * x),
        dtype,
        requires_grad,
    )


@takes_layout
def hamming_window(
    window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, requires_grad=False, device=None
):
    """The Hamming window alpha - beta cos(2 pi n / N)."""
    return _window(
        "hamming_window",
        window_length,
        periodic,
        lambda x: alpha - beta * np.cos(2 * np.pi * x),
        dtype,
        requires_grad,
    )


@takes_layout
def blackman_window(window_length, periodic=True, *, dtype=None, requires_grad=False, device=None):
    """The Blackman window 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)."""
    return _window(
        "blackman_window",
        window_length,
        periodic,
        lambda x: 0.42 - 0.5 * np.cos(2 * np.pi * x) + 0.08 * np.cos(4 * np.pi * x),
        dtype,
        requires_grad,
    )


@takes_layout
def bartlett_window(window_length, periodic=True, *, dtype=None, requires_grad=False, device=None):
    """The triangular Bartlett window 1 - |2 n / N - 1|."""
    return _window("bartlett_window", window_length, periodic, lambda x: 1 - np.abs(2 * x - 1), dtype, requires_grad)


@takes_layout
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, requires_grad=False, device=None):
    """The Kaiser window I0(beta sqrt(1 - (2 n / N - 1)^2)) / I0(beta)."""
    return _window(
        "kaiser_window",
        window_length,
        periodic,
        lambda x: np.i0(beta * np.sqrt(np.clip(1 - (2 * x - 1) ** 2, 0, None))) / np.i0(beta),
        dtype,
        requires_grad,
    )


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """obj as a Tensor: a Tensor itself (converted to `dtype`), sharing memory where it can unless copy=True."""

    if isinstance(obj, Tensor):
        out = obj if dtype is None else obj.to(dtype)
        if copy and out is obj:
            out = obj.clone()
        elif copy is False and out is not obj:
            raise ValueError("can't alias tensor from torch.asarray: its dtype would change")
    else:
        out = tensor(obj, dtype=dtype) if copy else as_tensor(obj, dtype=dtype)
    return out._requires_grad_() if requires_grad else out


def detach(input):
    """input.detach()."""
    return input.detach()


def detach_(input):
    """input.detach_()."""
    return input.detach_()


FUNCTIONS = {
    f.__name__: f
    for f in (
        logspace,
        scalar_tensor,
        tril_indices,
        triu_indices,
        hann_window,
        hamming_window,
        blackman_window,
        bartlett_window,
        kaiser_window,
        asarray,
        detach,
        detach_,
    )
}
