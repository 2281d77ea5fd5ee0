"""torch's CPU binomial sampler, element by element on the default generator's double uniforms: counting geometric
waiting times (inversion) while count * p < 10, else Hormann's transformed rejection (BTRS), each on min(p, 1 - p).
`single` runs the steps torch computes in its scalar type (float32 parameters) in float32."""

import math

import numpy as np

# Stirling's series remainder log k! - (k + 1/2) log(k + 1) + (k + 1) - log(2 pi) / 2 for k = 0..9, tabulated
_TAIL = (
    0.0810614667953272,
    0.0413406959554092,
    0.0276779256849983,
    0.02079067210376509,
    0.0166446911898211,
    0.0138761288230707,
    0.0118967099458917,
    0.0104112652619720,
    0.00925546218271273,
    0.00833056343336287,
)


def _stirling_tail(k):
    if k < len(_TAIL):
        return _TAIL[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)


def _inversion(bits, count, prob, real):
    """The number of geometric waiting times (trials to a success) that fit in `count` trials."""
    log_q = float(np.log1p(real(-prob)))
    total, successes = 0.0, 0
    while True:
        total += math.ceil(math.log(float(bits.unit(1, True)[0])) / log_q)
        if total > count:
            return successes
        successes += 1


def _btrs(bits, count, prob, real):
    """Hormann's BTRS: a draw k from a hat function, accepted in a box or by the log density ratio."""
    stddev = float(np.sqrt(real(count * prob * (real(1) - prob))))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * float(prob)
    c = float(real(count * prob)) + 0.5
    v_r = 0.92 - 4.2 / b
    r = float(real(prob / (real(1) - prob)))
    alpha = (2.83 + 5.1 / b) * stddev
    m = math.floor(float(real((count + real(1)) * prob)))
    n = float(count)
    while True:
        u, v = bits.unit(2, True).tolist()
        u -= 0.5
        us = 0.5 - abs(u)
        k = math.floor((2 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        log_v = math.log(v * alpha / (a / (us * us) + b))
        bound = (
            (m + 0.5) * math.log((m + 1) / (r * (n - m + 1)))
            + (n + 1) * math.log((n - m + 1) / (n - k + 1))
            + (k + 0.5) * math.log(r * (n - k + 1) / (k + 1))
            + _stirling_tail(m)
            + _stirling_tail(n - m)
            - _stirling_tail(k)
            - _stirling_tail(n - k)
        )
        if log_v <= bound:
            return k


def _one(bits, count, prob, real):
    if count <= 0 or prob <= 0:
        return 0.0
    if prob >= 1:
        return float(count)
    if prob <= 0.5:
        sampler = _btrs if count * prob >= 10 else _inversion
        return float(sampler(bits, count, prob, real))
    if prob > 0.5:
        q = real(1.0 - float(prob))
        sampler = _btrs if count * q >= 10 else _inversion
        return float(count) - sampler(bits, count, q, real)
    return math.nan  # a NaN probability


def binomial(bits, counts, probs, dtype):
    """Binomial(counts, probs) draws of the arrays' (equal) shape, in `dtype`."""
    real = np.float32 if np.dtype(dtype) != np.float64 else np.float64
    draws = [
        _one(bits, real(n), real(p), real) for n, p in zip(counts.ravel().tolist(), probs.ravel().tolist(), strict=True)
    ]
    return np.array(draws, np.float64).reshape(counts.shape).astype(dtype)
