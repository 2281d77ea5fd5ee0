"""A per-node backward walk over a batch, run `chunk_size` rows at a time: the gradients flowing between nodes then
hold one chunk's rows, not the whole batch's, so chunk_size bounds memory on a structure's first calls too (the
fused program bounds it with lax.map). Every chunk has the same number of rows (the last one padded with zeros), so
all chunks run the same per-node kernels."""
import contextlib

import numpy as np

from . import fallback_warnings


def chunkable(grads, batch):
    """The arrays of `grads` (Tensors with `batch.padded` rows) as host arrays to cut into chunks, or None where the
    walk runs over all rows at once: one chunk or none asked for, or rows that cannot be cut on the host (a traced,
    deferred, meta or sharded value, or a backend other than the CPU)."""
    from batched_grad._host import host_arrays

    k = batch.chunk_size
    return None if k is None or batch.padded <= k else host_arrays([g._v for g in grads])


def in_chunks(walk, values, batch, retain_graph):
    """`walk(grads, batch, retain_graph)` (the per-node walk: a list of batched Tensors or None) over the rows of
    `values` (chunkable's arrays) one chunk at a time, each a batch of its own; the results of the chunks joined.
    A tensor hook or Function.backward runs once per chunk (as under torch.func.jacrev's chunk_size), or once per
    row where it cannot be vectorized; a FallbackWarning is given once, for the whole batch."""
    k, results = batch.chunk_size, None
    for start in range(0, batch.padded, k):
        last = start + k >= batch.padded
        quiet = fallback_warnings(False) if start else contextlib.nullcontext()  # the first chunk warns
        with quiet:
            part = walk([_rows(v, start, k) for v in values], batch.rows(start), retain_graph if last else True)
        results = _gather(results, part, start, batch.padded)
    return results


def _rows(value, start, k):
    """Rows start..start+k of a host array as a Tensor of its own memory (zeros past its end)."""
    from batched_grad._tensor import Tensor

    rows = value[start:start + k]
    if len(rows) < k:
        rows = np.concatenate([rows, np.zeros((k - len(rows),) + rows.shape[1:], rows.dtype)])
    return Tensor._wrap(np.array(rows))  # a copy: the caller may write into its array after the call


def _gather(results, part, start, padded):
    """Write one chunk's results (Tensors or None) into the whole batch's (host arrays of `padded` rows, made at
    the first chunk that gives each a value); returns the whole batch's results as Tensors or None."""
    from batched_grad._lazy import materialize
    from batched_grad._tensor import Tensor

    results = [None] * len(part) if results is None else results
    for i, r in enumerate(part):
        if r is None:
            continue  # a hook that dropped this gradient for these rows: they stay zeros
        rows = np.asarray(materialize(r._v))
        if results[i] is None:
            results[i] = Tensor._wrap(np.zeros((padded,) + rows.shape[1:], rows.dtype))
        whole = results[i]._v
        whole[start:start + len(rows)] = rows[:padded - start]
    return results
