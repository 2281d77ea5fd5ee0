"""Segmented backward programs. A graph too large to compile whole (_fusion.py) runs its backward as a sequence of
compiled programs, each covering at most `limit` consecutive steps of the backward (reverse topological order).
The cotangents live between two segments are the outputs of one and the inputs of the next. A segment's key
numbers its nodes from its own first one, so equal segments (those of a long uniform chain) share one program:
compile time and memory grow at most linearly with the graph. The forward is computed first, in its own segments
(_lazy.py), and the backward reads its saved values."""

import functools
from typing import NamedTuple

from . import _basis, _lazy, _payback
from ._fused import BackwardPlan, Step, backward_links, backward_reads, template, traced_backward
from ._host import unshared
from ._lazy import Output, intern, kernel
from ._ops._core import VJP, Op, apply
from ._saved import SavedValue
from ._tensor import Tensor


def _step_vjp(values, cts, spec):
    """A step's VJP as a call of the per-node tier's kernel for it: traced once per kind of step (JAX caches the
    trace) instead of once per step, which was most of a long segment's first call. XLA inlines the calls."""
    if _basis.BasisRow in [type(c) for c in cts]:  # the basis rules (_basis.py) see the rows, not dense arrays
        return _basis.vjp(values, cts, spec)
    return kernel(VJP, (("spec", spec),))(*values, *cts)


def _traced_segment(*args, plan):
    return traced_backward(*args, plan=plan, vjp=_step_vjp)


SEGMENT = Op(
    "backward_segment",
    _traced_segment,
    multi=True,
    backward_name="BackwardProgram",
    whole_backward=True,
    reads=backward_reads,
    links=backward_links,
)


class Segment(NamedTuple):
    """One backward program of a segmented backward. `plan`: its BackwardPlan (numbered locally); `saved`: the
    range of its steps' saved values among the backward's; `ins`: the cotangent slots (Outputs) it reads from
    earlier segments (None for the first: it reads the root cotangents); `outs`: the slots it returns; `dead`:
    those of `ins` that nothing reads after it; `runs`: its nodes."""

    plan: BackwardPlan
    saved: tuple
    ins: tuple | None
    outs: tuple
    dead: tuple
    runs: tuple


def _slots_of(step):
    """The cotangent slots a backward step reads, and those it adds into."""
    spec = step.spec
    reads = [Output(step.node, k) for k, m in zip(spec.sig.diff_outs, spec.ct_mask) if m]
    return reads, list(step.targets)


def _local(steps, ins, outs):
    """`steps`, `ins` and `outs` with their nodes numbered in order of first appearance: the key of a segment does
    not depend on where it lies in the graph."""
    number = {}

    def slot(s):
        return Output(number.setdefault(s.pos, len(number)), s.k)

    ins = tuple([slot(s) for s in ins])
    steps = tuple(
        [Step(number.setdefault(st.node, len(number)), st.spec, tuple([slot(t) for t in st.targets])) for st in steps]
    )
    return steps, ins, tuple([slot(s) for s in outs])


def _liveness(chunks, roots):
    """Per chunk of steps, the slots its steps read and those they add into; per slot, the first chunk that adds
    into it (0 for the roots) and the last that reads or adds into it."""
    first_write, last_touch = dict.fromkeys(roots, 0), dict.fromkeys(roots, 0)
    touched = []
    for j, chunk in enumerate(chunks):
        reads, writes = set(), set()
        for step in chunk:
            r, w = _slots_of(step)
            reads.update(r)
            writes.update(w)
        for s in writes:
            first_write.setdefault(s, j)
        for s in reads | writes:
            last_touch[s] = j
        touched.append((reads, writes))
    return touched, first_write, last_touch


