"""When a structure's compiled program is worth its compile: the cost model behind _lazy.should_fuse.

A structure (deferred forward calls, a backward walk, a segment of one) first runs without a program of its own:
per-op host forms and kernels, which are shared with every other structure. Compiling its program costs a trace,
a lowering and an XLA compile (60 ms for a 6-node gradient, 1.3 s for a 130-node one on the 2-core benchmark
machine), against a per-op run of 0.1-30 ms. So a structure is compiled once the time already spent running it
without a program reaches what its program is estimated to cost: the rule that never pays more than twice the
better choice made in hindsight, whatever the number of repeats. A script that runs a loop ten times then
compiles only the structures whose runs are slow, and a long loop compiles every structure it repeats.

The estimates are measured in this process. A program's compile is predicted from the ops it is made of (its Mix):
PRIOR_FIXED plus a prior per op, which XLA's compile of that op sets: a node of plain float arithmetic (add, mul,
...), a view, relu, abs, sqrt or sin fuses into a loop with its neighbours and is priced 1.5 ms, the others (tanh
and the functions computed in float64, exp, log1p, matmul, reductions: 20-55 ms measured) 30 ms, forward and VJP of
one node on the 2-core benchmark machine. Each compile then corrects what is predicted: an op's prior is scaled by
the geometric mean of measured over predicted of the compiles it took part in, each weighted by its share of their
prediction, and the ops not compiled yet (and the fixed part) by that mean over every compile so far (1 before the
first); a program whose executable the store holds (_store.py) costs the mean time its loads took (PRIOR_LOAD before
the first). The time spent without a program excludes what this thread spent compiling kernels and tracing host
forms meanwhile (one-time work, which a program would not save).

Within one call, a loop of work without a program (a vmap.vmap structure's rows on the host) stops where the rows
done show that finishing would spend more than the program costs (`within`): the program then computes them.

`set_fuse_after(n)` (or BATCHED_GRAD_FUSE_AFTER=n) replaces the model by a count: a structure is compiled from its
(n+1)-th sighting on, whatever the times (the tests use it, so that which tier runs a call does not depend on
timing; benchmarks of the steady state use it to reach the fused programs in a known number of calls)."""

import math
import os
import threading
import time
import warnings

ENV = "BATCHED_GRAD_FUSE_AFTER"
# a fused program's trace, lowering and XLA compile on the 2-core benchmark machine (forward and backward of a chain
# of n nodes on 32 floats, fitted over n = 4, 16, 48): about 0.05-0.08 s, plus per node 1.5-2 ms for float
# arithmetic (mul and add: 11 nodes 0.08 s, 99 nodes 0.22 s; a 256-step backward segment of them 0.2-0.3 s), sin,
# and, within 2x of those, relu, abs, sqrt and views (reshape, permute); 43 ms for tanh (computed in float64),
# 41 ms for sigmoid, 54 ms for a 32x32 matrix-vector product, 40-55 ms for exp, log1p, or a mean
PRIOR_FIXED = 0.05
PRIOR_PER_OP = 0.03
PRIOR_CHEAP = 0.0015
CHEAP = frozenset({"add", "sub", "mul", "div", "neg", "rsub", "relu", "abs", "sqrt", "sin"})  # and every view op
PRIOR_LOAD = 0.005  # loading an executable from the store: deserializing it (2-3 ms for a small one)
_LIMIT = 4096  # structures whose spent time is kept (then forgotten, as the sighting counts are)

_lock = threading.Lock()
_spent = {}  # structural key -> seconds spent running it without its program
_stored = {}  # structural key -> whether the store holds its program's executable
_compiles = [0.0, 0]  # sum of log(measured / prior), count
_learned = {}  # op name -> [sum of share * log(measured / prior), sum of shares] over the compiles it took part in
_mixes = {}  # structural key -> its Mix (or tuple of Mixes), made once
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


class Mix(tuple):
    """The ops of a structure's program: ((op name, count, prior seconds per node), ...), sorted by name."""


