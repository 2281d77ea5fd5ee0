"""Helpers of the distributions: broadcasting parameters, probabilities and logits, and the draws of noise from
batched_grad's generator (a reparameterized sample is a differentiable function of the parameters and this noise)."""

import numbers

import jax
import jax.numpy as jnp
import numpy as np

import batched_grad as bg

from .._ops._index_parse import _concrete
from .._ops.random_draws import sample
from .distribution import _lazy_property as lazy_property

__all__ = [
    "broadcast_all",
    "clamp_probs",
    "lazy_property",
    "logits_to_probs",
    "probs_to_logits",
    "sample_dirichlet",
    "standard_gamma",
    "standard_normal",
    "uniform",
]

euler_constant = 0.57721566490153286060


def broadcast_all(*values):
    """The values broadcast to one shape; numbers become tensors of the first tensor's dtype (else the default)."""
    if not all(isinstance(v, (bg.Tensor, numbers.Number)) for v in values):
        raise ValueError(
            "Input arguments must all be instances of Number, torch.Tensor or objects implementing __torch_function__."
        )
    tensors = [v for v in values if isinstance(v, bg.Tensor)]
    dtype = tensors[0].dtype if tensors else bg.get_default_dtype()
    return bg.broadcast_tensors(*[v if isinstance(v, bg.Tensor) else bg.tensor(v, dtype=dtype) for v in values])


def _sum_rightmost(value, dim):
    """value summed over its `dim` rightmost dimensions (torch.distributions.utils' helper of that name)."""
    return value if dim == 0 else value.reshape(tuple(value.shape[: value.dim() - dim]) + (-1,)).sum(-1)


def clamp_probs(probs):
    """Probabilities clamped into [eps, 1 - eps] of their dtype."""
    eps = bg.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    """sigmoid(logits) for a binary event, else softmax over the last dimension."""
    return bg.sigmoid(logits) if is_binary else bg.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary=False):
    """log-odds of binary probabilities, else log-probabilities (clamped away from 0 and 1)."""
    clamped = clamp_probs(probs)
    return bg.log(clamped) - bg.log1p(-clamped) if is_binary else bg.log(clamped)


def _real(dtype):
    """The NumPy dtype torch's kernels draw a floating dtype in: float64, or float32 for the others."""
    return np.float64 if dtype.np == np.float64 else np.float32


def _draw(name, shape, dtype, draw):
    return sample(None, name, tuple(shape), lambda bits, size: draw(bits, size).astype(dtype.np))


def standard_normal(shape, dtype):
    """N(0, 1) noise of `shape` from the default generator."""
    return _draw("normal", shape, dtype, lambda bits, size: bits.normal(size, _real(dtype)))


def uniform(shape, dtype):
    """U[0, 1) noise of `shape` from the default generator."""
    return _draw("rand", shape, dtype, lambda bits, size: bits.uniform(size, _real(dtype)))


def standard_exponential(shape, dtype):
    """Exp(1) noise of `shape` from the default generator."""
    return _draw("exponential", shape, dtype, lambda bits, size: bits.exponential(size, _real(dtype), 1.0))


def _torch_gamma_gradient(alpha, x):
    """torch's standard_gamma_grad_one, elementwise in double: the reparameterized gradient dx/dalpha =
    -(dF/dalpha) / (dF/dx) of a standard Gamma(alpha) draw x, by a Taylor series below x = 0.8, Rice's saddle point
    expansion above alpha = 8, and a bivariate rational approximation between."""
    a, x = alpha.astype(jnp.float64), x.astype(jnp.float64)
    safe_x = jnp.maximum(x, jnp.finfo(jnp.float64).tiny)
    # Taylor series of the regularized lower incomplete gamma function and its alpha-derivative
    numer, denom = jnp.ones_like(x), a
    series1, series2 = numer / denom, numer / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-x / i)
        denom = denom + 1
        series1, series2 = series1 + numer / denom, series2 + numer / (denom * denom)
    pow_x_alpha = jnp.power(safe_x, a)
    pdf = jnp.power(safe_x, a - 1) * jnp.exp(-x)
    cdf_alpha = (jnp.log(safe_x) - jax.scipy.special.digamma(a)) * pow_x_alpha * series1 - pow_x_alpha * series2
    taylor = -cdf_alpha / pdf
    taylor = jnp.where(jnp.isnan(taylor), 0.0, taylor)
    # Rice saddle point expansion (large alpha), with its own rational form near x = alpha
    near = (
        (1 + 24 * a * (1 + 12 * a))
        * (1440 * a * a + 6 * x * (53 - 120 * x) - 65 * x * x / a + a * (107 + 3600 * x))
        / (1244160 * a * a * a * a)
    )
    root = jnp.sqrt(8 * a)
    gap = jnp.where(x == a, 1.0, a - x)
    term2 = root / gap
    term3 = jnp.power(jnp.abs(x - a - a * jnp.log(safe_x / a)), -1.5)
    term23 = jnp.where(x < a, term2 - term3, term2 + term3)
    term1 = jnp.log(safe_x / a) * term23 - jnp.sqrt(2 / a) * (a + x) / (gap * gap)
    stirling = 1 + 1 / (12 * a) * (1 + 1 / (24 * a))
    saddle = jnp.where((0.9 * a <= x) & (x <= 1.1 * a), near, -stirling * x * term1 / root)
    # bivariate rational approximation in u = log(x / alpha), v = log(alpha)
    u, v = jnp.log(safe_x / a), jnp.log(a)
    coef = [c0 + u * (c1 + u * c2) for c0, c1, c2 in zip(*_GAMMA_GRAD_COEFFICIENTS)]
    p = coef[0] + v * (coef[1] + v * (coef[2] + v * coef[3]))
    q = coef[4] + v * (coef[5] + v * (coef[6] + v * coef[7]))
    rational = jnp.exp(p / q)
    result = jnp.where(x < 0.8, taylor, jnp.where(a > 8.0, saddle, rational))
    return result.astype(alpha.dtype)


