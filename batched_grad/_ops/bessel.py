"""torch.special.bessel_j0 and bessel_j1, the Bessel functions of the first kind of orders 0 and 1, in float64.
JAX's bessel_jn is nan below about 2e-5, off by 1e-7 between 5 and 10 and by whole units beyond 30, so J_n is
computed here in three regimes of |x|, each accurate to a few units of rounding in the result's magnitude:

- |x| <= 2: the power series (x/2)^n sum_k (-x^2/4)^k / (k! (k+n)!), whose terms only shrink there;
- 2 < |x| <= 25: J_n(x) = 1/(2 pi) * integral over [0, 2 pi) of cos(n t - x sin t) dt by the trapezoidal rule on
  64 points: for a periodic integrand its error is the aliased terms J_{64 k +- n}(x), below 1e-18 for |x| <= 25;
- |x| > 25: Hankel's asymptotic expansion sqrt(2 / (pi x)) (P cos(chi) - Q sin(chi)), chi = x - pi/4 - n pi/2,
  whose terms fall below 1e-17 before they start to grow again (near the 2x-th).

J_0 is even and J_1 odd (J_1(-0.0) is -0.0, as torch's); inf and nan give nan, as torch's."""

import math

import jax.numpy as jnp
import numpy as np

SERIES_LIMIT, QUADRATURE_LIMIT = 2.0, 25.0
_SERIES_TERMS = 14
_QUADRATURE_ANGLES = np.arange(64) * (2 * np.pi / 64)
_ASYMPTOTIC_TERMS = 26


def _series(y, order):
    t = -(y * y) / 4
    total = jnp.zeros_like(y)
    for k in reversed(range(_SERIES_TERMS)):  # Horner's scheme in t
        total = total * t + 1.0 / (math.factorial(k) * math.factorial(k + order))
    return total * (y / 2) ** order


def _quadrature(y, order):
    return jnp.cos(order * _QUADRATURE_ANGLES - y[..., None] * np.sin(_QUADRATURE_ANGLES)).mean(-1)


def _hankel_coefficients(order):
    """a_k = prod_{j <= k} (4 order^2 - (2j - 1)^2) / (k! 8^k), the coefficients of the expansion in 1/x."""
    coefficients, a = [], 1.0
    for k in range(_ASYMPTOTIC_TERMS):
        coefficients.append(a)
        a *= (4 * order * order - (2 * k + 1) ** 2) / ((k + 1) * 8)
    return coefficients


def _hankel(y, order):
    inverse, inverse_square = 1 / y, 1 / (y * y)
    p, q = jnp.zeros_like(y), jnp.zeros_like(y)
    coefficients = _hankel_coefficients(order)
    for k in reversed(range(0, _ASYMPTOTIC_TERMS, 2)):
        p = p * inverse_square + (-1.0) ** (k // 2) * coefficients[k]
    for k in reversed(range(1, _ASYMPTOTIC_TERMS, 2)):
        q = q * inverse_square + (-1.0) ** (k // 2) * coefficients[k]
    q = q * inverse
    cos, sin = jnp.cos(y), jnp.sin(y)
    # cos(chi) and sin(chi) from cos(y) and sin(y), without rounding y - pi/4 - n pi/2
    if order == 0:
        cos_chi, sin_chi = cos + sin, sin - cos
    else:
        cos_chi, sin_chi = sin - cos, -(sin + cos)
    return jnp.sqrt(1 / (np.pi * y)) * (p * cos_chi - q * sin_chi)  # sqrt(2 / (pi y)) / sqrt(2)


def bessel_j(order):
    """J_order (0 or 1) of a float64 array."""

    def j(x):
        y = jnp.abs(x)
        safe = jnp.where(y > QUADRATURE_LIMIT, y, QUADRATURE_LIMIT + 1)  # the expansion only where it is chosen
        value = jnp.where(
            y <= SERIES_LIMIT,
            _series(y, order),
            jnp.where(y <= QUADRATURE_LIMIT, _quadrature(y, order), _hankel(safe, order)),
        )
        value = jnp.where(jnp.isnan(y) | jnp.isinf(y), jnp.nan, value)
        return jnp.where(jnp.signbit(x), -value, value) if order % 2 else value

    return j
