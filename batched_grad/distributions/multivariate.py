"""MultivariateNormal (given a covariance, a precision or a Cholesky factor) and LowRankMultivariateNormal
(covariance W W^T + diag(D)), with densities from triangular solves."""

import math

import batched_grad as bg

from . import constraints
from .distribution import Distribution
from .utils import lazy_property, standard_normal

__all__ = ["LowRankMultivariateNormal", "MultivariateNormal"]


def _batch_mv(matrix, vector):
    """matrix @ vector over broadcast batch dimensions."""
    return bg.matmul(matrix, vector.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(tril, x):
    """x^T (L L^T)^{-1} x for a lower-triangular L, broadcasting L's batch over x's."""
    batch = bg.broadcast_shapes(tuple(tril.shape[:-2]), tuple(x.shape[:-1]))
    tril = tril.expand(tuple(batch) + tuple(tril.shape[-2:]))
    x = x.expand(tuple(batch) + tuple(x.shape[-1:]))
    return bg.linalg.solve_triangular(tril, x.unsqueeze(-1), upper=False).squeeze(-1).pow(2).sum(-1)


def _precision_to_scale_tril(precision):
    # the lower Cholesky factor of P^{-1}: from the Cholesky factor of P with its rows and columns reversed
    flipped = bg.linalg.cholesky(bg.flip(precision, (-2, -1)))
    inverse_tril = bg.transpose(bg.flip(flipped, (-2, -1)), -2, -1)
    identity = bg.eye(precision.shape[-1], dtype=precision.dtype)
    return bg.linalg.solve_triangular(inverse_tril, identity, upper=False)


_MATRIX_ARGS = ("scale_tril", "covariance_matrix", "precision_matrix")


class _FromScaleTril:
    """The matrices of a distribution given by the lower Cholesky factor L of its covariance (or scale) matrix,
    each computed when read and expanded to `_matrix_shape()`: L, L L^T and (L L^T)^{-1}."""

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        tril = self._unbroadcasted_scale_tril
        return bg.matmul(tril, tril.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        return bg.cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())


class MultivariateNormal(_FromScaleTril, Distribution):
    """N(loc, Sigma) over the last dimension, Sigma given as exactly one of covariance_matrix, precision_matrix or
    scale_tril (its lower Cholesky factor)."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = {"scale_tril": scale_tril, "covariance_matrix": covariance_matrix, "precision_matrix": precision_matrix}
        given = {name: m for name, m in given.items() if m is not None}
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        ((name, matrix),) = given.items()
        if matrix.dim() < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = bg.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        setattr(self, name, matrix.expand(tuple(batch_shape) + (-1, -1)))
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = scale_tril
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = bg.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = bg.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape + self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in _MATRIX_ARGS:
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape + self.event_shape + self.event_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = standard_normal(shape, self.loc.dtype)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        mahalanobis = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + mahalanobis) - half_log_det

    def entropy(self):
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        entropy = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return entropy if len(self._batch_shape) == 0 else entropy.expand(self._batch_shape)


def _capacitance_tril(factor, diag):
    """The Cholesky factor of I + W^T D^{-1} W (the capacitance matrix of Woodbury's identity)."""
    wt_dinv = factor.mT / diag.unsqueeze(-2)
    capacitance = bg.matmul(wt_dinv, factor) + bg.eye(factor.shape[-1], dtype=factor.dtype)
    return bg.linalg.cholesky(capacitance)


def _lowrank_logdet(factor, diag, capacitance_tril):
    """log det(W W^T + D), by the matrix determinant lemma."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + diag.log().sum(-1)


def _lowrank_mahalanobis(factor, diag, x, capacitance_tril):
    """x^T (W W^T + D)^{-1} x, by Woodbury's identity."""
    wt_dinv_x = _batch_mv(factor.mT / diag.unsqueeze(-2), x)
    return (x.pow(2) / diag).sum(-1) - _batch_mahalanobis(capacitance_tril, wt_dinv_x)


class LowRankMultivariateNormal(Distribution):
    """N(loc, cov_factor cov_factor^T + diag(cov_diag)), for a covariance of low rank plus a diagonal."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if cov_factor.shape[-2:-1] != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if cov_diag.shape[-1:] != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, diag_ = bg.broadcast_tensors(loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1))
        except RuntimeError as e:
            raise ValueError(
                f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, cov_diag {cov_diag.shape}"
            ) from e
        self.loc, self.cov_diag = loc_[..., 0], diag_[..., 0]
        self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag = cov_factor, cov_diag
        self._capacitance_tril = _capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = bg.Size(batch_shape)
        loc_shape = batch_shape + self.event_shape
        new.loc, new.cov_diag = self.loc.expand(loc_shape), self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + self.cov_factor.shape[-1:])
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @lazy_property
    def variance(self):
        factor, diag = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (factor.pow(2).sum(-1) + diag).expand(self._batch_shape + self._event_shape)

    @lazy_property
    def scale_tril(self):
        # D^{1/2} chol(I + D^{-1/2} W W^T D^{-1/2}) keeps the factorization well conditioned
        sqrt_diag = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        scaled = self._unbroadcasted_cov_factor / sqrt_diag
        inner = bg.matmul(scaled, scaled.mT) + bg.eye(self._event_shape[0], dtype=scaled.dtype)
        return (sqrt_diag * bg.linalg.cholesky(inner)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        factor = self._unbroadcasted_cov_factor
        covariance = bg.matmul(factor, factor.mT) + bg.diag_embed(self._unbroadcasted_cov_diag)
        return covariance.expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        factor, diag = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        solved = bg.linalg.solve_triangular(self._capacitance_tril, factor.mT / diag.unsqueeze(-2), upper=False)
        return (bg.diag_embed(diag.reciprocal()) - bg.matmul(solved.mT, solved)).expand(self._matrix_shape())

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        factor = self._unbroadcasted_cov_factor
        eps_factor = standard_normal(tuple(shape[:-1]) + tuple(factor.shape[-1:]), self.loc.dtype)
        eps_diag = standard_normal(shape, self.loc.dtype)
        return self.loc + _batch_mv(factor, eps_factor) + self._unbroadcasted_cov_diag.sqrt() * eps_diag

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        factor, diag = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        mahalanobis = _lowrank_mahalanobis(factor, diag, value - self.loc, self._capacitance_tril)
        log_det = _lowrank_logdet(factor, diag, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + mahalanobis)

    def entropy(self):
        log_det = _lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril)
        entropy = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        return entropy if len(self._batch_shape) == 0 else entropy.expand(self._batch_shape)
