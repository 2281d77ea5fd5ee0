"""The backward walk shared by grad() and backward(): discover, order, run each node, accumulate."""

import contextlib
import functools
import heapq
import sys
import threading
import warnings
from collections import namedtuple

import jax.numpy as jnp
import numpy as np

from vmap._chunks import in_chunks
from vmap._memory import AUTO, auto_chunk

from . import _anomaly, _fused, _fusion, _grad_dtype, _graph, _graph_task, _lazy, _payback, _saved_hooks, _segments
from ._grad_mode import set_grad_enabled
from ._graph import AccumulateGrad
from ._hooks import run_post_accumulate_hooks, run_posthooks, run_prehooks, run_tensor_hooks
from ._host import host_arrays, to_device, unshared
from ._meta import MetaValue
from ._profiling import PROFILING, accumulated, evaluated_node
from ._reentrant import escapes_deep_nesting
from ._tensor import Tensor

# .grad is read, added to and written back: threads running backward() into one leaf take turns, as torch's
# AccumulateGrad does under its mutex
_grad_lock = threading.Lock()


def _needed(order, wanted):
    """The nodes of `order` (a topological order) from which some node of `wanted` is reachable: only they run."""
    needed = set(wanted)
    for node in reversed(order):  # every node this one leads to comes first
        if node not in needed:
            for e in node.edges:
                if e is not None and e.node in needed:
                    needed.add(node)
                    break
    return needed


def execution_order(nodes):
    """The order in which torch's engine runs `nodes` (a walk's nodes, each after the nodes its edges lead to): a
    node is ready once every node with an edge to it has run, and of the ready nodes a leaf's AccumulateGrad runs
    first, then the node made last (the highest sequence number)."""
    waiting = {}
    for node in nodes:
        for e in node.edges:
            if e is not None:
                waiting[e.node] = waiting.get(e.node, 0) + 1
    ready = [_priority(node) for node in nodes if node not in waiting]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)[-1]
        order.append(node)
        for e in node.edges:
            if e is not None:
                left = waiting[e.node] = waiting[e.node] - 1
                if not left:
                    heapq.heappush(ready, _priority(e.node))
    return order


def _priority(node):
    """A node's place in the ready queue (smallest first): AccumulateGrad nodes, then the latest made."""
    return (type(node) is not AccumulateGrad, -node.sequence_nr, node)


def _add(a, b):
    if a is None:
        return b
    if a._sparse_forms is not None and b._sparse_forms is None:  # dense + sparse: torch's buffer puts dense first
        return b + a
    return a + b


def _own(grad, create_graph):
    """`grad` as a `.grad` starts from it: under create_graph a copy recorded in the graph (torch's CopyBackwards),
    else a new Tensor of its values (memory shared with NumPy copied). As torch clones a gradient that something else
    holds, in-place changes of `.grad` (accumulation included) then do not reach the tensor the engine passed, which
    may be the caller's grad_output, nor do its changes reach `.grad`."""
    if create_graph:
        if not grad.requires_grad:
            return Tensor._wrap(unshared(grad._v))
        from ._ops import fresh_copy

        return fresh_copy(grad)
    return Tensor._wrap(unshared(grad._detached_value()))


def _accumulate(variable, grad, create_graph, take=False):
    """Add `grad` into `variable.grad`, then run the leaf's post-accumulate-grad hooks. With `take` (nothing but the
    engine holds `grad`, which passes it on to AccumulateGrad's hooks) a first gradient becomes `.grad` itself, as
    torch's AccumulateGrad steals it: in-place changes of `.grad` show in the gradient those hooks see."""
    grad = _grad_dtype.for_leaf(variable, grad)
    with _grad_lock:
        old = variable._grad
        if grad._sparse_forms is not None or (old is not None and old._sparse_forms is not None):
            from .sparse._grads import accumulate_sparse

            accumulate_sparse(variable, old, grad, create_graph)
        elif old is None:
            variable._grad = grad.detach() if take else _own(grad, create_graph)
        elif create_graph:
            variable._grad = old + grad
        else:
            if type(old._v) is not MetaValue:  # a meta gradient stays one: shape and dtype, no values to add
                old._value = _sum_into(old, grad)
            old._counter.value += 1
    if variable._post_accumulate_hooks:
        run_post_accumulate_hooks(variable)


