"""Whole-graph backward programs. One walk of the graph gives its structural key (ops, static params, avals, edges,
saved values, and the wiring of the deferred forward calls that compute them), not object identities. A graph made
only of table ops then runs as one compiled XLA program: its forward calls and its backward together, as
jax.jit(jax.grad(f)) does.

References to values (`_lazy.Output` or a frontier slot) and the records below make up the keys: a walk's WalkKey
(one NodeEntry per node), derived once per key into a Template whose BackwardPlan is the traced backward's key."""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from vmap._memory import lowerable
from vmap._rows import map_rows
from vmap._shards import replicated

from . import _basis, _graph, _lazy, _payback
from ._graph import AccumulateGrad
from ._host import computed_on_host, unshared
from ._lazy import CallStep, Output, Pending, hashed_once, intern, read, record
from ._meta import MetaValue
from ._ops._core import VJP, Op, OpNode, _read_by, _vjp_spec, apply, reads_of, vjp_dependencies, vjp_links
from ._saved import SavedValue
from ._tensor import Tensor
from ._tracing import is_tracer, tracing


class ForwardCall(NamedTuple):
    """The deferred forward call of a node that the fused program computes: a reference per argument; `keep`: its
    results are read after the program (they are returned too)."""

    args: tuple
    keep: bool


class NodeEntry(NamedTuple):
    """A node of a walk's key: its Signature; per operand an Output (node position, output) its edge leads to, or
    None; per saved value a reference, or None; its ForwardCall while its call is deferred, else None."""

    sig: object
    edges: tuple
    saved: tuple
    forward: ForwardCall | None


LEAF = NodeEntry(None, (), (), None)  # the entry of a leaf (an AccumulateGrad node without hooks)


@hashed_once
class WalkKey(NamedTuple):
    """The structure of a backward: `entries` (a NodeEntry per node, each after the nodes its edges lead to); the
    `roots` and `captures` (Outputs; a capture's position is None where the walk does not reach it); per root
    cotangent its frontier slot, or None for a block of the identity (`grads`), and the avals of all of them;
    whether leaves accumulate; the batch (vmap._batching.ProgramBatch) or None."""

    entries: tuple
    roots: tuple
    grads: tuple
    grad_avals: tuple
    captures: tuple
    accumulate: bool
    batch: object


class Walk(NamedTuple):
    """A depth-first walk from the roots. `nodes`: every node reached, each after all the nodes its edges lead to.
    `key`: None when some node is not a plain table op or a leaf without hooks (or in anomaly mode); else its
    WalkKey, whose values are `frontier`, the arrays the program reads. `direct`: the forward can be computed now
    (no value depends on a row of a vmap.vmap input)."""

    nodes: list
    key: WalkKey | None
    frontier: list
    direct: bool


