"""A node's Python-level backward (a Function.backward, a hook, vmap.vmap's rerun) over a batch of cotangents, as
the batching layer runs it (vmap/_fallback.py: vectorized where it can be, else row by row): the layer passes
arrays, the node's function takes and gives Tensors. A recorded backward (create_graph) loops over the rows with
recorded ops, so that every row's gradient stays differentiable."""

import numpy as np

from vmap import _fallback

from ._factories import zeros, zeros_like
from ._host import unshared
from ._ops import cat, stack, unbind
from ._tensor import Tensor
from ._vmap_levels import as_transform_rows


def run_batched(name, fn, cotangents, batch, *, vectorize=True, key=None):
    """fn(list of one row's cotangents: Tensors or None) -> list of Tensors or None, over every row of `cotangents`
    (Tensors of `batch.padded` rows, or None), as a list of batched Tensors or None."""
    if not vectorize:
        return _recorded_rows(name, fn, cotangents, batch)

    def on_arrays(rows):
        outs = fn([None if r is None else Tensor._wrap(r) for r in rows])
        return [None if o is None else _array(o) for o in outs]

    on_arrays = as_transform_rows(on_arrays)

    results = _fallback.run_batched(
        name, on_arrays, [None if c is None else _array(c) for c in cotangents], batch, key=key
    )
    return [None if r is None else Tensor._wrap(r) for r in results]


def _array(tensor):
    """A Tensor's values as an array to batch over: host data stays on the host (memory shared with NumPy copied)."""
    v = tensor._v
    return unshared(v) if type(v) is np.ndarray else tensor._value


def _recorded_rows(name, fn, cotangents, batch):
    _fallback.announce_rows(name, "create_graph=True", batch)
    n_rows = batch.looped
    per_row = [[None] * n_rows if c is None else unbind(c)[:n_rows] for c in cotangents]
    rows = [fn([cts[b] for cts in per_row]) for b in range(n_rows)]
    return [_stacked(parts, batch.padded) for parts in zip(*rows)]


def _stacked(parts, padded):
    """The rows' results stacked (recorded), zeros where a row gave None and below the real rows."""
    if all(p is None for p in parts):
        return None
    like = next(p for p in parts if p is not None)
    stacked = stack([zeros_like(like) if p is None else p for p in parts])
    if padded > len(parts):
        stacked = cat([stacked, zeros((padded - len(parts),) + tuple(like.shape), dtype=like.dtype)])
    return stacked
