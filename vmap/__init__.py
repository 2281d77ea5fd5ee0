"""vmap: the batching layer of batched_grad.

A layer of JAX functions of arrays, below the engine: it runs a backward program over a batch of cotangents
(vectorized with jax.vmap, or chunked with lax.map), and a step written in Python (a function of one row's arrays)
vectorized where it can be, else in a per-row loop. The engine describes its batch with this layer's records
(`_batching.py`) and calls into it; nothing here imports batched_grad.

The exceptions are this facade's two functions of Tensors: `vmap.vmap`, which is `batched_grad.func.vmap`, and
`vmap.shard_rows`. They are looked up in batched_grad when first used (a module `__getattr__`), so that importing
this layer does not import the engine.
"""

import os
import threading

from ._memory import memory_budget, set_memory_budget

__all__ = [
    "FallbackError",
    "FallbackWarning",
    "fallback_enabled",
    "fallback_warnings",
    "fallback_warnings_enabled",
    "memory_budget",
    "set_fallback_enabled",
    "set_fallback_warnings",
    "set_memory_budget",
    "shard_rows",
    "vmap",
]


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


def __getattr__(name):
    # the functions of Tensors, imported on first use (see the module's docstring)
    if name == "vmap":
        from batched_grad.func import vmap

        return vmap
    if name == "shard_rows":
        from batched_grad._batched import shard_rows

        return shard_rows
    raise AttributeError(f"module 'vmap' has no attribute {name!r}")
