"""Compressed evaluation on the recorded graph: one batched grad call with one seed per color, then one gather of
the nonzeros out of the compressed products.

- "reverse": the seeds are combinations of output rows, the products S J come from one is_grads_batched backward;
- "forward": the seeds are combinations of input columns; J S^T comes from the backward of a backward taken with
  respect to its cotangent (J s is the gradient of <J^T u, s> in u), batched over the seeds;
- Hessians: H s for each seed, one batched backward of the create_graph gradient.

The seeds are device constants kept with the pattern; the batch runs as any other, so chunk_size and memory
budgets apply to it."""

import numpy as np

from .._batched import fixed_rows
from .._factories import zeros, zeros_like
from .._grad_mode import enable_grad
from .._host import host_arrays, to_device
from .._lazy import materialize
from .._tensor import Tensor
from ..autograd._api import grad


def probe_seed(sparsity, mode):
    """A random seed (fixed per pattern and mode) sent along with a user's pattern's seeds: its product, computed
    by the derivative itself, must equal the one the decompressed nonzeros give."""
    size = sparsity.shape[0] if mode == "reverse" else sparsity.shape[1]
    return np.random.default_rng(size).standard_normal(size)


def _seed_blocks(sparsity, mode, like, sizes, probe):
    """The seeds of `mode` as Tensors, one (n_colors, numel) block per tensor of `like` (in its dtype), then the
    probe seed's row where `probe`; kept on the pattern per split and dtype."""
    key = ("seeds", mode, tuple(sizes), tuple(x.dtype for x in like), probe)
    found = sparsity._plans.get(key)
    if found is None:
        seeds, _ = sparsity.plan(mode)
        if probe:
            seeds = np.concatenate([seeds, probe_seed(sparsity, mode)[None]])
        start, found = 0, []
        for x, n in zip(like, sizes):
            found.append(fixed_rows(to_device(np.ascontiguousarray(seeds[:, start : start + n], x.dtype.np))))
            start += n
        sparsity._plans[key] = found
    return [Tensor._wrap(a) for a in found]


def _parts(grads, refs, k, dtypes):
    """The (k, numel) compressed products per tensor of `refs` from batched gradients (None: zeros of `dtypes`)."""
    parts = []
    for g, x, dtype in zip(grads, refs, dtypes):
        shape = (k, x.numel())
        parts.append(zeros(shape, dtype=dtype) if g is None else g if tuple(g.shape) == shape else g.reshape(shape))
    return parts


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


def jacobian_parts(outputs, inputs, sparsity, mode, create_graph, chunk_size, probe=False):
    """The compressed products of the Jacobian of `outputs` with respect to `inputs` (Tensors of the recorded
    graph) in `mode`: S J per input ("reverse"), J S^T per output ("forward"), with the probe seed's product as
    one more row where `probe`; None for a pattern without nonzeros (and no probe)."""
    k = sparsity.plan(mode)[0].shape[0] + probe
    if k == 0:
        return None
    out_sizes, in_sizes = [o.numel() for o in outputs], [x.numel() for x in inputs]
    with enable_grad():
        if mode == "reverse":
            seeds = _seed_blocks(sparsity, mode, outputs, out_sizes, probe)
            grads = _batched(outputs, inputs, seeds, create_graph, chunk_size)
            return _parts(grads, inputs, k, [x.dtype for x in inputs])
        probes = [zeros_like(o, requires_grad=True) for o in outputs]
        pulled = grad(outputs, inputs, probes, create_graph=True, allow_unused=True)
        tangents = _seed_blocks(sparsity, mode, inputs, in_sizes, probe)
        grads = _batched(list(pulled), probes, tangents, create_graph, chunk_size)
        return _parts(grads, outputs, k, [o.dtype for o in outputs])


def hessian_parts(output, inputs, sparsity, mode, create_graph, chunk_size, probe=False):
    """The compressed products H S^T of the Hessian of the single-element `output`, per input: one batched
    Hessian-vector product per color (and the probe's), of one create_graph gradient; None for a pattern without
    nonzeros."""
    k = sparsity.plan(mode)[0].shape[0] + probe
    if k == 0:
        return None
    with enable_grad():
        gradient = grad([output], inputs, create_graph=True, allow_unused=True)
        tangents = _seed_blocks(sparsity, mode, inputs, [x.numel() for x in inputs], probe)
        grads = _batched(list(gradient), inputs, tangents, create_graph, chunk_size)
        return _parts(grads, inputs, k, [x.dtype for x in inputs])


