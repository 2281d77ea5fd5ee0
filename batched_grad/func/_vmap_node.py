"""Gradients through vmap.vmap's batched results, as torch's: `out = vmap(f)(X); grad(out.sum(), w)` for a tensor
`w` that f captures. The results get one node whose edges are where f's recorded rows reach the graph made before
the call (captured tensors, leaves); its backward runs f again on each row under vmap.vmap and takes
autograd.grad of the row's results into those edges, summed over the rows (a recomputation, as checkpointing)."""

import contextlib
from collections.abc import Callable
from typing import NamedTuple

from vmap._pytree import flatten

from .. import _graph
from .._factories import zeros, zeros_like
from .._generator import default_generator
from .._grad_mode import enable_grad
from .._layout import note_row, stood_for
from .._rowwise import run_batched
from .._tensor import Tensor
from ..autograd._api import grad


class VmapCall(NamedTuple):
    """A vmap.vmap call, for the rerun of its function in the backward: `vmap` is the transform itself, which the
    rerun calls again; `rng_state`: the default generator's state before func ran, or None; `written`: the flat
    indices of the arguments func wrote into in place (`args` holds their values as func saw them), whose rows'
    final values are results after func's own."""

    vmap: Callable
    func: Callable
    args: tuple
    kwargs: dict
    in_dims: object
    randomness: str
    rng_state: object
    written: tuple = ()


def _made_before(node, start, varies):
    """Whether `node` belongs to the graph made before the call: a node made before `start`, or the accumulator of
    a leaf that does not vary across the call's rows (a leaf's accumulator is made when it is first used; an
    enclosing call's row is such a leaf)."""
    if type(node) is _graph.AccumulateGrad:
        return not varies(node.variable._v)
    return node.sequence_nr < start


