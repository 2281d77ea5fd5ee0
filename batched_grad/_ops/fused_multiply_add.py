"""x * y + z with one rounding, as torch's CPU kernels compute add's alpha * other + input and addcmul: float32
through float64 (where the product is exact), float64 through error-free transformations (Veltkamp's split and
Knuth's two-sum), so the result does not depend on whether XLA contracts a multiply and an add. With JAX in kernels
and with NumPy on the host."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

_SPLITTER = 134217729.0  # 2**27 + 1: splits a float64 into two halves whose products are exact


def _kept(v):
    return v


def _split(v, keep):
    scaled = keep(_SPLITTER * v)  # kept apart: a contracted scaled - v would not split
    high = scaled - (scaled - v)
    return high, v - high


def fma64(x, y, z, xp=np, keep=_kept):
    """round(x * y + z) for float64 arrays, with the array module `xp`; `keep` holds a value apart from the ops
    around it (XLA's optimization barrier: a multiply contracted into an add would break the transformations)."""
    product = keep(x * y)
    xh, xl = _split(x, keep)
    yh, yl = _split(y, keep)
    product_error = ((xh * yh - product) + xh * yl + xl * yh) + xl * yl  # x * y == product + product_error
    total = keep(product + z)
    part = total - product
    sum_error = (product - (total - part)) + (z - part)  # product + z == total + sum_error
    fused = total + (product_error + sum_error)
    return xp.where(xp.isfinite(fused), fused, x * y + z)  # the split overflows past 2**996: plain there


def fma32(x, y, z, xp=np):
    """round(x * y + z) for float32 arrays: the float64 product is exact, so the float64 sum rounds once more only
    where it is itself a tie (about one in 2**29)."""
    wide = xp.float64
    return (x.astype(wide) * y.astype(wide) + z.astype(wide)).astype(xp.float32)


@jax.custom_jvp
def fused_multiply_add(x, y, z):
    """round(x * y + z) for float32 or float64 arrays of one dtype (broadcast together)."""
    x, y, z = jnp.broadcast_arrays(x, y, z)
    if x.dtype == jnp.float32:
        return fma32(x, y, z, jnp)
    return fma64(x, y, z, jnp, lax.optimization_barrier)


@fused_multiply_add.defjvp
def _fused_multiply_add_jvp(primals, tangents):
    x, y, z = primals
    dx, dy, dz = tangents
    return fused_multiply_add(x, y, z), dx * y + x * dy + dz
