"""Deferred op results. A recorded op returns Pending values (shape and dtype known, nothing computed); they
are computed when something reads them. Computing a value evaluates every deferred call it depends on: call by
call through cached per-op kernels the first times a structure is seen, then as one compiled program keyed
by the structure (ops, static params, wiring, avals), so a forward and the backward that reads it run as a
single XLA call, as jax.jit(jax.grad(f)) does."""
import contextlib
import functools
import itertools
import operator

import jax

_compiles = [0]
FUSE_AFTER = 2  # a structure's first evaluations run per-op kernels (shared across structures); then it is fused
_seen = {}
_programs = {}


class Key(tuple):
    """A structural key: a tuple whose hash is computed once. `intern` returns one object per distinct key, so
    the dictionaries keyed by it (tier counts, compiled programs, kernels) hash it once and compare by identity."""

    def __hash__(self):
        try:
            return self._hash
        except AttributeError:
            self._hash = h = tuple.__hash__(self)
            return h


_interned = {}


def intern(parts):
    key = Key(parts)
    if len(_interned) > 4096:
        _interned.clear()
    return _interned.setdefault(key, key)


_fusing = [True]


@contextlib.contextmanager
def unfused():
    """Within it, per-op kernels only: for sweeps over many one-off structures (gradcheck), where compiling a
    program per structure costs more than it saves."""
    _fusing.append(False)
    try:
        yield
    finally:
        _fusing.pop()


def should_fuse(key):
    """Count one more sighting of a structure; True once it has been seen more than FUSE_AFTER times."""
    if not _fusing[-1]:
        return False
    count = _seen.get(key, 0) + 1
    if len(_seen) > 4096:  # forget one-off structures rather than grow without bound
        _seen.clear()
    _seen[key] = count
    return count > FUSE_AFTER


def compile_count():
    """How many kernels have been traced for compilation so far (ops, backward programs, fused evaluations)."""
    return _compiles[0]


def _counted(fn):
    @functools.wraps(fn)
    def traced(*args):
        _compiles[0] += 1
        return fn(*args)

    return traced


@functools.lru_cache(maxsize=4096)
def kernel(op, static):
    """The compiled forward of `op` with `static` (a tuple of (name, value) pairs); JAX caches by avals."""
    return jax.jit(_counted(functools.partial(op.fn, **dict(static))))


@functools.lru_cache(maxsize=8192)
def _out_avals(op, static, avals):
    structs = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in avals]
    out = jax.eval_shape(functools.partial(op.fn, **dict(static)), *structs)
    return tuple((o.shape, o.dtype) for o in (out if op.multi else (out,)))


class Call:
    """One deferred application of an op; `result` (a tuple of arrays) once computed, when `args` is dropped."""

    __slots__ = ("op", "static", "args", "n_out", "result", "created")

    def __init__(self, op, static, args, n_out):
        self.op, self.static, self.args, self.n_out, self.result = op, static, args, n_out, None
        self.created = next(_created)


_created = itertools.count()
_creation = operator.attrgetter("created")


class Pending:
    """Output `k` of a deferred Call; it has an array's shape, dtype and ndim."""

    __slots__ = ("call", "k", "shape", "dtype")

    def __init__(self, call, k, shape, dtype):
        self.call, self.k, self.shape, self.dtype = call, k, shape, dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


def defer(op, static, arrays, avals=None):
    """The outputs of op(*arrays) as Pending values (shape errors raise here, as an eager call would)."""
    if avals is None:
        avals = tuple([(a.shape, a.dtype) for a in arrays])
    out_avals = _out_avals(op, static, avals)
    call = Call(op, static, arrays, len(out_avals))
    return [Pending(call, k, shape, dtype) for k, (shape, dtype) in enumerate(out_avals)]


def materialize(value):
    """The array of a value that may be Pending (computing it and every deferred call it needs)."""
    if type(value) is not Pending:
        return value
    call = value.call
    if call.result is None:
        _evaluate(call)
    return call.result[value.k]


def _evaluate(target):
    calls, frontier, key = _structure(target)
    if len(calls) > 1:
        if should_fuse(key) or target.op.program:  # a backward program was fused already: fuse what it reads
            program = _programs.get(key)
            if program is None:
                program = _programs[key] = jax.jit(_counted(functools.partial(_run_all, key=key[0])))
            outs, start = program(*frontier), 0
            for call in calls:
                call.result, call.args = outs[start:start + call.n_out], None
                start += call.n_out
            return
    for call in calls:  # topological order: every call's pending args are computed before it
        args = [a.call.result[a.k] if type(a) is Pending else a for a in call.args]
        out = kernel(call.op, call.static)(*args)
        call.result, call.args = (out if call.op.multi else (out,)), None


def _structure(target):
    """The uncomputed calls `target` needs, in topological order; the concrete arrays they read (each once);
    and the structural key: per call (op, static, argument wiring), plus the arrays' avals."""
    needed, stack = {target}, [target]
    while stack:
        for a in stack.pop().args:
            if type(a) is Pending and a.call.result is None and a.call not in needed:
                needed.add(a.call)
                stack.append(a.call)
    order = sorted(needed, key=_creation)  # a call's arguments were made before it: creation order is topological
    index = {call: i for i, call in enumerate(order)}
    steps, frontier, slots = [], [], {}
    for call in order:
        refs = []
        for a in call.args:
            if type(a) is Pending:
                if a.call.result is None:
                    refs.append((index[a.call], a.k))
                    continue
                a = a.call.result[a.k]
            slot = slots.get(id(a))
            if slot is None:
                slot = slots[id(a)] = len(frontier)
                frontier.append(a)
            refs.append((slot,))
        steps.append((call.op, call.static, tuple(refs)))
    return order, frontier, intern((tuple(steps), tuple([(a.shape, a.dtype) for a in frontier])))


def _run_all(*frontier, key):
    """Every call of the structure `key`, traced into one program; returns all their outputs in order."""
    results = []
    for op, static, refs in key:
        args = [frontier[r[0]] if len(r) == 1 else results[r[0]][r[1]] for r in refs]
        out = op.fn(*args, **dict(static))
        results.append(out if op.multi else (out,))
    return tuple(o for outs in results for o in outs)
