"""Reentrant backward: a backward called while a node's backward runs (a custom Function whose backward calls
backward() or grad() on a graph of its own). Each nesting costs the thread a few dozen Python frames, so a
2000-deep chain would end in RecursionError long before torch's engine, which runs a reentrant backward that
nests too deep on a worker thread of its own. So does this: every DEPTH_PER_THREAD nestings in one thread, the
next backward runs on a new thread, which starts with an empty stack, while the calling thread waits for it.
The new thread takes the caller's thread-local settings (grad mode, running vmap calls, JAX's 64-bit mode, ...).
Inside a JAX trace nothing moves: JAX's trace is the thread's own."""

import functools
import threading

import jax

from . import _grad_mode, _tracing, _vmap_levels

DEPTH_PER_THREAD = 16  # nestings per thread: ~30 frames each, well under Python's default limit of 1000


class _Nesting(threading.local):
    depth = 0  # the backward calls running in this thread, outermost included


_nesting = _Nesting()


def _thread_states():
    """The thread-local records whose settings a backward reads (imported here: these modules import the
    engine)."""
    import vmap

    return [_grad_mode._state, _vmap_levels._running, _tracing.compiling, vmap._thread, _tracing.TRACING]


def _snapshot():
    """This thread's settings, each record's attributes (lists copied: the new thread pushes and pops its own)."""
    records = [
        (state, {k: list(v) if isinstance(v, list) else v for k, v in vars(state).items()})
        for state in _thread_states()
    ]
    return records, jax.enable_x64.value


def _restore(snapshot):
    records, x64 = snapshot
    for state, attributes in records:
        vars(state).update(attributes)
    jax.enable_x64.set_local(x64)


def _on_new_thread(run, args, kwargs):
    """run(*args, **kwargs) on a new thread that has this thread's settings; its result, or its exception raised
    here."""
    snapshot, outcome = _snapshot(), {}

    def target():
        _restore(snapshot)
        try:
            outcome["result"] = run(*args, **kwargs)
        except BaseException as error:  # handed to the waiting caller, which raises it
            outcome["error"] = error

    worker = threading.Thread(target=target, name="batched_grad reentrant backward")
    worker.start()
    worker.join()
    if "error" in outcome:
        error = outcome.pop("error")
        raise error.with_traceback(error.__traceback__)
    return outcome["result"]


def escapes_deep_nesting(run):
    """`run` (the engine's backward), moved to a new thread where this thread already runs DEPTH_PER_THREAD of
    them."""

    @functools.wraps(run)
    def nested(*args, **kwargs):
        depth = _nesting.depth
        if depth >= DEPTH_PER_THREAD and not _tracing.tracing():
            return _on_new_thread(nested, args, kwargs)
        _nesting.depth = depth + 1
        try:
            return run(*args, **kwargs)
        finally:
            _nesting.depth = depth

    return nested
