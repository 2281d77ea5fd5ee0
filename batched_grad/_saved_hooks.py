"""The saved-tensor hooks in force on this thread (torch.autograd.graph.saved_tensors_hooks), as torch keeps them:
a stack of (pack, unpack) pairs of which the innermost applies, and the message of a region that forbids them.

Every tensor a recorded op or a Function saves for backward while a pair is in force is handed to `pack` (under
no_grad); the node keeps what pack returns instead of the tensor, and gives it to `unpack` when backward (or
ctx.saved_tensors) reads it (_graph.SavedValue)."""

import contextlib
import functools
import threading

_state = threading.local()  # per thread, as torch's: `stack` of (pack, unpack), `disabled` (a message or None)

TRANSFORMS_UNSUPPORTED = (
    "torch.func.{grad, vjp, jacrev, hessian} don't yet support saved tensor hooks. "
    "Please open an issue with your use case."
)


def _stack():
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    return stack


def innermost():
    """The (pack, unpack) pair in force, or None (the fast path of every saved value)."""
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


def push(pack_hook, unpack_hook):
    disabled = getattr(_state, "disabled", None)
    if disabled is not None:
        raise RuntimeError(disabled)
    _stack().append((pack_hook, unpack_hook))


def pop():
    _stack().pop()


@contextlib.contextmanager
def disabled(error_message):
    """A region where saved-tensor hooks raise RuntimeError(error_message): on entering it if some are in force, and
    when one is pushed inside it."""
    previous = getattr(_state, "disabled", None)
    if innermost() is not None:
        raise RuntimeError(error_message)
    _state.disabled = error_message
    try:
        yield
    finally:
        _state.disabled = previous


@contextlib.contextmanager
def kept():
    """Restore this thread's hooks as they are now when the region ends: what backward's hooks enter or exit stays
    in that backward, as torch's engine restores the caller's thread-local state."""
    stack, message = list(_stack()), getattr(_state, "disabled", None)
    try:
        yield
    finally:
        _state.stack, _state.disabled = stack, message


def unsupported_in_transforms(transform):
    """Run `transform` (the part of grad, vjp or jacrev that records the function) where saved-tensor hooks are
    refused with torch's message."""

    @functools.wraps(transform)
    def refusing(*args, **kwargs):
        with disabled(TRANSFORMS_UNSUPPORTED):
            return transform(*args, **kwargs)

    return refusing