_GAMMA_GRAD_COEFFICIENTS = (
    (0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
    (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623),
    (
        0.040121004,
        -0.0065914022,
        -0.0026286047,
        -0.0013441777,
        0.017050642,
        -0.0021309326,
        0.00085092367,
        -1.5247877e-07,
    ),
)


@jax.custom_jvp
def _gamma_draw(concentration, drawn):
    return drawn


@_gamma_draw.defjvp
def _gamma_draw_jvp(primals, tangents):
    concentration, drawn = primals
    return drawn, _torch_gamma_gradient(concentration, drawn) * tangents[0]


def _drawn_by_jax(key, concentration):
    rng = jax.random.wrap_key_data(key.astype(jnp.uint32))
    drawn = jax.random.gamma(rng, jax.lax.stop_gradient(concentration), concentration.shape, dtype=concentration.dtype)
    return _gamma_draw(concentration, drawn)


_GAMMA_OF_DRAW = bg.jax_function(_gamma_draw)
_GAMMA_BY_JAX = bg.jax_function(_drawn_by_jax)


def standard_gamma(concentration):
    """Gamma(concentration, 1) draws of concentration's shape, differentiable in the concentration as torch's
    _standard_gamma (its implicit reparameterization gradient). Where the concentration's values are known, the
    draws are torch's (its sampler on the default generator's stream); while tracing (bg.compile, vmap) they are
    JAX's, keyed by a draw from the default generator."""
    alphas = _concrete(concentration.detach())
    if alphas is None:
        key = sample(None, "_standard_gamma", (2,), lambda bits, size: bits.integers(size, 0, 2**31, np.int64))
        return _GAMMA_BY_JAX(key, concentration)
    real = _real(concentration.dtype)
    drawn = sample(
        None,
        "_standard_gamma",
        alphas.shape,
        lambda bits, size: bits.standard_gamma(np.broadcast_to(alphas, size), real),
    )
    return _GAMMA_OF_DRAW(concentration, drawn.to(concentration.dtype))


def sample_dirichlet(concentration):
    """Draws on the simplex (concentration's last dimension) differentiable through normalized standard_gamma
    draws. Where the concentration's values are known, the values are torch's _sample_dirichlet (double gamma
    draws, normalized, clamped into (0, 1)); the gradient is that of those gamma draws normalized."""
    alphas = _concrete(concentration.detach())
    if alphas is None:
        gammas = standard_gamma(concentration)
        ratios = gammas / gammas.sum(-1, keepdim=True)
        finfo = bg.finfo(ratios.dtype)
        return ratios + (ratios.clamp(min=finfo.tiny, max=1 - finfo.eps / 2) - ratios).detach()
    real = _real(concentration.dtype)

    def draw(bits, size):  # the double gamma draws and torch's normalized values (exact in double), stacked
        gammas = bits.standard_gamma(np.broadcast_to(alphas, size[:-1]), np.float64)
        ratios = (gammas / gammas.sum(-1, keepdims=True)).astype(real)
        ratios = np.clip(ratios, np.finfo(real).tiny, np.nextafter(real(1), real(0)))
        return np.stack([gammas, ratios.astype(np.float64)], -1)

    drawn = sample(None, "_sample_dirichlet", alphas.shape + (2,), draw)
    gammas = _GAMMA_OF_DRAW(concentration.double(), drawn[..., 0])
    ratios = (gammas / gammas.sum(-1, keepdim=True)).to(concentration.dtype)
    return ratios + (drawn[..., 1].to(ratios.dtype) - ratios).detach()
