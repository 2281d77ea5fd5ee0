"""torch.overrides: the tests and the dispatch of the __torch_function__ protocol (_subclass.py), for functions
written in Python that take part in it as torch's own do."""

import functools

from ._subclass import dispatch, overloaded
from ._tensor import Tensor


def has_torch_function(relevant_args):
    """Whether an argument of `relevant_args` (a tuple) is an instance of a Tensor subclass that takes part in the
    protocol (and the protocol is on)."""
    return bool(overloaded(tuple(relevant_args)))


def has_torch_function_unary(obj):
    return bool(overloaded((obj,)))


def has_torch_function_variadic(*args):
    return bool(overloaded(args))


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """The call `public_api(*args, **kwargs)` taken by the __torch_function__ of the overloaded arguments among
    `relevant_args`; TypeError where each answers NotImplemented."""
    label = f"{public_api.__module__}.{public_api.__name__}"
    return dispatch(public_api, args, kwargs, label, relevant=relevant_args, python_level=True)


def get_default_nowrap_functions():
    """The getters whose results Tensor.__torch_function__ returns as they are, not converted to the subclass."""
    return {Tensor._base.__get__, Tensor.grad.__get__, Tensor._grad.__get__}


def is_tensor_like(inp):
    """Whether `inp` is a Tensor or has a __torch_function__ (a tensor-like of the protocol)."""
    return type(inp) is Tensor or hasattr(type(inp), "__torch_function__")


def is_tensor_method_or_property(func):
    """Whether `func` is a method of Tensor or the getter of one of its properties (as a __torch_function__ receives
    them)."""
    return func in _tensor_methods() or getattr(func, "__name__", None) == "__get__"


@functools.cache
def _tensor_methods():
    return frozenset(value for name in dir(Tensor) if callable(value := getattr(Tensor, name)))


def wrap_torch_function(dispatcher):
    """A decorator making a function take part in the protocol: `dispatcher(*args, **kwargs)` gives the arguments
    whose __torch_function__ may take the call."""

    def decorate(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)

        return wrapped

    return decorate


__all__ = [
    "get_default_nowrap_functions",
    "handle_torch_function",
    "has_torch_function",
    "has_torch_function_unary",
    "has_torch_function_variadic",
    "is_tensor_like",
    "is_tensor_method_or_property",
    "wrap_torch_function",
]