def op_prior(op):
    """The prior seconds a node of the table op `op` adds to the compile of a program."""
    return PRIOR_CHEAP if op.view or op.name in CHEAP else PRIOR_PER_OP


def mix_of(sigs):
    """The Mix of the Signatures `sigs` (None, a leaf's, counts for nothing)."""
    counts = {}
    for sig in sigs:
        if sig is not None:
            op = sig.op
            entry = counts.get(op.name)
            counts[op.name] = [1, op_prior(op)] if entry is None else [entry[0] + 1, entry[1]]
    return Mix([(name, count, prior) for name, (count, prior) in sorted(counts.items())])


def _priors(mix):
    """[(op name, or None for the fixed part; its prior seconds)] of a program of `mix` (or of an op count)."""
    if isinstance(mix, int):  # ops of unknown kinds
        return [(None, PRIOR_FIXED + PRIOR_PER_OP * mix)]
    return [(None, PRIOR_FIXED)] + [(name, count * prior) for name, count, prior in mix]


def note_compile(mix, seconds):
    """A program of the ops `mix` (a Mix, or a count of ops of unknown kinds) took `seconds` to trace, lower and
    compile."""
    priors = _priors(mix)
    total = sum([p for _, p in priors])
    ratio = math.log(max(seconds, 1e-4) / total)
    with _lock:
        _compiles[0] += ratio
        _compiles[1] += 1
        for name, p in priors:
            if name is not None:
                learned = _learned.setdefault(name, [0.0, 0.0])
                learned[0] += p / total * ratio
                learned[1] += p / total


def note_load(seconds):
    """An executable took `seconds` to load from the store."""
    with _lock:
        _loads[0] += seconds
        _loads[1] += 1


def _factor(name, overall):
    learned = _learned.get(name)
    return math.exp(learned[0] / learned[1]) if learned is not None and learned[1] > 0 else overall


def compile_estimate(mix):
    """The predicted seconds of compiling the program of a structure of the ops `mix` (a Mix, or a count of ops of
    unknown kinds), or the programs of a structure run in segments (a tuple of them: one per distinct segment,
    equal segments sharing one program)."""
    total, count = _compiles
    overall = math.exp(total / count) if count else 1.0
    mixes = mix if isinstance(mix, tuple) and not isinstance(mix, Mix) else (mix,)
    return sum([p * _factor(name, overall) for m in mixes for name, p in _priors(m)])


def load_estimate():
    """The predicted seconds of loading a program's executable from the store."""
    total, count = _loads
    return total / count if count else PRIOR_LOAD


def pays_back(key, mix, stored=None):
    """Whether the structure `key` (of the ops `mix`: see compile_estimate; or a function making them, called once
    per structure) has spent at least what its program costs: its compile, or, where `stored()` says the store holds
    the executable, its load (`stored` is asked once per structure, and only once the spent time has reached the
    load's cost)."""
    spent = _spent.get(key, 0.0)
    if spent <= 0.0:
        return False
    mix = _made(key, mix)
    if spent >= compile_estimate(mix):
        return True
    if stored is None or spent < load_estimate():
        return False
    found = _stored.get(key)
    if found is None:
        found = _stored[key] = bool(stored())
    return found


def within(key, mix, seconds):
    """Whether the structure `key` (of the ops `mix`, as in pays_back) running `seconds` more without its program
    would still have spent less than that program's estimated compile: a long loop of one-off work (many rows on
    the host) stops at that point rather than after it."""
    return _spent.get(key, 0.0) + seconds < compile_estimate(_made(key, mix))


def _made(key, mix):
    """The Mix of `key`: `mix`, or what the function `mix` gives, made once per structure."""
    if not callable(mix):
        return mix
    made = _mixes.get(key)
    if made is None:
        if len(_mixes) > _LIMIT:
            _mixes.clear()
        made = _mixes[key] = mix()
    return made


def spent(key):
    """Seconds the structure `key` has run without its program (for tests and diagnostics)."""
    return _spent.get(key, 0.0)


def clear():
    """Forget the times spent and what the store holds (the measured compile and load costs are kept)."""
    with _lock:
        _spent.clear()
        _stored.clear()
