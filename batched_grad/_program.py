"""Whole-graph backward programs. One walk of the graph gives its structural key (ops, static params, avals, edges,
saved values, and the wiring of the deferred forward calls that compute them), not object identities. A graph made
only of table ops then runs as one compiled XLA program: its forward calls and its backward together, as
jax.jit(jax.grad(f)) does."""

import functools

import jax
import jax.numpy as jnp

from vmap._memory import lowerable
from vmap._rows import map_rows
from vmap._shards import replicated

from . import _basis, _graph, _lazy
from ._graph import AccumulateGrad, SavedValue
from ._host import unshared
from ._lazy import Pending, intern
from ._meta import MetaValue
from ._ops._core import Op, OpNode, _read_by, _vjp_spec, apply, reads_of, vjp_reads
from ._tensor import Tensor
from ._tracing import is_tracer, tracing

LEAF = "leaf"  # the key entry of a leaf (an AccumulateGrad node without hooks)


class Walk:
    """A depth-first walk from the roots. `nodes`: every node reached, each after all the nodes its edges lead to.
    `key`: None when some node is not a plain table op or a leaf without hooks (or in anomaly mode); else the
    structure, whose values are `frontier`, the arrays the program reads. `direct`: the forward can be computed
    now (no value depends on a row of a vmap.vmap input)."""

    __slots__ = ("nodes", "key", "frontier", "direct")


class _Encoder:
    """Refs to the values a walk reads: (i, k) for output k of the deferred call of node i (a call of the walk),
    (slot,) for an array of the frontier. Every read of an array takes a slot of its own (except a call's read of
    the operand its node saves), so that the key does not depend on which arrays happen to be the same object."""

    def __init__(self):
        self.calls, self.frontier, self.direct = {}, [], True

    def ref(self, value):
        if type(value) is Pending:
            call = value.call
            i = self.calls.get(call)
            if i is not None:
                return i, value.k
            if call.result is not None:
                value = call.result[value.k]
            elif call.mapped:  # stays deferred: only the recorded program op can take it
                self.direct = False
            else:  # a deferred value from outside the walk (a detached one): computed on its own
                value = _lazy.materialize(value)
        elif type(value) is MetaValue:  # no values to compile a program for: the program op finds the shapes
            self.direct = False
        self.frontier.append(value)
        return (len(self.frontier) - 1,)

    def traced(self, args):
        """Whether a deferred call's arguments read a traced value: a tracer, the result of a call the program computes,
        or a value already computed in the trace."""
        for a in args:
            if type(a) is Pending:
                result = a.call.result
                if (a.call in self.calls) if result is None else is_tracer(result[a.k]):
                    return True
            elif is_tracer(a):
                return True
        return False

    def node(self, node, i, index):
        """The key entry of node `i` (its edges lead to nodes of `index`), or None if it cannot be fused: LEAF, or
        (signature, edge refs, saved refs, forward) with forward (argument refs, keep) while its call is deferred."""
        kind = type(node)
        if kind is AccumulateGrad:
            return None if node.variable._hooks or node.node_hooks else LEAF
        if kind is not OpNode or node.tensor_pre_hooks or node.retained or node.node_hooks:
            return None  # Python-level backward or hooks: the per-node engine runs it
        ref, saved, args = self.ref, [], None
        call = node.call
        call_args = None if call is None else call.args  # before its result: another thread sets the result first
        # the program computes this node's forward call too; inside a trace only one that reads a traced value (its
        # result is a tracer either way), not one whose result may be read after the trace (_tracing.py)
        if call_args is not None and call.result is None and (not tracing() or self.traced(call_args)):
            self.direct = self.direct and not call.mapped
            self.calls[call], args = i, []
        for s, a in zip(node.saved, call_args if args is not None else node.saved):
            if type(s) is SavedValue:
                value = s.value  # before `freed`: another thread's release marks it freed first
                if s.freed or s.counter.value != s.version:
                    return None  # the per-node engine raises torch's error if the node runs
                s = value
            r = None if s is None else ref(s)
            saved.append(r)
            if args is not None:
                args.append(r if a is s and r is not None else ref(a))
        if node.guards and any(counter.value != version for counter, version, _ in node.guards):
            return None  # an in-place op changed a result torch's backward reads: the per-node engine raises
        forward = None if args is None else (tuple(args), call.keep)
        edges = tuple([None if e is None else (index[e.node], e.output_nr) for e in node.edges])
        return node.sig, edges, tuple(saved), forward


