"""Map a pure JAX function over the leading (batch) axis of some arguments: vectorized, in chunks, on each device's
own rows."""

import jax

from ._shards import map_shards


def map_rows(fn, batched, chunk_size=None, shards=None, shared=(), in_axes=0):
    """fn(*shared, *row) for each row of the arrays in `batched` (a tuple), stacked along axis 0; `shared` are
    arrays every row reads whole. `in_axes` (jax.vmap's, for the arrays of `batched`) says where their rows are
    when all rows are vectorized at once; chunks and shards take them on axis 0.

    `chunk_size=None` vectorizes all rows at once (jax.vmap); `chunk_size=k` processes k rows at a time
    inside one compiled program (lax.map with batch_size), bounding memory with identical results. With `shards`
    (vmap/_shards.py) each device maps its own rows, `chunk_size` of them at a time, and reads its copy of `shared`.
    """
    if shards is not None:
        k = len(shared)
        return map_shards(lambda *a: map_rows(fn, a[k:], chunk_size, shared=a[:k]), batched, shards, shared)
    if chunk_size is None:
        return jax.vmap(lambda *row: fn(*shared, *row), in_axes=in_axes)(*batched)
    return jax.lax.map(lambda row: fn(*shared, *row), batched, batch_size=chunk_size)


def bucket(size, chunk_size=None, blocks=1):
    """The padded batch size a program is compiled for: the next power of two (or multiple of the chunk), so that
    a sweep over batch sizes compiles O(log B) programs instead of one per size; with rows split in `blocks`, each
    block's share is rounded so."""
    share = -(-size // blocks)
    if chunk_size is not None:
        return max(-(-share // chunk_size) * chunk_size, chunk_size) * blocks
    return (1 << max(share - 1, 0).bit_length()) * blocks
