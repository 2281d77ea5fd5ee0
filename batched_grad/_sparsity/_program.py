"""The warm path of sparsity="auto": once a structure's pattern is known, its nonzeros come from one compiled
program per (pattern, mode, inputs): the recorded forward replayed as a JAX function of the inputs, its products
with one seed per color (jax.vjp or jax.jvp over the seeds, or the jvp of jax.grad for a Hessian, vmapped), and
the gather of the pattern's values out of them, all fused by XLA. Its arguments are the inputs' values and the
operands of the recorded ops that depend on no input. The seeds are constants of the program, and so are the integer
operands the pattern depends on (a slice's start, a gather's indices), as they are the pattern's: XLA folds what
depends on them alone (a stencil's whole tangent but for the nonlinear terms), and a slice's derivative is a static
slice or pad, not a scatter into zeros.

It runs where the engine's batched backward would add nothing: no create_graph, no chunk_size, no hooks, no
anomaly mode, one floating dtype for every input and output, and every recorded node a table op whose operands
can be read. Elsewhere (and on a structure's first sighting, outside bg.compile, whose per-op kernels are cheaper
to make than a program) the engine's path (_evaluate.py) answers."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._fused import _fusible
from .._graph import AccumulateGrad, _anomaly
from .._lazy import materialize
from .._meta import MetaValue
from .._ops._core import OpNode
from .._tensor import Tensor
from .._tracing import compiling, is_tracer
from ._recorded import operand, operand_value

SIGHTINGS = 2  # the sighting of a pattern from which it runs as its program (bg.compile: from the first)


class Replay:
    """The recorded forward as steps over values: per op node its function and, per operand, where its value comes
    from: ("input", j), ("node", step, output), ("arg", i) (the i-th argument read from the recorded node) or
    ("const", array) (an operand the pattern depends on). `outputs`: where each output comes from; `reads`: the
    (node position, operand) of each argument."""

    __slots__ = ("steps", "outputs", "reads")

    def __init__(self, steps, outputs, reads):
        self.steps, self.outputs, self.reads = steps, outputs, reads

    def __call__(self, inputs, args):
        values = []
        for fn, multi, refs in self.steps:
            operands = [_value(r, inputs, args, values) for r in refs]
            out = fn(*operands)
            values.append(out if multi else (out,))
        return [_value(r, inputs, args, values) for r in self.outputs]


def _value(ref, inputs, args, values):
    kind, a = ref[0], ref[1]
    if kind == "input":
        return inputs[a]
    if kind == "node":
        return values[a][ref[2]]
    return args[a] if kind == "arg" else a


def replay_of(recorded, used):
    """The Replay of a Recorded graph (None where a node is not a table op, or an output does not come from the
    inputs); `used`: the (node position, operand) slots whose values the pattern depends on, baked in."""
    step_of, steps, reads = {}, [], []
    used = set(used)

    def ref_of(edge):
        j = recorded.inputs.get((edge.node, edge.output_nr))
        if j is not None:
            return ("input", j)
        step = step_of.get(edge.node)
        return None if step is None else ("node", step, edge.output_nr)

    for pos, node in enumerate(recorded.nodes):
        if type(node) is AccumulateGrad:
            continue  # a leaf that is not an input: its value is read as an operand of the nodes that use it
        if not isinstance(node, OpNode):
            return None
        refs = []
        for k in range(len(node.sig.avals)):
            edge = node.edges[k] if k < len(node.edges) else None
            ref = None if edge is None else ref_of(edge)
            value = None if ref is not None or (pos, k) not in used else operand_value(node, k)
            if value is not None:
                ref = ("const", value)
            elif ref is None:
                ref = ("arg", len(reads))
                reads.append((pos, k))
            refs.append(ref)
        fn = functools.partial(node.sig.op.fn, **dict(node.sig.static)) if node.sig.static else node.sig.op.fn
        step_of[node] = len(steps)
        steps.append((fn, node.sig.op.multi, tuple(refs)))
    outputs = [None if e is None else ref_of(e) for e in recorded.outputs]
    if None in outputs:
        return None
    return Replay(tuple(steps), tuple(outputs), tuple(reads))


def runnable(inputs, outputs, create_graph, chunk_size):
    """Whether the program may answer this call (see the module's docstring), from what the call gives."""
    if create_graph or chunk_size is not None or _anomaly["enabled"]:
        return False
    dtypes = {x.dtype for x in inputs} | {o.dtype for o in outputs}
    if len(dtypes) != 1 or not next(iter(dtypes)).is_floating_point:
        return False
    if any(type(x._v) is MetaValue for x in inputs):
        return False
    return compiling.name is not None or not any(is_tracer(x._v) for x in inputs)


def nonzeros(recorded, inputs, out_sizes, sparsity, mode, hessian, used):
    """values[i][j] of each block of the pattern's nonzeros (Tensors, CSR order), from the structure's program; None
    where this call cannot run as one (the engine's path answers)."""
    plans, xs = sparsity._plans, [materialize(x._v) for x in inputs]
    key = ("program", mode, hessian, tuple([(x.shape, x.dtype) for x in xs]))
    program = plans.get(key)
    if program is None:
        seen = plans.get(("sightings",) + key, 0) + 1
        plans[("sightings",) + key] = seen
        if seen < SIGHTINGS and compiling.name is None:
            return None
        replay = replay_of(recorded, used)
        program = plans[key] = False if replay is None else _Program(replay, sparsity, mode, hessian, inputs, out_sizes)
    if program is False:
        return None
    nodes = recorded.nodes
    for node in nodes:
        if type(node) is not AccumulateGrad and not _fusible(node):
            return None  # a hook or a changed saved value: the engine's path applies torch's rules
    args = []
    for pos, k in program.replay.reads:
        value = operand(nodes[pos], k)
        if value is None:
            return None
        args.append(value)
    values = iter(program.jit(xs, args))
    return [[Tensor._wrap(next(values)) for _ in row] for row in program.blocks]


class _Program:
    """The compiled program of one pattern, mode and inputs (see the module's docstring)."""

    __slots__ = ("replay", "blocks", "jit")

    def __init__(self, replay, sparsity, mode, hessian, inputs, out_sizes):
        self.replay = replay
        in_shapes = [tuple(x.shape) for x in inputs]
        in_sizes = [int(np.prod(s, dtype=np.int64)) for s in in_shapes]
        out_sizes = in_sizes if hessian else out_sizes
        _, source = sparsity.plan(mode)
        colors = sparsity.coloring(mode)
        k = int(colors.max()) + 1 if len(colors) else 0
        # per block, the flat positions of its nonzeros in the compressed products
        self.blocks = [
            [source if positions is None else source[positions] for positions, _, _ in row]
            for row in sparsity.blocks(out_sizes, in_sizes)
        ]
        sources = [s for row in self.blocks for s in row]
        dtype = inputs[0].dtype.np

        seed_rows = sparsity.plan(mode)[0].astype(dtype)

        def seeds():  # one row per color marking its rows (reverse) or columns
            return jnp.asarray(seed_rows)

        def split(flat, sizes, shapes):
            starts = np.cumsum([0, *sizes])
            return [flat[starts[i] : starts[i + 1]].reshape(shapes[i]) for i in range(len(sizes))]

        def flat_outputs(xs, args):
            return jnp.concatenate([o.reshape(-1) for o in replay(xs, args)])

        def program(xs, args):
            if k == 0:
                return tuple([jnp.zeros(0, dtype) for _ in sources])
            if hessian:  # H s per seed: forward over reverse
                gradient = jax.grad(lambda *v: replay(v, args)[0].reshape(()), argnums=tuple(range(len(xs))))
                push = lambda s: jax.jvp(gradient, tuple(xs), tuple(split(s, in_sizes, in_shapes)))[1]
                products = _flat(jax.vmap(push)(seeds()), k)
            elif mode == "reverse":  # S J: one vector-Jacobian product per color of rows
                _, pull = jax.vjp(lambda *v: flat_outputs(v, args), *xs)
                products = _flat(jax.vmap(pull)(seeds()), k)
            else:  # J S^T: one Jacobian-vector product per color of columns
                forward = lambda *v: flat_outputs(v, args)
                push = lambda s: jax.jvp(forward, tuple(xs), tuple(split(s, in_sizes, in_shapes)))[1]
                products = jax.vmap(push)(seeds())
            products = products.reshape(-1)
            return tuple([products[jnp.asarray(s)] for s in sources])

        self.jit = jax.jit(program)


def _flat(parts, k):
    """The (k, n) products of per-input (k, *shape) parts, the inputs side by side."""
    return jnp.concatenate([p.reshape(k, -1) for p in parts], axis=1)