def walk(root_nodes, roots, root_grads, captures, accumulate, batch):
    """Walk the graph from `root_nodes` (see Walk); `batch` is the batch's program key (vmap._batching) or None.
    The program does not read a root cotangent that is a block of the identity (in `batch`)."""
    nodes, index, seen = [], {}, set()
    encoder = None if _graph._anomaly["enabled"] else _Encoder()
    entries = []
    for root in root_nodes:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(root.edges))]
        while stack:
            node, edges = stack[-1]
            for e in edges:
                if e is not None and e.node not in seen:
                    seen.add(e.node)
                    stack.append((e.node, iter(e.node.edges)))
                    break
            else:  # every node this one leads to is in `nodes`
                stack.pop()
                index[node] = i = len(nodes)
                nodes.append(node)
                if encoder is not None:
                    entry = encoder.node(node, i, index)
                    if entry is None:
                        encoder = None
                    entries.append(entry)
    w = Walk()
    w.nodes, w.key, w.frontier, w.direct = nodes, None, (), False
    if encoder is not None:
        basis = (None,) * len(root_grads) if batch is None else batch.basis
        grads = [encoder.ref(unshared(g._v)) if b is None else None for g, b in zip(root_grads, basis)]
        w.key = intern(
            (
                tuple(entries),
                tuple([(index[e.node], e.output_nr) for e in roots]),
                tuple(grads),
                tuple([(g._v.shape, g._v.dtype) for g in root_grads]),
                tuple([(index.get(e.node), e.output_nr) for e in captures]),
                accumulate,
                batch,
            )
        )
        w.frontier, w.direct = encoder.frontier, encoder.direct
    return w


class Template:
    """What a key implies, derived once: the backward (`plan`: the key of `_program`), the nodes whose backward
    runs (`runs`, in order) and the leaves that get a gradient, what each capture reads, and for the fused
    program the forward calls (`forward`), where the backward's saved values and root cotangents are found, and
    which forward results it returns (`kept`); `shards`: the devices the rows of its batch are split over, or None."""

    __slots__ = ("plan", "runs", "leaves", "captured", "forward", "reads", "kept", "program", "shards")


@functools.lru_cache(maxsize=1024)
def template(key):
    entries, roots, grads, _, captures, accumulate, batch = key
    n = len(entries)
    needed = None
    if captures:  # only the nodes from which a captured node is reachable run
        needed = [False] * n
        wanted = {i for i, _ in captures}
        for i, entry in enumerate(entries):  # a node comes after the nodes its edges lead to
            needed[i] = i in wanted or (entry is not LEAF and any([e is not None and needed[e[0]] for e in entry[1]]))
    reached = [0] * n  # per node, a bit for each output that gets a cotangent
    for i, k in roots:
        reached[i] |= 1 << k
    steps, runs, leaves = [], [], []
    for i in reversed(range(n)):
        entry = entries[i]
        if not reached[i] or (needed is not None and not needed[i]):
            continue
        if entry is LEAF:
            if accumulate:
                leaves.append(i)
            continue
        sig, edges, saved, _ = entry
        ct_mask = tuple([reached[i] >> k & 1 == 1 for k in sig.diff_outs])  # the outputs with a cotangent
        if True not in ct_mask:
            continue
        want = tuple([j for j, e in enumerate(edges) if e is not None])  # the operands that get a gradient
        if sig.op.reads is not None:  # a recorded backward: only the operands its outputs with a cotangent read
            want = _read_by(want, reads_of(sig), [k for k, m in zip(sig.diff_outs, ct_mask) if m])
        targets = tuple([edges[j] for j in want])
        if needed is not None and not any([needed[t] for t, _ in targets]):
            continue
        for t, k in targets:
            reached[t] |= 1 << k
        steps.append((i, _vjp_spec(sig, tuple([r is not None for r in saved]), want, ct_mask), targets))
        runs.append(i)
    captured = tuple([c if c[0] is not None and reached[c[0]] >> c[1] & 1 else None for c in captures])
    t = Template()
    t.plan = intern((tuple(steps), roots, captured, tuple(leaves), batch))
    t.runs, t.leaves, t.captured, t.program = tuple(runs), tuple(leaves), captured, None
    t.shards = None if batch is None else batch.shards
    # the fused program: forward calls in walk order (a call's deferred arguments come from calls before it)
    forward = {i: e[3] for i, e in enumerate(entries) if e is not LEAF and e[3] is not None}
    step_of = {i: j for j, i in enumerate(forward)}

    def local(r):
        return r if len(r) == 1 else (step_of[r[0]], r[1])

    t.forward = tuple([(entries[i][0], tuple([local(r) for r in args])) for i, (args, _) in forward.items()])
    t.reads = tuple(
        [local(r) for i in runs for r in entries[i][2] if r is not None] + [local(r) for r in grads if r is not None]
    )
    t.kept = tuple([(i, step_of[i]) for i, (_, keep) in forward.items() if keep])
    return t