class _Encoder:
    """References to the values a walk reads: Output(i, k) for output k of the deferred call of node i (a call of
    the walk), a slot for an array of the frontier. Every read of an array takes a slot of its own (except a call's
    read of the operand its node saves), so that the key does not depend on which arrays are the same object."""

    def __init__(self):
        self.calls, self.frontier, self.direct = {}, [], True
        self.tracing = tracing()  # read once: a walk neither enters nor leaves a trace

    def ref(self, value):
        if type(value) is Pending:
            call = value.call
            i = self.calls.get(call)
            if i is not None:
                return record(Output, (i, value.k))
            if call.result is not None:
                value = call.result[value.k]
            elif call.mapped:  # stays deferred: only the recorded program op can take it
                self.direct = False
            else:  # a deferred value from outside the walk (a detached one): computed on its own
                value = _lazy.materialize(value)
        elif type(value) is MetaValue:  # no values to compile a program for: the program op finds the shapes
            self.direct = False
        self.frontier.append(value)
        return len(self.frontier) - 1

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
        """The NodeEntry of node `i` (its edges lead to nodes of `index`), or None if it cannot be fused."""
        kind = type(node)
        if kind is AccumulateGrad:
            return None if node.variable._hooks or node.node_hooks else LEAF
        if not (kind is OpNode or isinstance(node, OpNode)) or not _fusible(node):
            return None
        call = node.call
        call_args = None if call is None else call.args  # before its result: another thread sets the result first
        # the program computes this node's forward call too; inside a trace only one that reads a traced value (its
        # result is a tracer either way), not one whose result may be read after the trace (_tracing.py)
        fused_call = call_args is not None and call.result is None and (not self.tracing or self.traced(call_args))
        if fused_call:
            self.direct = self.direct and not call.mapped
            self.calls[call] = i
        refs = self._saved_refs(node, call_args if fused_call else None)
        if refs is None:
            return None
        saved, args = refs
        forward = record(ForwardCall, (tuple(args), call.keep)) if fused_call else None
        edges = tuple([None if e is None else record(Output, (index[e.node], e.output_nr)) for e in node.edges])
        return record(NodeEntry, (node.sig, edges, tuple(saved), forward))

    def _saved_refs(self, node, call_args):
        """(the refs of the node's saved values, the refs of its forward call's `call_args` where the program
        computes that call, else None); None if a saved value keeps the node out of the program."""
        ref, saved, args = self.ref, [], [] if call_args is not None else None
        for s, a in zip(node.saved, call_args if call_args is not None else node.saved):
            if type(s) is SavedValue:
                value = s.value  # before `freed`: another thread's release marks it freed first
                if s.packed is not None:
                    return None  # saved under saved_tensors_hooks: the per-node engine unpacks it
                if s.stale():
                    return None  # the per-node engine raises torch's error if the node runs
                s = value
            r = None if s is None else ref(s)
            saved.append(r)
            if args is not None:
                args.append(r if a is s and r is not None else ref(a))
        return saved, args


def _fusible(node):
    """Whether an OpNode can be part of a fused program: a table op without hooks or retained gradients whose results
    torch's backward reads were not changed in place nor packed by saved-tensor hooks (else the per-node engine runs
    it, and raises torch's error where there is one), nor an op whose gradients may refuse a second derivative
    (Op.second_order: the per-node engine joins them to torch's error node)."""
    if node.tensor_pre_hooks or node.retained or node.node_hooks or node.sig.op.second_order is not None:
        return False
    for s in node.saved_results:
        if s.counter.value != s.version or s.packed is not None:  # packed: the per-node engine unpacks it
            return False
    return True


def plain(root_nodes):
    """Whether every node reached from `root_nodes` is a table op or a leaf that a fused program can run (see
    _Encoder.node), outside anomaly mode: a backward through them runs no user code (no hook, custom Function or
    saved-tensor hook), so one call over many rows of cotangents cannot be told from a call per row."""
    if _graph._anomaly["enabled"]:
        return False
    for node in _topological(root_nodes)[0]:
        if type(node) is AccumulateGrad:
            if node.variable._hooks or node.node_hooks:
                return False
        elif not isinstance(node, OpNode) or not _fusible(node) or not _plain_saved(node):
            return False
    return True


def _plain_saved(node):
    for s in node.saved:
        if type(s) is SavedValue and (s.packed is not None or s.stale()):
            return False
    return True


def _topological(root_nodes):
    """Every node reached from `root_nodes`, each after all the nodes its edges lead to; the position of each."""
    nodes, index, seen = [], {}, set()
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
                index[node] = len(nodes)
                nodes.append(node)
    return nodes, index


