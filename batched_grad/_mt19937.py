"""torch's CPU random stream: a 32-bit Mersenne Twister (MT19937, seeded by init_genrand with the seed's low 32
bits) and the draws torch's CPU kernels make from it, element by element in memory order, vectorized with NumPy.
`random()` is one 32-bit output, `random64()` two (the first the high half). Box-Muller keeps its second value
for the next scalar normal draw, as torch's generator does."""

import math

import numpy as np

from . import _simd_math

_U64 = np.uint64
_FLOAT_BITS, _DOUBLE_BITS = 24, 53
SMALL_NORMAL = 16  # fewer elements: scalar Box-Muller; otherwise normal_fill's blocks of 16
RANDOM64_RANGE = 1 << 28  # integer ranges from here on draw random64()
_ONE_THIRD_F, _SQUEEZE_F = float(np.float32(1) / np.float32(3)), float(np.float32(0.0331))  # C's 1.0f / 3.0f, 0.0331f


class Stream:
    """The engine and the cached normal samples of one Generator."""

    def __init__(self, seed):
        self.engine = np.random.MT19937()
        self.engine._legacy_seeding(seed & 0xFFFFFFFF)
        self.fresh = True  # torch's `next` index is 0 until the first draw
        self.next_double_normal = None
        self.next_float_normal = None

    # ---- raw words -------------------------------------------------------------------------------------------
    def random(self, n):
        """n 32-bit outputs, as uint64."""
        self.fresh = self.fresh and n == 0
        return self.engine.random_raw(n).astype(_U64)

    def random64(self, n):
        words = self.random(2 * n)
        return (words[0::2] << _U64(32)) | words[1::2]

    # ---- transformations ---------------------------------------------------------------------------------------
    def unit(self, n, double):
        """n uniform values in [0, 1): 53 bits of random64() for float64, 24 bits of random() otherwise."""
        if double:
            return (self.random64(n) & _U64(2**_DOUBLE_BITS - 1)).astype(np.float64) * 2.0**-_DOUBLE_BITS
        return (self.random(n) & _U64(2**_FLOAT_BITS - 1)).astype(np.float32) * np.float32(2.0**-_FLOAT_BITS)

    def uniform(self, size, dtype, low=0.0, high=1.0, fused=True):
        """uniform_(low, high): x * (high - low) + low in the dtype, a fused multiply-add as torch's vectorized
        CPU kernels are built (`fused=False`: torch's kernels outside them, e.g. rrelu's)."""
        double = np.dtype(dtype) == np.float64
        x = self.unit(math.prod(size), double)
        if double:
            low, high = float(low), float(high)
            out = x if (low, high) == (0.0, 1.0) else (_fma64(x, high - low, low) if fused else x * (high - low) + low)
        else:
            low, high = np.float32(low), np.float32(high)
            out = _simd_math.fma(x, high - low, low) if fused else x * (high - low) + low
        return out.reshape(size).astype(dtype)

    def normal(self, size, dtype, mean=0.0, std=1.0, contiguous=True):
        """normal_(mean, std): scalar Box-Muller (in double, with its cached second value) below 16 elements or
        into a storage that is not `contiguous`; from 16 on, torch's normal_fill: all uniforms drawn first,
        transformed in blocks of 16 (the first 8 give the radii, the last 8 the angles), and a partial last block
        redone on 16 fresh uniforms."""
        n = math.prod(size)
        if n < SMALL_NORMAL or not contiguous:
            out = np.array([self._scalar_normal(mean, std) for _ in range(n)], np.float64)
            return out.reshape(size).astype(dtype)
        double = np.dtype(dtype) == np.float64
        fill = _fill16_double if double else _fill16_float
        out = fill(self.unit(n, double)[: n - n % 16], mean, std)
        if n % 16:
            out = np.concatenate([out[: n - 16], fill(self.unit(16, double), mean, std)])
        return out.reshape(size).astype(dtype)

    def _scalar_normal(self, mean, std):
        """torch's normal_distribution<double>: one value, with fma(value, std, mean)."""
        if self.next_double_normal is not None:
            value, self.next_double_normal = self.next_double_normal, None
        else:
            u1, u2 = self.unit(2, True).tolist()
            radius = math.sqrt(-2.0 * math.log1p(-u2))
            theta = 2.0 * math.pi * u1
            self.next_double_normal = radius * math.sin(theta)
            value = radius * math.cos(theta)
        return float(_fma64(np.float64(value), float(std), float(mean)))

    def integers(self, size, low, high, dtype):
        """random_(low, high): (word % range) + low, a random64() word for a range of 2**28 or more."""
        n, span = math.prod(size), high - low
        words = self.random64(n) if span >= RANDOM64_RANGE else self.random(n)
        values = (words % _U64(span)).astype(np.int64) + low
        return values.reshape(size).astype(dtype)

    def full_range(self, size, dtype, span, double_words):
        """random_() without bounds: a word modulo `span` (random64() words where `double_words`)."""
        n = math.prod(size)
        words = self.random64(n) if double_words else self.random(n)
        return (words % _U64(span)).reshape(size).astype(dtype)

    def bernoulli(self, size, p):
        """bernoulli_(p) for a number p: unit double < p (torch's CPU kernel for a scalar probability)."""
        return (self.unit(math.prod(size), True) < p).reshape(size)

    def bernoulli_tensor(self, p):
        """bernoulli with a tensor of probabilities `p` (a NumPy array): a double uniform against a float64 p, a
        float one against any other dtype."""
        double = p.dtype == np.float64
        return self.unit(p.size, double).reshape(p.shape) < p

    def exponential(self, size, dtype, rate):
        """exponential_(rate): -1 / rate * log1p(-u) in double."""
        u = self.unit(math.prod(size), True).tolist()
        return (-1.0 / rate * np.array([math.log1p(-v) for v in u], np.float64)).reshape(size).astype(dtype)

    def cauchy(self, size, dtype, median, sigma):
        """cauchy_(median, sigma): median + sigma * tan(pi * (u - 0.5)) in double (fused)."""
        u = self.unit(math.prod(size), True).tolist()
        tangents = np.array([math.tan(math.pi * (v - 0.5)) for v in u], np.float64)
        return _fma64(tangents, float(sigma), float(median)).reshape(size).astype(dtype)

    def log_normal(self, size, dtype, mean, std):
        """log_normal_(mean, std): exp of torch's scalar normal draws (Box-Muller with its cached value)."""
        values = [math.exp(self._scalar_normal(mean, std)) for _ in range(math.prod(size))]
        return np.array(values, np.float64).reshape(size).astype(dtype)

    def geometric(self, size, dtype, p):
        """geometric_(p): ceil(log(u) / log(1 - p)) in double."""
        u, denominator = self.unit(math.prod(size), True).tolist(), math.log(1.0 - p)
        values = [math.ceil(math.log(v) / denominator) if v > 0 else math.inf for v in u]
        return np.array(values, np.float64).reshape(size).astype(dtype)

    def poisson(self, rates):
        """torch's CPU poisson, element by element: a product of double uniforms below rate 10, the transformed
        rejection method (Hoermann) from 10 on."""
        return np.array([self._poisson(float(rate)) for rate in rates.ravel().tolist()]).reshape(rates.shape)

    def _poisson(self, rate):
        if rate == 0:
            return 0
        if rate < 10:
            count, product, limit = 0, 1.0, math.exp(-rate)
            while True:
                product *= self.unit(1, True)[0]
                if product <= limit:
                    return count
                count += 1
        root, log_rate = math.sqrt(rate), math.log(rate)
        b = 0.931 + 2.53 * root
        a = -0.059 + 0.02483 * b
        inverse_alpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        while True:
            u, v = self.unit(2, True).tolist()
            u -= 0.5
            us = 0.5 - abs(u)
            k = math.floor((2 * a / us + b) * u + rate + 0.43)
            if us >= 0.07 and v <= vr:
                return k
            if k < 0 or (us < 0.013 and v > us):
                continue
            accept = math.log(v) + math.log(inverse_alpha) - math.log(a / (us * us) + b)
            if accept <= -rate + k * log_rate - math.lgamma(k + 1.0):
                return k

    def standard_gamma(self, alphas, dtype):
        """torch's CPU _standard_gamma, element by element: each alpha drawn by `_gamma` in the arithmetic of
        `dtype`, at least the dtype's smallest normal number."""
        single = np.dtype(dtype) != np.float64
        tiny = np.finfo(dtype).tiny
        draws = [max(tiny, self._gamma(alpha, single)) for alpha in alphas.ravel().tolist()]
        return np.array(draws, dtype).reshape(alphas.shape)

    def _gamma(self, alpha, single):
        """torch's sample_gamma (Marsaglia and Tsang's rejection method) on double uniforms and scalar normal
        draws; an alpha below 1 is raised by 1 and its draw scaled by u ** (1 / alpha). `single`: alpha's own
        arithmetic (torch's scalar_t) is float32, where C's float constants (1.0f / 3.0f, 0.0331f) round too."""
        real = np.float32 if single else float
        alpha, scale = real(alpha), 1.0
        if alpha < 1:
            if alpha == 0:
                return 0.0
            scale = math.pow(1.0 - float(self.unit(1, True)[0]), float(real(1.0) / alpha))
            alpha = real(alpha + real(1.0))
        d = float(alpha - real(_ONE_THIRD_F))
        c = 1.0 / math.sqrt(9.0 * d)
        while True:
            x, y = 0.0, 0.0
            while y <= 0:
                x = self._scalar_normal(0.0, 1.0)
                y = 1.0 + c * x
            v = y * y * y
            u = 1.0 - float(self.unit(1, True)[0])
            xx = x * x
            if u < 1.0 - _SQUEEZE_F * xx * xx or math.log(u) < 0.5 * xx + d * (1.0 - v + math.log(v)):
                return scale * d * v

    def randperm(self, n):
        """torch's CPU randperm: a Fisher-Yates shuffle of 0..n-1 swapping i with i + random() % (n - i); for n of
        2**32 / 20 or more the inside-out shuffle with random64()."""
        if n < (2**32 - 1) // 20:
            picks = (self.random(max(n - 1, 0)) % np.arange(n, 1, -1, dtype=_U64)).tolist()
            out = list(range(n))
            for i, z in enumerate(picks):
                out[i], out[i + z] = out[i + z], out[i]
            return np.array(out, np.int64)
        picks = (self.random64(n) % np.arange(1, n + 1, dtype=_U64)).tolist()
        out = [0] * n
        for i, z in enumerate(picks):
            out[i] = out[z]
            out[z] = i
        return np.array(out, np.int64)

    def seed_numpy(self):
        """A NumPy generator seeded by one random64() draw, for the samplers whose torch algorithm is not
        reproduced (poisson, gamma, multinomial, ...): reproducible from the seed, not torch's numbers."""
        return np.random.Generator(np.random.PCG64(int(self.random64(1)[0])))


