"""Gradient clipping (torch.nn.utils.clip_grad): by the total norm of all gradients, or by value, in place.

`foreach=None` or `True` computes every gradient's norm (and scales or clamps every gradient) in one compiled
program, as torch's foreach kernels make one call per list; `foreach=False` runs one op per gradient."""

import functools
import types
import warnings

import jax.numpy as jnp

from ..._budget import Jitted
from ..._factories import tensor
from ..._grad_mode import no_grad
from ..._host import HOST_ELEMENTS
from ..._ops import clamp, stack
from ..._tensor import Tensor
from ..._x64 import scoped
from ...linalg import vector_norm
from ...optim._parts import Update, in_parts, shapes_of, values

NON_FINITE = (
    "The total norm of order {} for gradients from `parameters` is non-finite, so it cannot be clipped. To "
    "disable this error and scale the gradients by the non-finite norm anyway, set "
    "`error_if_nonfinite=False`"
)


def _as_list(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


# one program for all the tensors once it pays for its compile (which grows with their number: 1.4 s for a U-Net's
# gradients), before that tensor by tensor on the host (optim._parts.in_parts)
@functools.partial(Update, static_argnames=("norm_type",), largest=HOST_ELEMENTS)
def _norms(arrays, norm_type):
    return [jnp.linalg.norm(a.ravel(), ord=norm_type) for a in arrays]


@functools.partial(Update, largest=HOST_ELEMENTS)
def _scaled(arrays, coef):
    return [a * coef.astype(a.dtype) for a in arrays]


def _in_parts(key, update, tensors, *args):
    """`update(arrays, *args)` of the tensors' values (a list), in parts until its one program pays back; `key`
    names the update and its static arguments."""
    arrays = values(tensors)
    part = lambda chosen: (update([arrays[i] for i in chosen], *args),)  # noqa: E731
    return in_parts((key, shapes_of(tensors)), len(arrays), part)[0]


@scoped
def _vector_norms(tensors, norm_type, foreach):
    if foreach is False:
        return [vector_norm(t, norm_type) for t in tensors]
    return [Tensor._wrap(n) for n in _in_parts(("norms", norm_type), _norms, tensors, norm_type)]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The `norm_type` norm of the tensors' norms: their norm as if concatenated into one vector (0 for none)."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    with no_grad():
        total = vector_norm(stack(_vector_norms(tensors, norm_type, foreach)), norm_type)
    if error_if_nonfinite and not bool(total.isfinite()):
        raise RuntimeError(NON_FINITE.format(norm_type))
    return total


@scoped
def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the parameters' gradients in place by min(max_norm / (total_norm + 1e-6), 1)."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        coef = clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        if foreach is False:
            for g in grads:
                g.mul_(coef)
            return
        for g, scaled in zip(grads, _in_parts(("scaled",), _scaled, grads, coef._held)):
            g.copy_(Tensor._wrap(scaled))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of `parameters` in place so that their total `norm_type` norm is at most `max_norm`;
    returns the total norm before clipping."""
    if isinstance(parameters, types.GeneratorType):
        parameters = list(parameters)
        if not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2)
    parameters = _as_list(parameters)
    total = get_total_norm([p.grad for p in parameters if p.grad is not None], norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


@Jitted
def _clamped(arrays, bound):
    return [jnp.clip(a, -bound.astype(a.dtype), bound.astype(a.dtype)) for a in arrays]


@scoped
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp the gradients of `parameters` in place to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    with no_grad():
        if foreach is False:
            for g in grads:
                g.clamp_(-clip_value, clip_value)
            return
        for g, clamped in zip(grads, _clamped([g._value for g in grads], jnp.asarray(clip_value))):
            g.copy_(Tensor._wrap(clamped))
