"""Distributions over matrices: LKJCholesky (Cholesky factors of correlation matrices, drawn by the onion method)
and Wishart (positive definite matrices, drawn by Bartlett's decomposition)."""

import math
import numbers
import warnings

import numpy as np

import batched_grad as bg

from . import constraints
from .continuous import ExponentialFamily
from .distribution import Distribution, _all_true
from .location_scale import Chi2
from .multivariate import _MATRIX_ARGS, _FromScaleTril, _precision_to_scale_tril
from .simplex import Beta
from .utils import broadcast_all, standard_normal

__all__ = ["LKJCholesky", "Wishart"]


class LKJCholesky(Distribution):
    """The LKJ distribution over D x D correlation matrices (density proportional to det(C)^(concentration - 1)),
    given as their lower Cholesky factors."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        # the onion method: row i's squared off-diagonal length is Beta(i / 2, concentration + (D - 2 - i) / 2)
        marginal = self.concentration + 0.5 * (self.dim - 2)
        offset = bg.arange(self.dim - 1, dtype=self.concentration.dtype)
        offset = bg.cat([offset.new_zeros((1,)), offset])
        self._beta = Beta(offset + 0.5, marginal.unsqueeze(-1) - 0.5 * offset)
        super().__init__(self.concentration.size(), bg.Size((dim, dim)), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = bg.Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with bg.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u = standard_normal(self._extended_shape(sample_shape), y.dtype).tril(-1)
            # each row a uniform direction on the sphere of its first i coordinates; row 0 has none
            row_norms = u.norm(dim=-1, keepdim=True)
            first_row = bg.arange(self.dim) == 0
            directions = bg.where(first_row.unsqueeze(-1), 0.0, u / row_norms)
            w = bg.sqrt(y) * directions
            diagonal = bg.clamp(1 - bg.sum(w**2, dim=-1), min=bg.finfo(w.dtype).tiny).sqrt()
            return w + bg.diag_embed(diagonal)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diagonal = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = bg.arange(2, self.dim + 1)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = bg.sum(order * diagonal.log(), dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        log_normalizer = 0.5 * dm1 * math.log(math.pi) + bg.mvlgamma(alpha - 0.5, dm1) - bg.lgamma(alpha) * dm1
        return unnormalized - log_normalizer


_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """The multivariate digamma function: sum_i digamma(x - i / 2), i < p."""
    if not _all_true(x.gt((p - 1) / 2)):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    halves = bg.arange(p, dtype=x.dtype).div(2).expand(tuple(x.shape) + (-1,))
    return bg.digamma(x.unsqueeze(-1) - halves).sum(-1)


class Wishart(_FromScaleTril, ExponentialFamily):
    """The Wishart distribution of `df` degrees of freedom and scale matrix given as one of covariance_matrix,
    precision_matrix or scale_tril: the law of sum_i x_i x_i^T for df draws x_i ~ N(0, Sigma)."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {
            "covariance_matrix": constraints.positive_definite,
            "precision_matrix": constraints.positive_definite,
            "scale_tril": constraints.lower_cholesky,
            "df": constraints.greater_than(self.event_shape[-1] - 1),
        }

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        given = {"covariance_matrix": covariance_matrix, "precision_matrix": precision_matrix, "scale_tril": scale_tril}
        given = {name: m for name, m in given.items() if m is not None}
        if len(given) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        ((name, param),) = given.items()
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = bg.Size(param.shape[:-2])
            self.df = bg.tensor(df, dtype=param.dtype)
        else:
            batch_shape = bg.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape))
            self.df = df.expand(batch_shape)
        event_shape = param.shape[-2:]
        if not _all_true(self.df.gt(event_shape[-1] - 1)):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {event_shape[-1] - 1}.")
        setattr(self, name, param.expand(tuple(batch_shape) + (-1, -1)))
        if not _all_true(self.df.ge(event_shape[-1])):
            warnings.warn(
                "Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < ndim.",
                stacklevel=2,
            )
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = param
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = bg.linalg.cholesky(param)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(param)
        self._set_chi2()

    def _set_chi2(self):
        """The Bartlett decomposition's diagonal: chi-square draws of df, df - 1, ..., df - p + 1 degrees."""
        steps = bg.arange(self._event_shape[-1], dtype=self._unbroadcasted_scale_tril.dtype)
        self._dist_chi2 = Chi2(df=self.df.unsqueeze(-1) - steps.expand(self._batch_shape + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = bg.Size(batch_shape)
        matrix_shape = batch_shape + self.event_shape
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(matrix_shape)
        new.df = self.df.expand(batch_shape)
        for name in _MATRIX_ARGS:
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(matrix_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._set_chi2()
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape

    def _df_matrix(self):
        return self.df.view(self._batch_shape + (1, 1))

    mean = property(lambda self: self._df_matrix() * self.covariance_matrix)

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = bg.where(factor <= 0, math.nan, factor)
        return factor.view(self._batch_shape + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        v = self.covariance_matrix
        diagonal = v.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (v.pow(2) + bg.einsum("...i,...j->...ij", diagonal, diagonal))

    def _bartlett_sampling(self, sample_shape=()):
        """L A A^T L^T for A lower triangular: sqrt(chi-square) on the diagonal, N(0, 1) below."""
        p = self._event_shape[-1]
        root = self._dist_chi2.rsample(sample_shape).sqrt()
        diagonal = root.clamp(min=bg.finfo(root.dtype).eps)
        rows, cols = np.tril_indices(p, -1)
        below = standard_normal(tuple(sample_shape) + tuple(self._batch_shape) + (len(rows),), diagonal.dtype)
        slots = np.full(p * p, len(rows))  # entries on and above the diagonal read a zero
        slots[rows * p + cols] = np.arange(len(rows))
        padded = bg.cat([below, bg.zeros(tuple(below.shape[:-1]) + (1,), dtype=below.dtype)], -1)
        noise = padded[..., bg.tensor(slots)].reshape(tuple(below.shape[:-1]) + (p, p)) + diagonal.diag_embed()
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.transpose(-2, -1)

    def _positive_definite(self, sample):
        """Per draw (over the batch): whether the support's check holds."""
        valid = self.support.check(sample)
        return valid.amax(tuple(range(-len(self._batch_shape), 0))) if self._batch_shape else valid

    def rsample(self, sample_shape=(), max_try_correction=None):
        """Bartlett draws. torch 2.13 redraws every positive definite draw once (its check's sense is inverted),
        and draws again while a redraw is singular, up to max_try_correction times; the redraws are done here too,
        so that the draws are torch's for the same seed (without torch's warning, which that inversion raises on
        every call)."""
        max_try_correction = 10 if max_try_correction is None else max_try_correction
        sample_shape = bg.Size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        redraw = self._positive_definite(sample).numpy().copy()
        for _ in range(max_try_correction if redraw.any() else 0):
            fresh = self._bartlett_sampling((int(redraw.sum()),))
            sample = self._replace(sample, redraw, fresh)
            redraw[redraw] = ~self._positive_definite(fresh).numpy()
            if not redraw.any():
                break
        return sample

    @staticmethod
    def _replace(sample, where, fresh):
        """sample with its draws at the True entries of the boolean array `where` replaced by fresh's, in order."""
        flat = sample.reshape((-1,) + tuple(sample.shape[where.ndim :]))
        return flat.index_copy(0, bg.tensor(np.flatnonzero(where)), fresh).reshape(sample.shape)

    def _log_det_scale(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        trace = bg.cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(dim1=-2, dim2=-1).sum(dim=-1)
        return (
            -nu * (p * _LOG_2 / 2 + self._log_det_scale())
            - bg.mvlgamma(nu / 2, p=p)
            + (nu - p - 1) / 2 * bg.linalg.slogdet(value).logabsdet
            - trace / 2
        )

    def entropy(self):
        nu, p = self.df, self._event_shape[-1]
        return (
            (p + 1) * (p * _LOG_2 / 2 + self._log_det_scale())
            + bg.mvlgamma(nu / 2, p=p)
            - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p=p)
            + nu * p / 2
        )

    @property
    def _natural_params(self):
        return -self.precision_matrix / 2, (self.df - self._event_shape[-1] - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        shifted = y + (p + 1) / 2
        return shifted * (-bg.linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p) + bg.mvlgamma(shifted, p=p)
