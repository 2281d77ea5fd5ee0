"""The parts of complex tensors: real, imag, conj."""

import jax.numpy as jnp

from ._core import Op, apply

# torch computes real and imag as views selecting a component (its nodes are SelectBackward0); here they are copies
_REAL = Op("real", jnp.real, backward_name="SelectBackward0", linear=True, diagonal=True)
_IMAG = Op("imag", jnp.imag, backward_name="SelectBackward0", linear=True, diagonal=True)
_CONJ = Op("conj", jnp.conj, linear=True, diagonal=True)


def real(input):
    """The real part of a complex tensor (a real tensor itself)."""
    return apply(_REAL, [input]) if input.dtype.is_complex else input


def imag(input):
    """The imaginary part of a complex tensor."""
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return apply(_IMAG, [input])


def conj(input):
    """The complex conjugate (a real tensor itself)."""
    return apply(_CONJ, [input]) if input.dtype.is_complex else input


METHODS = {"real": property(real, doc=real.__doc__), "imag": property(imag, doc=imag.__doc__), "conj": conj}