def block_values(parts, sparsity, mode, out_sizes, in_sizes, dtypes):
    """values[i][j]: the nonzeros of block (output i, input j), CSR order, gathered from the compressed parts
    (per input, or per output in forward mode); `dtypes[i][j]` for a pattern without nonzeros."""
    blocks = sparsity.blocks(out_sizes, in_sizes)
    if parts is None:
        return [[zeros(0, dtype=d) for d in row] for row in dtypes]
    sources = _block_sources(sparsity, mode, out_sizes, in_sizes)
    return [
        [_gather(parts[j if mode != "forward" else i], sources[i][j]) for j in range(len(in_sizes))]
        for i in range(len(blocks))
    ]


def _block_sources(sparsity, mode, out_sizes, in_sizes):
    """Per block, where each of its nonzeros is in its part, flattened (NumPy int64)."""
    key = ("sources", mode, tuple(out_sizes), tuple(in_sizes))
    found = sparsity._plans.get(key)
    if found is None:
        source = sparsity.plan(mode)[1]
        along = sparsity.shape[0] if mode == "forward" else sparsity.shape[1]
        colors, position = np.divmod(source, along)
        sizes = out_sizes if mode == "forward" else in_sizes
        starts = np.cumsum([0, *sizes])
        found = []
        for i, row in enumerate(sparsity.blocks(out_sizes, in_sizes)):
            found.append([])
            for j, (positions, _, _) in enumerate(row):
                p = i if mode == "forward" else j
                c, t = (colors, position) if positions is None else (colors[positions], position[positions])
                found[-1].append(c * sizes[p] + (t - starts[p]))
        sparsity._plans[key] = found
    return found


def _gather(part, source):
    """part.reshape(-1)[source]: with NumPy where the part is concrete on the CPU and needs no graph (a fifth of a
    kernel's time), else as an indexing op (recorded under create_graph)."""
    if not part.requires_grad:
        host = host_arrays([materialize(part._v)])
        if host is not None:
            return Tensor._wrap(host[0].reshape(-1)[source])
    return part.reshape(-1)[Tensor._wrap(to_device(source))]


def check_pattern(parts, sparsity, mode, argname):
    """A user's pattern must hold every nonzero. Two checks, on the host: a compressed slot that no nonzero of the
    pattern adds to must be zero; and the probe seed's product (the last row of the parts) must equal the one the
    decompressed nonzeros give, to rounding: a nonzero outside the pattern that shares a slot with one inside
    corrupts that one, and the probe's product shows it."""
    if parts is None:
        return
    compressed = np.concatenate([np.asarray(p.detach().numpy(), np.float64) for p in parts], axis=1)
    product, compressed = compressed[-1], compressed[:-1]
    m, n = sparsity.shape
    colors, rows, cols = sparsity.coloring(mode), sparsity.rows, sparsity.cols
    if mode == "reverse":
        covered = colors[rows] * n + cols
    else:
        covered = colors[cols] * (m if mode == "forward" else n) + rows
    mask = np.ones(compressed.size, bool)
    mask[covered] = False
    outside = np.flatnonzero(compressed.reshape(-1)[mask] != 0)
    probe = probe_seed(sparsity, mode)
    values = compressed.reshape(-1)[sparsity.plan(mode)[1]] if len(compressed) else np.zeros(0)
    if mode == "reverse":  # u^T J
        terms, at, size = probe[rows] * values, cols, n
    else:  # J v (H v)
        terms, at, size = values * probe[cols], rows, m
    expected = np.bincount(at, weights=terms, minlength=size)
    scale = np.bincount(at, weights=np.abs(terms), minlength=size) + np.abs(product)
    tolerance = 1e-4 if min(p.dtype.itemsize for p in parts) < 8 else 1e-9
    wrong = np.flatnonzero(np.abs(expected - product) > tolerance * np.maximum(scale, np.finfo(float).tiny))
    if len(outside) or len(wrong):
        side = "column" if mode == "reverse" else "row"
        where = f"{side} {int(wrong[0])}" if len(wrong) else f"{len(outside)} compressed values"
        raise ValueError(
            f"{argname}: the given pattern is missing entries: the derivative is nonzero outside it (at {where}). "
            'Pass a pattern that holds every nonzero, or sparsity="auto".'
        )
