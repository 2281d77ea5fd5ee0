"""The parts of complex tensors: real, imag; the conjugate, lazy (conj: a view whose elements are its base's
conjugated, as torch's conjugate bit makes it) or materialized (conj_physical)."""

import jax.numpy as jnp

from ._core import Op, apply

# torch computes real and imag as views selecting a component (its nodes are SelectBackward0); here they are copies
_REAL = Op("real", jnp.real, backward_name="SelectBackward0", linear=True, diagonal=True)
_IMAG = Op("imag", jnp.imag, backward_name="SelectBackward0", linear=True, diagonal=True)
# torch's conj() sets the conjugate bit of a view; here the view holds the conjugated values, and a write through it
# stores their conjugates in the base
_CONJ = Op("conj", jnp.conj, linear=True, diagonal=True, view=True, involution=True)
_CONJ_PHYSICAL = Op("conj_physical", jnp.conj, linear=True, diagonal=True)


def real(input):
    """The real part of a complex tensor (a real tensor itself)."""
    return apply(_REAL, [input]) if input.dtype.is_complex else input


def imag(input):
    """The imaginary part of a complex tensor."""
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return apply(_IMAG, [input])


def conj(input):
    """The complex conjugate, as a view of `input` that is_conj() (a real tensor itself)."""
    return apply(_CONJ, [input]) if input.dtype.is_complex else input


def conj_physical(input):
    """The complex conjugate as a tensor of its own (a real tensor itself)."""
    return apply(_CONJ_PHYSICAL, [input]) if input.dtype.is_complex else input


def conj_physical_(self):
    """In-place conj_physical."""
    return self._assign(conj_physical(self), "conj_physical_") if self.dtype.is_complex else self


def is_conj(self):
    """Whether this tensor is a conjugated view (conj() of a tensor that is none): its conjugate bit, in torch."""
    view = self._view
    return view is not None and self.dtype.is_complex and sum(step[0] is _CONJ for step in view[1]) % 2 == 1


def resolve_conj(self):
    """A tensor of this conjugated view's values that is no view (this tensor itself if it is no conjugated view)."""
    return self.clone() if is_conj(self) else self


METHODS = {"real": property(real, doc=real.__doc__), "imag": property(imag, doc=imag.__doc__), "conj": conj}
