"""vmap: the batching layer of batched_grad.

Runs backward programs over a batch of cotangents (vectorized with jax.vmap, or chunked), falls back to a
per-row loop for the nodes that cannot be vectorized, and vectorizes functions of Tensors (`vmap.vmap`).
"""
import os
import threading

__all__ = ["FallbackError", "FallbackWarning", "fallback_enabled", "fallback_warnings", "fallback_warnings_enabled",
           "set_fallback_enabled", "set_fallback_warnings", "vmap"]


class FallbackWarning(UserWarning):
    """A node's backward could not be vectorized and ran once per row of the batch."""


class FallbackError(RuntimeError):
    """Raised instead of looping per row when the fallback is disabled (`set_fallback_enabled(False)`)."""


_state = {"warnings": os.environ.get("VMAP_FALLBACK_WARNINGS", "") == "1", "enabled": True}


class _ThreadState(threading.local):
    warnings = None  # inside a `fallback_warnings` block of this thread: its setting; else None (the process's)
    outer = ()  # the settings the thread's open blocks replaced, innermost last


_thread = _ThreadState()


def _check_bool(enabled, fn):
    if not isinstance(enabled, bool):
        raise TypeError(f"{fn}(enabled): enabled must be a bool, but got {type(enabled).__name__}")


def set_fallback_warnings(enabled):
    """Switch FallbackWarning on or off for the process (off by default; VMAP_FALLBACK_WARNINGS=1 turns it on at
    import); inside a `fallback_warnings` block, also for the rest of that block."""
    _check_bool(enabled, "set_fallback_warnings")
    _state["warnings"] = enabled
    if _thread.warnings is not None:
        _thread.warnings = enabled


def fallback_warnings_enabled():
    """Whether a FallbackWarning is emitted when a node's backward runs per row (in this thread)."""
    enabled = _thread.warnings
    return _state["warnings"] if enabled is None else enabled


class fallback_warnings:
    """Context manager: fallback warnings on (or off) inside the block, in this thread only (as torch's grad modes
    are), restored after."""

    def __init__(self, enabled=True):
        _check_bool(enabled, "fallback_warnings")
        self.enabled = enabled

    def __enter__(self):
        _thread.outer += (_thread.warnings,)
        _thread.warnings = self.enabled
        return self

    def __exit__(self, *exc):
        _thread.warnings, _thread.outer = _thread.outer[-1], _thread.outer[:-1]


def set_fallback_enabled(enabled):
    """With False, a node that cannot be vectorized raises FallbackError instead of looping per row."""
    _check_bool(enabled, "set_fallback_enabled")
    _state["enabled"] = enabled


def fallback_enabled():
    """Whether nodes that cannot be vectorized run per row (True) or raise FallbackError (False)."""
    return _state["enabled"]


def vmap(func, in_dims=0, out_dims=0, *, chunk_size=None, randomness="error"):
    """Vectorize `func` (a function of Tensors) over axis `in_dims` of its arguments; see batched_grad's README."""
    from ._vmap import vmap as _vmap

    return _vmap(func, in_dims, out_dims, chunk_size=chunk_size, randomness=randomness)
