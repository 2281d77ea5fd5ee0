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
    return _drawn(generator, fn, shape, draw, random_rows(), None)


def sample_like(generator, fn, like, draw, strided_draw=None, rows_first=False):
    """sample() of `like`'s shape drawn through the storage torch's kernel fills for it: where that is a dense
    permuted layout (a permuted view; torch's empty_like keeps it; under vmap.vmap(randomness="different"), a mapped
    argument's own storage with its batch where in_dims puts it, unless `rows_first`: torch's batching rule fills a
    new row-major tensor of the rows), the draws fill the storage in order and are permuted back to `like`'s dims.
    `strided_draw`: the draw torch's kernel makes on a storage that is not row-major, where it is another algorithm
    (normal_'s element-by-element one)."""
    levels = random_rows()
    order = None if levels and rows_first else _fill_order(like, levels)
    if strided_draw is not None and order is not None:
        draw = strided_draw
    return _drawn(generator, fn, like.shape, draw, levels, order)


def _drawn(generator, fn, shape, draw, levels, order):
    """The draw of (levels' sizes..., *shape), filled in `order` (its dims, outermost in storage first; None:
    row-major), each level's row selected (outermost first)."""
    generator = resolve(generator, fn)
    note_draw(generator)
    size = tuple(level.size for level in levels) + tuple(shape)
    if order is None:
        drawn = draw(generator._bits, size)
    else:
        drawn = np.transpose(draw(generator._bits, tuple(size[d] for d in order)), np.argsort(order))
    value = Tensor._wrap(drawn)
    for level in levels:  # outermost first: the row of each vmap call's own axis
        value = apply(_ROW, [value, level.row])
    return value


def _fill_order(like, levels):
    """The order (outermost in storage first) of the dims of (levels' sizes..., *like.shape) in which torch fills
    draws for `like`; None for row-major. Inside one vmap.vmap(randomness="different"), torch's batching rule fills
    the storage of a mapped argument as the caller gave it (rows at in_dims); a tensor made inside is taken as
    row-major with its rows first."""
    if not levels:
        return dense_order(like)
    if len(levels) > 1 or not levels[0].arguments or id(like) not in levels[0].arguments:
        return None
    level = levels[0]
    given = level.arguments[id(like)]
    batch = level.in_dims[id(like)] % given.ndim
    physical = dense_order(given) or list(range(given.ndim))
    # a physical dim's place among (rows, *like's dims)
    order = [0 if d == batch else d + (d < batch) for d in physical]
    return None if order == sorted(order) else order


def check_inplace(target, value):
    """torch's error for filling `target`, the same in every row of a vmap.vmap, with a `value` drawn per row."""
    if is_batched(value._v) and not is_batched(target._v):
        raise RuntimeError(DIFFERENT_INPLACE)
