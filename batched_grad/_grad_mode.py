"""Grad-mode switches: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local)."""
import functools
import threading

_state = threading.local()


def is_grad_enabled():
    return getattr(_state, "enabled", True)


def _set(mode):
    _state.enabled = mode


class _GradMode:
    """Base of the grad-mode context managers; each one is also a decorator."""

    mode = True

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set(self.mode)

    def __exit__(self, *exc):
        _set(self._prev)

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args()):
                return func(*args, **kwargs)

        return wrapper

    def _args(self):
        return ()


class no_grad(_GradMode):
    """Disable graph recording inside the block (or the decorated function)."""

    mode = False


class enable_grad(_GradMode):
    """Re-enable graph recording inside a no_grad block."""

    mode = True


class set_grad_enabled(_GradMode):
    """Set grad mode: `set_grad_enabled(False)` as a call, a context manager or a decorator."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(mode): mode must be a bool, but got {type(mode).__name__}")
        self.mode = mode
        self._prev = is_grad_enabled()
        _set(mode)

    def __enter__(self):
        pass

    def __call__(self, func):
        _set(self._prev)  # used as a decorator: the mode applies only inside calls
        return super().__call__(func)

    def _args(self):
        return (self.mode,)


class inference_mode(_GradMode):
    """Like no_grad (the tensors made inside never record a graph); `inference_mode(False)` is a no-op."""

    def __init__(self, mode=True):
        self._enabled = mode

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set(False if self._enabled else self._prev)

    def _args(self):
        return (self._enabled,)
