"""When a structure's compiled program is worth its compile: the cost model behind _lazy.should_fuse.

A structure (deferred forward calls, a backward walk, a segment of one) first runs without a program of its own:
per-op host forms and kernels, which are shared with every other structure. Compiling its program costs a trace,
a lowering and an XLA compile (60 ms for a 6-node gradient, 1.3 s for a 130-node one on the 2-core benchmark
machine), against a per-op run of 0.1-30 ms. So a structure is compiled once the time already spent running it
without a program reaches what its program is estimated to cost: the rule that never pays more than twice the
better choice made in hindsight, whatever the number of repeats. A script that runs a loop ten times then
compiles only the structures whose runs are slow, and a long loop compiles every structure it repeats.

The estimates are measured in this process: the compile of a program of n ops is predicted as a factor times
(PRIOR_FIXED + PRIOR_PER_OP * n), the factor the geometric mean of measured over predicted for the programs compiled
so far (1 before the first); a program whose executable the store holds (_store.py) costs the mean time its loads
took (PRIOR_LOAD before the first). The time spent without a program excludes what this thread spent compiling
kernels and tracing host forms meanwhile (one-time work, which a program would not save).

`set_fuse_after(n)` (or BATCHED_GRAD_FUSE_AFTER=n) replaces the model by a count: a structure is compiled from its
(n+1)-th sighting on, whatever the times (the tests use it, so that which tier runs a call does not depend on
timing; benchmarks of the steady state use it to reach the fused programs in a known number of calls)."""

import math
import os
import threading
import time
import warnings

ENV = "BATCHED_GRAD_FUSE_AFTER"
# a fused program's trace, lowering and XLA compile on the 2-core benchmark machine: about 0.03 s plus 0.01 s per
# node of its structure (a 6-node gradient 60-80 ms, 18 nodes 0.2 s, 66 nodes 0.67 s, 130 nodes 1.3 s)
PRIOR_FIXED = 0.03
PRIOR_PER_OP = 0.01
PRIOR_LOAD = 0.005  # loading an executable from the store: deserializing it (2-3 ms for a small one)
_LIMIT = 4096  # structures whose spent time is kept (then forgotten, as the sighting counts are)

_lock = threading.Lock()
_spent = {}  # structural key -> seconds spent running it without its program
_stored = {}  # structural key -> whether the store holds its program's executable
_compiles = [0.0, 0]  # sum of log(measured / predicted), count
_loads = [0.0, 0]  # sum of seconds, count
_local = threading.local()


def check_fuse_after(n):
    """set_fuse_after's argument check."""
    if n is not None and (not isinstance(n, int) or isinstance(n, bool)):
        raise TypeError(f"set_fuse_after(): argument 'n' must be None or an int, but got {type(n).__name__}")
    if n is not None and n < 0:
        raise ValueError(f"set_fuse_after(): argument 'n' must be None or an int >= 0, but got {n}")


def from_environment():
    """The fixed count $BATCHED_GRAD_FUSE_AFTER gives, or None (the cost model) where it is unset or empty."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        warnings.warn(f"{ENV} must be an int >= 0, but got {text!r}; using the cost model", UserWarning, stacklevel=2)
        return None
    return n


def one_time():
    """Seconds this thread has spent compiling kernels and tracing host forms so far."""
    return getattr(_local, "seconds", 0.0)


def add_one_time(seconds):
    """Count `seconds` of one-time work (a compile, a trace) done by this thread."""
    _local.seconds = one_time() + seconds


def one_time_mark():
    """A mark from which `one_time_since` counts a piece of one-time work."""
    return time.perf_counter(), one_time()


def one_time_since(mark):
    """Count the time since `mark` as one-time work, less what was counted inside it meanwhile (a trace that
    compiled a kernel); the seconds since `mark`."""
    start, counted = mark
    elapsed = time.perf_counter() - start
    add_one_time(max(0.0, elapsed - (one_time() - counted)))
    return elapsed


def clock():
    """This thread's time without its one-time work: the difference of two readings is what a run cost beyond
    its compiles."""
    return time.perf_counter() - one_time()


def note_unfused(key, seconds):
    """A run of the structure `key` without its program took `seconds` (from `clock`)."""
    if seconds <= 0:
        return
    with _lock:
        if len(_spent) > _LIMIT:
            _spent.clear()
            _stored.clear()
        _spent[key] = _spent.get(key, 0.0) + seconds


def note_compile(size, seconds):
    """A program of a structure of `size` ops took `seconds` to trace, lower and compile."""
    with _lock:
        _compiles[0] += math.log(max(seconds, 1e-4) / _prior(size))
        _compiles[1] += 1


def note_load(seconds):
    """An executable took `seconds` to load from the store."""
    with _lock:
        _loads[0] += seconds
        _loads[1] += 1


def _prior(size):
    return PRIOR_FIXED + PRIOR_PER_OP * size


def compile_estimate(size):
    """The predicted seconds of compiling the program of a structure of `size` ops, or the programs of a structure
    run in segments (`size` a tuple: the ops of each distinct segment, equal segments sharing one program)."""
    total, count = _compiles
    sizes = size if isinstance(size, tuple) else (size,)
    return sum([_prior(n) for n in sizes]) * (math.exp(total / count) if count else 1.0)


def load_estimate():
    """The predicted seconds of loading a program's executable from the store."""
    total, count = _loads
    return total / count if count else PRIOR_LOAD


def pays_back(key, size, stored=None):
    """Whether the structure `key` (of `size` ops: see compile_estimate) has spent at least what its program costs:
    its compile, or, where `stored()` says the store holds the executable, its load (`stored` is asked once per
    structure, and only once the spent time has reached the load's cost)."""
    spent = _spent.get(key, 0.0)
    if spent <= 0.0:
        return False
    if spent >= compile_estimate(size):
        return True
    if stored is None or spent < load_estimate():
        return False
    found = _stored.get(key)
    if found is None:
        found = _stored[key] = bool(stored())
    return found


def spent(key):
    """Seconds the structure `key` has run without its program (for tests and diagnostics)."""
    return _spent.get(key, 0.0)


def clear():
    """Forget the times spent and what the store holds (the measured compile and load costs are kept)."""
    with _lock:
        _spent.clear()
        _stored.clear()
