"""The module functions' face: the out= keyword of torch's elementwise functions, and torch's errors for it; a
function that fails on a torch.Tensor argument says that it got one."""

import functools
import warnings

import numpy as np

from .._foreign import TORCH_TENSOR_PASSED, has_torch_tensor, not_a_tensor
from .._grad_mode import is_grad_enabled, no_grad
from .._tensor import Tensor

RESIZED = (
    "An output with one or more elements was resized since it had shape {}, which does not match the required "
    "output shape {}. This behavior is deprecated, and in a future PyTorch release outputs will not be resized "
    "unless they have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
    "elements with t.resize_(0)."
)


def public(fn, out=None):
    """`fn` as batched_grad exports it: with the keyword `out` if `out` is given (how the result's dtype may differ
    from out's: "cast", "exact" or "where", torch's rules for the op, or a function of the op's arguments giving
    one); a failure on a torch.Tensor argument raises
    TypeError(TORCH_TENSOR_PASSED) instead (checked only once `fn` has raised)."""
    name = fn.__name__
    rule = out
    if not out:

        @functools.wraps(fn)
        def function(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception:
                _say_if_torch(args, kwargs)
                raise
    else:

        @functools.wraps(fn)
        def function(*args, out=None, **kwargs):
            try:
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
