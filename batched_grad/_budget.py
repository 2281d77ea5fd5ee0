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
import numpy as np

from . import _cache, _names, _payback, _store

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
    jax.jit of a fresh wrapper, so no JAX cache keyed by the old one keeps them) and stays usable.

    `name` (a value _names.py can describe: a kernel's op and static params, a program's structural key) names what
    `fn` computes in every process: its executables are then kept in the store (_store.py), and a later process
    loads them at the point JAX would trace `fn`, without tracing it; those calls go to the loaded executables by
    their arguments' avals. `size`: the ops of a fused program, whose compile times the cost model learns from."""

    __slots__ = (
        "fn",
        "options",
        "jit",
        "traced",
        "nbytes",
        "executables",
        "name",
        "size",
        "described",
        "loaded",
    )

    def __init__(self, fn, name=None, size=None, **options):
        self.fn, self.options, self.name, self.size = fn, options, name, size
        self.described = [_UNDESCRIBED]  # the name's text, made at the first trace (shared with the wrapper)
        self.loaded = None  # {call signature: executable loaded from the store}
        self._fresh()

    def _fresh(self):
        fn, traced = self.fn, [0]  # the wrapper counts its own traces: a thread's trace is not another's compile
        name, options, described = self.name, self.options, self.described

        @functools.wraps(fn)
        def counted(*args, **kwargs):
            if name is not None and not kwargs and not _unstored.flag and _at_top_level() and _store.active():
                key = _store_key(name, options, described, args, traced_args=True)
                compiled = None if key is None else _store.load(key)
                if compiled is not None:  # found: no trace (the caller runs it)
                    raise _Loaded(compiled)
            mark = _payback.one_time_mark()
            _traces[0] += 1
            traced[0] += 1
            out = fn(*args, **kwargs)
            # when this thread's trace began, and its count of JAX's cache hits once traced: a hit after that is
            # this program's (compiles that ran inside the trace, of values computed eagerly, are not)
            _started.marks[id(traced)] = mark, _cache.hits.count
            if name is not None:  # what JAX loads from its cache cannot be serialized again: keep what it read
                _cache.hits.wanted, _cache.hits.serialized = True, None
            return out

        self.jit, self.traced = jax.jit(counted, **options), traced
        self.nbytes = self.executables = 0
        self.loaded = None

    def __call__(self, *args, **kwargs):
        loaded = self.loaded
        if loaded is not None:
            compiled = loaded.get(_call_signature(args))
            if compiled is not None:
                _touch_if_held(self)
                return compiled(*args)
        traced = self.traced
        before = traced[0]
        try:
            out = self.jit(*args, **kwargs)
        except _Loaded as found:
            return self._run_loaded(found.compiled, args, kwargs)
        if traced[0] != before:  # traced: compiled, or staged into an outer trace (then its results are tracers)
            _charge(self, args, kwargs, out)
        elif self.executables:
            _touch_if_held(self)
        return out

    def _run_loaded(self, compiled, args, kwargs):
        """A call whose executable the store held: kept for the later calls with these avals, and run. Inside an
        outer trace (tracer arguments) the function is traced into it instead, without the store."""
        if any([isinstance(a, jax.core.Tracer) for a in args]):
            _unstored.flag = True
            try:
                return self(*args, **kwargs)
            finally:
                _unstored.flag = False
        if self.loaded is None:
            self.loaded = {}
        self.loaded[_call_signature(args)] = compiled
        _hold(self, FIXED_BYTES + BYTES_PER_HLO_CHAR * len(compiled.as_text() or ""))
        return compiled(*args)

    def forget(self):
        """Drop the executables (JAX frees them once nothing else refers to them)."""
        self.jit.clear_cache()
        self._fresh()


_UNDESCRIBED = object()


class _Loaded(Exception):
    """Raised out of a trace whose executable the store holds: the caller runs that instead."""

    def __init__(self, compiled):
        super().__init__("an executable found in the store")
        self.compiled = compiled


class _Started(threading.local):
    def __init__(self):
        self.marks = {}  # id of a Jitted's trace counter -> (start, JAX cache hits) of this thread's last trace


_started = _Started()


