"""The backward walk shared by grad() and backward(): discover, order, run each node, accumulate."""
import warnings

import jax.numpy as jnp

from . import _graph, _lazy, _program
from ._grad_mode import set_grad_enabled
from ._graph import AccumulateGrad
from vmap._fallback import run_batched


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


def _add(a, b):
    return b if a is None else a + b


def _call_hook(hook, grad):
    result = hook(grad)
    if result is None:
        return grad
    if result.shape != grad.shape:
        raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has changed the size of value")
    return result


def _run_hooks(hooks, grad, batch):
    """Apply tensor hooks in order; in batched mode each hook sees per-row gradients."""
    for hook in list(hooks.values()):
        if batch is None:
            grad = _call_hook(hook, grad)
        else:
            name = f"hook '{getattr(hook, '__name__', hook)}'"
            (grad,) = run_batched(name, lambda cts, hook=hook: [_call_hook(hook, cts[0])], [grad], batch, key=hook)
    return grad


def _accumulate(variable, grad, create_graph):
    if not create_graph:
        grad = grad.detach()
    old = variable._grad
    if old is None:
        variable._grad = grad
    elif create_graph:
        variable._grad = old + grad
    else:
        old._value = old._value + grad._value
        old._counter.value += 1


def _check_anomaly(node, grads):
    for i, g in enumerate(grads):
        if g is not None and bool(jnp.isnan(g._value).any()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


def _call(node, cotangents, create_graph, batch):
    if not _graph._anomaly["enabled"]:
        return node.backward(cotangents, create_graph, batch)
    try:
        grads = node.backward(cotangents, create_graph, batch)
        if _graph._anomaly["check_nan"]:
            _check_anomaly(node, grads)
        return grads
    except Exception:
        if node.trace:
            warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
                          f"{node.trace}", UserWarning, stacklevel=3)
        raise


def _deliver(buffers, edge, grad):
    slot = buffers.setdefault(edge.node, [None] * len(edge.node.out_meta))
    slot[edge.output_nr] = _add(slot[edge.output_nr], grad)


def run_backward(roots, root_grads, captures, *, retain_graph, create_graph, accumulate, batch=None):
    """Propagate `root_grads` (Tensors) from the `roots` (GradientEdges) through the graph.

    `captures` lists GradientEdges whose incoming gradient is returned (None when unreached). When
    `accumulate`, every reached leaf's `.grad` is accumulated into. With a `batch` (vmap._batching.Batch),
    every gradient carries a leading batch axis and each node's backward runs over all rows at once.
    A structure seen often enough runs as one compiled program; otherwise each node runs in turn.
    """
    root_nodes = list(dict.fromkeys([e.node for e in roots]))
    walk = _program.walk(root_nodes, roots, root_grads, captures, accumulate,
                         None if batch is None else batch.program_key)
    with set_grad_enabled(create_graph):
        if walk.key is not None and _lazy.should_fuse(walk.key):
            results, leaves, leaf_grads = _program.run(walk, root_grads, create_graph, release=not retain_graph)
            for leaf, g in zip(leaves, leaf_grads):
                _accumulate(leaf.variable, g, create_graph)
            return results
        buffers = {}
        for edge, g in zip(roots, root_grads):
            _deliver(buffers, edge, g)
        wanted = {}
        for i, edge in enumerate(captures):
            wanted.setdefault(edge.node, []).append((edge.output_nr, i))
        order = walk.nodes[::-1]
        return _run_nodes(order, buffers, _needed(order, wanted) if captures else None, wanted, len(captures),
                          retain_graph=retain_graph, create_graph=create_graph, accumulate=accumulate, batch=batch)


def _run_nodes(order, buffers, needed, wanted, n_captures, *, retain_graph, create_graph, accumulate, batch):
    """The per-node walk: hooks, retain_grad, captures, then each node's backward in topological order."""
    for node in order:  # each node's backward reads its saved values: keep them once computed
        for s in node.saved_values():
            _lazy.keep(s.value)
    results = [None] * n_captures
    for node in order:
        cotangents = buffers.pop(node, None)
        if cotangents is None or (needed is not None and node not in needed):
            continue
        if isinstance(node, AccumulateGrad):
            leaf, grad = node.variable, cotangents[0]
            if grad is None:
                continue
            if leaf._hooks:
                grad = _run_hooks(leaf._hooks, grad, batch)
            for _, i in wanted.get(node, ()):
                results[i] = grad
            if accumulate:
                _accumulate(leaf, grad, create_graph)
            continue
        for nr, hooks in (node.tensor_pre_hooks or {}).items():
            if cotangents[nr] is not None and hooks:
                cotangents[nr] = _run_hooks(hooks, cotangents[nr], batch)
        if node.retained and batch is None:
            for nr, ref in node.retained.items():
                t = ref()
                if t is not None and cotangents[nr] is not None and t.grad_fn is node:
                    g = cotangents[nr] if create_graph else cotangents[nr].detach()
                    t._grad = g if t._grad is None else t._grad + g
        for nr, i in wanted.get(node, ()):
            results[i] = cotangents[nr]
        if needed is not None and not any(e is not None and e.node in needed for e in node.edges):
            continue
        if all(c is None for c in cotangents):
            continue
        grads = _call(node, cotangents, create_graph, batch)
        for hook in list((node.post_hooks or {}).values()):
            hook(tuple(grads), tuple(cotangents))
        if not retain_graph:
            node.release()
        for edge, g in zip(node.edges, grads):
            if edge is not None and g is not None:
                _deliver(buffers, edge, g)
    return results