def walk(root_nodes, roots, root_grads, captures, accumulate, batch):
    """Walk the graph from `root_nodes` (see Walk); `batch` is the batch's ProgramBatch (vmap._batching) or None.
    The program does not read a root cotangent that is a block of the identity (in `batch`)."""
    nodes, index = _topological(root_nodes)
    # a sparse root gradient (of a leaf, for its AccumulateGrad) has no array a program could read
    if _graph._anomaly["enabled"] or any(g._sparse_forms is not None for g in root_grads):
        return Walk(nodes, None, (), False)
    encoder, entries = _Encoder(), []
    for i, node in enumerate(nodes):
        entry = encoder.node(node, i, index)
        if entry is None:
            return Walk(nodes, None, (), False)
        entries.append(entry)
    basis = (None,) * len(root_grads) if batch is None else batch.basis
    grads = [encoder.ref(unshared(g._v)) if b is None else None for g, b in zip(root_grads, basis)]
    fields = (
        tuple(entries),
        tuple([record(Output, (index[e.node], e.output_nr)) for e in roots]),
        tuple(grads),
        tuple([(g._v.shape, g._v.dtype) for g in root_grads]),
        tuple([record(Output, (index.get(e.node), e.output_nr)) for e in captures]),
        accumulate,
        batch,
    )
    return record(Walk, (nodes, intern(record(WalkKey, fields)), encoder.frontier, encoder.direct))


class Step(NamedTuple):
    """One node's VJP in a backward: the node's position, its VjpSpec, and the Outputs its gradients add into."""

    node: int
    spec: object
    targets: tuple


@hashed_once
class BackwardPlan(NamedTuple):
    """The key of a traced backward (traced_backward): its Steps in order, the root Outputs (whose cotangents are
    its last arguments), the captured Outputs (None for one not reached) and the leaves' positions it returns
    gradients of, and the batch (ProgramBatch) or None."""

    steps: tuple
    roots: tuple
    captures: tuple
    leaves: tuple
    batch: object


class Template:
    """What a WalkKey implies, derived once: the BackwardPlan (with the leaves that get a gradient and what each
    capture reads), the nodes whose backward runs (`runs`, in order), and for the fused program the forward CallSteps
    (`forward`), where the backward's saved values and root cotangents are found (`reads`), and which forward
    results it returns (`kept`: (node, step) pairs); `shards`: the devices the rows of its batch are split over,
    or None; `fused`: the compiled Program of the forward and backward, made at its first use."""

    __slots__ = ("plan", "runs", "forward", "reads", "kept", "shards", "fused")

    def __init__(self, plan, runs, forward, reads, kept):
        self.plan, self.runs = plan, runs
        self.forward, self.reads, self.kept = forward, reads, kept
        self.shards = None if plan.batch is None else plan.batch.shards
        self.fused = None


def _needed(entries, captures):
    """Per node, whether a captured node is reachable from it (only those run), or None without captures."""
    if not captures:
        return None
    needed, wanted = [False] * len(entries), {c.pos for c in captures}
    for i, entry in enumerate(entries):  # a node comes after the nodes its edges lead to
        needed[i] = i in wanted or any([e is not None and needed[e.pos] for e in entry.edges])
    return needed


def _step(i, entry, reached, needed):
    """Node `i`'s Step, or None when no output of it has a cotangent or none of its gradients is needed."""
    sig = entry.sig
    ct_mask = tuple([reached[i] >> k & 1 == 1 for k in sig.diff_outs])  # the outputs with a cotangent
    if True not in ct_mask:
        return None
    want = tuple([j for j, e in enumerate(entry.edges) if e is not None])  # the operands that get a gradient
    if sig.op.reads is not None:  # a recorded backward: only the operands its outputs with a cotangent read
        want = _read_by(want, reads_of(sig), [k for k, m in zip(sig.diff_outs, ct_mask) if m])
    targets = tuple([entry.edges[j] for j in want])
    if needed is not None and not any([needed[t.pos] for t in targets]):
        return None
    return Step(i, _vjp_spec(sig, tuple([r is not None for r in entry.saved]), want, ct_mask), targets)


