"""A per-node backward walk over a batch, run `chunk_size` rows at a time: the gradients flowing between nodes then
hold one chunk's rows, not the whole batch's, so chunk_size bounds memory on a structure's first calls too (the
fused program bounds it with lax.map). Every chunk has the same number of rows (the last one padded with zeros), so
all chunks run the same per-node kernels."""

import contextlib

import numpy as np

from . import fallback_warnings


def in_chunks(walk, values, batch):
    """`walk(arrays, batch, last)` (the per-node walk: a list of arrays or None) over the rows of `values` (host
    arrays of `batch.padded` rows) one chunk at a time, each a batch of its own (`last`: the final chunk); the
    results of the chunks joined into host arrays. A step that cannot be vectorized runs once per row of each chunk;
    a FallbackWarning is given once, for the whole batch."""
    k, results = batch.chunk_size, None
    for start in range(0, batch.padded, k):
        quiet = fallback_warnings(False) if start else contextlib.nullcontext()  # the first chunk warns
        with quiet:
            part = walk([_rows(v, start, k) for v in values], batch.rows(start), start + k >= batch.padded)
        results = _gather(results, part, start, batch.padded)
    return results


def _rows(value, start, k):
    """Rows start..start+k of a host array, in memory of their own (zeros past its end)."""
    rows = value[start : start + k]
    if len(rows) < k:
        rows = np.concatenate([rows, np.zeros((k - len(rows),) + rows.shape[1:], rows.dtype)])
    return np.array(rows)  # a copy: the caller may write into its array after the call


def _gather(results, part, start, padded):
    """Write one chunk's results (arrays or None) into the whole batch's (host arrays of `padded` rows, made at the
    first chunk that gives each a value)."""
    results = [None] * len(part) if results is None else results
    for i, r in enumerate(part):
        if r is None:
            continue  # a hook that dropped this gradient for these rows: they stay zeros
        rows = np.asarray(r)
        if results[i] is None:
            results[i] = np.zeros((padded,) + rows.shape[1:], rows.dtype)
        results[i][start : start + len(rows)] = rows[: padded - start]
    return results
