"""The function transforms whose functions are running in this thread, in the order they nest (torch's stack of
functorch levels): grad-type levels (_transform_levels.py), vmap.vmap calls (_vmap_levels.py) and functionalize
calls. A level's number, as torch's reprs and debug_unwrap show it, is its depth in this stack, from 1."""

import contextlib
import threading


class _Stack(threading.local):
    def __init__(self):
        self.levels = []


_stack = _Stack()


@contextlib.contextmanager
def pushed(level):
    """Within it, `level` is the innermost running transform."""
    levels = _stack.levels
    levels.append(level)
    try:
        yield level
    finally:
        levels.pop()


def levels():
    """The running transforms of this thread, outermost first."""
    return _stack.levels


def depth(level):
    """The number torch gives `level`: its depth in the stack (1 for the outermost)."""
    for i, running in enumerate(_stack.levels):
        if running is level:
            return i + 1
    raise ValueError(f"{level!r} is not running")


@contextlib.contextmanager
def hidden_from(level):
    """Within it, `level` and the transforms inside it are not running (code runs at the level that encloses it)."""
    levels = _stack.levels
    k = depth(level) - 1
    inner = levels[k:]
    del levels[k:]
    try:
        yield
    finally:
        levels.extend(inner)
