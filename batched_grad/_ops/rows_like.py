"""A tensor made after another one (new_zeros, new_empty, zeros_like, ...) inside vmap.vmap: where that tensor varies
across the rows, the new one is made per row too, as torch.func materializes it, so that a batched value can be
written into it in place."""

import jax.numpy as jnp

from .._tensor import REQUIRES_GRAD_DTYPE
from .._vmap_levels import is_batched
from ._core import Op, apply


def rows_of(value, anchor):
    """The array `value` in every row of the rows the array `anchor` varies across: the empty slice reads none of
    anchor's values (and adds an exact zero), but the result is batched wherever anchor is, under jax.vmap and in
    a deferred vmap.vmap alike (what a value-less op such as zero_ needs: jnp.zeros_like(anchor) is a constant)."""
    return value + jnp.sum(anchor.ravel()[:0]).astype(value.dtype)


_ROWS_OF = Op("rows_of", rows_of)


def rows_like(made, anchor, requires_grad=False):
    """`made` (a new tensor, not requiring grad), one per row where `anchor` varies across the rows of a running
    vmap.vmap; then a leaf requiring grad where `requires_grad`."""
    if is_batched(anchor._v):
        made = apply(_ROWS_OF, [made, anchor.detach()])
    if requires_grad:
        made._set_requires_grad(True, REQUIRES_GRAD_DTYPE)
    return made
