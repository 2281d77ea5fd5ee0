"""Grad-mode switches: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local).

Each is a context manager and a decorator (of functions and of generator functions, like torch);
`no_grad`, `enable_grad` and `inference_mode` also decorate without parentheses.
"""

import functools
import inspect
import sys
import threading
import warnings

CLASS_DECORATION = (
    "Decorating classes is deprecated and will be disabled in future versions. You should only decorate functions "
    "or methods. To preserve the current behavior of class decoration, you can directly decorate the `__init__` "
    "method and nothing else."
)


class _State(threading.local):
    # the defaults of every thread (class attributes: read as fast as instance ones)
    grad = True  # grad mode, as the user set it
    inference = False
    enabled = True  # ops record the graph: grad mode on and inference mode off
    view_replay = False  # _force_original_view_tracking


_state = _State()


def is_grad_enabled():
    """Whether grad mode is on in this thread. Inside inference mode it is off unless enable_grad turned it on, and
    even then nothing is recorded, as in torch."""
    return _state.grad


def is_recording():
    """Whether ops record the graph in this thread: grad mode on, inference mode off."""
    return _state.enabled


def is_inference_mode_enabled():
    """Whether inference mode is on in this thread."""
    return _state.inference


def _set(mode, inference=None):
    if inference is not None and inference is not _state.inference:
        _state.inference = inference
        from . import _inference

        _inference.mode_switched(inference)
    _state.grad = mode
    _state.enabled = mode and not _state.inference


def _check_bool(fn, name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{fn}(): argument '{name}' (position 1) must be bool, not {type(value).__name__}")


def _wrap_generator(make_ctx, gen_fn):
    """Run every step of the generator (not the code between steps) inside a fresh context."""

    @functools.wraps(gen_fn)
    def wrapper(*args, **kwargs):
        gen = gen_fn(*args, **kwargs)
        try:
            with make_ctx():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with make_ctx():
                        gen.close()
                    raise
                except BaseException:
                    with make_ctx():
                        response = gen.throw(*sys.exc_info())
                else:
                    with make_ctx():
                        response = gen.send(request)
        except StopIteration as e:
            return e.value

    return wrapper


class _GradMode:
    """Base of the grad-mode context managers. Re-entrant: nested `with` of one instance restores correctly."""

    mode = True
    inference = None  # None: leave the inference flag as it is

    def __new__(cls, *args):
        if args and callable(args[0]) and not isinstance(args[0], bool):  # used as @no_grad (no parentheses)
            return cls()(args[0])
        return super().__new__(cls)

    def __enter__(self):
        self.__dict__.setdefault("_stack", []).append((is_grad_enabled(), is_inference_mode_enabled()))
        _set(self.mode, self.inference)

    def __exit__(self, *exc):
        stack = self.__dict__.get("_stack")
        if stack:
            _set(*stack.pop())

    def clone(self):
        """A fresh manager with the same mode (decorated functions enter one per call)."""
        return self.__class__(*self._args())

    def _args(self):
        return ()

    def __call__(self, func):
        if inspect.isclass(func):  # as torch: the class becomes a function that constructs it under the mode
            warnings.warn(CLASS_DECORATION, FutureWarning, stacklevel=2)
            cls = func
            func = lambda *args, **kwargs: cls(*args, **kwargs)
        if inspect.isgeneratorfunction(func):
            return _wrap_generator(self.clone, func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """Disable graph recording inside the block (or the decorated function)."""

    mode = False


class enable_grad(_GradMode):
    """Re-enable graph recording inside a no_grad block."""

    mode = True


class set_grad_enabled(_GradMode):
    """Set grad mode: `set_grad_enabled(False)` as a call, a context manager or a decorator."""

    def __new__(cls, mode):
        return object.__new__(cls)

    def __init__(self, mode):
        _check_bool("set_grad_enabled", "enabled", mode)
        self.mode = mode
        self._prev = is_grad_enabled()
        _set(mode)

    def __enter__(self):
        _set(self.mode)

    def __exit__(self, *exc):
        _set(self._prev)

    def __call__(self, func):
        _set(self._prev)  # used as a decorator: the mode applies only inside calls
        return super().__call__(func)

    def clone(self):
        prev = is_grad_enabled()
        c = set_grad_enabled(self.mode)
        _set(prev)
        c._prev = prev
        return c


class inference_mode(_GradMode):
    """Inference mode inside the block: no graph recording, as no_grad, and the tensors made are inference tensors
    (_inference.py). `inference_mode(False)` (or `mode=False`) turns both off: grad mode on; a function given as
    `mode` is decorated, as torch allows."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):  # @inference_mode, or inference_mode(mode=func)
            return cls()(mode)
        return object.__new__(cls)

    def __init__(self, mode=True):
        _check_bool("inference_mode", "mode", mode)
        self.mode, self.inference = not mode, mode

    def _args(self):
        return (self.inference,)


def is_view_replay_enabled():
    """Whether a view modified in place gets its history by replaying its chain of view ops (one node per view op,
    as the view was made), rather than as one as_strided of its base (torch's default on CPU)."""
    return _state.view_replay


class _force_original_view_tracking:
    """View replay on (True) or off (False): from construction (a call), inside the block (a context manager), or
    inside calls (a decorator), as torch's."""

    def __init__(self, mode):
        self.prev, self.mode = _state.view_replay, mode
        _state.view_replay = mode

    def __enter__(self):
        _state.view_replay = self.mode

    def __exit__(self, *exc):
        _state.view_replay = self.prev

    def clone(self):
        prev = _state.view_replay
        c = _force_original_view_tracking(self.mode)
        _state.view_replay = prev
        c.prev = prev
        return c

    def __call__(self, func):
        _state.view_replay = self.prev

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)

        return wrapper
