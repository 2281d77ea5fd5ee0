"""Matrices built from diagonals: diag_embed and diagflat."""

import jax.numpy as jnp

from .._tensor import _wrap_dim
from ._core import Op, apply
from .shape import flatten


def _diag_embed_fn(a, *, offset, dim1, dim2):
    n = a.shape[-1]
    size = n + abs(offset)
    rows, cols = jnp.arange(n) + max(-offset, 0), jnp.arange(n) + max(offset, 0)
    out = jnp.zeros(a.shape[:-1] + (size, size), a.dtype).at[..., rows, cols].set(a)
    return jnp.moveaxis(out, (-2, -1), (dim1, dim2))


_DIAG_EMBED = Op("diag_embed", _diag_embed_fn, linear=True)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose diagonals (`offset` above the main one) in the planes of dims `dim1` and `dim2` hold the last
    dimension of `input`; zeros elsewhere."""
    ndim = input.ndim + 1
    d1, d2 = _wrap_dim(dim1, ndim), _wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply(_DIAG_EMBED, [input], offset=int(offset), dim1=d1, dim2=d2)


def diagflat(input, offset=0):
    """A square matrix with the flattened `input` on its diagonal (`offset` above the main one)."""
    return diag_embed(flatten(input), offset)
