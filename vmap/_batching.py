"""grad(..., is_grads_batched=True): pad the batch of cotangents to a bucket, run the backward once over
all rows (vectorized or chunked), slice the padding off. Cotangents that are a block of the identity (a Jacobian's)
are not read: the backward program makes their rows (batched_grad/_basis.py)."""
import math
import numbers
import weakref
from typing import NamedTuple

import jax
import numpy as np

from batched_grad import _engine
from batched_grad._host import is_shared, read_before, to_device
from ._rows import bucket


class BasisBlock(NamedTuple):
    """A grad_output whose rows are columns `offset`.. of an identity: row b is one at flat index b - offset of a
    row of shape `row_shape`, zero elsewhere."""
    offset: int
    row_shape: tuple
    dtype: np.dtype


class ProgramBatch(NamedTuple):
    """The static part of a whole backward program's batch (the program may read no cotangent at all): per
    grad_output in `basis`, None or its BasisBlock."""
    chunk_size: int | None
    padded: int
    basis: tuple


class KernelBatch(NamedTuple):
    """The static part of a batched kernel (its padded size is in its avals)."""
    chunk_size: int | None


class Batch:
    """The batch a backward runs over: `size` real rows, padded to `padded`, processed `chunk_size` at a time;
    `basis`: per grad_output, None or its BasisBlock. `whole`: the real rows of the whole backward's batch, of which
    this batch may be one chunk (what a FallbackWarning counts)."""

    __slots__ = ("size", "padded", "chunk_size", "basis", "whole")

    def __init__(self, size, padded, chunk_size, basis, whole=None):
        self.size, self.padded, self.chunk_size, self.basis = size, padded, chunk_size, basis
        self.whole = size if whole is None else whole

    def rows(self, start):
        """The chunk of `chunk_size` rows from row `start`, as a batch of its own: its rows vectorized at once,
        dense (a chunk of a block of the identity is no block of its own)."""
        real = min(max(self.size - start, 0), self.chunk_size)
        return Batch(real, self.chunk_size, None, (None,) * len(self.basis), self.whole)

    @property
    def key(self):
        return KernelBatch(self.chunk_size)

    @property
    def program_key(self):
        return ProgramBatch(self.chunk_size, self.padded, self.basis)


def check_chunk_size(chunk_size):
    """The one check of `chunk_size` for every entry point (vmap.vmap, grad, jacobian, hessian): None or a
    positive integer (a NumPy one too, but not a bool); returns it as a Python int."""
    if chunk_size is None:
        return None
    if isinstance(chunk_size, numbers.Integral) and not isinstance(chunk_size, bool) and chunk_size > 0:
        return int(chunk_size)
    raise ValueError(f"chunk_size must be None or a positive int, but got {chunk_size!r}")


def batched_backward(roots, grads, captures, *, retain_graph, create_graph, chunk_size):
    sizes = [g._v.shape[0] for g in grads]
    if len(set(sizes)) > 1:
        raise ValueError("If `is_grads_batched=True`, every grad_output must have the same batch size (its first "
                         f"dimension), but got sizes {sizes}.")
    basis = tuple([_basis_block(g) for g in grads])
    # a Jacobian's batch size is fixed by the structure: no padding needed
    padded = sizes[0] if None not in basis else bucket(sizes[0], chunk_size)
    batch = Batch(sizes[0], padded, chunk_size, basis)
    if batch.padded > batch.size:
        grads = [_pad_rows(g, batch.padded) for g in grads]
    results = _engine.run_backward(roots, grads, captures, retain_graph=retain_graph, create_graph=create_graph,
                                   accumulate=False, batch=batch)
    if batch.padded > batch.size:
        results = [None if r is None else _take_rows(r, batch.size) for r in results]
    return results


_device_blocks = {}  # id(device array) -> (weakref to it, its _basis_block): a device array is immutable


def _basis_block(g):
    """(offset, row shape, dtype) when the rows of `g` are columns offset.. of an identity (row b is one at flat
    index b - offset, zero elsewhere: jacobian()'s cotangents), else None. Only a constant real array qualifies.
    A host array is checked as it is the first time (it may be written in place before the next call); one passed
    again is moved to the device for good, as an op's second read of it does, and its check is cached."""
    v, dtype = g._v, g.dtype
    if g.requires_grad or not dtype.is_floating_point or dtype.is_complex:
        return None
    if not 0 < math.prod(v.shape[1:]) <= v.shape[0]:  # fewer rows than a row's size: not a block of the identity
        return None
    if type(v) is np.ndarray:
        if is_shared(v) or not read_before(v):  # memory shared with NumPy (from_numpy) stays where it is
            return _identity_block(v)
        v = g._v = to_device(v)
    if not isinstance(v, jax.Array) or isinstance(v, jax.core.Tracer):
        return None
    known = _device_blocks.get(id(v))
    if known is not None and known[0]() is v:
        return known[1]
    if len(_device_blocks) > 256:
        _device_blocks.clear()
    block = _identity_block(np.asarray(v))
    _device_blocks[id(v)] = (weakref.ref(v), block)
    return block


def _identity_block(a):
    rows, shape = a.shape[0], a.shape[1:]
    n = math.prod(shape)
    a = a.reshape(rows, n)
    offset = 0 if a[0, 0] == 1 else int(np.argmax(a[:, 0] != 0))
    diagonal = a.diagonal(-offset)
    if len(diagonal) != n or not (diagonal == 1).all():
        return None
    # n nonzero bit patterns, the diagonal's ones: every other entry is +0.0
    return BasisBlock(offset, shape, a.dtype) if np.count_nonzero(a.view(f"u{a.itemsize}")) == n else None


def _on_host(t):
    # padding and slicing on the host compile nothing; a recorded (differentiable or traced) value cannot go there
    return not t.requires_grad and not isinstance(t._value, jax.core.Tracer)


def _pad_rows(g, padded):
    import batched_grad as bg

    if not _on_host(g):
        return bg.cat([g, bg.zeros((padded - g.shape[0],) + tuple(g.shape[1:]), dtype=g.dtype)])
    rows = np.zeros((padded,) + tuple(g.shape[1:]), g._v.dtype)
    rows[:g.shape[0]] = np.asarray(g._value)
    return bg.Tensor._wrap(rows)  # host data, not shared with anyone


def _take_rows(r, size):
    import batched_grad as bg

    return bg.Tensor._wrap(np.asarray(r._value)[:size].copy()) if _on_host(r) else r[:size]
