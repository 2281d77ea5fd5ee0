"""Helpers of the distributions: broadcasting parameters, probabilities and logits, and the draws of noise from
batched_grad's generator (a reparameterized sample is a differentiable function of the parameters and this noise)."""

import numbers

import jax
import jax.numpy as jnp
import numpy as np

import batched_grad as bg

from .._ops.random_draws import check_parameters, sample, sample_given, values_known
from ._implicit_gradients import dirichlet_draw, gamma_draw
from .distribution import _lazy_property as lazy_property

__all__ = [
    "broadcast_all",
    "clamp_probs",
    "lazy_property",
    "logits_to_probs",
    "probs_to_logits",
    "sample_dirichlet",
    "standard_cauchy",
    "standard_gamma",
    "standard_normal",
    "tril_matrix_to_vec",
    "uniform",
    "vec_to_tril_matrix",
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


def uniform(shape, dtype, low=0.0, high=1.0):
    """U[low, high) noise of `shape` from the default generator (torch's rand, or uniform_(low, high))."""
    return _draw("rand", shape, dtype, lambda bits, size: bits.uniform(size, _real(dtype), low, high))


def standard_cauchy(shape, dtype):
    """Cauchy(0, 1) noise of `shape` from the default generator (torch's cauchy_)."""
    return _draw("cauchy", shape, dtype, lambda bits, size: bits.cauchy(size, _real(dtype), 0.0, 1.0))


def standard_exponential(shape, dtype):
    """Exp(1) noise of `shape` from the default generator."""
    return _draw("exponential", shape, dtype, lambda bits, size: bits.exponential(size, _real(dtype), 1.0))


def _drawn_by_jax(key, concentration):
    rng = jax.random.wrap_key_data(key.astype(jnp.uint32))
    drawn = jax.random.gamma(rng, jax.lax.stop_gradient(concentration), concentration.shape, dtype=concentration.dtype)
    return gamma_draw(concentration, drawn)


_GAMMA_OF_DRAW = bg.jax_function(gamma_draw)
_GAMMA_BY_JAX = bg.jax_function(_drawn_by_jax)
_DIRICHLET_OF_DRAW = bg.jax_function(dirichlet_draw)


def standard_gamma(concentration, generator=None):
    """Gamma(concentration, 1) draws of concentration's shape, differentiable in the concentration as torch's
    _standard_gamma (its implicit reparameterization gradient). Where the concentration's values are known, the
    draws are torch's (its sampler on the stream of `generator`, the default one if None; inside vmap.vmap, for all
    rows at once as torch's batching rule); inside bg.compile they are JAX's, keyed by a draw from that generator."""
    check_parameters(concentration)
    if not values_known(concentration):
        key = sample(generator, "_standard_gamma", (2,), lambda bits, size: bits.integers(size, 0, 2**31, np.int64))
        return _GAMMA_BY_JAX(key, concentration)
    real = _real(concentration.dtype)
    drawn = sample_given(
        generator,
        "_standard_gamma",
        concentration.shape,
        lambda bits, size, alphas: bits.standard_gamma(alphas, real),
        concentration.detach(),
    )
    return _GAMMA_OF_DRAW(concentration, drawn.to(concentration.dtype))


def sample_dirichlet(concentration, generator=None):
    """Draws on the simplex (concentration's last dimension), differentiable in the concentration as torch's
    _sample_dirichlet (its reparameterized gradient, from each coordinate's Beta marginal). Where the
    concentration's values are known the draws are torch's (double gamma draws normalized, clamped into (0, 1));
    inside bg.compile, normalized standard_gamma draws."""
    check_parameters(concentration)
    if not values_known(concentration):
        gammas = standard_gamma(concentration, generator).detach()
        ratios = gammas / gammas.sum(-1, keepdim=True)
        finfo = bg.finfo(ratios.dtype)
        return _DIRICHLET_OF_DRAW(concentration, ratios.clamp(min=finfo.tiny, max=1 - finfo.eps / 2))
    real = _real(concentration.dtype)

    def draw(bits, size, alphas):
        gammas = bits.standard_gamma(alphas, np.float64)
        ratios = (gammas / gammas.sum(-1, keepdims=True)).astype(real)
        return np.clip(ratios, np.finfo(real).tiny, np.nextafter(real(1), real(0)))

    drawn = sample_given(generator, "_sample_dirichlet", concentration.shape, draw, concentration.detach())
    return _DIRICHLET_OF_DRAW(concentration, drawn.to(concentration.dtype))


def _tril_indices(n, diag):
    """The (row, column) indices of the entries on or below diagonal `diag` of an n x n matrix, in row order."""
    rows, cols = np.nonzero(np.arange(n) < np.arange(n)[:, None] + (diag + 1))
    return rows, cols


def tril_matrix_to_vec(mat, diag=0):
    """The entries of the (batched) square matrix on or below diagonal `diag`, in row order."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    rows, cols = _tril_indices(n, diag)
    return mat[..., bg.tensor(rows), bg.tensor(cols)]


def vec_to_tril_matrix(vec, diag=0):
    """The (batched) square matrix whose entries on or below diagonal `diag` are vec's, in row order (0 above)."""
    # the positive root of n^2 + (1 + 2 diag) n - |diag| (diag + 1) - 2 len(vec) = 0
    length = vec.shape[-1]
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * length + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > bg.finfo(vec.dtype).eps:
        raise ValueError(
            f"The size of last dimension is {length} which cannot be expressed as "
            "the lower triangular part of a square D x D matrix."
        )
    n = round(n)
    rows, cols = _tril_indices(n, diag)
    slots = np.full(n * n, length)  # entries above the diagonal read the appended zero
    slots[rows * n + cols] = np.arange(len(rows))
    padded = bg.cat([vec, bg.zeros(tuple(vec.shape[:-1]) + (1,), dtype=vec.dtype)], -1)
    return padded[..., bg.tensor(slots)].reshape(tuple(vec.shape[:-1]) + (n, n))