class _Unstored(threading.local):
    flag = False  # this thread traces without the store (the call is part of an outer trace)


_unstored = _Unstored()

try:  # JAX has no public test of whether a trace is staged into an outer one
    from jax._src.core import EvalTrace as _EvalTrace
    from jax._src.core import trace_ctx as _trace_ctx
except ImportError:  # pragma: no cover - depends on the JAX version
    _EvalTrace = _trace_ctx = None


def _at_top_level():
    """Inside a jit's trace: whether that jit was called at the top level (its executable will run), not inside an
    outer trace (a fused program's, vmap's), which stages it and would have no use for a stored executable."""
    if _trace_ctx is None:
        return True  # a found executable is refused by _run_loaded where the call is staged
    parent = getattr(_trace_ctx.trace, "parent_trace", None)
    return parent is None or type(parent) is _EvalTrace


def _call_signature(args):
    """What selects a loaded executable for a call: the 64-bit mode and each argument's shape, dtype and weak type
    (and the structure of arguments that are pytrees)."""
    try:
        return (jax.enable_x64.value,) + tuple([_argument_signature(a) for a in args])
    except _NotAnArray:
        leaves, tree = jax.tree_util.tree_flatten(args)
        return (jax.enable_x64.value, tree) + tuple([_argument_signature(a) for a in leaves])


class _NotAnArray(Exception):
    pass


def _argument_signature(a):
    if type(a) is np.ndarray:
        return a.shape, a.dtype, False
    if isinstance(a, jax.core.Tracer):  # an outer trace's value (a jax.Array too): never a loaded executable's
        return type(a)
    if isinstance(a, jax.Array):
        return a.shape, a.dtype, a.weak_type
    if isinstance(a, (tuple, list, dict)) or a is None:
        raise _NotAnArray
    return jax.typeof(a)


def _store_key(name, options, described, args, traced_args):
    """The store's key of a program named `name` for these arguments (tracers of its trace, or the concrete
    arguments of a call); None where the name has no stable text."""
    text = described[0]
    if text is _UNDESCRIBED:
        text = described[0] = _names.describe(name)
    if text is None:
        return None
    leaves, tree = jax.tree_util.tree_flatten(args)
    avals = [a.aval if traced_args else jax.typeof(a) for a in leaves]
    return _store.key_text(text, options, str(tree), avals)


def stored(jitted, args):
    """Whether the store holds the executable `jitted` would run on these (concrete) arguments (a sequence, each
    passed as a positional argument)."""
    if jitted.name is None or not _store.active():
        return False
    key = _store_key(jitted.name, jitted.options, jitted.described, tuple(args), traced_args=False)
    return key is not None and _store.contains(key)


def _charge(jitted, args, kwargs, out):
    start, hits_then = _started.marks.pop(id(jitted.traced), (None, None))  # this thread's trace of it
    if any([isinstance(o, jax.core.Tracer) for o in jax.tree_util.tree_leaves(out)]):
        return  # staged into another program: nothing was compiled
    if start is not None:
        seconds = _payback.one_time_since(start)  # its trace, lowering, compile (and first run)
        if jitted.size is not None:
            _payback.note_compile(jitted.size, seconds)
    compiled = jitted.jit.lower(*args, **kwargs).compile()  # found in JAX's caches, about 0.2 ms
    if jitted.name is not None and start is not None:
        hits, serialized = _cache.hits, None
        hits.wanted = False
        if hits.count != hits_then:  # loaded from JAX's cache: stored with the bytes that entry held
            serialized = hits.serialized if hits.count == hits_then + 1 else None
        if not kwargs and _store.active() and (serialized is not None or hits.count == hits_then):
            key = _store_key(jitted.name, jitted.options, jitted.described, args, traced_args=False)
            if key is not None:
                _store.save(key, compiled, serialized)
    _hold(jitted, FIXED_BYTES + BYTES_PER_HLO_CHAR * len(compiled.as_text()))


def _touch_if_held(jitted):
    if jitted.executables:
        try:
            _touch(jitted)
        except KeyError:  # evicted by another thread meanwhile
            pass


def _hold(jitted, nbytes):
    """Count one more executable of `jitted`, of `nbytes` (estimated), against the budget."""
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