@functools.lru_cache(maxsize=256)
def layout(plan, limit):
    """The backward `plan` (a Template's) cut into Segments of at most `limit` consecutive steps."""
    steps, roots, batch = plan.steps, plan.roots, plan.batch
    finals = {c for c in plan.captures if c is not None} | {Output(i, 0) for i in plan.leaves}
    chunks = [steps[start : start + limit] for start in range(0, max(len(steps), 1), limit)]
    touched, first_write, last_touch = _liveness(chunks, roots)
    segments, start = [], 0
    for j, (chunk, (reads, writes)) in enumerate(zip(chunks, touched)):
        ins = None if j == 0 else sorted([s for s in reads | writes if first_write[s] < j])
        made = writes | set(roots) if j == 0 else writes
        outs = sorted([s for s in made if last_touch[s] > j or s in finals])
        n_saved = sum([sum(step.spec.saved_mask) for step in chunk])
        local_steps, local_ins, local_outs = _local(chunk, roots if ins is None else ins, outs)
        local_batch = batch if batch is None or ins is None else batch._replace(basis=(None,) * len(ins))
        segments.append(
            Segment(
                plan=intern(BackwardPlan(local_steps, local_ins, local_outs, (), local_batch)),
                saved=(start, start + n_saved),
                ins=ins,
                outs=tuple(outs),
                dead=() if ins is None else tuple([s for s in ins if last_touch[s] == j and s not in finals]),
                runs=tuple([step.node for step in chunk]),
            )
        )
        start += n_saved
    return tuple(segments)


def _mix(plan):
    return _payback.mix_of([step.spec.sig for step in plan.steps])


def distinct_mixes(plan, limit):
    """The ops (_payback.Mix) of each distinct program of the backward `plan` cut into segments of at most `limit`
    steps (equal segments, those of a long uniform chain, share one)."""
    return tuple([_mix(p) for p in dict.fromkeys([seg.plan for seg in layout(plan, limit)])])


def run(w, root_grads, create_graph, release, limit):
    """Run a walk's backward as segments of at most `limit` steps, as _fused.run does whole: (captured gradients,
    leaves, their gradients). Each segment is recorded as one differentiable op with `create_graph`."""
    t, nodes = template(w.key), w.nodes
    recorded = create_graph or not w.direct
    saved, grads = _inputs(w, t, root_grads, create_graph, recorded)
    values = {}  # the cotangents live between two segments, by slot
    for seg in layout(t.plan, limit):
        args = saved[seg.saved[0] : seg.saved[1]] + (grads if seg.ins is None else [values[s] for s in seg.ins])
        outs = _run_segment(seg, args, recorded, w.direct) if seg.outs else ()
        for s in seg.dead:
            del values[s]
        values.update(zip(seg.outs, outs))
        saved[seg.saved[0] : seg.saved[1]] = [None] * (seg.saved[1] - seg.saved[0])  # freed as it goes
        if release:
            for i in seg.runs:
                nodes[i].release()
    wrap = (lambda v: v) if recorded else Tensor._wrap
    captured = [None if c is None else wrap(values[c]) for c in t.plan.captures]
    return captured, [nodes[i] for i in t.plan.leaves], [wrap(values[Output(i, 0)]) for i in t.plan.leaves]


def _inputs(w, t, root_grads, create_graph, recorded):
    """The saved values of the steps in order, and the root cotangents the first segment reads: arrays, or Tensors
    when `recorded`. The forward is computed first (in its own segments), keeping every value the backward reads,
    so that no segment's op is fused with the forward before it; under vmap.vmap it stays deferred."""
    held = [s for i in t.runs for s in w.nodes[i].saved if s is not None]
    if w.direct:
        for s in held:
            if type(s) is SavedValue:
                _lazy.keep(s.value)
    saved = [(s.unpack(True) if create_graph else s.array()) if type(s) is SavedValue else s for s in held]
    grads = [g for g, r in zip(root_grads, w.key.grads) if r is not None]  # not the blocks of the identity
    if not recorded:
        return [_lazy.materialize(s) for s in saved], [_lazy.materialize(unshared(g._v)) for g in grads]
    if w.direct:
        for s in saved:
            _lazy.materialize(s._v if isinstance(s, Tensor) else s)
    return saved, grads


def _run_segment(seg, args, recorded, direct):
    """One segment's outputs: arrays from its compiled program, or Tensors of a recorded program op (computed now
    unless the walk reads rows of a vmap.vmap input, so that the next segment is not fused with it)."""
    if not recorded:
        program = _lazy.program_for(
            intern(("segment", seg.plan)),
            lambda: functools.partial(_traced_segment, plan=seg.plan),
            lambda: _mix(seg.plan),
        )
        return program(*args)
    outs = apply(SEGMENT, args, plan=seg.plan)
    if direct:
        for o in outs:
            _lazy.materialize(o._v)
    return outs
