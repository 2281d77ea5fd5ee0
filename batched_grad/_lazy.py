"""Deferred op results. A recorded op returns Pending values (shape and dtype known, nothing computed); they
are computed when something reads them. Computing a value evaluates every deferred call it depends on: call by
call through cached per-op kernels the first times a structure is seen, then as one compiled program keyed
by the structure (ops, static params, wiring, avals), so a forward and the backward that reads it run as a
single XLA call, as jax.jit(jax.grad(f)) does."""

import contextlib
import functools
import itertools
import operator
import threading
from typing import NamedTuple

import jax
import numpy as np

from vmap._memory import AUTO, auto_chunk, lowerable
from vmap._rows import map_rows
from vmap._shards import replicated

from . import _budget, _fusion, _payback, _store
from ._budget import Jitted
from ._compiled import Program
from ._dtypes import differentiable
from ._host import computed_on_host, host_arrays, host_out_avals, on_host
from ._tracing import is_tracer, tracing
from ._x64 import scoped

# One evaluation at a time: threads reading one deferred graph share its calls, whose results are published (and
# their arguments dropped) under this lock. Reentrant: an op's function may read a Tensor while it is traced.
lock = threading.RLock()
# None: a structure runs as its own program once the time spent running it per op would pay for its compile
# (_payback.py); an int n: from its (n+1)-th sighting on (set_fuse_after, $BATCHED_GRAD_FUSE_AFTER)
FUSE_AFTER = _payback.from_environment()
_seen = {}
_program_cache = {}


class Key(tuple):
    """A structural key: a tuple whose hash is computed once. `intern` returns one object per distinct key, so
    the dictionaries keyed by it (tier counts, compiled programs, kernels) hash it once and compare by identity."""

    def __hash__(self):
        try:
            return self._hash
        except AttributeError:
            self._hash = h = tuple.__hash__(self)
            return h


def hashed_once(record):
    """The NamedTuple class `record` as a Key: hashed once (a decorator)."""
    return type(record.__name__, (record, Key), {"__slots__": (), "__doc__": record.__doc__})


_interned = {}


def intern(parts):
    """The one object equal to `parts` (a tuple, or a record made by hashed_once)."""
    key = parts if isinstance(parts, Key) else Key(parts)
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


def fusing():
    """Whether structures may fuse at all (not inside `unfused`, nor with fusion off)."""
    return _fusing[-1] and _fusion.get_fusion() != "off"


def mix_of_steps(key):
    """A function giving the ops of the structure `key` (_payback.Mix), which the cost model calls once per key."""
    return lambda: _payback.mix_of([step.sig for step in key.steps])


def should_fuse(key, mix, stored=None):
    """Count one more sighting of a structure of the ops `mix` (see _payback.pays_back); whether it runs as its own
    program now: once the time it spent running per op pays for that program's compile, or its load where
    `stored()` says the store holds it (_payback.py), or with a fixed FUSE_AFTER once it has been seen more than that
    many times; never where fusion is off (_fusion.py decides whether it runs whole or in segments)."""
    if not fusing():
        return False
    count = _seen.get(key, 0) + 1
    if len(_seen) > 4096:  # forget one-off structures rather than grow without bound
        _seen.clear()
    _seen[key] = count
    if FUSE_AFTER is not None:
        return count > FUSE_AFTER
    return _payback.pays_back(key, mix, stored)


def set_fuse_after(n):
    """When a structure (deferred forward calls, a backward walk) runs as one compiled program: None (the default)
    once the time spent running it op by op reaches what its compile is estimated to cost, measured in this process
    (or its load, where the store of executables holds it); an int n >= 0: from its (n+1)-th sighting on. Returns
    the previous setting. $BATCHED_GRAD_FUSE_AFTER sets it at import."""
    global FUSE_AFTER
    _payback.check_fuse_after(n)
    previous, FUSE_AFTER = FUSE_AFTER, n
    return previous


def _per_op(calls, key):
    """Run `calls` (topological order) each on its own, counting the time against the structure `key`."""
    start = _payback.clock()
    for call in calls:
        _run(call)
    if len(calls) > 1:
        _payback.note_unfused(key, _payback.clock() - start)


def compile_count():
    """How many kernels have been traced for compilation so far (ops, backward programs, fused evaluations)."""
    return _budget.traces()