def _log_each(values):
    """The C library's log of each value (NumPy's own vectorized log differs from it in the last bit)."""
    return np.array([math.log(v) for v in values.tolist()], np.float64)


def _fma64(a, b, c):
    """a * b + c in float64 with one rounding, as the compiler's fused multiply-add: the product split exactly
    (Dekker) and the sum's error carried; equal to the true fma except in double-rounding ties."""
    a = np.asarray(a, np.float64)
    product = a * b
    split = 134217729.0  # 2**27 + 1
    ah = a * split - (a * split - a)
    al = a - ah
    bh = b * split - (b * split - b)
    bl = b - bh
    product_error = ((ah * bh - product) + ah * bl + al * bh) + al * bl
    total = product + c
    back = total - product
    sum_error = (product - (total - back)) + (c - back)
    return total + (product_error + sum_error)


def _fill16_float(u, mean, std):
    """normal_fill_16_AVX2 on consecutive blocks of 16 float32 uniforms."""
    blocks = u.reshape(-1, 16)
    radius = np.sqrt(np.float32(-2) * _simd_math.log(np.float32(1) - blocks[:, :8]))
    sin, cos = _simd_math.sincos(np.float32(2.0 * math.pi) * blocks[:, 8:])
    mean, std = np.float32(mean), np.float32(std)
    first, second = _simd_math.fma(radius * cos, std, mean), _simd_math.fma(radius * sin, std, mean)
    return np.concatenate([first, second], axis=1).ravel()


def _fill16_double(u, mean, std):
    """normal_fill_16 in double with the C library's log, cos and sin."""
    blocks = u.reshape(-1, 16)
    radius = np.sqrt(-2.0 * _log_each(1.0 - blocks[:, :8].ravel())).reshape(-1, 8)
    theta = (2.0 * math.pi * blocks[:, 8:]).ravel().tolist()
    cos = np.array([math.cos(t) for t in theta]).reshape(-1, 8)
    sin = np.array([math.sin(t) for t in theta]).reshape(-1, 8)
    first, second = _fma64(radius * cos, float(std), float(mean)), _fma64(radius * sin, float(std), float(mean))
    return np.concatenate([first, second], axis=1).ravel()
