"""Arithmetic rounded as torch's CPU kernels round it, where XLA's code would round otherwise.

x * y + z with one rounding (fused_multiply_add), as torch computes add's input + alpha * other, addcmul and lerp:
float32 through float64 (where the product is exact), float64 through error-free transformations (Veltkamp's split
and Knuth's two-sum), so the result does not depend on whether XLA contracts a multiply and an add; with JAX in
kernels and with NumPy on the host. And a quotient rounded once (divide), where XLA would multiply by the
reciprocal of a divisor broadcast over the dividend."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import _simd_math
from .._simd_math import fma64

_SMALLEST_NORMAL32 = 2.0**-126
_BELOW_FLOAT32, _HALF_FLOAT32 = np.uint64(2**29 - 1), np.uint64(2**28)  # a float64's bits a float32 drops; a tie's
fused_multiply_add_host = _simd_math.fused_multiply_add  # fused_multiply_add with NumPy


def fma32(x, y, z, xp=np):
    """round(x * y + z) for float32 arrays: with NumPy, _simd_math.fma (exact); in a kernel, the float64 product is
    exact, and the float64 sum rounded to float32 rounds twice, which errs only where that sum is a float32 tie (its 29
    dropped bits 1000...) and not exact: there the sum's rounding error (Knuth's two-sum) says which way to round.
    (XLA's CPU code flushes subnormal results to zero.)"""
    if xp is np:
        return _simd_math.fma(x, y, z)
    product, addend = _wide_in_kernel(x) * _wide_in_kernel(y), _wide_in_kernel(z)
    total = product + addend
    back = total - product
    error = (product - (total - back)) + (addend - back)  # exact: total + error == product + addend
    tie = lax.bitcast_convert_type(total, jnp.uint64) & _BELOW_FLOAT32 == _HALF_FLOAT32
    nudged = jnp.nextafter(total, jnp.where(error > 0, jnp.inf, -jnp.inf))
    return jnp.where(tie & (error != 0), nudged, total).astype(jnp.float32)


def _wide_in_kernel(v):
    """A float32 array as float64, kept as rounded: LLVM folds a float32 multiply that is widened and then added
    into a float64 fused multiply-add (no longer rounding it to float32), unless the widened value passes through
    an op it cannot see through (reduce_precision, which keeps float32 values but flushes subnormals: those pass
    by the select)."""
    widened = v.astype(jnp.float64)
    kept = lax.reduce_precision(widened, exponent_bits=8, mantissa_bits=23)
    return jnp.where(jnp.abs(widened) < _SMALLEST_NORMAL32, widened, kept)


@jax.custom_jvp
def fused_multiply_add(x, y, z):
    """round(x * y + z) for float32 or float64 arrays of one dtype (broadcast together); x * y + z for others."""
    return rounded_multiply_add(*jnp.broadcast_arrays(x, y, z))


@jax.jit
def rounded_multiply_add(x, y, z):
    """fused_multiply_add of arrays of one shape, a call of its own in a jaxpr: the host evaluator computes it as one
    step, with fused_multiply_add_host (_numpy_rows.CALLS), rather than the steps of its kernel form."""
    if x.dtype == jnp.float32:
        return fma32(x, y, z, jnp)
    if x.dtype == jnp.float64:
        return fma64(x, y, z, jnp, lax.optimization_barrier)
    return x * y + z


@fused_multiply_add.defjvp
def _fused_multiply_add_jvp(primals, tangents):
    x, y, z = primals
    dx, dy, dz = tangents
    return fused_multiply_add(x, y, z), dx * y + x * dy + dz


def product(x, y):
    """x * y rounded on its own where a sum of it follows: XLA contracts a product and a sum in one kernel into a
    fused multiply-add (rounding once), which torch's separate ops and NumPy do not. One fused multiply-add with
    -0.0, exact for every product, signed zeros included."""
    return fused_multiply_add(x, y, jnp.asarray(-0.0, jnp.result_type(x, y)))


def lerp(a, b, w):
    """torch's lerp kernel: a + w * (b - a) for |w| < 0.5, else b - (b - a) * (1 - w), each one fused rounding."""
    step = b - a
    return jnp.where(jnp.abs(w) < 0.5, fused_multiply_add(w, step, a), fused_multiply_add(-step, 1 - w, b))


def divide(a, b):
    """a / b, each quotient rounded once: a divisor that broadcasts (a number, a 0-d or smaller operand) is given at
    the quotient's shape behind an optimization barrier, as XLA otherwise multiplies by its reciprocal."""
    shape = jnp.broadcast_shapes(jnp.shape(a), jnp.shape(b))
    if jnp.shape(b) != shape and jnp.result_type(a, b) in (jnp.float32, jnp.float64):
        b = lax.optimization_barrier(jnp.broadcast_to(b, shape))
    return jnp.true_divide(a, b)