_HOST_SUM_DTYPES = frozenset([np.dtype(np.float32), np.dtype(np.float64)])


def _sum_into(old, grad):
    """`.grad` (the Tensor `old`) plus `grad`, in the dtype of `.grad` (which differs from the gradient's only where
    the leaf's grad_dtype is None). Floats of one dtype on the CPU backend add with NumPy, where both already are
    or can be read without a copy: the sum stays on the host, as the in-place updates that follow it read it."""
    a, b = old._v, grad._v
    if a.dtype == b.dtype and a.dtype in _HOST_SUM_DTYPES and a.shape == b.shape:
        host = host_arrays([a, b])  # None for a deferred value
        if host is not None:
            return np.add(host[0], host[1])
    return (old._value + grad._value).astype(a.dtype)


def _references(holder):
    return sys.getrefcount(holder[0])


_ALONE = _references([object()])  # what _references sees of an object that only its list holds


def _only_held_by(holder):
    """Whether the Tensor in `holder` (a one-element list) is held by nothing else, as torch's use_count tells."""
    return _references(holder) <= _ALONE


def _retain(tensor, grad, create_graph):
    """Add `grad` into the `.grad` of a non-leaf that retains its gradient (out of place, as torch's)."""
    with _grad_lock:
        old = tensor._grad
        if old is None:
            tensor._grad = _own(grad, create_graph)
        else:
            tensor._grad = old + (grad if create_graph else grad.detach())