@functools.lru_cache(maxsize=4096)
def kernel(op, static):
    """The compiled forward of `op` with `static` (a tuple of (name, value) pairs); JAX caches by avals, and the
    budget bounds what it keeps."""
    return Jitted(functools.partial(op.fn, **dict(static)), name=("kernel", op, static))


class Signature:
    """An op with its static params, applied to operands of given avals, and the avals of its outputs. There is
    one object per distinct (op, static, avals): structural keys made of signatures hash and compare them by
    identity, however large their params."""

    __slots__ = ("op", "static", "avals", "out_avals", "differentiable", "diff_outs", "in_differentiable")

    def __init__(self, op, static, avals, out_avals):
        self.op, self.static, self.avals, self.out_avals = op, static, avals, out_avals
        self.in_differentiable = tuple([differentiable(dtype) for _, dtype in avals])
        self.differentiable = tuple([differentiable(dtype) for _, dtype in out_avals])
        self.diff_outs = tuple([k for k, d in enumerate(self.differentiable) if d])  # the outputs with gradients


_signatures = {}


def signature(op, static, avals, arrays=None):
    """The one Signature of `op` with `static` on operands of `avals` (`arrays`: the operands, where given), its
    output avals from _out_avals."""
    key = (op, static, avals)
    sig = _signatures.get(key)
    if sig is None:
        out_avals = _out_avals(op, static, avals, arrays)
        if len(_signatures) > 8192:
            _signatures.clear()
        sig = _signatures[key] = Signature(op, static, avals, out_avals)
    return sig


def _out_avals(op, static, avals, arrays):
    """The (shape, dtype) of each output of `op` on operands of `avals` (the `arrays`, where given): by its shape rule
    (Op.shapes), its host form run on `arrays`, or its derived form's jaxpr; else from a trace, kept in the store
    across processes."""
    if op.shapes is not None:
        found = op.shapes(avals, **dict(static))
        if found is not None:
            return found
    out = None if arrays is None or op.host is None else on_host(op, arrays, static)
    if out is None:
        out = host_out_avals(op, static, avals)
    if out is not None:
        return tuple([(o.shape, o.dtype) for o in out])
    return _store.remembered("avals", (op, static, avals), lambda: _traced_avals(op, static, avals))


def _traced_avals(op, static, avals):
    """The (shape, dtype) of each output of `op` on operands of `avals`, from jax.eval_shape (a trace)."""
    structs = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in avals]
    out = jax.eval_shape(functools.partial(op.fn, **dict(static)), *structs)
    return tuple([(o.shape, o.dtype) for o in (out if op.multi else (out,))])


class Output(NamedTuple):
    """A reference to output `k` of the call (or graph node) at position `pos` of a structure. A reference to an
    array the structure reads (its frontier) is that array's slot, an int."""

    pos: int
    k: int


class CallStep(NamedTuple):
    """One call of a structure: its Signature, and per argument a reference (an Output of an earlier step, or a
    slot of the frontier)."""

    sig: Signature
    args: tuple


@hashed_once
class StructureKey(NamedTuple):
    """The structural key of deferred calls: their CallSteps, and (slot, shape) of each array mapped by vmap.vmap
    (the signatures fix every other aval)."""

    steps: tuple
    mapped: tuple


# a record from the tuple of its fields, without NamedTuple's Python-level __new__: keys are built at every call
record = tuple.__new__


def read(ref, frontier, results):
    """The value of a reference: a slot of `frontier`, or an Output among `results` (per step, its outputs)."""
    return frontier[ref] if type(ref) is int else results[ref.pos][ref.k]


class Call:
    """One deferred application of an op; `result` (a tuple of arrays) once computed, when `args` is dropped.
    `keep`: when a fused program computes it on the way to another value, keep its result too (it will be
    read: a saved value of a graph walked node by node, or the output of a backward)."""

    __slots__ = ("sig", "op", "args", "result", "created", "keep", "mapped")

    def __init__(self, sig, args, mapped=False):
        self.sig, self.op, self.args, self.result = sig, sig.op, args, None  # op: sig.op, read on every walk
        self.created, self.keep = next(_created), False
        self.mapped = mapped  # depends on a row of a vmap.vmap input


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