def _plan(key):
    """The BackwardPlan of a WalkKey: the steps from the roots back, in reverse topological order."""
    entries, needed = key.entries, _needed(key.entries, key.captures)
    reached = [0] * len(entries)  # per node, a bit for each output that gets a cotangent
    for root in key.roots:
        reached[root.pos] |= 1 << root.k
    steps, leaves = [], []
    for i in reversed(range(len(entries))):
        entry = entries[i]
        if not reached[i] or (needed is not None and not needed[i]):
            continue
        if entry is LEAF:
            if key.accumulate:
                leaves.append(i)
            continue
        step = _step(i, entry, reached, needed)
        if step is not None:
            for t in step.targets:
                reached[t.pos] |= 1 << t.k
            steps.append(step)
    captured = tuple([c if c.pos is not None and reached[c.pos] >> c.k & 1 else None for c in key.captures])
    return intern(BackwardPlan(tuple(steps), key.roots, captured, tuple(leaves), key.batch))


@functools.lru_cache(maxsize=1024)
def template(key):
    """The Template of a WalkKey. The fused program's forward calls run in walk order (a call's deferred arguments
    come from calls before it), renumbered from node positions to step positions."""
    plan = _plan(key)
    runs = tuple([step.node for step in plan.steps])
    calls = {i: e.forward for i, e in enumerate(key.entries) if e.forward is not None}
    step_of = {i: j for j, i in enumerate(calls)}

    def local(r):
        return r if type(r) is int else Output(step_of[r.pos], r.k)

    forward = tuple([CallStep(key.entries[i].sig, tuple([local(r) for r in call.args])) for i, call in calls.items()])
    saved = [local(r) for i in runs for r in key.entries[i].saved if r is not None]
    reads = tuple(saved + [local(r) for r in key.grads if r is not None])
    kept = tuple([(i, step_of[i]) for i, call in calls.items() if call.keep])
    return Template(plan, runs, forward, reads, kept)


def _forward_and_backward(*frontier, t):
    """The traced fused program of Template `t`: the forward calls, then the backward reading their values."""
    results = _lazy.run_steps(frontier, t.forward)
    args = [read(r, frontier, results) for r in t.reads]
    return tuple(o for _, j in t.kept for o in results[j]) + traced_backward(*args, plan=t.plan)


def traced_backward(*args, plan, vjp=_basis.vjp):
    """The traced backward of a BackwardPlan: route cotangents through each step's VJP (`vjp(saved, cotangents,
    spec)`), return captured and leaf grads. `args`: the steps' saved values in order, then the root cotangents."""
    if plan.batch is not None:
        return _traced_rows(args, plan, vjp)
    args = iter(args)
    saved = [[next(args) for s in step.spec.saved_mask if s] for step in plan.steps]
    buffers = {}

    def add(slot, value):
        buffers[slot] = value if slot not in buffers else _basis.add(buffers[slot], value)

    for slot in plan.roots:
        add(slot, next(args))
    for step, values in zip(plan.steps, saved):
        spec = step.spec
        cts = [buffers[Output(step.node, k)] for k, m in zip(spec.sig.diff_outs, spec.ct_mask) if m]
        for slot, g in zip(step.targets, vjp(values, cts, spec)):
            add(slot, g)
    outs = [buffers[c] for c in plan.captures if c is not None] + [buffers[Output(i, 0)] for i in plan.leaves]
    return tuple([_basis.dense(o) for o in outs])


def _traced_rows(args, plan, vjp):
    """A batched plan's backward: root cotangents carry a leading batch axis, saved values do not; each row runs
    the plan unbatched (the rows of the dense cotangents, and the basis rows at the row's index)."""
    batch = plan.batch
    n = sum(sum(step.spec.saved_mask) for step in plan.steps)
    row_plan = intern(plan._replace(batch=None))

    def row(*args):
        saved, index, cts = args[:n], args[n], iter(args[n + 1 :])
        rows = [
            next(cts) if b is None else _basis.BasisRow(index, b.offset, jnp.ones(b.row_shape, b.dtype))
            for b in batch.basis
        ]
        return traced_backward(*saved, *rows, plan=row_plan, vjp=vjp)

    batched = (jnp.arange(batch.padded),) + tuple(args[n:])
    return map_rows(row, batched, batch.chunk_size, batch.shards, shared=tuple(args[:n]))


