"""torch's float32 Box-Muller on x86 CPUs: the log and sincos of avx_mathfun.h (Cephes polynomials, 8 lanes at a
time) as the AVX2 build of torch runs them, with the multiply-adds its compiler fuses, in NumPy float32 arithmetic.
The results are torch's bit for bit; a fused multiply-add is emulated exactly through float64 (`fma`). And the fused
multiply-add of float64 arrays, through error-free transformations (`fma64`, with NumPy or in a kernel)."""

import numpy as np

_F32, _I32, _U32, _U64 = np.float32, np.int32, np.uint32, np.uint64
# the 29 float64 mantissa bits a float32 drops; their pattern in a tie
_BELOW_FLOAT, _HALF_FLOAT = _U64(2**29 - 1), _U64(2**28)
# below 2**-125 float32s are multiples of 2**-149 (the subnormals, and the normals of the smallest exponent)
_SUBNORMAL_GRID_TOP, _SUBNORMAL_SCALE = 2.0**-125, 2.0**149
_ABOVE_2_POW_M125 = np.uint32(0x7F000000)  # bits of a float32's exponent field, one of which is set from 2**-125 on
_ANY = np.logical_or.reduce  # ndarray.any without its Python wrapper
try:  # np.count_nonzero without its Python wrapper (0.13 us a call, a third of a small pass)
    from numpy._core.multiarray import count_nonzero as _count
except ImportError:  # pragma: no cover - depends on the NumPy version
    _count = np.count_nonzero
_LOG_P = (
    7.0376836292e-2,
    -1.1514610310e-1,
    1.1676998740e-1,
    -1.2420140846e-1,
    1.4249322787e-1,
    -1.6668057665e-1,
    2.0000714765e-1,
    -2.4999993993e-1,
    3.3333331174e-1,
)
_LOG_Q1, _LOG_Q2 = _F32(-2.12194440e-4), _F32(0.693359375)
_SQRT_HALF = _F32(0.707106781186547524)
_FOUR_OVER_PI = _F32(1.27323954473516)
_MINUS_DP = (_F32(-0.78515625), _F32(-2.4187564849853515625e-4), _F32(-3.77489497744594108e-8))
_COS_P = (_F32(2.443315711809948e-005), _F32(-1.388731625493765e-003), _F32(4.166664568298827e-002))
_SIN_P = (_F32(-1.9515295891e-4), _F32(8.3321608736e-3), _F32(-1.6666654611e-1))


def fma(a, b, c):
    """a * b + c rounded once to float32 (broadcast together). The product of two float32s is exact in float64; the
    sum is rounded twice (to float64, then float32), which _rounded_once corrects where that errs."""
    product = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    addend = np.asarray(c, np.float64)
    total = product + addend
    rounded = total.astype(_F32)
    return _rounded_once(rounded, total, product, addend) if _may_round_twice(total, rounded) else rounded


def scaled_sum(alpha, y, z):
    """alpha * y + z rounded once to float32, as fma, for the common case in fewer passes: `alpha` a float32's value
    (a Python float), `y` and `z` float32 arrays of one shape."""
    total = y.astype(np.float64)
    total *= alpha
    total += z
    rounded = total.astype(_F32)
    if _may_round_twice(total, rounded):
        return _rounded_once(rounded, total, y.astype(np.float64) * alpha, z.astype(np.float64))
    return rounded


def _may_round_twice(total, rounded):
    """Whether the float64 sums `total`, `rounded` to float32 as `rounded`, may be rounded twice otherwise than once:
    where one lies on a float32 tie (its 29 dropped bits 1000...) or a result is below 2**-125 (a float32 exponent
    field of 0 or 1: among the subnormals ties lie elsewhere). Elsewhere the two roundings give the one's result."""
    ties = _count((total.view(_U64) & _BELOW_FLOAT) == _HALF_FLOAT)
    return ties != 0 or _count(rounded.view(_U32) & _ABOVE_2_POW_M125) < rounded.size


