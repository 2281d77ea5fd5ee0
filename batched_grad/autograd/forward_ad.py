"""torch.autograd.forward_ad: forward-mode AD by dual tensors, on eager code.

    with forward_ad.dual_level():
        y = f(forward_ad.make_dual(x, v))
        jvp = forward_ad.unpack_dual(y).tangent

Each op on a dual tensor also computes its result's tangent (batched_grad/_dual.py). As torch, one level is open at a
time, and closing it drops every tangent."""

from typing import NamedTuple

from .. import _dual
from .._ops._core import apply
from .._ops.shape import PRIMAL_VIEW
from .._tensor import Tensor

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "dual_level"]


def __getattr__(name):
    """`_current_level`: the open level's index, -1 while none is open (torch's module variable)."""
    if name == "_current_level":
        return _dual.LEVELS.level
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnpackedDualTensor(NamedTuple):
    """A dual tensor's primal (a view of it without tangent) and its tangent (None where it has none)."""

    primal: Tensor
    tangent: Tensor | None


def enter_dual_level():
    """Open a forward AD level and return its index (torch has one level at a time)."""
    return _dual.enter()


def exit_dual_level(*, level=None):
    """Close the forward AD level: every tangent recorded in it is dropped."""
    _dual.exit(level)


def _check_level(level, name):
    if _dual.LEVELS.open is None:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to enter_dual_level() first."
        )
    if level is not None and level != _dual.LEVELS.level:
        raise RuntimeError(f"Invalid level given to {name}")


def _untangented_view(tensor):
    """A view of `tensor` (sharing its values and version) that has no tangent."""
    view = apply(PRIMAL_VIEW, [tensor], shape=tuple(tensor.shape))
    if _dual.LEVELS.open is not None:
        _dual.LEVELS.open.pop(view)
    return view


def check_dual_dtypes(primal, tangent):
    """torch's refusal of a primal or a tangent that is neither floating point nor complex (make_dual's, and
    torch.func.jvp's, which makes its primals dual)."""
    if not (primal.dtype.is_floating_point or primal.dtype.is_complex):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {primal.dtype!r}")
    if not (tangent.dtype.is_floating_point or tangent.dtype.is_complex):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype!r}")


def _storage_elements(t):
    """The number of `t`'s elements that the storage it shares with its base holds."""
    root = t if t._view is None else t._view[0]
    return root.numel() * root.dtype.itemsize // t.dtype.itemsize


def _laid_out_alike(tensor, tangent):
    """torch's has_same_meta: the same storage size and offset, strides (but where a dim has one element or none)
    and conjugate and negative bits."""
    if _storage_elements(tensor) != _storage_elements(tangent) or tensor.storage_offset() != tangent.storage_offset():
        return False
    for n, a, b in zip(tensor.shape, tensor.stride(), tangent.stride()):
        if a != b and n > 1:
            return False
    return tensor.is_conj() == tangent.is_conj() and tensor.is_neg() == tangent.is_neg()


def _tangent_laid_out_as(tensor, tangent):
    """`tangent` where it is laid out as `tensor`, else a copy of it (with `tensor`'s conjugate bit), as torch's
    make_dual: in-place ops on the dual tensor then write into the copy, not into `tangent`."""
    if _laid_out_alike(tensor, tangent):
        return tangent
    values = tangent.resolve_conj().resolve_neg()
    if tensor.is_conj():
        return values.conj().resolve_conj().conj()
    return values.clone() if values is tangent else values


def make_dual(tensor, tangent, *, level=None):
    """A view of `tensor` carrying `tangent` (of its shape): the ops applied to it compute their results' tangents.
    The dual tensor's tangent is `tangent` itself where it is laid out as `tensor` (else a copy of it)."""
    _check_level(level, "_make_dual")
    check_dual_dtypes(tensor, tangent)
    if _dual.LEVELS.open.get(tensor) is not None:
        raise RuntimeError(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the same level "
            f"{_dual.LEVELS.level} is not supported."
        )
    if _dual.LEVELS.open.get(tangent) is not None:
        raise RuntimeError(
            f"Setting a forward grad that itself has a forward gradient at the same level{_dual.LEVELS.level} is not "
            "supported."
        )
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the original Tensor, this is "
            f"not supported. Tensor is of size {list(tensor.shape)} while the given forward gradient is of size "
            f"{list(tangent.shape)}."
        )
    dual = _untangented_view(tensor)
    # hidden while forward gradients are off, as torch's
    _dual.LEVELS.open.set(dual, _tangent_laid_out_as(tensor, tangent))
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of a dual tensor: a view of it without tangent, and its tangent (None if it has none)."""
    tangent = _dual.tangent_of(tensor)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    return UnpackedDualTensor(_untangented_view(tensor), tangent)


def _is_fwd_grad_enabled():
    """Whether forward gradients are on: ops on dual tensors compute their tangents (off in a custom Function's
    forward and jvp, and under _set_fwd_grad_enabled(False))."""
    return _dual.fwd_grad_enabled()


class _set_fwd_grad_enabled:
    """Switch forward gradients on or off when made (as torch's private helper), until its `with` block exits.
    Off, ops compute no tangents and dual tensors show none, and a forward-mode transform's trace (jvp, jacfwd)
    gets no tangent through what is computed meanwhile; jvp, jacfwd and hessian switch them on for the function
    they transform. Unlike torch's, the mode is the process's (as the dual level is), not the thread's."""

    def __init__(self, mode):
        self._mode = _dual.set_fwd_grad_enabled(mode)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)


class dual_level:
    """Context manager opening a forward AD level for its block (enter_dual_level / exit_dual_level)."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False