def outside_edges(leaves, start, varies):
    """The distinct edges by which the graph of the Tensors `leaves` (one row's results) reaches the graph made
    before `start` (a _graph.sequence_mark()); `varies(value)` tells whether a value varies across the rows."""
    found, seen = {}, set()
    stack = [x.grad_fn for x in leaves if isinstance(x, Tensor) and x.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for edge in node.edges:
            if edge is None:
                continue
            if _made_before(edge.node, start, varies):
                found.setdefault((id(edge.node), edge.output_nr), _graph.GradientEdge(*edge))
            else:
                stack.append(edge.node)
    return _without_nested(list(found.values()))


def _without_nested(edges):
    """(edges, through): `edges` with each one whose node leads to another of them taken out into `through` and
    replaced by its node's own edges, until none does. A gradient taken into both `w` and `w[:, 0]` would reach `w`
    twice (the rerun's grad walks through `w[:, 0]`'s node to `w`); so the rerun walks through such a node, and
    the node keeps an edge to it that carries no gradient, only so that the backward runs it after this one."""
    through = []
    while True:
        nodes = {id(e.node) for e in edges}
        nested = next(
            (e for e in edges if type(e.node) is not _graph.AccumulateGrad and _leads_to(e.node, nodes - {id(e.node)})),
            None,
        )
        if nested is None:
            return edges, through
        through.append(nested)
        inner = [_graph.GradientEdge(*x) for x in nested.node.edges if x is not None]
        edges = list({(id(e.node), e.output_nr): e for e in edges + inner if e is not nested}.values())


def _leads_to(node, targets):
    """Whether a path of edges from `node` reaches a node whose id is in `targets`."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        for edge in n.edges:
            if edge is None or id(edge.node) in seen:
                continue
            if id(edge.node) in targets:
                return True
            seen.add(id(edge.node))
            stack.append(edge.node)
    return False


class VmapNode(_graph.Node):
    """The node of vmap.vmap's batched results (outputs k of f's flat results, moved to their out_dims). Its edges:
    where the rows' graph reaches the graph made before the call (outside_edges: those with a gradient, then those
    the rerun walks through), then the mapped arguments that require grad."""

    __slots__ = ("call", "rows_k", "out_dims", "mapped", "n_through")

    def __init__(self, outside, inputs, results, call, rows_k, out_dims):
        edges, through = outside
        self.n_through = len(through)
        edges = list(edges) + list(through) + [_graph.edge_of(x) for _, x, _ in inputs]
        super().__init__(tuple(edges), tuple((tuple(r.shape), r.dtype) for r in results))
        self.call, self.rows_k, self.out_dims = call, rows_k, out_dims
        self.mapped = [(i, d) for i, _, d in inputs]  # (flat index among the arguments, in_dim)

    def name(self):
        return "VmapBackward0"

    def backward(self, cotangents, create_graph, batch=None):
        if batch is None:
            return self._backward(cotangents, create_graph)
        return run_batched(
            self.name(), lambda cts: self._backward(cts, create_graph), cotangents, batch, key=self.call.func
        )

    def _backward(self, cotangents, create_graph):
        vmap, func, args, kwargs, in_dims, randomness, rng_state, written = self.call
        args = _unwritten(args, written)
        cotangents = [
            zeros(shape, dtype=dtype) if c is None else c for c, (shape, dtype) in zip(cotangents, self.out_meta)
        ]
        rows_k, mapped = self.rows_k, self.mapped
        edges = list(self.edges)[: len(self.edges) - len(mapped) - self.n_through]

        def row_gradients(*call_args, cts):
            flat, spec = flatten(call_args)
            rows = [_differentiable(flat[i]) for i, _ in mapped]
            for (i, _), row in zip(mapped, rows):
                flat[i] = row
            # a row that func writes into in place: its gradient is the one of its values before the write
            row_targets = [_graph.edge_of(r) if i in written else r for (i, _), r in zip(mapped, rows)]
            with enable_grad():
                leaves, _ = flatten(func(*spec.unflatten(flat), **kwargs))
                leaves += [flat[i] for i in written]
                outs = [leaves[k] for k in rows_k]
                pairs = [(o, c) for o, c in zip(outs, cts) if o.requires_grad]
                targets = edges + row_targets
                grads = (
                    grad(
                        [o for o, _ in pairs],
                        targets,
                        [c for _, c in pairs],
                        retain_graph=True,
                        allow_unused=True,
                        create_graph=create_graph,
                    )
                    if pairs
                    else [None] * len(targets)
                )
            fill = [_zeros_for(e) for e in edges] + [zeros_like(r) for r in rows]
            return tuple(z if g is None else g for g, z in zip(grads, fill))

        row_dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        rerun = vmap(
            lambda *a: row_gradients(*a[:-1], cts=a[-1]),
            in_dims=row_dims + (list(self.out_dims),),
            randomness=randomness,
        )
        with _drawing_again(rng_state):
            per_row = rerun(*args, cotangents)
        summed = [g.sum(0) for g in per_row[: len(edges)]]  # a captured tensor's gradient sums over the rows
        through = [None] * self.n_through  # their gradients are in the edges' own, taken through them
        return summed + through + [g.movedim(0, d) for g, (_, d) in zip(per_row[len(edges) :], mapped)]


@contextlib.contextmanager
def _drawing_again(rng_state):
    """Within it, the default generator draws what it drew from `rng_state` on (None: as it is), so that a rerun
    of a function with randomness="same" sees the forward's random values."""
    if rng_state is None:
        yield
        return
    current = default_generator.get_state()
    default_generator.set_state(rng_state)
    try:
        yield
    finally:
        default_generator.set_state(current)


def _unwritten(args, written):
    """`args` with fresh tensors for those the rerun writes into in place, so that each rerun sees them as the
    forward did."""
    if not written:
        return args
    flat, spec = flatten(args)
    for i in written:
        flat[i] = Tensor._wrap(flat[i]._v)
    return spec.unflatten(flat)


def _differentiable(row):
    """A mapped argument's row as a leaf that requires grad (as it is when the rerun records it already), standing
    for what the row stands for (an in-place write into it is checked as one into the caller's tensor)."""
    if row.requires_grad:
        return row
    leaf = row.detach()._requires_grad_()
    stands_for = stood_for(row)
    if stands_for is not None:
        note_row(leaf, *stands_for)
    return leaf


def _zeros_for(edge):
    shape, dtype = edge.node.out_meta[edge.output_nr]
    return zeros(shape, dtype=dtype)
