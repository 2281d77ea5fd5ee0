"""The module functions' face: the out= keyword of torch's elementwise functions, and torch's errors for it; a
function that fails on a torch.Tensor argument says that it got one."""

import functools
import warnings

import numpy as np

from .._foreign import TORCH_TENSOR_PASSED, has_torch_tensor, not_a_tensor
from .._grad_mode import is_grad_enabled, no_grad
from .._tensor import Tensor
from .._vmap_levels import is_batched
from .numpy_keywords import function_renaming

RESIZED = (
    "An output with one or more elements was resized since it had shape {}, which does not match the required "
    "output shape {}. This behavior is deprecated, and in a future PyTorch release outputs will not be resized "
    "unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
    "elements with t.resize_(0)."
)


def public(fn, out=None, name=None):
    """`fn` as batched_grad exports it (under `name`, by default its own), taking torch's NumPy spellings of its
    keywords (numpy_keywords); with the keyword `out` if `out` is given
    (how the result's dtype may differ from out's: "cast", "exact" or "where", torch's rules for the op, or a function
    of the op's arguments giving one); a failure on a torch.Tensor argument raises
    TypeError(TORCH_TENSOR_PASSED) instead (checked only once `fn` has raised)."""
    name = fn.__name__ if name is None else name
    rule = out
    renamed = function_renaming(fn, name) or (lambda args, kwargs: kwargs)
    if not out:

        @functools.wraps(fn)
        def function(*args, **kwargs):
            try:
                return fn(*args, **renamed(args, kwargs))
            except Exception:
                _say_if_torch(args, kwargs)
                raise
    else:

        @functools.wraps(fn)
        def function(*args, out=None, **kwargs):
            try:
                kwargs = renamed(args, kwargs)
                return fn(*args, **kwargs) if out is None else write_out(name, out, fn, args, kwargs, rule)
            except Exception:
                _say_if_torch(args + (out,), kwargs)
                raise

    return function


def _say_if_torch(args, kwargs):
    if has_torch_tensor(args, kwargs):
        raise TypeError(TORCH_TENSOR_PASSED) from None


def write_out(name, out, fn, args, kwargs, rule="cast"):
    """fn(*args, **kwargs) written into `out` (resized if its shape differs, cast to its dtype where `rule` lets
    torch cast), as torch's out= does; `out` is returned."""
    if not isinstance(out, Tensor):
        raise not_a_tensor(name, "out", out)
    operands = [x for x in (*args, *kwargs.values(), out) if isinstance(x, Tensor)]
    if is_grad_enabled() and any(x.requires_grad for x in operands):
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic differentiation, but "
            "one of the arguments requires grad."
        )
    result = fn(*args, **kwargs)
    if any([is_batched(x._v) for x in operands]):  # torch.func.vmap has no rule for an op with out=
        raise RuntimeError(
            f"Batching rule not implemented for aten::{out_overload(name, args, kwargs)}; the fallback path doesn't "
            "work on out= or view ops."
        )
    rule = rule(*args, **kwargs) if callable(rule) else rule
    if result.dtype is not out.dtype and rule != "cast":
        got, expected = out.dtype.type_name, result.dtype.type_name
        raise RuntimeError(
            f"Found dtype {got} but expected {expected}"
            if rule == "exact"
            else f"Expected out type to be {expected} but got {got}"
        )
    if result.shape != out.shape:
        _resize(out, result.shape)
    with no_grad():
        out._assign(result)
    return out


def _resize(out, shape):
    if out._view is not None:
        raise RuntimeError(
            f"out= cannot resize a view (or detached alias) of shape {list(out.shape)} to the result's "
            f"shape {list(shape)}: pass a tensor of that shape"
        )
    if out.numel():
        warnings.warn(RESIZED.format(list(out.shape), list(shape)), UserWarning, stacklevel=4)
    out.data = Tensor._wrap(np.zeros(shape, out.dtype.np))


# the ops whose out= overload torch names by whether their second operand is a Tensor (Tensor_out) or a number
_BY_OTHER = {"fmod", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor", "eq", "ne", "lt", "le", "gt", "ge"}


def out_overload(name, args, kwargs):
    """torch's name of the out= overload that `name`(*args, **kwargs, out=...) calls, e.g. pow.Tensor_Scalar_out."""

    def operand(position, keyword):
        return args[position] if position < len(args) else kwargs.get(keyword)

    def tensor(position, keyword):
        return isinstance(operand(position, keyword), Tensor)

    if name == "normalize":  # torch's normalize divides into out
        return "div.out"
    if name == "where":
        return "where.self_out"
    if name == "pow":
        if not tensor(0, "input"):
            return "pow.Scalar_out"
        return "pow.Tensor_Tensor_out" if tensor(1, "exponent") else "pow.Tensor_Scalar_out"
    if name in ("clamp", "clip"):
        return f"{name}.Tensor_out" if tensor(1, "min") or tensor(2, "max") else f"{name}.out"
    if name == "lerp":
        return "lerp.Tensor_out" if tensor(2, "weight") else "lerp.Scalar_out"
    if name == "round" and operand(1, "decimals") is not None:
        return "round.decimals_out"
    if name == "div" and operand(2, "rounding_mode") is not None:
        return "div.out_mode"
    if name in _BY_OTHER:
        return f"{name}.Tensor_out" if tensor(1, "other") else f"{name}.Scalar_out"
    return f"{name}.out"