def _check_anomaly(node, grads):
    for i, g in enumerate(grads):
        if g is not None and bool(jnp.isnan(g._value).any()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


def _call(node, cotangents, create_graph, batch, needed):
    if PROFILING.on and PROFILING.claims(node):  # a profiler is recording: the node runs as its spans
        return evaluated_node(_call, node, cotangents, create_graph, batch, needed)
    if not _graph._anomaly["enabled"]:
        return node.backward_needed(cotangents, create_graph, batch, needed)
    try:
        with _anomaly.running(node):
            grads = node.backward_needed(cotangents, create_graph, batch, needed)
        if _graph._anomaly["check_nan"]:
            _check_anomaly(node, grads)
        return grads
    except Exception:
        _anomaly.warn_forward_traces(node)
        raise


def _deliver(buffers, edge, grad):
    """Add `grad` into the gradients of `edge.node`'s outputs. None still makes the node run: as in torch, every node
    an edge of a node that ran leads to runs (its hooks see None for an output without a gradient)."""
    slot = buffers.get(edge.node)
    if slot is None:
        slot = buffers[edge.node] = [None] * len(edge.node.out_meta)
    if grad is not None:
        slot[edge.output_nr] = _add(slot[edge.output_nr], grad)


@escapes_deep_nesting
def run_backward(roots, root_grads, captures, *, retain_graph, create_graph, accumulate, batch=None):
    """_run_backward as this thread's current backward (_graph_task.py): the callbacks queued while it runs run at
    its end, in the grad mode it was called in."""
    with _graph_task.running(_graph_task.GraphTask(captures, accumulate)) as task:
        results = _run_backward(
            roots,
            root_grads,
            captures,
            task,
            retain_graph=retain_graph,
            create_graph=create_graph,
            accumulate=accumulate,
            batch=batch,
        )
        task.run_callbacks()
    return results


def _run_backward(roots, root_grads, captures, task, *, retain_graph, create_graph, accumulate, batch):
    """Propagate `root_grads` (Tensors) from the `roots` (GradientEdges) through the graph.

    Without `accumulate` (grad()), `captures` lists GradientEdges whose incoming gradient is returned (None when
    unreached). With it (backward()), every reached leaf's `.grad` is accumulated into; where `captures` are given
    (backward's `inputs`), their nodes are the ones it runs to, as torch's: each runs whole (its hooks, a leaf's
    accumulation), and only the nodes that lead to one run. With a `batch` (vmap._batching.Batch),
    every gradient carries a leading batch axis and each node's backward runs over all rows at once, or over
    `batch.chunk_size` rows at a time (vmap/_chunks.py).
    A structure seen often enough runs as one compiled program (a large one as a sequence of programs,
    _segments.py); otherwise each node runs in turn.
    """
    root_nodes = list(dict.fromkeys([e.node for e in roots]))
    to_inputs = accumulate and bool(captures)
    fused_key = None if batch is None else batch.fused_key
    # a program runs to backward's inputs by capturing their gradients: a leaf's is accumulated here
    walk = _fused.walk(root_nodes, roots, root_grads, captures, accumulate and not to_inputs, fused_key)
    task.order = walk.nodes
    fuse_now = batch is not None and (batch.shards is not None or batch.chunk_size == AUTO)
    if batch is not None and batch.chunk_size == AUTO:
        batch, walk = _auto_chunk(walk, batch, root_grads, create_graph)
    with set_grad_enabled(create_graph), _saved_hooks.kept():
        run, compiling = _compiled_run(walk, create_graph, fuse_now)
        if run is not None:
            results, leaves, leaf_grads = run(walk, root_grads, create_graph, release=not retain_graph)
            for leaf, g in zip(leaves, leaf_grads):
                _accumulate(leaf.variable, g, create_graph)
            if to_inputs:
                return _accumulate_inputs(captures, results, create_graph)
            return [_captured(edge, g) for edge, g in zip(captures, results)]
        # while its program compiles, the forward that program computes is not fused (and compiled) on its own
        start = _payback.clock()
        with _lazy.unfused() if compiling else contextlib.nullcontext():
            results = _per_node(
                walk,
                roots,
                root_grads,
                captures,
                retain_graph=retain_graph,
                create_graph=create_graph,
                accumulate=accumulate,
                batch=batch,
            )
        if walk.key is not None:
            _payback.note_unfused(walk.key, _payback.clock() - start)
        return results


def _captured(edge, grad):
    """grad()'s result for a captured edge: a leaf's gradient cast to its grad_dtype."""
    return _grad_dtype.for_leaf(edge.node.variable, grad) if type(edge.node) is AccumulateGrad else grad


def _accumulate_inputs(captures, grads, create_graph):
    """backward(inputs=...) run as a program: the captured gradients of the leaves among the inputs accumulate
    into their `.grad` (a leaf with hooks, or a non-leaf input, which retains its gradient, runs per node)."""
    for edge, g in zip(captures, grads):
        if g is not None and type(edge.node) is AccumulateGrad:
            _accumulate(edge.node.variable, g, create_graph)
    return [None] * len(captures)


def _per_node(walk, roots, root_grads, captures, *, retain_graph, create_graph, accumulate, batch):
    """The per-node tier: the walk's nodes in turn, over all rows of a batch at once or a chunk at a time."""
    wanted, targets = {}, frozenset()
    if accumulate:  # backward(inputs=...): the inputs' nodes run whole
        targets = frozenset([e.node for e in captures])
    else:
        for i, edge in enumerate(captures):
            wanted.setdefault(edge.node, []).append((edge.output_nr, i))
    order = execution_order(walk.nodes)
    needed = _needed(order, targets or wanted) if captures else None

    def walk_rows(grads, rows, retain):
        buffers = {}
        for edge, g in zip(roots, grads):
            _deliver(buffers, edge, g)
        return _run_nodes(
            order,
            buffers,
            needed,
            _Wanted(wanted, targets, len(captures)),
            retain_graph=retain,
            create_graph=create_graph,
            accumulate=accumulate,
            batch=rows,
        )

    # a recorded backward (create_graph) keeps every row's gradients: no chunk to bound; nor do rows that cannot be
    # cut on the host (traced, deferred, meta or sharded values, or a backend other than the CPU)
    rows = None if batch is None or create_graph or not batch.in_chunks else host_arrays([g._v for g in root_grads])
    if rows is None:
        return walk_rows(root_grads, batch, retain_graph)
    _saved_to_device(order)

    def walk_chunk(arrays, chunk, last):
        grads = walk_rows([Tensor._wrap(a) for a in arrays], chunk, retain_graph if last else True)
        return [None if g is None else _lazy.materialize(g._v) for g in grads]

    return [None if r is None else Tensor._wrap(r) for r in in_chunks(walk_chunk, rows, batch)]


def _saved_to_device(order):
    """Move the saved values on the host to the device for good: every chunk of a batch reads them, and a host
    array is moved again at every read (the SavedValue keeps the host array)."""
    for node in order:
        for s in node.saved_values():
            if type(s.value) is np.ndarray:
                s.value = to_device(s.value)


def _auto_chunk(walk, batch, root_grads, create_graph):
    """(the batch, the walk) with chunk_size="auto" resolved: the largest chunk whose compiled program fits the
    memory budget (vmap/_memory.py), chosen once per structure. A backward that is no single program (custom
    Functions, hooks, anomaly mode, segments) has none to measure: its rows run at once, with a warning."""
    if walk.key is None or not _fusion.allows(len(walk.nodes)):
        warnings.warn(
            'chunk_size="auto": this backward does not compile to one program whose memory can be '
            "measured (it has a custom Function or a hook, runs in anomaly mode or is too large for one "
            "program); its rows run all at once. Give chunk_size a number to bound them.",
            UserWarning,
            stacklevel=5,
        )
        chunk = None
    else:
        chunk = auto_chunk(
            ("backward", walk.key, create_graph),
            lambda k: _fused.compile_now(
                _fused.rebatched(walk, batch.with_chunk(k).fused_key), root_grads, create_graph
            ),
            batch.padded // batch.blocks,
        )
    batch = batch.with_chunk(chunk)
    return batch, walk if walk.key is None else _fused.rebatched(walk, batch.fused_key)


def _compiled_run(walk, create_graph, fuse_now):
    """(what runs a walk's backward as compiled programs, or None while the per-node tier does; whether its program
    is compiling meanwhile): a structure seen often enough runs as one program once it is compiled, or in segments
    when too large for one (_segments.py). A backward of values that depend on the rows of a vmap.vmap input is
    recorded as its program from the first sighting: the whole function compiles as one program anyway, whose
    structure must not change from call to call. With `fuse_now` (a batch whose rows are split over devices, or
    whose chunk was chosen from its program's memory) the program compiles now, in this thread."""
    if walk.key is None or not (
        fuse_now
        or _lazy.should_fuse(walk.key, functools.partial(_program_mixes, walk), lambda: _fused.stored(walk))
        or (not walk.direct and _lazy.fusing())
    ):
        return None, False
    if not _fusion.allows(len(walk.nodes)):
        return functools.partial(_segments.run, limit=_fusion.segment_size()), False
    if fuse_now or _fused.ready(walk, create_graph):
        return _fused.run, False
    return None, True


def _program_mixes(walk):
    """What the walk's programs are made of, for the cost of compiling them (_payback.compile_estimate): the ops of
    its nodes, or where it runs in segments, of each distinct segment. The cost model asks once per structure."""
    limit = _fusion.segment_size()
    if _fusion.allows(len(walk.nodes)) or limit is None:
        return _fused.mix(walk.key)
    return _segments.distinct_mixes(_fused.template(walk.key).plan, limit)


def _run_prehooks(node, hooks, cotangents, batch):
    """A node's pre-hooks, on the gradients of the outputs torch's node takes (not max's indices), in place."""
    outputs = node.torch_outputs()
    for k, g in zip(outputs, run_prehooks(hooks, [cotangents[k] for k in outputs], batch)):
        cotangents[k] = g


def _run_accumulate(node, holder, create_graph, batch):
    """An AccumulateGrad node run by backward() on the gradient in `holder` (a list the engine holds it in, and
    nothing else of the engine): its pre-hooks, the accumulation into `.grad` (and the leaf's post-accumulate-grad
    hooks), its hooks."""
    if PROFILING.on and PROFILING.claims(node):  # a profiler is recording: the accumulation runs as its spans
        return accumulated(_run_accumulate, node, holder, create_graph, batch)
    hooks = node.node_hooks
    if hooks and hooks.pre:
        (holder[0],) = run_prehooks(hooks.pre, [holder[0]], batch)
    if holder[0] is not None:
        # torch's .grad takes over a first gradient nobody else holds (its storage: the same data_ptr)
        take = not create_graph and holder[0]._view is None and _only_held_by(holder)
        _accumulate(node.variable, holder[0], create_graph, take)
    if hooks and hooks.post:
        run_posthooks(hooks.post, [], [holder[0]], batch)


class _Wanted(namedtuple("_Wanted", ["captures", "targets", "count"])):
    """What a per-node walk is for: `captures` maps a node to the (output, result index) pairs whose gradients
    grad() returns, `targets` are the nodes backward(inputs=...) runs to (they run even where none of their own
    edges leads on), `count` is the number of results."""


def _run_nodes(order, buffers, needed, wanted, *, retain_graph, create_graph, accumulate, batch):
    """The per-node walk: hooks, retain_grad, captures, then each node's backward in topological order."""
    for node in order:  # each node's backward reads its saved values: keep them once computed
        for s in node.saved_values():
            _lazy.keep(s.value)
    results = [None] * wanted.count
    for node in order:
        cotangents = buffers.pop(node, None)
        if cotangents is None or (needed is not None and node not in needed):
            continue
        if isinstance(node, AccumulateGrad):
            cotangents[0] = _leaf_gradient(node, cotangents[0], batch)
            for _, i in wanted.captures.get(node, ()):
                results[i] = cotangents[0]
            if accumulate:
                _run_accumulate(node, cotangents, create_graph, batch)
            continue
        _run_tensor_hooks(node, cotangents, create_graph, batch)
        for nr, i in wanted.captures.get(node, ()):
            results[i] = cotangents[nr]
        edges_needed = None if needed is None else tuple([e is not None and e.node in needed for e in node.edges])
        if edges_needed is not None and True not in edges_needed and node not in wanted.targets:
            continue  # grad() only captures what reaches this node
        _deliver_all(buffers, node.edges, _node_gradients(node, cotangents, create_graph, batch, edges_needed))
        if not retain_graph:
            node.release()
    return results


def _deliver_all(buffers, edges, grads):
    """Each of a node's gradients to where its edge leads (the walk keeps no other reference to them)."""
    for edge, g in zip(edges, grads):
        if edge is not None:
            _deliver(buffers, edge, g)


def _leaf_gradient(node, grad, batch):
    """A leaf's gradient, cast to its grad_dtype, after its tensor hooks."""
    grad = _grad_dtype.for_leaf(node.variable, grad)
    hooks = node.variable._hooks
    return run_tensor_hooks(hooks, grad, batch) if hooks else grad


def _run_tensor_hooks(node, cotangents, create_graph, batch):
    """A node's tensor pre-hooks on its outputs' gradients (in place), then retain_grad's accumulation."""
    for nr, hooks in list((node.tensor_pre_hooks or {}).items()):
        if hooks:
            cotangents[nr] = run_tensor_hooks(hooks, cotangents[nr], batch)
    if node.retained and batch is None:
        for nr, ref in list(node.retained.items()):
            t = ref()
            if t is not None and cotangents[nr] is not None and t.grad_fn is node:
                _retain(t, cotangents[nr], create_graph)


def _node_gradients(node, cotangents, create_graph, batch, edges_needed):
    """A node's operand gradients: its pre-hooks, its backward (unless no gradient comes in), its hooks."""
    hooks = node.node_hooks
    if hooks and hooks.pre:
        _run_prehooks(node, hooks.pre, cotangents, batch)
    if any(c is not None for c in cotangents) or (batch is None and node.backward_without_gradients):
        grads = _call(node, cotangents, create_graph, batch, edges_needed)
    else:
        grads = [None] * len(node.edges)  # no gradient in, none out
    if hooks and hooks.post:
        grads = run_posthooks(hooks.post, grads, [cotangents[k] for k in node.torch_outputs()], batch)
    return grads
