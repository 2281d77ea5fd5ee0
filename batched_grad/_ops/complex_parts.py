"""The parts of complex tensors, as torch's views of them: view_as_real and view_as_complex (complex elements as
(real, imaginary) pairs of a last dimension, and back), real and imag (a component of view_as_real); the conjugate,
lazy (conj: a view whose elements are its base's conjugated, as torch's conjugate bit makes it) or materialized
(conj_physical); and the negative view torch's imag of a conjugated tensor is (its negative bit)."""

import jax.numpy as jnp

from .. import _dtypes
from .._autocast import autocast_policy
from .._layout import storage_offset, stride
from ._core import Op, apply
from .shape import _SELECT, encode_index

_VIEW_AS_REAL = Op(
    "view_as_real", lambda z: jnp.stack([jnp.real(z), jnp.imag(z)], -1), linear=True, view=True, replayed=True
)
_VIEW_AS_COMPLEX = Op("view_as_complex", lambda a: a[..., 0] + 1j * a[..., 1], linear=True, view=True, replayed=True)
# torch's conj() sets the conjugate bit of a view, and its imag of such a view sets the negative bit of another; here
# the view holds the conjugated (negated) values, and a write through it stores their conjugates (negatives) in the base
_CONJ = Op("conj", jnp.conj, linear=True, diagonal=True, view=True, involution=True, replayed=True)
_NEG_VIEW = Op("neg_view", jnp.negative, linear=True, diagonal=True, view=True, involution=True, replayed=True)
_CONJ_PHYSICAL = Op("conj_physical", jnp.conj, linear=True, diagonal=True)


def view_as_real(input):
    """A complex tensor as real pairs: a view with a last dim of 2 (real, imaginary)."""
    if not input.dtype.is_complex:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    if is_conj(input):
        raise RuntimeError(
            "view_as_real doesn't work on unresolved conjugated tensors.  To resolve the conjugate tensor so you can "
            "view it as real, use self.resolve_conj(); however, be warned that the resulting tensor will NOT alias "
            "the original."
        )
    return apply(_VIEW_AS_REAL, [input])


@autocast_policy("fp32")
def view_as_complex(input):
    """A real tensor whose last dim is 2 as complex numbers: a view of it."""
    if input.dtype not in (_dtypes.float32, _dtypes.float64):
        raise RuntimeError(
            f"view_as_complex is only supported for float and double tensors, but got a tensor of "
            f"scalar type: {input.dtype.type_name}"
        )
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    _check_pairs_layout(input)
    return apply(_VIEW_AS_COMPLEX, [input])


def _check_pairs_layout(input):
    """torch's view_as_complex needs each pair adjacent in storage and every pair at an even position."""
    strides = stride(input)
    if strides[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if storage_offset(input) % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")


def _component(input, k):
    """Component `k` (0 real, 1 imaginary) of a complex tensor, as torch selects it from view_as_real (of the
    conjugate of a conjugated view, whose imaginary parts are then a negative view)."""
    pairs = view_as_real(apply(_CONJ, [input]) if is_conj(input) else input)
    if k == 1 and is_conj(input):
        pairs = apply(_NEG_VIEW, [pairs])
    return apply(_SELECT, [pairs], index=encode_index((slice(None),) * input.ndim + (k,)))


def real(input):
    """The real part of a complex tensor (a real tensor itself)."""
    return _component(input, 0) if input.dtype.is_complex else input


def imag(input):
    """The imaginary part of a complex tensor."""
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return _component(input, 1)


def conj(input):
    """The complex conjugate, as a view of `input` that is_conj() (a real tensor itself)."""
    return apply(_CONJ, [input]) if input.dtype.is_complex else input


def conj_physical(input):
    """The complex conjugate as a tensor of its own (a real tensor itself)."""
    return apply(_CONJ_PHYSICAL, [input]) if input.dtype.is_complex else input


def conj_physical_(self):
    """In-place conj_physical."""
    return self._assign(conj_physical(self), "conj_physical_") if self.dtype.is_complex else self


def _odd_count(tensor, op):
    view = tensor._view
    return view is not None and sum(step[0] is op for step in view[1]) % 2 == 1


def is_conj(self):
    """Whether this tensor is a conjugated view (conj() of a tensor that is none): its conjugate bit, in torch."""
    return self.dtype.is_complex and _odd_count(self, _CONJ)


def is_neg(self):
    """Whether this tensor is a negative view (the imaginary parts of a conjugated view): its negative bit, in
    torch."""
    return _odd_count(self, _NEG_VIEW)


def resolve_conj(self):
    """A tensor of this conjugated view's values that is no view (this tensor itself if it is no conjugated view)."""
    return self.clone() if is_conj(self) else self


def resolve_neg(self):
    """A tensor of this negative view's values that is no view (this tensor itself if it is no negative view)."""
    return self.clone() if is_neg(self) else self


def _set_real(self, value):
    real(self).copy_(value)


def _set_imag(self, value):
    imag(self).copy_(value)


METHODS = {
    "real": property(real, _set_real, doc=real.__doc__ + " Assigning to it writes the real parts."),
    "imag": property(imag, _set_imag, doc=imag.__doc__ + " Assigning to it writes the imaginary parts."),
    "conj": conj,
}
