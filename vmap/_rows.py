"""Map a pure JAX function over the leading (batch) axis of some arguments: vectorized, in chunks, on each device's
own rows."""

import jax

from ._shards import map_shards


def map_rows(fn, batched, chunk_size=None, shards=None):
    """fn applied to each row of the arrays in `batched` (a tuple), stacked along axis 0.

    `chunk_size=None` vectorizes all rows at once (jax.vmap); `chunk_size=k` processes k rows at a time
    inside one compiled program (lax.map with batch_size), bounding memory with identical results. With `shards`
    (vmap/_shards.py) each device maps its own rows, `chunk_size` of them at a time.
    """
    if shards is not None:
        return map_shards(lambda *block: map_rows(fn, block, chunk_size), batched, shards)
    if chunk_size is None:
        return jax.vmap(fn)(*batched)
    return jax.lax.map(lambda row: fn(*row), batched, batch_size=chunk_size)


def bucket(size, chunk_size=None, blocks=1):
    """The padded batch size a program is compiled for: the next power of two (or multiple of the chunk), so that
    a sweep over batch sizes compiles O(log B) programs instead of one per size; with rows split in `blocks`, each
    block's share is rounded so."""
    share = -(-size // blocks)
    if chunk_size is not None:
        return max(-(-share // chunk_size) * chunk_size, chunk_size) * blocks
    return (1 << max(share - 1, 0).bit_length()) * blocks