def backward_reads(plan):
    """Per output of the traced backward of `plan`, a bitmask of its arguments it reads (the saved values of its
    steps in order, then its root cotangents), found from the steps' VJPs."""
    return _backward_masks(plan, vjp_dependencies)


def backward_links(plan):
    """As backward_reads, the arguments each output links to (a fused op's gradient links to all its VJP reads)."""
    return _backward_masks(plan, vjp_links)


def _backward_masks(plan, vjp_masks):
    bases = (None,) * len(plan.roots) if plan.batch is None else plan.batch.basis
    arg = sum([sum(step.spec.saved_mask) for step in plan.steps])
    reads = {}
    for slot, basis in zip(plan.roots, bases):
        reads[slot] = reads.get(slot, 0) | (0 if basis is not None else 1 << arg)  # a block of the identity: none
        arg += basis is None
    first = 0  # the step's first saved value among the arguments
    for step in plan.steps:
        spec, n = step.spec, sum(step.spec.saved_mask)
        ct_reads = [reads[Output(step.node, k)] for k, m in zip(spec.sig.diff_outs, spec.ct_mask) if m]
        for slot, mask in zip(step.targets, vjp_masks(spec)):  # mask: over the VJP's saved values, then cotangents
            read_mask = (mask & ((1 << n) - 1)) << first
            for i, ct in enumerate(ct_reads):
                if mask >> (n + i) & 1:
                    read_mask |= ct
            reads[slot] = reads.get(slot, 0) | read_mask
        first += n
    return tuple([reads[c] for c in plan.captures if c is not None] + [reads[Output(i, 0)] for i in plan.leaves])


class _NoHostForm(Exception):
    """A step of a backward whose VJP has no host form on its arguments."""


def _host_vjp(values, cts, spec):
    grads = computed_on_host(VJP, list(values) + [_basis.dense(c) for c in cts], {"spec": spec})
    if grads is None:
        raise _NoHostForm
    return grads


def _backward_on_host(*arrays, plan):
    """The host form of a recorded backward program (BACKWARD_OP, on host arrays): its steps in turn, each node's VJP
    by its host form, as the per-node tier computes it; None (its kernel) for batched cotangents or where a step's VJP
    has no host form."""
    if plan.batch is not None:
        return None
    try:
        return traced_backward(*arrays, plan=plan, vjp=_host_vjp)
    except _NoHostForm:
        return None


def _backward_shapes(avals, *, plan):
    """The (shape, dtype) of each output of an unbatched plan's traced backward on arguments of `avals`: a gradient
    has the aval of the operand it is for, a root's cotangent that of its argument; None for a batched plan."""
    if plan.batch is not None:
        return None
    found = dict(zip(plan.roots, avals[sum([sum(step.spec.saved_mask) for step in plan.steps]) :]))
    for step in plan.steps:
        for slot, w in zip(step.targets, step.spec.want):
            found.setdefault(slot, step.spec.sig.avals[w])
    return tuple([found[c] for c in plan.captures if c is not None] + [found[Output(i, 0)] for i in plan.leaves])


BACKWARD_OP = Op(
    "backward_program",
    traced_backward,
    multi=True,
    backward_name="BackwardProgram",
    whole_backward=True,
    reads=backward_reads,
    links=backward_links,
    host=_backward_on_host,
    shapes=_backward_shapes,
)


