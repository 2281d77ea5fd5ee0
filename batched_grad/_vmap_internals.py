"""torch._vmap_internals: the prototype vmap that older autograd code (torch.autograd.functional before torch.func,
pytorch-minimize's Hessians and Jacobians) batches `autograd.grad` calls with. `_vmap` is _vmap_levels.prototype_vmap
with torch's in_dims / out_dims and its `allow_none_pass_through`, which lets a function return None for an input
that autograd.grad found unused; `vmap` is the same with torch's FutureWarning."""

import functools
import warnings

from ._tensor import Tensor
from ._vmap_levels import prototype_vmap

__all__ = ["vmap"]


def _name(func):
    return getattr(func, "__name__", repr(func))


def _check_out_dims(out_dims, func):
    if isinstance(out_dims, int) or (isinstance(out_dims, tuple) and all(isinstance(d, int) for d in out_dims)):
        return
    raise ValueError(
        f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int or a tuple of int representing "
        "where in the outputs the vmapped dimension should appear."
    )


def _check_outputs(outputs, func, allow_none):
    """Torch's check that `func` returned a Tensor or a tuple of Tensors (and None, when allowed)."""
    if isinstance(outputs, Tensor):
        return
    if not isinstance(outputs, tuple):
        raise ValueError(
            f"vmap({_name(func)}, ...): `{_name(func)}` must only return Tensors, got type {type(outputs)} as the "
            "return."
        )
    for i, output in enumerate(outputs):
        if not isinstance(output, Tensor) and not (allow_none and output is None):
            raise ValueError(
                f"vmap({_name(func)}, ...): `{_name(func)}` must only return Tensors, got type {type(output)} for "
                f"return {i}."
            )


def _vmap(func, in_dims=0, out_dims=0, allow_none_pass_through=False):
    """torch._vmap_internals._vmap: `func` batched over axis `in_dims` of its arguments, the batch at `out_dims` of
    its results; autograd.grad inside it takes batched grad_outputs."""
    _check_out_dims(out_dims, func)
    nones = []  # the positions of the None results of the latest call, put back after the batched call

    @functools.wraps(func)
    def tensors_only(*args):
        outputs = func(*args)
        _check_outputs(outputs, func, allow_none_pass_through)
        nones[:] = [i for i, out in enumerate(outputs) if out is None] if isinstance(outputs, tuple) else []
        if not nones:
            return outputs
        # an unbatched stand-in for each None: vmap gives it a batch, and it is dropped below
        stand_in = next((out for out in outputs if out is not None), args[0]).new_zeros(())
        return tuple(stand_in if out is None else out for out in outputs)

    batched = prototype_vmap(tensors_only, in_dims, out_dims)

    @functools.wraps(func)
    def wrapped(*args):
        outputs = batched(*args)
        if not nones:
            return outputs
        return tuple(None if i in nones else out for i, out in enumerate(outputs))

    return wrapped


def vmap(func, in_dims=0, out_dims=0):
    """torch._vmap_internals.vmap: deprecated in favour of torch.vmap, which it warns of; otherwise `_vmap`."""
    warnings.warn("Please use `torch.vmap` instead of `torch._vmap_internals.vmap`.", FutureWarning, stacklevel=2)
    return _vmap(func, in_dims, out_dims)
