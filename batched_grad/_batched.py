"""grad(..., is_grads_batched=True): the grad_outputs as a batch for the batching layer (vmap/_batching.py): padded
to a bucket, the backward run once over all rows (vectorized or chunked), the padding sliced off. Cotangents that
are a block of the identity (a Jacobian's) are not read: the backward program makes their rows (_basis.py). Rows
split over devices stay there: each device pads, maps and slices its own (vmap/_shards.py)."""

import math
import weakref

import jax
import numpy as np

from vmap import _shards
from vmap._batching import Batch, identity_block
from vmap._memory import AUTO
from vmap._rows import bucket

from . import _dual, _engine
from ._factories import zeros
from ._host import is_shared, read_before, to_device
from ._ops import cat
from ._tensor import Tensor


def batched_backward(roots, grads, captures, *, retain_graph, create_graph, chunk_size):
    sizes = [g._v.shape[0] for g in grads]
    if len(set(sizes)) > 1:
        raise ValueError(
            "If `is_grads_batched=True`, every grad_output must have the same batch size (its first "
            f"dimension), but got sizes {sizes}."
        )
    shards = _shards.first_shards([g._v for g in grads])
    if shards is not None:  # the constant grad_outputs split as the first split one (a recorded one stays as it is)
        grads = [Tensor._wrap(_shards.split_as(g._value, shards)) if _constant(g) else g for g in grads]
    basis = tuple([basis_block(g) for g in grads])
    # a Jacobian's batch size is fixed by the structure, and so is a sparse Jacobian's (its seeds): no padding
    # needed; else a bucket of rows (on each device), a multiple of the chunk ("auto" chooses a power of two)
    fixed = all(b is not None or (shards is None and _is_fixed(g._v)) for b, g in zip(basis, grads))
    padded = (
        sizes[0]
        if fixed
        else bucket(sizes[0], None if chunk_size == AUTO else chunk_size, 1 if shards is None else shards.count)
    )
    batch = Batch(sizes[0], padded, chunk_size, basis, shards)
    if batch.padded > batch.size:
        grads = [_pad_rows(g, batch) for g in grads]
    results = _engine.run_backward(
        roots, grads, captures, retain_graph=retain_graph, create_graph=create_graph, accumulate=False, batch=batch
    )
    if batch.padded > batch.size:
        results = [None if r is None else _take_rows(r, batch) for r in results]
    return results


def shard_rows(tensor, devices=None):
    """vmap.shard_rows: a Tensor of `tensor`'s values with its rows (first dimension) split evenly over `devices`
    (default: every device, of every process under jax.distributed). Given as grad_outputs of
    grad(..., is_grads_batched=True) or as vmap.vmap's mapped inputs, it makes each device compute its own rows and
    the results keep the same split."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"shard_rows(): argument 'tensor' must be a Tensor, but got {type(tensor).__name__}")
    if tensor.requires_grad:
        raise ValueError(
            "shard_rows(tensor): tensor requires grad; its placement is not recorded, so split a "
            "tensor that does not (tensor.detach()) and make it require grad after"
        )
    return Tensor._wrap(_shards.place_rows(tensor._value, devices))


_device_blocks = {}  # id(device array) -> (weakref to it, its basis_block): a device array is immutable
_fixed_rows = {}  # id(device array) -> weakref to it: seeds whose number of rows a structure fixes


def fixed_rows(array):
    """Mark a device array of grad_outputs as rows whose number is fixed by the structure (a sparse Jacobian's
    seeds, one per color), so that a batch of them is not padded to a bucket: padding only saves compiles for
    batch sizes that vary, and would add rows of work here (5 colors run as 8)."""
    key = id(array)
    _fixed_rows[key] = weakref.ref(
        array, lambda ref: _fixed_rows.pop(key, None) if _fixed_rows.get(key) is ref else None
    )
    return array


def _is_fixed(v):
    ref = _fixed_rows.get(id(v))
    return ref is not None and ref() is v


def basis_block(g):
    """The BasisBlock of a grad_output whose rows are columns of an identity, else None. Only a constant real array
    qualifies. A host array is checked as it is the first time (it may be written in place before the next call);
    one passed again is moved to the device for good, as an op's second read of it does, and its check is cached."""
    v, dtype = g._v, g.dtype
    if g.requires_grad or not dtype.is_floating_point or dtype.is_complex:
        return None
    if not 0 < math.prod(v.shape[1:]) <= v.shape[0]:  # decided by the shape: no values read
        return None
    if type(v) is np.ndarray:
        if is_shared(v) or not read_before(v):  # memory shared with NumPy (from_numpy) stays where it is
            return identity_block(v)
        v = g._v = to_device(v)
    if not isinstance(v, jax.Array) or isinstance(v, jax.core.Tracer) or not v.is_fully_addressable:
        return None  # rows on another process's devices are not read here
    known = _device_blocks.get(id(v))
    if known is not None and known[0]() is v:
        return known[1]
    if len(_device_blocks) > 256:
        _device_blocks.clear()
    block = identity_block(np.asarray(v))
    _device_blocks[id(v)] = (weakref.ref(v), block)
    return block


def _constant(t):
    # a constant is padded and sliced as an array (on the host, compiling nothing, or on each device of its rows);
    # a recorded (differentiable, traced or dual) value by recorded ops, which keep its graph, trace or tangent
    return not t.requires_grad and not isinstance(t._value, jax.core.Tracer) and _dual.tangent_of(t) is None


def _pad_rows(g, batch):
    if not _constant(g):
        if batch.shards is None:
            return cat([g, zeros((batch.padded - g.shape[0],) + tuple(g.shape[1:]), dtype=g.dtype)])
        blocks, row = batch.blocks, tuple(g.shape[1:])  # each device's block of rows padded on its own
        padding = zeros((blocks, (batch.padded - batch.size) // blocks) + row, dtype=g.dtype)
        return cat([g.reshape((blocks, -1) + row), padding], 1).reshape((batch.padded,) + row)
    if batch.shards is not None:
        return Tensor._wrap(_shards.pad_rows(g._value, batch.padded, batch.shards))
    rows = np.zeros((batch.padded,) + tuple(g.shape[1:]), g._v.dtype)
    rows[: g.shape[0]] = np.asarray(g._value)
    return Tensor._wrap(rows)  # host data, not shared with anyone


def _take_rows(r, batch):
    if not _constant(r):
        if batch.shards is None:
            return r[: batch.size]
        blocks, row = batch.blocks, tuple(r.shape[1:])
        return r.reshape((blocks, -1) + row)[:, : batch.size // blocks].reshape((batch.size,) + row)
    if batch.shards is not None:
        return Tensor._wrap(_shards.take_rows(r._value, batch.size, batch.shards))
    return Tensor._wrap(np.asarray(r._value)[: batch.size].copy())
