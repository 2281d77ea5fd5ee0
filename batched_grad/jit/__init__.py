"""torch.jit's names that library code uses as decorators and guards, for programs that run eagerly.

Nothing is compiled: `script` returns the function or module it is given, and `trace` runs the example inputs as
torch's tracer does (is_tracing() is True meanwhile) and returns the function or module itself, so later calls run
eagerly with whatever inputs they get (torch's traced graph would replay the example's control flow; here
Python runs each call). `is_scripting()` is always False, so `if torch.jit.is_scripting():` branches take the
eager path. `ignore`, `unused`, `export`, `interface`, `script_if_tracing` and `annotate` return what they are
given; `Final` is typing.Final. A ScriptModule subclass is a Module whose `script_method`s run eagerly. To compile a
step, use batched_grad.compile."""

import functools
import threading
import typing
import warnings

from .._tensor import Tensor
from ..nn.module import Module

__all__ = [
    "Final",
    "ScriptModule",
    "annotate",
    "export",
    "ignore",
    "interface",
    "is_scripting",
    "is_tracing",
    "script",
    "script_if_tracing",
    "script_method",
    "trace",
    "unused",
]

Final = typing.Final
_tracing = threading.local()


def is_scripting():
    """False: nothing runs as TorchScript here."""
    return False


def is_tracing():
    """Whether trace() is running its example inputs in this thread."""
    return getattr(_tracing, "depth", 0) > 0


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """`obj` itself (a function, module or class), to run eagerly: nothing is compiled. Warns as torch's
    (deprecated)."""
    _deprecated("script")
    return obj


class ScriptModule(Module):
    """torch.jit.ScriptModule as a base class: a Module whose `script_method` methods run eagerly as written."""


def script_method(fn):
    """`fn` itself, a method of a ScriptModule subclass to run eagerly. Warns as torch's (deprecated)."""
    _deprecated("script_method")
    return fn


def _deprecated(name):
    # attributed inside this package, so Python's default filters hide it from a program, as they hide torch's
    warnings.warn(
        f"`torch.jit.{name}` is deprecated. Please switch to `torch.compile` or `torch.export`.",
        DeprecationWarning,
        stacklevel=2,  # script's (or trace's) line in this package, as torch's is in its own
    )


def _script_type(value):
    """The TorchScript name of `value`'s type, as torch's tracer names it in its error."""
    if isinstance(value, Tensor):
        return "Tensor"
    if isinstance(value, tuple):
        return f"Tuple[{', '.join(_script_type(v) for v in value)}]"
    if isinstance(value, list):
        return f"List[{_script_type(value[0]) if value else 'Tensor'}]"
    if isinstance(value, dict):
        key, item = next(iter(value.items()), ("", None))
        return f"Dict[{_script_type(key)}, {_script_type(item) if value else 'Tensor'}]"
    return type(value).__name__


def _traceable(value):
    """torch's tracer takes tensors and (nested) lists, tuples and dicts of them."""
    if isinstance(value, (list, tuple)):
        return all(_traceable(v) for v in value)
    if isinstance(value, dict):
        return all(_traceable(v) for v in value.values())
    return isinstance(value, Tensor)


def _check_traceable(inputs):
    if not _traceable(inputs):
        raise RuntimeError(
            f"Type '{_script_type(inputs)}' cannot be traced. Only Tensors and (possibly nested) Lists, Dicts, and "
            "Tuples of Tensors can be traced"
        )


def trace(
    func,
    example_inputs=None,
    optimize=None,
    check_trace=True,
    check_inputs=None,
    check_tolerance=1e-5,
    strict=True,
    _force_outplace=False,
    _module_class=None,
    _compilation_unit=None,
    example_kwarg_inputs=None,
    _store_inputs=True,
):
    """Run `func` on `example_inputs` (a tensor or a tuple of them; or `example_kwarg_inputs`, a dict) as torch's
    tracer runs it, and return `func` itself, which later calls run eagerly. torch runs the function once to trace
    it and, with `check_trace`, for each check input (`check_inputs`, else the example) once more traced and once
    eagerly to compare; the same calls are made here (so side effects and random draws match), but there is no
    graph to compare, so nothing is checked."""
    if example_inputs is None:
        if not isinstance(example_kwarg_inputs, dict):
            raise RuntimeError("example_kwarg_inputs should be a dict")
        first = ((), example_kwarg_inputs)
    else:
        first = (_as_tuple(example_inputs), {})
    _check_traceable(first[1] if example_inputs is None else first[0])
    _run_traced(func, *first)
    if check_trace:
        for args, kwargs in [first] if check_inputs is None else [(_as_tuple(c), {}) for c in check_inputs]:
            _run_traced(func, args, kwargs)
            func(*args, **kwargs)
    return func


def _as_tuple(inputs):
    return inputs if isinstance(inputs, tuple) else (inputs,)


def _run_traced(func, args, kwargs):
    """One traced run; torch's check re-traces through torch.jit.trace, which warns each time."""
    _deprecated("trace")
    _tracing.depth = getattr(_tracing, "depth", 0) + 1
    try:
        func(*args, **kwargs)
    finally:
        _tracing.depth -= 1


def ignore(drop=False, **kwargs):
    """Decorator (`@ignore` or `@ignore(drop=...)`): the function itself."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    """Decorator: the function itself."""
    return fn


def export(fn):
    """Decorator of a module method TorchScript would compile: the method itself."""
    return fn


def interface(obj):
    """Decorator of a TorchScript interface class: the class itself."""
    return obj


def script_if_tracing(fn):
    """Decorator: the function itself (nothing is scripted)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def annotate(the_type, the_value):
    """`the_value` (TorchScript's type hint for an empty container)."""
    return the_value
