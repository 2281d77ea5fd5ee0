"""Ops torch has no forward-mode derivative of (Op.forward_error): forward-mode AD raises torch's error where an
operand of such an op has a tangent, instead of differentiating it.

On dual tensors (forward_ad) the operands' tangents are known when the op is applied. In a forward-mode transform
(jvp, jacfwd, linearize, hessian, autograd.functional's forward mode) the function is traced before its JVP is
taken: there the op's function is wrapped in a custom JVP whose rule raises the error. JAX calls a JVP rule only
where some operand's tangent is not a symbolic zero, so an op reached only by values without tangents runs as
usual, as in torch. (Without this, the JAX function of such an op, built on a custom VJP whose backward raises,
fails under JAX's forward mode with JAX's own TypeError.)"""

import copy
import functools

import jax

from .._dual import LEVELS
from .._tracing import TRACING

_FILE_AN_ISSUE = (
    "Please file an issue to PyTorch at https://github.com/pytorch/pytorch/issues/new?template=feature-request.yml "
    "so that we can prioritize its implementation or submit a PR adding the implementation to derivatives.yaml"
)


def not_implemented_forward(name):
    """Op.forward_error of an op whose derivative torch defines for reverse mode only (`name`: torch's kernel)."""
    message = (
        f"Trying to use forward AD with {name} that does not support it because it has not been implemented yet.\n"
        f"{_FILE_AN_ISSUE}"
    )
    return lambda *operands, **static: NotImplementedError(message)


def unsupported_forward(name):
    """Op.forward_error of an op torch has no derivative of in either mode (`name`: its aten operator)."""
    message = f"Trying to use forward AD with aten::{name} that does not support it."
    return lambda *operands, **static: NotImplementedError(message)


def checked_forward(op, operands, static):
    """`op` to apply to `operands`: raises its forward error where an operand is a dual tensor; in a forward-mode
    trace, the op whose JVP raises it."""
    tangents = LEVELS.tangents
    if tangents is not None and any(tangents.get(x) is not None for x in operands if hasattr(x, "_v")):
        error = op.forward_error(*operands, **dict(static))
        if error is not None:
            raise error
    return _refusing_forward(op) if TRACING.depth else op


@functools.cache
def _refusing_forward(op):
    """`op`, whose JVP raises its forward error (where it has one for the operands and static params)."""
    refusing = copy.copy(op)

    def fn(*arrays, **static):
        error = op.forward_error(*arrays, **static)
        if error is None:
            return op.fn(*arrays, **static)
        guarded = jax.custom_jvp(functools.partial(op.fn, **static))

        def refuse(primals, tangents):
            raise error

        guarded.defjvp(refuse)
        return guarded(*arrays)

    refusing.fn = fn
    return refusing