def _fused(*frontier, t):
    """The traced fused program: the forward calls, then the backward reading their values."""
    results = _lazy.run_steps(frontier, t.forward)
    args = [frontier[r[0]] if len(r) == 1 else results[r[0]][r[1]] for r in t.reads]
    return tuple(o for _, j in t.kept for o in results[j]) + _program(*args, key=t.plan)


def _program(*args, key, vjp=_basis.vjp):
    """The traced backward: route cotangents through each step's VJP (`vjp(saved, cotangents, spec)`), return
    captured and leaf grads."""
    steps, roots, captures, leaves, batch = key
    if batch is not None:  # root cotangents carry a leading batch axis; saved values do not
        n = sum(sum(spec.saved_mask) for _, spec, _ in steps)
        row_key = intern(key[:4] + (None,))

        def row(index, *cts):  # the rows of the dense cotangents, and the basis rows at `index`
            cts = iter(cts)
            rows = [
                next(cts) if b is None else _basis.BasisRow(index, b.offset, jnp.ones(b.row_shape, b.dtype))
                for b in batch.basis
            ]
            return _program(*args[:n], *rows, key=row_key, vjp=vjp)

        return map_rows(row, (jnp.arange(batch.padded),) + tuple(args[n:]), batch.chunk_size, batch.shards)
    args = iter(args)
    saved = [[next(args) for s in spec.saved_mask if s] for _, spec, _ in steps]
    buffers = {}

    def add(slot, value):
        buffers[slot] = value if slot not in buffers else _basis.add(buffers[slot], value)

    for slot in roots:
        add(slot, next(args))
    for (pos, spec, targets), values in zip(steps, saved):
        cts = [buffers[(pos, k)] for k, m in zip(spec.sig.diff_outs, spec.ct_mask) if m]
        for slot, g in zip(targets, vjp(values, cts, spec)):
            add(slot, g)
    outs = [buffers[c] for c in captures if c is not None] + [buffers[(pos, 0)] for pos in leaves]
    return tuple([_basis.dense(o) for o in outs])


def program_reads(key):
    """Per output of the backward program of `key`, a bitmask of its arguments it reads (the saved values of its
    steps in order, then its root cotangents), found from the steps' VJPs."""
    steps, roots, captures, leaves, batch = key
    bases = (None,) * len(roots) if batch is None else batch.basis
    arg = sum([sum(spec.saved_mask) for _, spec, _ in steps])
    reads = {}
    for slot, basis in zip(roots, bases):
        reads[slot] = reads.get(slot, 0) | (0 if basis is not None else 1 << arg)  # a block of the identity: none
        arg += basis is None
    first = 0  # the step's first saved value among the arguments
    for pos, spec, targets in steps:
        n = sum(spec.saved_mask)
        ct_reads = [reads[(pos, k)] for k, m in zip(spec.sig.diff_outs, spec.ct_mask) if m]
        for slot, mask in zip(targets, vjp_reads(spec)):  # mask: over the VJP's saved values, then cotangents
            read = (mask & ((1 << n) - 1)) << first
            for i, ct in enumerate(ct_reads):
                if mask >> (n + i) & 1:
                    read |= ct
            reads[slot] = reads.get(slot, 0) | read
        first += n
    return tuple([reads[c] for c in captures if c is not None] + [reads[(pos, 0)] for pos in leaves])


