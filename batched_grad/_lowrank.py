"""Randomized low-rank SVD and PCA (torch.svd_lowrank, torch.pca_lowrank): Halko, Martinsson and Tropp's range
finder with subspace iterations (arXiv:0909.4061, Algorithm 4.4), then the SVD of the small projected matrix. The
Gaussian test matrix comes from the default generator, so a seeded call draws torch's; the result is differentiable
as the ops it is built of."""

from . import _dtypes, linalg, randn


def _floating(A):
    return A.dtype if A.dtype.is_floating_point or A.dtype.is_complex else _dtypes.float32


def _range_basis(A, q, niter, M):
    """Q with q orthonormal columns whose span approximates the range of A - M (M None: of A), without forming
    A - M."""

    def times(right, adjoint=False):
        """(A - M) @ right, or its adjoint's product."""
        a, m = (A.mH, None if M is None else M.mH) if adjoint else (A, M)
        return a @ right if m is None else a @ right - m @ right

    Q = linalg.qr(times(randn(A.shape[-1], q, dtype=_floating(A)))).Q
    for _ in range(niter):
        Q = linalg.qr(times(Q, adjoint=True)).Q
        Q = linalg.qr(times(Q)).Q
    return Q


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) with A - M ~= U diag(S) V^H, of rank q (default 6), by `niter` subspace iterations (default 2); M
    (broadcast to A's shape) is subtracted without forming A - M."""
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    wide = m < n
    if wide:  # work on the tall transpose
        A, M = A.mH, (None if M is None else M.mH)
    Q = _range_basis(A, q, niter, M)
    B = Q.mH @ A
    if M is not None:
        B = B - Q.mH @ M
    U, S, Vh = linalg.svd(B, full_matrices=False)
    U, V = Q @ U, Vh.mH
    return (V, S, U) if wide else (U, S, V)


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V) of the rank-q SVD of A with its column means removed (center=True): V's columns are the principal
    directions, S**2 / (m - 1) the variances along them. q defaults to min(6, m, n)."""
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return svd_lowrank(A, q, niter=niter)
    return svd_lowrank(A - A.mean(dim=(-2,), keepdim=True), q, niter=niter)
