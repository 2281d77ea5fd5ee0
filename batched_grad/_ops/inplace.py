"""In-place methods recorded unlike their out-of-place ops: comparisons and logical ops written into a float tensor
keep it in the graph with a zero derivative (EqBackward1, ..., as torch; torch leaves the history of a tensor changed
by logical_and_, logical_or_, logical_xor_ or logical_not_ as it was, so that its gradient passes through them
unchanged, which is wrong: here it is zero); acosh_, asinh_, atanh_ and floor_divide_ have no derivative (their
backward raises, as torch's)."""

import jax.numpy as jnp

from .. import _dtypes
from .._grad_mode import is_recording
from .._tensor import Tensor
from ._core import Op, apply
from ._derivatives import raises_in_backward
from .elementwise import COMPARISONS, PREDICATES, UNARY, floor_divide

_COMPARE = {
    "eq": jnp.equal,
    "ne": jnp.not_equal,
    "lt": jnp.less,
    "le": jnp.less_equal,
    "gt": jnp.greater,
    "ge": jnp.greater_equal,
    "logical_and": jnp.logical_and,
    "logical_or": jnp.logical_or,
    "logical_xor": jnp.logical_xor,
}
_ALIASES = {"greater": "gt", "less": "lt"}


def _compare_fn(a, b, *, compare, dtype):
    return _COMPARE[compare](a.astype(dtype), b.astype(dtype)).astype(a.dtype)  # a comparison's derivative is 0


def _compare_op(name, tensor_other):
    suffix = 1 if tensor_other else 0
    title = "".join(p.capitalize() for p in name.split("_"))
    return Op(f"{name}_", _compare_fn, backward_name=f"{title}Backward{suffix}", diagonal=True)


_COMPARE_OPS = {(name, t): _compare_op(name, t) for name in _COMPARE for t in (False, True)}
_LOGICAL_NOT = Op(
    "logical_not_", lambda a: jnp.logical_not(a).astype(a.dtype), backward_name="LogicalNotBackward0", diagonal=True
)


def _recording(self, *others):
    return is_recording() and any(isinstance(x, Tensor) and x.requires_grad for x in (self, *others))


def _compare_inplace(name):
    compare = _ALIASES.get(name, name)

    def method(self, other):
        if not _recording(self, other):
            return self._assign(COMPARISONS[compare](self, other), f"{name}_", (other,))
        dtype = _dtypes.result_type(self, other)
        return self._assign(
            apply(_COMPARE_OPS[compare, isinstance(other, Tensor)], [self, other], compare=compare, dtype=dtype.np),
            f"{name}_",
            (other,),
        )

    return method


def _logical_not_inplace(self):
    if not _recording(self):
        return self._assign(PREDICATES["logical_not"](self), "logical_not_")
    return self._assign(apply(_LOGICAL_NOT, [self]), "logical_not_")


_NO_DERIVATIVE = {  # name: (JAX function, torch's node name, the error its backward raises)
    "acosh": (jnp.arccosh, "AcoshBackward1", NotImplementedError),
    "asinh": (jnp.arcsinh, "AsinhBackward1", NotImplementedError),
    "atanh": (jnp.arctanh, "AtanhBackward1", NotImplementedError),
}


def _underivable_unary(name):
    f, backward_name, error = _NO_DERIVATIVE[name]
    message = f"the derivative for 'inplace version of {name}' is not implemented."
    op = Op(f"{name}_", lambda a: raises_in_backward(f(a), lambda: error(message)), backward_name=backward_name)

    def method(self):
        result = UNARY[name](self)
        return self._assign(
            apply(op, [self]) if _recording(self) and result.dtype is self.dtype else result, f"{name}_"
        )

    return method


def _floor_divide_fn(a, b):
    quotient = jnp.floor_divide(a, b.astype(a.dtype))
    # the quotient's derivative is zero, which JAX drops before it reaches a custom backward: select the quotient
    # from a differentiable expression instead, so that the backward runs (and raises)
    linked = jnp.where(jnp.ones(quotient.shape, bool), quotient, a + b.astype(a.dtype))
    return raises_in_backward(linked, lambda: RuntimeError("derivative for aten::floor_divide_ is not implemented"))


_FLOOR_DIVIDE = Op("floor_divide_", _floor_divide_fn, backward_name="torch::autograd::NotImplemented")


def _floor_divide_inplace(self, other):
    result = floor_divide(self, other)  # torch's checks of the operands
    if _recording(self, other) and result.dtype is self.dtype:
        result = apply(_FLOOR_DIVIDE, [self, other])
    return self._assign(result, "floor_divide_", (other,))


METHODS = {f"{name}_": _compare_inplace(name) for name in [*_COMPARE, *_ALIASES]}
METHODS.update(
    {f"{name}_": _underivable_unary(name) for name in _NO_DERIVATIVE},
    logical_not_=_logical_not_inplace,
    floor_divide_=_floor_divide_inplace,
)
