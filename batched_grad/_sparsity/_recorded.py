"""Sparsity detection on the recorded graph: the nodes between the inputs and the outputs of a recorded function,
their structural key, and their index sets, each table op's found by propagating through the jaxpr of its JAX
function (traced once per op signature).

The key holds each node's op signature (op, static params, operand avals) and where its operands come from, so
two calls that record the same graph share a key, and a branch in the user's code that records another graph
does not. The pattern of a gather or a slice depends on its integer operands' values too: the operands a pattern
read are listed with it, and their values are part of its cache entry (_api.py)."""

import functools
from typing import NamedTuple

import jax
import numpy as np
from jax.extend.core import ClosedJaxpr, DebugInfo
from jax.extend.linear_util import wrap_init
from jax.interpreters.partial_eval import trace_to_jaxpr_dynamic

from .._graph import AccumulateGrad, edge_of
from .._lazy import Pending, materialize
from .._ops._core import OpNode
from .._saved import SavedValue
from .._tracing import is_tracer
from .._x64 import set_x64, swap_x64
from . import _sets
from ._propagate import Propagation, Var, run
from ._rules import inexact

LEAF = ("leaf",)
MAX_CONSTANT_ELEMENTS = 1_000_000  # float operands that depend on no input, read for their zeros up to this size


class Recorded(NamedTuple):
    """The nodes a detection walks (each after those its operands come from), the inputs' edges (edge -> input
    number), the outputs' edges, the key (None when a node is not a table op or a leaf: no caching)."""

    nodes: list
    inputs: dict
    outputs: list
    key: tuple | None


def walk(outputs, inputs):
    """The Recorded graph from `inputs` (Tensors) to `outputs` (Tensors): the nodes reached from the outputs
    without passing through an input."""
    input_edges = {}
    for j, x in enumerate(inputs):
        e = edge_of(x)
        if e is not None:
            input_edges.setdefault((e.node, e.output_nr), j)
    out_edges = [edge_of(o) for o in outputs]
    nodes, index, seen = [], {}, set()
    for e in out_edges:
        if e is None or (e.node, e.output_nr) in input_edges or e.node in seen:
            continue
        seen.add(e.node)
        stack = [(e.node, iter(e.node.edges))]
        while stack:
            node, edges = stack[-1]
            for d in edges:
                if d is not None and d.node not in seen and (d.node, d.output_nr) not in input_edges:
                    seen.add(d.node)
                    stack.append((d.node, iter(d.node.edges)))
                    break
            else:
                stack.pop()
                index[node] = len(nodes)
                nodes.append(node)
    return Recorded(nodes, input_edges, out_edges, _key(nodes, index, input_edges, out_edges, len(inputs)))


def _ref(edge, index, input_edges):
    if edge is None:
        return None
    j = input_edges.get((edge.node, edge.output_nr))
    if j is not None:
        return ("input", j)
    return (index[edge.node], edge.output_nr)


def _key(nodes, index, input_edges, out_edges, n_inputs):
    entries = []
    for node in nodes:
        if isinstance(node, AccumulateGrad):
            entries.append(LEAF)
        elif isinstance(node, OpNode):
            entries.append((node.sig, tuple([_ref(e, index, input_edges) for e in node.edges])))
        else:
            return None
    return (tuple(entries), tuple([_ref(e, index, input_edges) for e in out_edges]), n_inputs)


_DEBUG_INFO = DebugInfo("sparsity detection", "op", None, None)


