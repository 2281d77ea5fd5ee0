"""Map a pure JAX function over the leading (batch) axis of some arguments: vectorized or in chunks."""
import jax


def map_rows(fn, batched, chunk_size=None):
    """fn applied to each row of the arrays in `batched` (a tuple), stacked along axis 0.

    `chunk_size=None` vectorizes all rows at once (jax.vmap); `chunk_size=k` processes k rows at a time
    inside one compiled program (lax.map with batch_size), bounding memory with identical results.
    """
    if chunk_size is None:
        return jax.vmap(fn)(*batched)
    return jax.lax.map(lambda row: fn(*row), batched, batch_size=chunk_size)


def bucket(size, chunk_size=None):
    """The padded batch size a program is compiled for: the next power of two (or multiple of the chunk),
    so that a sweep over batch sizes compiles O(log B) programs instead of one per size."""
    if chunk_size is not None:
        return max(-(-size // chunk_size) * chunk_size, chunk_size)
    return 1 << max(size - 1, 0).bit_length()
