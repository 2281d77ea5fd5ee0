"""Whole-graph backward programs: the walk of a graph made only of table ops, compiled into one XLA
program and cached by graph structure (ops, static params, avals, edges), not by object identity."""
from . import _graph
from ._graph import AccumulateGrad, SavedValue
from ._ops._core import Op, OpNode, _vjp_fn, apply
from ._lazy import intern
from vmap._rows import map_rows


class Plan:
    """One backward walk, symbolically: the structural key plus the nodes whose saved values it reads."""

    __slots__ = ("key", "nodes", "leaves")

    def __init__(self, key, nodes, leaves):
        self.key, self.nodes, self.leaves = key, nodes, leaves


def plan(order, needed, roots, captures, accumulate, batch=None):
    """The plan of this walk if every node that runs is a plain table op, else None (per-node engine)."""
    if _graph._anomaly["enabled"]:
        return None
    position = {node: i for i, node in enumerate(order)}
    reached = [0] * len(order)  # per position, a bit for each output that gets a cotangent
    for e in roots:
        reached[position[e.node]] |= 1 << e.output_nr
    steps, nodes, leaves = [], [], []
    for pos, node in enumerate(order):
        if not reached[pos] or (needed is not None and node not in needed):
            continue
        kind = type(node)
        if kind is AccumulateGrad:
            if node.variable._hooks:
                return None
            if accumulate:
                leaves.append(node)
            continue
        if kind is not OpNode or node.tensor_pre_hooks or node.retained or node.post_hooks:
            return None  # Python-level backward or hooks: the per-node engine runs it
        sig, edges = node.sig, node.edges
        bits = reached[pos]
        ct_mask = sig.ct_mask(bits)
        if True not in ct_mask:
            continue
        targets = tuple([(position[edges[i].node], edges[i].output_nr) for i in node.want])
        if needed is not None and needed.isdisjoint([order[t] for t, _ in targets]):
            continue
        for t, k in targets:
            reached[t] |= 1 << k
        steps.append((pos, node.spec(ct_mask), targets))
        nodes.append(node)
    slots = [(position.get(e.node), e.output_nr) for e in captures]
    captured = tuple([slot if slot[0] is not None and reached[slot[0]] >> slot[1] & 1 else None for slot in slots])
    key = intern((tuple(steps), tuple([(position[e.node], e.output_nr) for e in roots]), captured,
                  tuple([position[leaf] for leaf in leaves]), batch))
    return Plan(key, nodes, leaves)


def _program(*args, key):
    """The traced backward: route cotangents through each step's VJP, return captured and leaf grads."""
    steps, roots, captures, leaves, batch = key
    if batch is not None:  # root cotangents carry a leading batch axis; saved values do not
        n = sum(sum(spec.saved_mask) for _, spec, _ in steps)
        row_key = intern(key[:4] + (None,))
        return map_rows(lambda *cts: _program(*args[:n], *cts, key=row_key), args[n:], batch[0])
    args = iter(args)
    saved = [[next(args) for s in spec.saved_mask if s] for _, spec, _ in steps]
    buffers = {}

    def add(slot, value):
        buffers[slot] = value if slot not in buffers else buffers[slot] + value

    for slot in roots:
        add(slot, next(args))
    for (pos, spec, targets), values in zip(steps, saved):
        cts = [buffers[(pos, k)] for k, m in zip(spec.sig.diff_outs, spec.ct_mask) if m]
        for slot, g in zip(targets, _vjp_fn(*values, *cts, spec=spec)):
            add(slot, g)
    return tuple(buffers[c] for c in captures if c is not None) + tuple(buffers[(pos, 0)] for pos in leaves)


PROGRAM = Op("backward_program", _program, multi=True, backward_name="BackwardProgram", program=True)


def run(p, root_grads, create_graph, release):
    """Run a plan as one compiled program (recorded as one differentiable op when create_graph); with `release`,
    the nodes' saved values are freed once read (a backward that does not retain the graph)."""
    saved = []
    for node in p.nodes:
        for s in node.saved:
            if type(s) is SavedValue:
                saved.append(s.unpack(True) if create_graph else s.array())
                if release:
                    s.free()
            elif s is not None:
                saved.append(s)
    outs = iter(apply(PROGRAM, saved + list(root_grads), key=p.key))
    captured = [None if c is None else next(outs) for c in p.key[2]]
    return captured, list(outs)
