"""Random values as Tensors: a NumPy sampler's draw from a generator; inside vmap.vmap(randomness="different") every
row draws its own, as one draw for all rows of which each row reads its own."""

import jax
import numpy as np

from .._generator import resolve
from .._layout import dense_order
from .._tensor import Tensor
from .._vmap_levels import in_vmap_randomness, is_batched, note_draw, random_rows
from ._core import Op, apply

_ROW = Op("select_row", lambda rows, index: jax.lax.dynamic_index_in_dim(rows, index, keepdims=False))

DIFFERENT_INPLACE = (
    "vmap: Cannot ask for different inplace randomness on an unbatched tensor. This will appear like "
    "same randomness. If this is necessary for your usage, please file an issue with functorch."
)


SAME_BATCHED = (
    "Vmap does not currently support same randomness with a batched tensor input. Please file an issue with functorch"
)


def check_parameters(*parameters):
    """torch's refusal, inside vmap.vmap(randomness="same"), of a draw whose distribution's parameters (Tensors
    among `parameters`) vary across the rows."""
    if in_vmap_randomness() == "same" and any(isinstance(p, Tensor) and is_batched(p._v) for p in parameters):
        raise RuntimeError(SAME_BATCHED)


def sample(generator, fn, shape, draw):
    """A Tensor of `shape` drawn by `draw(bits, size)` (a NumPy array of `size` from the NumPy generator `bits`)
    from `generator` (None: the default one) for `fn`; torch's error inside vmap.vmap(randomness="error")."""
    levels = random_rows()
    generator = resolve(generator, fn)
    note_draw(generator)
    bits = generator._bits
    value = Tensor._wrap(draw(bits, tuple(level.size for level in levels) + tuple(shape)))
    for level in levels:  # outermost first: the row of each vmap call's own axis
        value = apply(_ROW, [value, level.row])
    return value


def sample_like(generator, fn, like, draw):
    """sample() of `like`'s shape drawn through `like`'s storage: where it is a dense permuted view (torch's
    empty_like keeps that layout, and an in-place fill of a view runs through its memory), the draws fill the
    storage in order and the result is permuted back to `like`'s dims."""
    order = dense_order(like)
    if order is None:
        return sample(generator, fn, like.shape, draw)
    value = sample(generator, fn, [like.shape[d] for d in order], draw)
    return value.permute(*np.argsort(order).tolist())


def check_inplace(target, value):
    """torch's error for filling `target`, the same in every row of a vmap.vmap, with a `value` drawn per row."""
    if is_batched(value._v) and not is_batched(target._v):
        raise RuntimeError(DIFFERENT_INPLACE)