def defer(op, static, arrays, mapped=False):
    """The outputs of op(*arrays) as Pending values (shape errors raise here, as an eager call would); `mapped`:
    some array depends on a row of a vmap.vmap input."""
    call = Call(signature(op, static, tuple([(a.shape, a.dtype) for a in arrays]), arrays), arrays, mapped)
    return [Pending(call, k, shape, dtype) for k, (shape, dtype) in enumerate(call.sig.out_avals)]


def keep(value):
    """Mark a value that will be read after the fused program that computes it on the way to another one."""
    if type(value) is Pending:
        value.call.keep = True


def computable(value):
    """Whether a Pending value can be computed now, outside any trace: no call it needs reads a traced value or a
    row of vmap.vmap's inputs (a transform's internal tensor, still alive, may hold such a value)."""
    seen, stack = set(), [value.call]
    while stack:
        call = stack.pop()
        if call.op is MAPPED or call.args is None:
            return False
        for a in call.args:
            if type(a) is Pending:
                if a.call.result is None and a.call not in seen:
                    seen.add(a.call)
                    stack.append(a.call)
            elif is_tracer(a):
                return False
    return True


def materialize(value):
    """The array of a value that may be Pending (computing it and every deferred call it needs)."""
    if type(value) is not Pending:
        return value
    call = value.call
    result = call.result
    if result is None:
        with lock:
            if call.result is None:  # another thread may have computed it meanwhile
                _evaluate(call)
            result = call.result
    return result[value.k]


class NeedsTracing(Exception):
    """A value that depends on a mapped input of vmap.vmap was read while its function ran (`.item()`, NumPy, a
    branch on values): vmap.vmap then runs the function again under jax.vmap, with traced values."""


class _MappedInput:
    """The op of a vmap.vmap input's placeholder: one row's shape and dtype, its rows given at evaluation."""

    name, whole_backward, multi = "mapped_input", False, False


MAPPED = _MappedInput()


def mapped_input(shape, dtype):
    """A placeholder for one row of a batched input of vmap.vmap."""
    shape = tuple(shape)
    call = Call(Signature(MAPPED, (), (), ((shape, dtype),)), (), mapped=True)
    return Pending(call, 0, shape, dtype)


@scoped
def _evaluate(target):
    calls, frontier, key, _ = _structure([target])
    if tracing() and _run_untraced(calls):  # in a trace: what reads no tracer is computed first, eagerly
        if target.result is not None:
            return
        calls, frontier, key, _ = _structure([target])
    if len(calls) > 1:
        outputs = {c for c in calls if c.keep or c is target}
        # a backward program fuses with the calls it reads
        if any(c.op.whole_backward for c in calls) or (
            _fusion.allows(len(calls))
            and should_fuse(key, mix_of_steps(key), lambda: _fused_program(calls, key, outputs)[0].stored(frontier))
        ):
            _run_fused(calls, frontier, key, outputs)
            return
        limit = _fusion.segment_size()
        if limit is not None and len(calls) > limit:
            _run_segments(calls, target, limit)
            return
    _per_op(calls, key)  # topological order: every call's pending args are computed before it


def _fused_program(calls, key, outputs):
    """The Program of a structure's `calls` returning the results of `outputs`, and which of the calls those are."""
    kept = tuple([i for i, c in enumerate(calls) if c in outputs])
    make = lambda: functools.partial(_run_kept, steps=key.steps, kept=kept)  # noqa: E731
    return program_for(intern((key, kept)), make, mix_of_steps(key)), kept


def _run_fused(calls, frontier, key, outputs):
    """The `calls` of a structure as one compiled program. Only the results of `outputs` leave it: XLA fuses the
    rest away."""
    program, kept = _fused_program(calls, key, outputs)
    if not program.ready_or_compiling(frontier) and not any(c.op.whole_backward for c in calls):
        for call in calls:  # per-op kernels until the fused program is ready
            _run(call)
        return
    outs, start = program(*frontier), 0
    for i in kept:
        call = calls[i]
        n_out = len(call.sig.out_avals)
        call.result, call.args = outs[start : start + n_out], None
        start += n_out


