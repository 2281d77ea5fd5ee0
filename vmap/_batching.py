"""grad(..., is_grads_batched=True): pad the batch of cotangents to a bucket, run the backward once over
all rows (vectorized or chunked), slice the padding off."""
import jax
import numpy as np

from batched_grad import _engine
from ._rows import bucket


class Batch:
    """The batch a backward runs over: `size` real rows, padded to `padded`, processed `chunk_size` at a time."""

    __slots__ = ("size", "padded", "chunk_size")

    def __init__(self, size, padded, chunk_size):
        self.size, self.padded, self.chunk_size = size, padded, chunk_size

    @property
    def key(self):
        """The static part of batched kernels (the padded size is in the avals)."""
        return (self.chunk_size,)


def check_chunk_size(chunk_size):
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1):
        raise ValueError(f"chunk_size must be None or a positive int, but got {chunk_size!r}")


def batched_backward(roots, grads, captures, *, retain_graph, create_graph, chunk_size):
    check_chunk_size(chunk_size)
    sizes = [g._v.shape[0] for g in grads]
    if len(set(sizes)) > 1:
        raise ValueError("If `is_grads_batched=True`, every grad_output must have the same batch size (its first "
                         f"dimension), but got sizes {sizes}.")
    batch = Batch(sizes[0], bucket(sizes[0], chunk_size), chunk_size)
    if batch.padded > batch.size:
        grads = [_pad_rows(g, batch.padded) for g in grads]
    results = _engine.run_backward(roots, grads, captures, retain_graph=retain_graph, create_graph=create_graph,
                                   accumulate=False, batch=batch)
    if batch.padded > batch.size:
        results = [None if r is None else _take_rows(r, batch.size) for r in results]
    return results


def _on_host(t):
    # padding and slicing on the host compile nothing; a recorded (differentiable or traced) value cannot go there
    return not t.requires_grad and not isinstance(t._value, jax.core.Tracer)


def _pad_rows(g, padded):
    import batched_grad as bg

    if not _on_host(g):
        return bg.cat([g, bg.zeros((padded - g.shape[0],) + tuple(g.shape[1:]), dtype=g.dtype)])
    rows = np.zeros((padded,) + tuple(g.shape[1:]), g._v.dtype)
    rows[:g.shape[0]] = np.asarray(g._value)
    return bg.from_numpy(rows)


def _take_rows(r, size):
    import batched_grad as bg

    return bg.from_numpy(np.asarray(r._value)[:size]) if _on_host(r) else r[:size]
