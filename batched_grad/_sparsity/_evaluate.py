"""Compressed evaluation on the recorded graph: one batched grad call with one seed per color, then one gather of
the nonzeros out of the compressed products.

- "reverse": the seeds are combinations of output rows, the products S J come from one is_grads_batched backward;
- "forward": the seeds are combinations of input columns; J S^T comes from the backward of a backward taken with
  respect to its cotangent (J s is the gradient of <J^T u, s> in u), batched over the seeds;
- Hessians: H s for each seed, one batched backward of the create_graph gradient.

The seeds are device constants kept with the pattern; the batch runs as any other, so chunk_size and memory
budgets apply to it."""

import numpy as np

from .._factories import zeros, zeros_like
from .._grad_mode import enable_grad
from .._host import host_arrays, to_device
from .._lazy import materialize
from .._ops import cat
from .._tensor import Tensor
from ..autograd._api import grad


def _seed_blocks(sparsity, mode, like, sizes):
    """The seeds of `mode` as Tensors, one (n_colors, numel) block per tensor of `like` (in its dtype), kept on the
    pattern per split and dtype."""
    key = ("seeds", mode, tuple(sizes), tuple(x.dtype for x in like))
    found = sparsity._plans.get(key)
    if found is None:
        seeds, _ = sparsity.plan(mode)
        start, found = 0, []
        for x, n in zip(like, sizes):
            found.append(to_device(np.ascontiguousarray(seeds[:, start : start + n], x.dtype.np)))
            start += n
        sparsity._plans[key] = found
    return [Tensor._wrap(a) for a in found]


def _source(sparsity, mode):
    key = ("source", mode)
    found = sparsity._plans.get(key)
    if found is None:
        found = sparsity._plans[key] = to_device(sparsity.plan(mode)[1])
    return Tensor._wrap(found)


def _compressed(grads, refs, k, dtype):
    """The (k, total) compressed products from per-tensor batched gradients (None: zeros)."""
    parts = []
    for g, x in zip(grads, refs):
        shape = (k, x.numel())
        parts.append(zeros(shape, dtype=dtype) if g is None else g if tuple(g.shape) == shape else g.reshape(shape))
    return parts[0] if len(parts) == 1 else cat(parts, dim=1)


def _decompressed(compressed, sparsity, mode):
    """The nonzeros gathered from the compressed products: with NumPy where they are concrete on the CPU and need
    no graph (a fifth of a kernel's time), else as an indexing op (recorded under create_graph)."""
    if not compressed.requires_grad:
        host = host_arrays([materialize(compressed._v)])
        if host is not None:
            return Tensor._wrap(host[0].reshape(-1)[sparsity.plan(mode)[1]])
    return compressed.reshape(-1)[_source(sparsity, mode)]


def _batched(outputs, inputs, seeds, create_graph, chunk_size):
    """grad of the outputs that require grad, with their seeds as batched cotangents (None for every input when
    none does)."""
    kept = [(o, s) for o, s in zip(outputs, seeds) if o is not None and o.requires_grad]
    if not kept:
        return [None] * len(inputs)
    flat = [o.reshape(-1) if o.ndim != 1 else o for o, _ in kept]
    return grad(
        flat,
        inputs,
        [s for _, s in kept],
        create_graph=create_graph,
        allow_unused=True,
        is_grads_batched=True,
        chunk_size=chunk_size,
    )


def jacobian_values(outputs, inputs, sparsity, mode, create_graph, chunk_size):
    """The values (a 1-D Tensor, CSR order) of the Jacobian of `outputs` with respect to `inputs` (Tensors of
    the recorded graph) at the nonzeros of `sparsity`, computed in `mode`; the compressed products too."""
    out_sizes, in_sizes = [o.numel() for o in outputs], [x.numel() for x in inputs]
    dtype = outputs[0].dtype
    seeds, _ = sparsity.plan(mode)
    k = seeds.shape[0]
    if k == 0:
        return zeros(0, dtype=dtype), None
    with enable_grad():
        if mode == "reverse":
            grads = _batched(
                outputs, inputs, _seed_blocks(sparsity, mode, outputs, out_sizes), create_graph, chunk_size
            )
            compressed = _compressed(grads, inputs, k, dtype)
        else:
            probes = [zeros_like(o, requires_grad=True) for o in outputs]
            pulled = grad(outputs, inputs, probes, create_graph=True, allow_unused=True)
            tangents = _seed_blocks(sparsity, mode, inputs, in_sizes)
            grads = _batched(list(pulled), probes, tangents, create_graph, chunk_size)
            compressed = _compressed(grads, outputs, k, dtype)
    return _decompressed(compressed, sparsity, mode), compressed


def hessian_values(output, inputs, sparsity, mode, create_graph, chunk_size):
    """The values of the Hessian of the single-element `output` with respect to `inputs` at the nonzeros of
    `sparsity`: one batched Hessian-vector product per color, of one create_graph gradient."""
    sizes = [x.numel() for x in inputs]
    seeds, _ = sparsity.plan(mode)
    k = seeds.shape[0]
    if k == 0:
        return zeros(0, dtype=output.dtype), None
    with enable_grad():
        gradient = grad([output], inputs, create_graph=True, allow_unused=True)
        tangents = _seed_blocks(sparsity, mode, inputs, sizes)
        grads = _batched(list(gradient), inputs, tangents, create_graph, chunk_size)
        compressed = _compressed(grads, inputs, k, output.dtype)
    return _decompressed(compressed, sparsity, mode), compressed


def check_covered(sparsity, mode, compressed, argname):
    """A user's pattern must hold every nonzero: a compressed slot that no nonzero of the pattern is read from must
    be zero, else the function has a nonzero outside the pattern (which would also corrupt a nonzero sharing its
    color)."""
    if compressed is None:
        return
    key = ("uncovered", mode)
    uncovered = sparsity._plans.get(key)
    if uncovered is None:
        mask = np.ones(compressed.numel(), bool)
        mask[sparsity.plan(mode)[1]] = False
        uncovered = sparsity._plans[key] = np.flatnonzero(mask)
    if not len(uncovered):
        return
    values = np.asarray(compressed.detach().reshape(-1).numpy())[uncovered]
    bad = np.flatnonzero(values != 0)
    if len(bad):
        k = compressed.shape[0]
        color, position = divmod(int(uncovered[bad[0]]), compressed.numel() // k)
        side = "row" if mode == "forward" else "column"
        raise ValueError(
            f"{argname}: the given pattern is missing entries: the derivative is nonzero outside it ({len(bad)} "
            f"compressed values, e.g. {side} {position} with the seed of color {color}). Pass a pattern that "
            'holds every nonzero, or sparsity="auto".'
        )
