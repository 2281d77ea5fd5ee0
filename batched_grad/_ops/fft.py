"""torch.fft: discrete Fourier transforms (complex, real-to-complex, complex-to-real, Hermitian), their sample
frequencies and shifts, with torch's arguments (n / s, dim, norm), dtypes and errors.

Every transform is one op whose function is JAX's n-dimensional transform over the chosen axes (padding or
truncating to the sizes asked), so its gradient is JAX's VJP; the engine's conjugation gives torch's convention."""

import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._autocast import autocast_policy
from .._int_args import int_or_ints
from .._layout_types import takes_layout
from .._tensor import _wrap_dim
from ._core import Op, apply
from .shape import roll

_NORMS = ("backward", "ortho", "forward")
# hfft and ihfft are irfft and rfft of the conjugate, normalized the other way round
_SWAPPED = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _fftn(a, s, axes, norm):
    return jnp.fft.fftn(a, s=s, axes=axes, norm=norm)


def _ifftn(a, s, axes, norm):
    return jnp.fft.ifftn(a, s=s, axes=axes, norm=norm)


def _rfftn(a, s, axes, norm):
    return jnp.fft.rfftn(a, s=s, axes=axes, norm=norm)


def _irfftn(a, s, axes, norm):
    return jnp.fft.irfftn(a, s=s, axes=axes, norm=norm)


def _hfftn(a, s, axes, norm):
    return jnp.fft.irfftn(jnp.conj(a), s=s, axes=axes, norm=_SWAPPED[norm])


def _ihfftn(a, s, axes, norm):
    return jnp.conj(jnp.fft.rfftn(a, s=s, axes=axes, norm=_SWAPPED[norm]))


# kind: (JAX's transform, what the input is converted to, torch's node name)
_KINDS = {
    "fft": (_fftn, "complex", "FftC2CBackward0"),
    "ifft": (_ifftn, "complex", "FftC2CBackward0"),
    "rfft": (_rfftn, "real", "FftR2CBackward0"),
    "irfft": (_irfftn, "complex", "FftC2RBackward0"),
    "hfft": (_hfftn, "complex", "FftC2RBackward0"),
    "ihfft": (_ihfftn, "real", "FftR2CBackward0"),
}


def _transform_fn(transform):
    def fn(a, *, s, axes, norm, dtype):
        return transform(a.astype(dtype), s, axes, norm)

    return fn


_OPS = {
    kind: Op(f"fft_{kind}", _transform_fn(transform), backward_name=name, linear=True)
    for kind, (transform, _, name) in _KINDS.items()
}


def _input_dtype(kind, input):
    """The dtype the transform reads the input as: torch's errors for complex input to a real transform and for
    the dtypes its CPU kernels lack."""
    d = _dtypes.float_result(input.dtype)
    if d in (_dtypes.float16, _dtypes.bfloat16):
        raise RuntimeError(f"Unsupported dtype {d.type_name}")
    if _KINDS[kind][1] == "real":
        if d.is_complex:
            raise RuntimeError(f"{kind} expects a real input tensor, but got {d.type_name}")
        return d
    return d if d.is_complex else _dtypes._to_complex(d)


def _check_norm(norm):
    if norm is not None and norm not in _NORMS:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    return norm or "backward"