@functools.lru_cache(maxsize=4096)
def node_jaxpr(sig):
    """The closed jaxpr of a table op's function at its signature's operand avals (None if it cannot be traced).
    Traced directly, without the jit wrapper jax.make_jaxpr adds (a third of the time of a small op's trace)."""
    fn, multi = functools.partial(sig.op.fn, **dict(sig.static)), sig.op.multi

    def flat(*arrays):
        out = fn(*arrays)
        return tuple(out) if multi else (out,)

    previous = swap_x64(True)
    try:
        avals = [jax.core.ShapedArray(shape, dtype) for shape, dtype in sig.avals]
        jaxpr, _, consts = trace_to_jaxpr_dynamic(wrap_init(flat, debug_info=_DEBUG_INFO), avals)
        return ClosedJaxpr(jaxpr, consts)
    except Exception:  # a function that needs concrete values: the node gets the dense fallback
        return None
    finally:
        set_x64(previous)


def operand(node, k):
    """The value of operand `k` of a recorded table op as it was given (a tracer inside a trace), None where it was
    not kept (its call ran and its backward does not save it)."""
    call = node.call
    if call is not None and call.args is not None:
        value = call.args[k]
    elif node.saved_mask[k]:
        value = node.saved[k]
        value = value.value if type(value) is SavedValue else value
    else:
        return None
    return materialize(value) if type(value) is Pending else value


def operand_value(node, k):
    """The value of operand `k` of a recorded table op, as a NumPy array, where it can be had (None: unknown)."""
    value = operand(node, k)
    if value is None or is_tracer(value) or not hasattr(value, "dtype"):
        return None
    return np.asarray(value)


def detect(recorded, sizes, hessian=False):
    """The index sets of each output (None where it depends on no input) and the Propagation (its used values,
    Hessian pairs), for inputs of `sizes` elements."""
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    inputs = [_sets.identity(int(n), int(o)) for n, o in zip(sizes, offsets)]
    ctx = Propagation(int(offsets[-1]), hessian)
    index = {node: i for i, node in enumerate(recorded.nodes)}
    produced = {}
    previous = swap_x64(True)
    try:
        for pos, node in enumerate(recorded.nodes):
            operands = [_edge_sets(e, recorded.inputs, index, produced, inputs) for e in node.edges]
            for k, s in enumerate(_node(ctx, pos, node, operands)):
                produced[(pos, k)] = s
    finally:
        set_x64(previous)
    outputs = [_edge_sets(e, recorded.inputs, index, produced, inputs) for e in recorded.outputs]
    ctx.warn()
    return outputs, ctx


def _edge_sets(edge, input_edges, index, produced, inputs):
    if edge is None:
        return None
    j = input_edges.get((edge.node, edge.output_nr))
    if j is not None:
        return inputs[j]
    return produced.get((index[edge.node], edge.output_nr))


def _node(ctx, pos, node, operands):
    """The output sets of one node, given its operands' sets (one per edge)."""
    if isinstance(node, AccumulateGrad):
        return [None]
    jaxpr = node_jaxpr(node.sig) if isinstance(node, OpNode) else None
    if jaxpr is None:
        ctx.warn_dense(node.name(), node=True)
        ctx.approximate()
        return _dense_node(ctx, node, operands)
    args = []
    for k, (shape, dtype) in enumerate(node.sig.avals):
        sets = operands[k] if k < len(operands) else None
        if sets is not None:
            args.append(Var(sets, shape))
        elif not inexact(dtype) or int(np.prod(shape, dtype=np.int64)) <= MAX_CONSTANT_ELEMENTS:
            # a value that depends on no input: indices, masks, a kernel's zeros may shape the pattern (a rule
            # that reads one marks it, and the pattern is then cached with its value)
            args.append(Var(None, shape, operand_value(node, k), frozenset({(pos, k)})))
        else:
            args.append(Var(None, shape))
    return [v.sets for v in run(ctx, jaxpr, args)]


def _dense_node(ctx, node, operands):
    present = [s for s in operands if s is not None]
    if not present:
        return [None] * len(node.out_meta)
    everything = _sets.everything(present, 1, ctx.width)
    if ctx.hessian:
        ctx.interact(everything, everything)
    return [
        _sets.take(everything, np.zeros(int(np.prod(shape, dtype=np.int64)), np.int64)) for shape, _ in node.out_meta
    ]