def _run_segments(calls, target, limit):
    """The `calls` of a structure too large to fuse whole (topological order), in segments of at most `limit`
    consecutive calls, each evaluated as a structure of its own; a segment returns the results that later
    segments read, the target's and those marked `keep`."""
    last_read = {}
    for i, call in enumerate(calls):
        for a in call.args:
            if type(a) is Pending:
                last_read[a.call] = i
    for end in range(limit, len(calls) + limit, limit):
        outputs = {c for c in calls[end - limit : end] if c.keep or c is target or last_read.get(c, -1) >= end}
        segment, frontier, key, _ = _structure(list(outputs))
        if len(segment) > 1 and should_fuse(
            key,
            mix_of_steps(key),
            lambda: _fused_program(segment, key, outputs)[0].stored(frontier),  # noqa: B023
        ):
            _run_fused(segment, frontier, key, outputs)
        else:
            _per_op(segment, key)


def _run(call):
    """One deferred call, by its op's host form where it has one that applies (no compile for a new shape), else by
    its kernel."""
    args = [a.call.result[a.k] if type(a) is Pending else a for a in call.args]
    op = call.op
    result = on_host(op, args, call.sig.static)
    if result is None:
        out = kernel(op, call.sig.static)(*args)
        result = out if op.multi else (out,)
    call.result, call.args = result, None


def _run_untraced(calls):
    """Inside a trace: run now, outside it, the calls (in topological order) that read no tracer, as their results
    may be read after it (a captured tensor's deferred value; _tracing.py). Whether there were any."""
    traced = set()
    with jax.ensure_compile_time_eval():
        for call in calls:
            if any([is_tracer(a) or (type(a) is Pending and a.call in traced) for a in call.args]):
                traced.add(call)
            else:
                _run(call)
    return len(traced) < len(calls)


def evaluate_mapped(values, mapped, chunk_size=None, shards=None):
    """vmap.vmap's evaluation: the `values` (Pending or arrays) its function returned, for every row of the
    mapped inputs (`mapped`: {placeholder call: array with the rows on axis 0}) in one compiled program; with
    `shards`, each device maps its own rows (vmap/_shards.py) and the other arrays are copied to every device;
    chunk_size="auto" is chosen once per structure from the compiled program's memory (vmap/_memory.py)."""
    with lock:
        targets = [v.call for v in values if _uncomputed(v)]
        _, frontier, key, outs = _structure(targets, mapped, values)
        if shards is None and chunk_size != AUTO and not should_fuse(key, mix_of_steps(key)):
            rows = _rows_on_host(key, frontier, outs)
            if rows is not None:
                return rows
        if shards is not None:
            frontier = [replicated(a, shards) for a in frontier]

        def program(chunk):
            return program_for(
                intern((key, outs, chunk, shards)),
                lambda: functools.partial(
                    _run_mapped,
                    steps=key.steps,
                    batched=[i for i, _ in key.mapped],
                    outs=outs,
                    chunk_size=chunk,
                    shards=shards,
                ),
                mix_of_steps(key),
            )

        if chunk_size == AUTO:
            rows = key.mapped[0][1][0] // (1 if shards is None else shards.count)  # a mapped array's, a device's
            chunk_size = auto_chunk(
                ("vmap", key, outs, shards), lambda k: program(k).plain.jit.lower(*lowerable(frontier)).compile(), rows
            )
        return program(chunk_size)(*frontier)


def _rows_on_host(key, frontier, outs):
    """The outputs `outs` of a vmap.vmap structure `key` on `frontier`, computed a row at a time by its ops' host forms
    (rows of its mapped arrays, NumPy views, and the rest whole), stacked: the per-op tier of a mapped structure, which
    compiles nothing. None where it does not apply (an array not on the host, no rows, an op without a host form) or
    where its rows, at the time the first ones took, would cost more than the structure's program is estimated to
    (_payback.within; not with a fixed FUSE_AFTER, whose tiers do not depend on timing); the structure's program
    computes them then."""
    arrays = host_arrays(frontier)
    size = key.mapped[0][1][0] if key.mapped else 0
    if arrays is None or size == 0:
        return None
    batched, mix = {i for i, _ in key.mapped}, mix_of_steps(key)
    start, rows = _payback.clock(), [[] for _ in outs]
    for r in range(size):
        elapsed = _payback.clock() - start
        if r and FUSE_AFTER is None and not _payback.within(key, mix, elapsed / r * size):
            _payback.note_unfused(key, elapsed)  # the rest would cost more than the program: it computes them all
            return None
        values = [a[r] if i in batched else a for i, a in enumerate(arrays)]
        results = []
        for sig, args in key.steps:
            out = computed_on_host(sig.op, [read(ref, values, results) for ref in args], dict(sig.static))
            if out is None:
                return None
            results.append(out if sig.op.multi else (out,))
        for found, ref in zip(rows, outs):
            found.append(read(ref, values, results))
    _payback.note_unfused(key, _payback.clock() - start)
    return [np.stack(found) for found in rows]