def _dims_and_sizes(input, s, dim, default_dims):
    """torch's resolution of (s, dim) for an n-dimensional transform: dims wrapped, unique, sizes given or the
    input's (-1 in s also meaning the input's)."""
    if dim is not None:
        dims = [_wrap_dim(d, input.ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
        if s is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        if len(s) > input.ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {input.ndim} dimensions.")
        dims = list(range(input.ndim - len(s), input.ndim))
    else:
        dims = list(range(input.ndim)) if default_dims is None else [_wrap_dim(d, input.ndim) for d in default_dims]
    if len(set(dims)) != len(dims):
        raise RuntimeError("FFT dims must be unique")
    return dims, None if s is None else [int(n) for n in s]


def _last_size(kind, input, dims, sizes):
    """The size of the last transformed dim of the output of a complex-to-real transform: 2 * (m - 1) unless
    given."""
    if sizes is None or sizes[-1] == -1:
        return 2 * (input.shape[dims[-1]] - 1)
    return sizes[-1]


def _transform(kind, input, s, dim, norm, default_dims=None):
    norm = _check_norm(norm)
    if input.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    dims, sizes = _dims_and_sizes(input, s, dim, default_dims)
    full = [input.shape[d] if sizes is None or sizes[i] == -1 else sizes[i] for i, d in enumerate(dims)]
    if kind in ("irfft", "hfft"):
        full[-1] = _last_size(kind, input, dims, sizes)
    for n in full:
        if n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
    dtype = _input_dtype(kind, input)
    return apply(_OPS[kind], [input], s=tuple(full), axes=tuple(dims), norm=norm, dtype=dtype.np)


def _one_dim(kind, doc):
    def transform(input, n=None, dim=-1, norm=None):
        return _transform(kind, input, None if n is None else (n,), (dim,), norm)

    transform.__name__ = transform.__qualname__ = kind
    transform.__doc__ = doc
    return transform


def _n_dim(kind, name, default_dims, doc):
    def transform(input, s=None, dim=default_dims, norm=None):
        return _transform(kind, input, s, dim, norm, default_dims)

    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = doc
    return transform


_DOCS = {
    "fft": "The discrete Fourier transform",
    "ifft": "The inverse discrete Fourier transform",
    "rfft": "The Fourier transform of a real input (the non-negative frequencies only)",
    "irfft": "The inverse of rfft: a real output from the non-negative frequencies",
    "hfft": "The Fourier transform of a Hermitian-symmetric input given by its first half (a real output)",
    "ihfft": "The inverse of hfft: the first half of the inverse transform of a real input",
}
_SUFFIXES = {"": " along `dim`, of size `n`.", "2": " over the last two dims.", "n": " over `dim` (all by default)."}
FUNCTIONS = {}
for _kind, _doc in _DOCS.items():
    FUNCTIONS[_kind] = _one_dim(_kind, _doc + _SUFFIXES[""])
    FUNCTIONS[_kind + "2"] = _n_dim(_kind, _kind + "2", (-2, -1), _doc + _SUFFIXES["2"])
    FUNCTIONS[_kind + "n"] = _n_dim(_kind, _kind + "n", None, _doc + _SUFFIXES["n"])
# torch's CPU autocast runs these in float32 (all but hfft2, hfftn, ihfft2, ihfftn)
for _name in [name for name in FUNCTIONS if not name.startswith(("hfft", "ihfft")) or name in ("hfft", "ihfft")]:
    FUNCTIONS[_name] = autocast_policy("fp32")(FUNCTIONS[_name])


# ---- frequencies and shifts -------------------------------------------------------------------------------------
def _frequencies(values, dtype, requires_grad):
    from .._factories import tensor

    d = _dtypes.get_default_dtype() if dtype is None else _dtypes.to_dtype(dtype)
    return tensor(values.astype(d.np), dtype=d, requires_grad=requires_grad)


@takes_layout
def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point fft with sample spacing d: [0, 1, ..., -1] / (d * n)."""
    return _frequencies(np.fft.fftfreq(n, d), dtype, requires_grad)


@takes_layout
def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point rfft with sample spacing d: [0, 1, ..., n // 2] / (d * n)."""
    return _frequencies(np.fft.rfftfreq(n, d), dtype, requires_grad)


def _shift(input, dim, sign):
    dims = list(range(input.ndim)) if dim is None else list(int_or_ints(dim))
    dims = [_wrap_dim(d, input.ndim) for d in dims]
    if not dims:
        return roll(input, 0, ())
    return roll(input, [sign * (input.shape[d] // 2) for d in dims], dims)


def fftshift(input, dim=None):
    """The zero frequency moved to the middle of each dim in `dim` (all by default)."""
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):
    """The inverse of fftshift."""
    return _shift(input, dim, -1)


FUNCTIONS.update(fftfreq=fftfreq, rfftfreq=rfftfreq, fftshift=fftshift, ifftshift=ifftshift)