def ready(w, create_graph):
    """Whether a walk's fused program can run now: it is compiled, or it is recorded as an op (create_graph) or
    computed later (a vmap.vmap row); else its compile is started in the background and the per-node tier answers."""
    if create_graph or not w.direct:
        return True
    return _with_fused(template(w.key), w.key).fused.ready_or_compiling(w.frontier)


def stored(w):
    """Whether the store of executables holds the fused program of the walk `w` (only one computed now, whose rows
    are not split over devices)."""
    if not w.direct:
        return False
    t = _with_fused(template(w.key), w.key)
    return t.shards is None and t.fused.stored(w.frontier)


def rebatched(w, batch):
    """The walk `w` with the batch of its key replaced by `batch` (a ProgramBatch): its structure run otherwise."""
    return w._replace(key=intern(w.key._replace(batch=batch)))


def compile_now(w, root_grads, create_graph):
    """The program of the walk `w` compiled (not run), for its memory analysis: its fused program, whose first call
    then reuses it; or where the backward is recorded as one op (create_graph, a vmap.vmap row), that backward."""
    if create_graph or not w.direct:
        t, nodes = template(w.key), w.nodes
        saved = [s.value if type(s) is SavedValue else s for i in t.runs for s in nodes[i].saved if s is not None]
        grads = [g._v for g, r in zip(root_grads, w.key.grads) if r is not None]
        return jax.jit(functools.partial(traced_backward, plan=t.plan)).lower(*lowerable(saved + grads)).compile()
    t = _with_fused(template(w.key), w.key)
    return t.fused.plain.jit.lower(*lowerable(_placed(w.frontier, t.shards))).compile()


def _with_fused(t, key):
    """The template `t` of `key`, with its fused Program (made once)."""
    if t.fused is None:
        t.fused = _lazy.program_for(key, lambda: functools.partial(_forward_and_backward, t=t), lambda: mix(key))
    return t


def mix(key):
    """The ops of the walk `key` (_payback.Mix): its nodes' (each computed with its forward in the fused program)."""
    return _payback.mix_of([entry.sig for entry in key.entries])


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
        grads = [  # not the blocks of the identity
            _unversioned(g, nodes[slot.pos])
            for g, r, slot in zip(root_grads, w.key.grads, t.plan.roots)
            if r is not None
        ]
        outs = iter(apply(BACKWARD_OP, saved + grads, plan=t.plan))
    else:
        outs = iter([Tensor._wrap(o) for o in _run_fused(w, t)])
    captured = [None if c is None else next(outs) for c in t.plan.captures]
    if release:
        for i in t.runs:
            nodes[i].release()
    return captured, [nodes[i] for i in t.plan.leaves], list(outs)


def _unversioned(grad, node):
    """A root's cotangent as the recorded backward saves it. torch's node multiplies it by what the root's node saved:
    where none of that requires grad, no node of the double backward saves the cotangent itself (only products of
    it), so writing into it afterwards (a seed row set and reset in place, a jacobian by rows) raises nothing there;
    it is then passed by its value alone. Otherwise torch saves it and checks its version, as the op here does."""
    saved = [*getattr(node, "saved", ()), *getattr(node, "saved_results", ())]  # a leaf root saves nothing
    if grad.requires_grad or any(type(s) is SavedValue and s.requires_grad for s in saved):
        return grad
    return Tensor._wrap(grad._v)


def _run_fused(w, t):
    """The fused program's backward outputs; the forward results it also returns are published to their calls."""
    _with_fused(t, w.key)  # `t` found by the caller: a key's lookup hashes the whole structure
    with _lazy.lock:  # deferred results are published under it
        outs = iter(t.fused(*_placed(w.frontier, t.shards)))
        for i, _ in t.kept:  # forward results read later (a loss printed after its backward)
            results, call = tuple([next(outs) for _ in w.nodes[i].sig.out_avals]), w.nodes[i].call
            if call is not None and call.result is None:  # not computed, nor released, by another thread
                call.result, call.args = results, None
        return list(outs)