def program_for(key, make_fn, mix):
    """The compiled Program of a structure of the ops `mix` (a _payback.Mix, or a function giving it), made by
    `make_fn()` the first time (at most 1024 kept, like kernels; the budget bounds their executables). The key names
    it in the store of executables: it fixes what the program computes."""
    program = _program_cache.get(key)
    if program is None:
        if len(_program_cache) > 1024:
            _program_cache.clear()
        program = _program_cache[key] = Program(make_fn(), key, mix() if callable(mix) else mix)
    return program


def _uncomputed(value):
    return type(value) is Pending and value.call.result is None and value.call.op is not MAPPED


def _structure(targets, mapped=None, outputs=()):
    """The uncomputed calls the `targets` need, in topological order; the arrays they read, each once (concrete
    ones, and the rows of vmap.vmap's inputs when `mapped` is given); the structural key: per call its signature
    and argument wiring, then which arrays are mapped and their shapes; and where each of `outputs` is found."""
    needed, stack = set(targets), list(targets)
    while stack:
        call = stack.pop()
        if call.op is MAPPED:
            raise NeedsTracing(call)
        for a in call.args:
            if type(a) is Pending and a.call.result is None and a.call not in needed:
                if a.call.op is MAPPED and mapped is not None and a.call in mapped:
                    continue
                needed.add(a.call)
                stack.append(a.call)
    order = sorted(needed, key=_creation)  # a call's arguments were made before it: creation order is topological
    index = {call: i for i, call in enumerate(order)}
    frontier, slots, batched = [], {}, []

    def ref(a):  # a value no call of `order` computes
        is_mapped = False
        if type(a) is Pending:
            call = a.call
            if call.result is not None:
                a = call.result[a.k]
            elif mapped is None or call not in mapped:  # an outer vmap.vmap's row, returned as it is
                raise NeedsTracing(call)
            else:
                a, is_mapped = mapped[call], True
        # an array read twice takes one slot, but a 0-d one (a number, a shared constant) its own: the key must
        # not depend on which numbers happen to be equal; an array both mapped and read whole takes two
        slot = slots.get((id(a), is_mapped)) if a.ndim else None
        if slot is None:
            slot = slots[(id(a), is_mapped)] = len(frontier)
            frontier.append(a)
            if is_mapped:
                batched.append(slot)
        return slot

    def arg(a):
        return record(Output, (index[a.call], a.k)) if type(a) is Pending and a.call in index else ref(a)

    steps = tuple([record(CallStep, (call.sig, tuple([arg(a) for a in call.args]))) for call in order])
    outs = tuple([arg(v) for v in outputs])
    key = intern(StructureKey(steps, tuple([(i, frontier[i].shape) for i in batched])))
    return order, frontier, key, outs


def run_steps(frontier, steps):
    """The outputs of each CallStep of `steps` in turn (per step, a tuple), reading `frontier` and earlier ones."""
    results = []
    for sig, args in steps:
        out = sig.op.fn(*[read(r, frontier, results) for r in args], **dict(sig.static))
        results.append(out if sig.op.multi else (out,))
    return results


def _run_kept(*frontier, steps, kept):
    """The calls of a structure, traced into one program; returns the outputs of the `kept` ones in order."""
    results = run_steps(frontier, steps)
    return tuple(o for i in kept for o in results[i])


def _run_mapped(*frontier, steps, batched, outs, chunk_size, shards):
    """The calls of a structure for every row of the mapped arrays (jax.vmap, or lax.map in chunks; on each
    device's own rows with `shards`)."""

    unbatched = [i for i in range(len(frontier)) if i not in batched]

    def row(*args):
        values = [None] * len(frontier)
        for i, v in zip(unbatched + list(batched), args):
            values[i] = v
        results = run_steps(values, steps)
        return tuple(read(o, values, results) for o in outs)

    shared = tuple(frontier[i] for i in unbatched)
    return map_rows(row, tuple(frontier[i] for i in batched), chunk_size, shards, shared=shared)
