"""The budget for compiled code held in memory. Each XLA executable a cache keeps costs memory and memory mappings
(measured on the CPU backend, jaxlib 0.10.1: about 0.5 MB of RSS and 3-10 mappings for a one-op kernel, 10 MB and 290
mappings for a 200-op fused gradient; Linux allows a process 65530 mappings, and XLA crashes inside LLVM past them).
So every cache of jitted callables (per-op kernels, fused and backward programs, optimizer steps) holds them as
`Jitted`, whose executables count against one budget of bytes and of executables: past either limit the jitted
callables called least recently forget theirs, which JAX then frees, and compile again when next called.

An executable's size is estimated from its optimized HLO, which sets how much code XLA generates: the RSS an
executable kept, measured as above from one-op kernels to 200-op programs, is about 512 KiB plus 32 bytes per
character of `compiled.as_text()`.

The limits: `set_cache_limit(bytes=, entries=)`, or `BATCHED_GRAD_CACHE_BYTES` (bytes) at import."""

import collections
import functools
import os
import threading
from typing import NamedTuple

import jax

ENV_VAR = "BATCHED_GRAD_CACHE_BYTES"
FIXED_BYTES = 512 << 10  # per executable
BYTES_PER_HLO_CHAR = 32
DEFAULT_BYTES = 256 << 20
DEFAULT_ENTRIES = 2048  # executables: 3-30 mappings each, well under the kernel's 65530


class CacheLimit(NamedTuple):
    bytes: int
    entries: int


_traces = [0]
_lru = collections.OrderedDict()  # the Jitted holding executables, least recently called first
_touch = _lru.move_to_end
_used = [0, 0]  # estimated bytes, executables
_lock = threading.Lock()


def _limit_from_environment():
    text = os.environ.get(ENV_VAR, "")
    if not text:
        return DEFAULT_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{ENV_VAR} must be a positive number of bytes, but got {text!r}")
    return value


_limits = CacheLimit(_limit_from_environment(), DEFAULT_ENTRIES)


def _check_limit(name, value):
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"set_cache_limit(): argument '{name}' must be an int or None, not {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"set_cache_limit(): argument '{name}' must be positive, but got {value}")


def set_cache_limit(bytes=None, entries=None):  # noqa: A002  (the public keyword's name)
    """Bound the compiled code kept in memory: `bytes` (estimated) and `entries` (executables); None keeps that
    limit. Past either, the programs called least recently are dropped (and compiled again if called again).
    Returns the limits now in force."""
    global _limits
    _check_limit("bytes", bytes)
    _check_limit("entries", entries)
    with _lock:
        _limits = CacheLimit(_limits.bytes if bytes is None else bytes, _limits.entries if entries is None else entries)
        _evict(keep=None)
    return _limits


def cache_usage():
    """(estimated bytes, executables) of the compiled code the caches hold now."""
    return tuple(_used)


def traces():
    """How many functions have been traced for compilation so far."""
    return _traces[0]


class Jitted:
    """`jax.jit(fn, **options)` whose executables count against the budget. Evicted, it forgets them (a fresh
    jax.jit of a fresh wrapper, so no JAX cache keyed by the old one keeps them) and stays usable."""

    __slots__ = ("fn", "options", "jit", "traced", "nbytes", "executables")

    def __init__(self, fn, **options):
        self.fn, self.options = fn, options
        self._fresh()

    def _fresh(self):
        fn, traced = self.fn, [0]  # the wrapper counts its own traces: a thread's trace is not another's compile

        @functools.wraps(fn)
        def counted(*args, **kwargs):
            _traces[0] += 1
            traced[0] += 1
            return fn(*args, **kwargs)

        self.jit, self.traced = jax.jit(counted, **self.options), traced
        self.nbytes = self.executables = 0

    def __call__(self, *args, **kwargs):
        traced = self.traced
        before = traced[0]
        out = self.jit(*args, **kwargs)
        if traced[0] != before:  # traced: compiled, or staged into an outer trace (then its results are tracers)
            _charge(self, args, kwargs, out)
        elif self.executables:
            try:
                _touch(self)
            except KeyError:  # evicted by another thread meanwhile
                pass
        return out

    def forget(self):
        """Drop the executables (JAX frees them once nothing else refers to them)."""
        self.jit.clear_cache()
        self._fresh()


def estimate(jitted, args, kwargs):
    """The estimated bytes of the executable `jitted` has for these arguments (just compiled: lowering and compiling
    again find it in JAX's caches, about 0.2 ms)."""
    compiled = jitted.lower(*args, **kwargs).compile()
    return FIXED_BYTES + BYTES_PER_HLO_CHAR * len(compiled.as_text())


def _charge(jitted, args, kwargs, out):
    if any([isinstance(o, jax.core.Tracer) for o in jax.tree_util.tree_leaves(out)]):
        return  # staged into another program: nothing was compiled
    nbytes = estimate(jitted.jit, args, kwargs)
    with _lock:
        if jitted.executables:
            _touch(jitted)
        else:
            _lru[jitted] = None
        jitted.nbytes += nbytes
        jitted.executables += 1
        _used[0] += nbytes
        _used[1] += 1
        _evict(keep=jitted)


def _evict(keep):
    """Forget the least recently called executables until the budget holds (never `keep`, the one just compiled)."""
    while (_used[0] > _limits.bytes or _used[1] > _limits.entries) and _lru:
        jitted = next(iter(_lru))
        if jitted is keep:
            break
        del _lru[jitted]
        _used[0] -= jitted.nbytes
        _used[1] -= jitted.executables
        jitted.forget()


def clear():
    """Forget every executable the budget holds."""
    with _lock:
        while _lru:
            jitted, _ = _lru.popitem(last=False)
            _used[0] -= jitted.nbytes
            _used[1] -= jitted.executables
            jitted.forget()
