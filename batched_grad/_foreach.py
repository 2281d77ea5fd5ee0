"""torch._foreach_*: an op applied to each tensor of a list, the other operands given once for all (a number, a
tensor) or one per tensor (a list of numbers or of tensors). The out-of-place forms return a tuple of results
(recorded, differentiable, as each op is); the in-place forms (trailing underscore) update each tensor and return
the list they were given. torch's checks of the lists' lengths are kept, with its messages."""

from . import _ops, linalg
from ._tensor import Tensor

# the ops with an out-of-place and an in-place form, by how many operands follow the list
_UNARY = (
    "abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p log2 neg reciprocal "
    "round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc"
).split()
_BINARY = "add sub mul div clamp_max clamp_min maximum minimum pow".split()
_TERNARY = "addcdiv addcmul lerp".split()


def _tensor_list(tensors):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"_foreach ops take a list or tuple of Tensors, got {type(tensors).__name__}")
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")
    return tensors


def _per_tensor(operand, count):
    """The operand each tensor gets: a list's (checked to have one per tensor) or the one given."""
    if not isinstance(operand, (list, tuple)):
        return [operand] * count
    if len(operand) != count:
        if operand and all(isinstance(x, Tensor) for x in operand):
            raise RuntimeError(f"Tensor lists must have the same number of tensors, got {count} and {len(operand)}")
        raise RuntimeError("Tensor list must have same number of elements as scalar list.")
    return list(operand)


def _scalars_of(operand, count):
    """A 1-D tensor of scalars given as the last operand of addcmul/addcdiv: one number per tensor."""
    if isinstance(operand, Tensor) and operand.ndim == 1:
        return _per_tensor(operand.tolist(), count)
    return _per_tensor(operand, count)


def _out_of_place(name, op):
    def foreach(self, *operands, **kwargs):
        tensors = _tensor_list(self)
        per = [_per_tensor(x, len(tensors)) for x in operands]
        if name in ("addcmul", "addcdiv") and len(operands) == 3:
            per[2] = _scalars_of(operands[2], len(tensors))
            return tuple(op(t, a, b, value=v) for t, a, b, v in zip(tensors, *per))
        return tuple(op(t, *(p[i] for p in per), **kwargs) for i, t in enumerate(tensors))

    foreach.__name__ = foreach.__qualname__ = f"_foreach_{name}"
    foreach.__doc__ = f"torch._foreach_{name}: {name} of each tensor of the list (a tuple of the results)."
    return foreach


def _in_place(name):
    def foreach_(self, *operands, **kwargs):
        tensors = _tensor_list(self)
        per = [_per_tensor(x, len(tensors)) for x in operands]
        if name in ("addcmul", "addcdiv") and len(operands) == 3:
            per[2] = _scalars_of(operands[2], len(tensors))
            for t, a, b, v in zip(tensors, *per):
                getattr(t, f"{name}_")(a, b, value=v)
            return self
        for i, t in enumerate(tensors):
            getattr(t, f"{name}_")(*(p[i] for p in per), **kwargs)
        return self

    foreach_.__name__ = foreach_.__qualname__ = f"_foreach_{name}_"
    foreach_.__doc__ = f"torch._foreach_{name}_: {name}_ of each tensor of the list, in place (the list returned)."
    return foreach_


def _foreach_pow(self, exponent):
    """torch._foreach_pow: each tensor to the power `exponent` (one or one per tensor), or a number to the power of
    each tensor when the list comes second."""
    if not isinstance(self, (list, tuple)) and isinstance(exponent, (list, tuple)):
        return tuple(_ops.pow(self, t) for t in _tensor_list(exponent))
    return _out_of_place("pow", _ops.pow)(self, exponent)


def _foreach_norm(self, ord=2, dtype=None):  # noqa: A002  (torch's name)
    """torch._foreach_norm: the vector norm of each tensor."""
    return tuple(linalg.vector_norm(t, ord, dtype=dtype) for t in _tensor_list(self))


def _foreach_max(self):
    """torch._foreach_max: the largest element of each tensor."""
    return tuple(t.max() for t in _tensor_list(self))


def _foreach_clone(self):
    """torch._foreach_clone: a copy of each tensor."""
    return tuple(t.clone() for t in _tensor_list(self))


def _foreach_mm(self, other):
    """torch._foreach_mm: the matrix product of each pair of tensors of the two lists."""
    tensors = _tensor_list(self)
    return tuple(_ops.mm(a, b) for a, b in zip(tensors, _per_tensor(other, len(tensors))))


def _foreach_copy_(self, src, non_blocking=False):
    """torch._foreach_copy_: each tensor overwritten with its source's values (the list returned)."""
    tensors = _tensor_list(self)
    for t, s in zip(tensors, _per_tensor(src, len(tensors))):
        t.copy_(s, non_blocking)
    return self


def _foreach_zero_(self):
    """torch._foreach_zero_: each tensor filled with zeros (the list returned)."""
    for t in _tensor_list(self):
        t.zero_()
    return self


FUNCTIONS = {f"_foreach_{name}": _out_of_place(name, getattr(_ops, name)) for name in _UNARY + _BINARY + _TERNARY}
FUNCTIONS.update({f"_foreach_{name}_": _in_place(name) for name in _UNARY + _BINARY + _TERNARY})
FUNCTIONS.update(
    {
        f.__name__: f
        for f in (
            _foreach_pow,
            _foreach_norm,
            _foreach_max,
            _foreach_clone,
            _foreach_mm,
            _foreach_copy_,
            _foreach_zero_,
        )
    }
)
