"""A few extreme eigenvalues of a symmetric operator by block Lanczos with full reorthogonalization and thick
restarts: each step multiplies the operator with a block of k vectors in one batched product (the residuals of the
k wanted Ritz pairs, which extend the Krylov space as block Lanczos' next block does), then Rayleigh-Ritz on the
whole basis. The vector algebra runs in NumPy on the host."""

import numpy as np

from ._probes import draw_probes, product, result, square_size

WHICH = ("LA", "SA", "LM", "SM", "BE")


def _select(theta, k, which):
    """Indices of the k wanted Ritz values among `theta` (ascending), most wanted first."""
    if which == "LA":
        return np.argsort(-theta, kind="stable")[:k]
    if which == "SA":
        return np.argsort(theta, kind="stable")[:k]
    if which == "LM":
        return np.argsort(-np.abs(theta), kind="stable")[:k]
    if which == "SM":
        return np.argsort(np.abs(theta), kind="stable")[:k]
    order = np.argsort(theta, kind="stable")  # BE: alternately from the top and the bottom
    ends = [order[-1 - i // 2] if i % 2 == 0 else order[i // 2] for i in range(len(order))]
    return np.array(list(dict.fromkeys(ends))[:k])


def _orthonormal_extension(V, R, floor):
    """An orthonormal basis of R's part orthogonal to V's columns (two passes of Gram-Schmidt), less the columns
    that are (numerically) in V's span."""
    for _ in range(2):
        R = R - V @ (V.T @ R)
    Q, triangle = np.linalg.qr(R)
    keep = np.abs(np.diag(triangle)) > floor
    Q = Q[:, keep]
    return Q - V @ (V.T @ Q)


def top_eigenvalues(A, k=1, which="LA", *, tol=1e-6, max_iter=200, max_basis=None, generator=None):
    """The k eigenvalues of the symmetric operator (or matrix) A that `which` picks, with their eigenvectors:
    'LA' largest, 'SA' smallest (algebraic), 'LM' / 'SM' largest / smallest in magnitude (PyHessian's top
    eigenvalues are 'LM'), 'BE' from both ends in turn. Returns (eigenvalues `(k,)`, eigenvectors `(dim, k)`) as
    Tensors of A's dtype, most wanted first. A pair has converged when its residual norm |A y - t y| is at most
    `tol * |t|` (or `tol` times the largest |t| for t near 0); `max_iter` bounds the block products;
    the basis is restarted from its wanted Ritz vectors when it reaches `max_basis` columns (default max(20 k, 60)).
    Raises RuntimeError if the pairs have not converged after max_iter products."""
    dim = square_size(A)
    if which not in WHICH:
        raise ValueError(f"which must be one of {WHICH}, but got {which!r}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k < dim:
        raise ValueError(f"k must be an int in [1, {dim - 1}], but got {k!r}")
    limit = min(dim, max_basis or max(20 * k, 60))
    if limit < 2 * k:
        raise ValueError(f"max_basis ({limit}) must be at least 2 k = {2 * k}")
    V, _ = np.linalg.qr(draw_probes(dim, k, "normal", generator=generator))
    AV = product(A, V)
    for _ in range(max_iter):
        theta, S = np.linalg.eigh(_symmetric(V.T @ AV))
        wanted = _select(theta, k, which)
        Y, AY = V @ S[:, wanted], AV @ S[:, wanted]
        R = AY - Y * theta[wanted]
        scale = np.maximum(np.abs(theta[wanted]), np.abs(theta).max() * 1e-8)
        if np.all(np.linalg.norm(R, axis=0) <= tol * scale):
            return result(theta[wanted], A), result(Y, A)
        if V.shape[1] + k > limit:  # thick restart: keep the best Ritz vectors (and their products)
            kept = _select(theta, limit - k - (limit - k) // 3, which)
            V, AV = V @ S[:, kept], AV @ S[:, kept]
        extension = _orthonormal_extension(V, R, 1e-12 * max(1.0, np.linalg.norm(R)))
        if extension.shape[1] == 0:  # the basis spans an invariant subspace: its Ritz pairs are exact
            extension = _orthonormal_extension(V, draw_probes(dim, k, "normal", generator=generator), 1e-12)
            if extension.shape[1] == 0:
                return result(theta[wanted], A), result(Y, A)
        V, AV = np.concatenate([V, extension], axis=1), np.concatenate([AV, product(A, extension)], axis=1)
    raise RuntimeError(
        f"top_eigenvalues: {k} eigenpair(s) ({which}) did not converge to tol={tol} in {max_iter} block products; "
        "raise max_iter or tol"
    )


def _symmetric(T):
    return (T + T.T) / 2
