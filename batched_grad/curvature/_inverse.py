"""The inverse of a symmetric positive-definite operator by conjugate gradients (curvlinops 3's
CGInverseLinearOperator, whose CG is GPyTorch's `linear_cg`; this is the same iteration, with the same options and
defaults): all right-hand sides are solved together, so each iteration is one product of the operator with every
column at once. The CG vector algebra runs in NumPy on the host (float64 stays float64)."""

import warnings

import numpy as np

from ._base import LinearOperator
from ._probes import dtype_of, product

_DEFAULTS = {
    "tolerance": 1.0,  # the mean residual norm (of the normalized right-hand sides) at which CG stops
    "eps": 1e-10,  # below this, a division's denominator counts as zero
    "stop_updating_after": 1e-10,  # a column whose residual norm is below this stops changing
    "max_iter": 1000,
    "initial_guess": None,  # a Tensor (N,) or (N, K)
    "preconditioner": None,  # a callable of a Tensor (N, K) -> M^-1 applied to it
}


class CGInverseLinearOperator(LinearOperator):
    """A^-1 for a symmetric positive-definite operator A, applied by conjugate gradients. `cg_hyperparameters` are
    `linear_cg`'s: tolerance (1.0: the mean residual norm of the normalized right-hand sides at which CG stops, checked
    from the 11th iteration on), eps (1e-10), stop_updating_after (1e-10), max_iter (1000), initial_guess (None),
    preconditioner (None)."""

    def __init__(self, A, **cg_hyperparameters):
        if A._in_shape != A._out_shape:
            raise ValueError(f"CGInverseLinearOperator: A must be square, but maps {A._in_shape} to {A._out_shape}")
        unknown = sorted(set(cg_hyperparameters) - set(_DEFAULTS))
        if unknown:
            raise TypeError(f"CGInverseLinearOperator: unknown CG options {unknown}; the options are {list(_DEFAULTS)}")
        super().__init__(A._in_shape, A._out_shape)
        self._A, self._cg_hyperparameters = A, dict(cg_hyperparameters)

    dtype = property(lambda self: self._A.dtype, doc="A's dtype.")
    device = property(lambda self: self._A.device, doc="A's device.")

    def _adjoint(self):
        return CGInverseLinearOperator(self._A.adjoint(), **self._cg_hyperparameters)

    def _matmat(self, M):
        from .. import as_tensor, cat

        k = M[0].shape[0]
        rhs = np.asarray(cat([m.reshape(k, -1) for m in M], dim=1).numpy()).T
        solution = conjugate_gradients(self._A, rhs, **{**_DEFAULTS, **self._cg_hyperparameters})
        return self._split_rows(as_tensor(np.ascontiguousarray(solution.T), dtype=self.dtype))


def _safe_divide(numerator, denominator, eps):
    zero = denominator < eps
    return np.where(zero, 0.0, numerator / np.where(zero, 1.0, denominator))


def conjugate_gradients(A, rhs, tolerance, eps, stop_updating_after, max_iter, initial_guess, preconditioner):
    """Solve A X = rhs for the columns of `rhs` (N, K) together: one product with all K columns per iteration."""
    from .. import as_tensor

    def precondition(r):
        if preconditioner is None:
            return r.copy()
        return np.asarray(preconditioner(as_tensor(r, dtype=dtype_of(A))).numpy())

    rhs_norm = np.linalg.norm(rhs, axis=0, keepdims=True)
    rhs_is_zero = rhs_norm < eps
    rhs_norm = np.where(rhs_is_zero, 1.0, rhs_norm)
    rhs = rhs / rhs_norm
    guess = np.zeros_like(rhs) if initial_guess is None else _as_columns(initial_guess, rhs.shape) / rhs_norm
    residual = rhs - product(A, guess)
    result = guess.copy()
    if np.isnan(residual).any():
        raise RuntimeError("CGInverseLinearOperator: the product with A gave NaNs")
    residual_norm = np.linalg.norm(residual, axis=0, keepdims=True)
    converged = residual_norm < stop_updating_after
    if converged.all():
        return result * rhs_norm
    preconditioned = precondition(residual)
    direction = preconditioned
    inner = (preconditioned * residual).sum(0, keepdims=True)
    reached = False
    for step in range(max_iter):
        products = product(A, direction)
        alpha = _safe_divide(inner, (direction * products).sum(0, keepdims=True), eps)
        alpha = np.where(converged, 0.0, alpha)
        residual = residual - alpha * products
        preconditioned = precondition(residual)
        result = result + alpha * direction
        previous, inner = inner, (residual * preconditioned).sum(0, keepdims=True)
        beta = _safe_divide(inner, previous, eps)
        direction = direction * beta + preconditioned
        residual_norm = np.where(rhs_is_zero, 0.0, np.linalg.norm(residual, axis=0, keepdims=True))
        converged = residual_norm < stop_updating_after
        if step >= min(10, max_iter - 1) and residual_norm.mean() < tolerance:
            reached = True
            break
    if not reached:
        warnings.warn(
            f"CGInverseLinearOperator: CG stopped after {max_iter} iterations with mean residual norm "
            f"{residual_norm.mean():.3g}, above its tolerance {tolerance}; raise max_iter or the tolerance",
            RuntimeWarning,
            stacklevel=4,
        )
    return result * rhs_norm


def _as_columns(guess, shape):
    values = np.asarray(guess.numpy() if hasattr(guess, "numpy") else guess, dtype=np.float64)
    return values.reshape(shape) if values.ndim == 1 else values