def _rounded_once(rounded, total, product, addend):
    """`rounded` (the float64 sum `total` of `product` and `addend` rounded to float32) as one rounding of the exact
    product + addend: the two roundings differ only where total is halfway between two float32s (29 dropped bits
    1000... among the normal ones, an odd multiple of 2**-150 below 2**-125) and the exact sum is not. There the sum's
    rounding error says which side the exact value lies on: total moved one float64 step that way rounds right."""
    suspect = (total.view(_U64) & _BELOW_FLOAT) == _HALF_FLOAT
    suspect |= np.abs(total) < _SUBNORMAL_GRID_TOP
    if _ANY(suspect, axis=None):
        p, t, c = (np.broadcast_to(v, total.shape)[suspect] for v in (product, total, addend))
        back = t - p
        error = (p - (t - back)) + (c - back)  # exact: t + error == p + c
        on_grid_half = np.abs(np.modf(t * _SUBNORMAL_SCALE)[0]) == 0.5
        halfway = np.where(np.abs(t) < _SUBNORMAL_GRID_TOP, on_grid_half, (t.view(_U64) & _BELOW_FLOAT) == _HALF_FLOAT)
        nudged = np.nextafter(t, np.where(error > 0, np.inf, -np.inf)).astype(_F32)
        rounded[suspect] = np.where(halfway & (error != 0), nudged, rounded[suspect])
    return rounded


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


def fused_multiply_add(x, y, z):
    """fused_multiply_add with NumPy: one rounding of x * y + z for float32 and float64 (broadcast together), x * y + z
    for other dtypes."""
    x, y, z = np.broadcast_arrays(x, y, z)
    if z.dtype == np.float32:
        return fma(x, y, z)
    return fma64(x, y, z) if z.dtype == np.float64 else x * y + z


def log(x):
    """avx_mathfun's log256_ps for positive float32 `x`."""
    x = np.maximum(x, np.array(0x00800000, _I32).view(_F32))
    exponent = (x.view(_I32) >> 23) - 0x7F
    x = ((x.view(_I32) & ~0x7F800000) | np.array(0.5, _F32).view(_I32)).view(_F32)
    e = exponent.astype(_F32) + _F32(1)
    small = x < _SQRT_HALF
    e = e - np.where(small, _F32(1), _F32(0))
    x = (x - _F32(1)) + np.where(small, x, _F32(0))
    z = x * x
    y = np.full_like(x, _F32(_LOG_P[0]))
    for p in _LOG_P[1:]:
        y = fma(y, x, _F32(p))
    y = fma(y * x, z, e * _LOG_Q1)
    y = fma(z, _F32(-0.5), y)
    return fma(e, _LOG_Q2, x + y)


def sincos(x):
    """avx_mathfun's sincos256_ps for float32 `x`: (sin, cos)."""
    sin_negative = np.signbit(x)
    x = np.abs(x)
    octant = ((x * _FOUR_OVER_PI).astype(_I32) + 1) & ~1
    y = octant.astype(_F32)
    sin_negative = sin_negative ^ ((octant & 4) != 0)
    cos_negative = (~(octant - 2) & 4) != 0
    first_polynomial_is_cos = (octant & 2) == 0
    for dp in _MINUS_DP:  # x - y * pi/4 in three parts
        x = fma(y, dp, x)
    z = x * x
    cos_poly = fma(fma(np.full_like(x, _COS_P[0]), z, _COS_P[1]), z, _COS_P[2]) * z
    cos_poly = fma(cos_poly, z, -(z * _F32(0.5))) + _F32(1)
    sin_poly = fma(fma(np.full_like(x, _SIN_P[0]), z, _SIN_P[1]), z, _SIN_P[2]) * z
    sin_poly = fma(sin_poly, x, x)
    sin = np.where(first_polynomial_is_cos, sin_poly, cos_poly)
    cos = np.where(first_polynomial_is_cos, cos_poly, sin_poly)
    return np.where(sin_negative, -sin, sin), np.where(cos_negative, -cos, cos)