PROGRAM = Op(
    "backward_program", _program, multi=True, backward_name="BackwardProgram", program=True, reads=program_reads
)


def ready(w, create_graph):
    """Whether a walk's fused program can run now: it is compiled, or it is recorded as an op (create_graph) or
    computed later (a vmap.vmap row); else its compile is started in the background and the per-node tier answers."""
    if create_graph or not w.direct:
        return True
    return _with_program(template(w.key), w.key).program.ready_or_compiling(w.frontier)


def rebatched(w, batch):
    """The walk `w` with the batch of its key replaced by `batch` (a ProgramBatch): its structure run otherwise."""
    v = Walk()
    v.nodes, v.frontier, v.direct = w.nodes, w.frontier, w.direct
    v.key = intern(w.key[:-1] + (batch,))
    return v


def compile_now(w, root_grads, create_graph):
    """The program of the walk `w` compiled (not run), for its memory analysis: its fused program, whose first call
    then reuses it; or where the backward is recorded as one op (create_graph, a vmap.vmap row), that backward."""
    if create_graph or not w.direct:
        t, nodes = template(w.key), w.nodes
        saved = [s.value if type(s) is SavedValue else s for i in t.runs for s in nodes[i].saved if s is not None]
        grads = [g._v for g, r in zip(root_grads, w.key[2]) if r is not None]
        return jax.jit(functools.partial(_program, key=t.plan)).lower(*lowerable(saved + grads)).compile()
    t = _with_program(template(w.key), w.key)
    return t.program.plain.jit.lower(*lowerable(_placed(w.frontier, t.shards))).compile()


def _with_program(t, key):
    """The template `t` of `key`, with its fused program (made once)."""
    if t.program is None:
        t.program = _lazy.compiled(key, lambda: functools.partial(_fused, t=t))
    return t


def _placed(frontier, shards):
    """The arrays a program reads, copied to every device of `shards` (once: vmap/_shards.py) where its batch's
    rows are split over devices."""
    return frontier if shards is None else [replicated(a, shards) for a in frontier]


def run(w, root_grads, create_graph, release):
    """Run a walk's backward as one compiled program: (captured gradients, leaves, their gradients). With
    `create_graph` it is recorded as one differentiable op; with `release`, the saved values are freed."""
    t, nodes = template(w.key), w.nodes
    if create_graph or not w.direct:
        saved = [
            (s.unpack(True) if create_graph else s.array()) if type(s) is SavedValue else s
            for i in t.runs
            for s in nodes[i].saved
            if s is not None
        ]
        grads = [g for g, r in zip(root_grads, w.key[2]) if r is not None]  # not the blocks of the identity
        outs = iter(apply(PROGRAM, saved + grads, key=t.plan))
    else:
        _with_program(t, w.key)  # `t` found above: a key's lookup hashes the whole structure
        with _lazy.lock:  # deferred results are published under it
            outs = iter(t.program(*_placed(w.frontier, t.shards)))
            for i, _ in t.kept:  # forward results read later (a loss printed after its backward)
                results, call = tuple([next(outs) for _ in nodes[i].sig.out_avals]), nodes[i].call
                if call is not None and call.result is None:  # not computed, nor released, by another thread
                    call.result, call.args = results, None
        outs = iter([Tensor._wrap(o) for o in outs])
    captured = [None if c is None else next(outs) for c in t.captured]
    if release:
        for i in t.runs:
            nodes[i].release()
    return captured, [nodes[i] for i in t.leaves], list(outs)
