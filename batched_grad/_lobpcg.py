"""torch.lobpcg: the k largest (or smallest) eigenpairs of a symmetric eigenproblem A x = e B x (B symmetric positive
definite, the identity when not given) by the locally optimal block preconditioned conjugate gradient method
(Knyazev 2001). Each step takes the Rayleigh-Ritz pairs of A on the span of the current vectors X, their
(preconditioned) residuals W and the previous step's direction P. method="ortho" makes that basis B-orthonormal
block by block, dropping numerically dependent directions (Stathopoulos and Wu 2002); method="basic" reduces the
problem with the Cholesky factor of the basis' Gram matrix; a step whose basis is singular (where torch's basic
method may fail) drops the dependent directions as "ortho" does.

The iteration runs on the host, one matrix of a batch at a time. The result is differentiable in A (B not given) by
the derivative of the computed eigenpairs, written with differentiable ops so that higher orders follow."""

import numpy as np

from . import _dtypes, linalg
from ._factories import eye, randn, tensor
from ._tensor import Tensor
from .autograd.function import Function

_TOLERANCE_EPS = {"float32": 1.2e-07, "float64": 2.23e-16}  # torch's feps: the default tol is its square root
_METHODS = ("ortho", "basic")


# ---- the iteration (NumPy, one matrix) -------------------------------------------------------------------------


def _b_product(B, Y):
    return Y if B is None else B @ Y


def _orthonormal_block(Y, basis, B, drop):
    """Y made B-orthogonal to `basis` (B-orthonormal columns) and B-orthonormal itself, twice over for accuracy;
    directions whose B-norm falls below `drop` (relative) after the projection are dropped."""
    for _ in range(2):
        if basis is not None:
            Y = Y - basis @ (basis.T @ _b_product(B, Y))
        scale = np.sqrt(np.einsum("ij,ij->j", Y, _b_product(B, Y)))
        keep = scale > drop * max(scale.max(initial=0.0), np.finfo(Y.dtype).tiny)
        Y = Y[:, keep] / scale[keep]
        if not Y.shape[1]:
            return Y
        w, V = np.linalg.eigh(Y.T @ _b_product(B, Y))
        keep = w > drop * w.max()
        Y = Y @ (V[:, keep] / np.sqrt(w[keep]))
    return Y


def _select(theta, V, n, largest):
    """The n largest Ritz pairs (in decreasing order) or the n smallest (increasing) of ascending `theta`."""
    order = np.arange(len(theta))[::-1][:n] if largest else np.arange(n)
    return theta[order], V[:, order]


def _ritz_ortho(A, B, blocks, n, largest, drop):
    """Rayleigh-Ritz on a B-orthonormal basis of the blocks' span (the first block first): (values, vectors,
    direction: the vectors' part outside the first block)."""
    Q = _orthonormal_block(blocks[0], None, B, drop)
    for block in blocks[1:]:
        Q = np.concatenate([Q, _orthonormal_block(block, Q, B, drop)], axis=1)
    T = Q.T @ A @ Q
    theta, V = _select(*np.linalg.eigh((T + T.T) / 2), n, largest)
    first = min(n, blocks[0].shape[1])
    return theta, Q @ V, Q[:, first:] @ V[first:]


def _ritz_basic(A, B, blocks, n, largest):
    """Rayleigh-Ritz through the Cholesky factor of the Gram matrix of the blocks' columns (unit-normed)."""
    S = np.concatenate(blocks, axis=1)
    S = S / np.linalg.norm(S, axis=0)
    G, T = S.T @ _b_product(B, S), S.T @ A @ S
    L = np.linalg.cholesky((G + G.T) / 2)  # LinAlgError where the basis is singular
    Linv = np.linalg.inv(L)
    reduced = Linv @ T @ Linv.T
    theta, V = _select(*np.linalg.eigh((reduced + reduced.T) / 2), n, largest)
    C = Linv.T @ V
    first = blocks[0].shape[1]
    return theta, S @ C, S[:, first:] @ C[first:]


def _scale_on(M, X):
    """|M X| / |X| (Frobenius norms) for the start X: the scale of M that the residuals are measured against (a
    backward-stable criterion, Duersch et al. 2018); 1 for the identity."""
    return 1.0 if M is None else float(np.linalg.norm(M @ X) / np.linalg.norm(X))


def _iterate(A, B, iK, X, k, niter, tol, largest, method):
    """(values (k,), vectors (m, k)) of A x = e B x from the start X (m, n)."""
    n = X.shape[1]
    drop = np.finfo(A.dtype).eps * 10

    def ritz(blocks):
        if method == "basic":
            try:
                return _ritz_basic(A, B, blocks, n, largest)
            except np.linalg.LinAlgError:
                pass  # a singular basis (a small problem exhausts its space): this step drops dependent directions
        return _ritz_ortho(A, B, blocks, n, largest, drop)

    a_norm, b_norm = _scale_on(A, X), _scale_on(B, X)
    E, X, _ = ritz([X])
    P, step = None, 0
    while True:
        R = A @ X - _b_product(B, X) * E
        rerr = np.linalg.norm(R, axis=0) / ((a_norm + np.abs(E) * b_norm) * np.linalg.norm(X, axis=0))
        if (rerr[:k] < tol).all() or step == niter:
            return E[:k], X[:, :k]
        active = rerr >= tol  # converged pairs are locked: their residuals and directions leave the basis
        W = R[:, active] if iK is None else iK @ R[:, active]
        blocks = [X, W] if P is None else [X, W, P[:, active]]
        E, X, P = ritz([b for b in blocks if b.shape[1]])
        step += 1


# ---- the differentiable front end -----------------------------------------------------------------------------


def _eigenpairs_vjp(A, D, U, gD, gU):
    """The gradient for A (symmetric) of <gD, D> + <gU, U> where (D, U) are k eigenpairs of A: the eigenvalues'
    part sums u_i u_i^T; an eigenvector's derivative is its part along the other computed vectors, with weights
    1 / (e_i - e_j), plus its part in their orthogonal complement, where e_i - A is invertible."""
    Ut = U.mT
    grad = 0
    if gD is not None:
        grad = (U * gD.unsqueeze(-2)) @ Ut
    if gU is not None:
        k, m = D.shape[-1], A.shape[-1]
        diff = D.unsqueeze(-2) - D.unsqueeze(-1)  # [j, i] = e_i - e_j
        off = 1 - eye(k, dtype=A.dtype)
        along = U @ ((Ut @ gU) * off / (diff + eye(k, dtype=A.dtype)))
        P = eye(m, dtype=A.dtype) - U @ Ut
        shifted = D.unsqueeze(-1).unsqueeze(-1) * eye(m, dtype=A.dtype) - A.unsqueeze(-3)  # (*, k, m, m)
        system = P.unsqueeze(-3) @ shifted @ P.unsqueeze(-3) + (U @ Ut).unsqueeze(-3)
        rhs = (P @ gU).mT.unsqueeze(-1)  # (*, k, m, 1)
        across = P @ linalg.solve(system, rhs).squeeze(-1).mT
        grad = grad + (along + across) @ Ut
    return grad


class LOBPCGAutogradFunction(Function):
    @staticmethod
    def forward(ctx, A, k, B, X, n, iK, niter, tol, largest, method):
        host = [None if t is None else np.asarray(t.detach().numpy(force=True)) for t in (A, B, iK, X)]
        a, b, ik, x = host
        batch, m = a.shape[:-2], a.shape[-1]
        values, vectors = np.empty(batch + (k,), a.dtype), np.empty(batch + (m, k), a.dtype)
        for i in np.ndindex(*batch):
            start = x[i] if x is not None else np.asarray(randn(m, n, dtype=A.dtype).numpy())
            values[i], vectors[i] = _iterate(
                a[i], None if b is None else b[i], ik, start.astype(a.dtype), k, niter, tol, largest, method
            )
        D, U = tensor(values, dtype=A.dtype), tensor(vectors, dtype=A.dtype)
        ctx.has_B = B is not None
        ctx.save_for_backward(A, D, U)
        return D, U

    @staticmethod
    def backward(ctx, gD, gU):
        A, D, U = ctx.saved_tensors
        if ctx.has_B:
            raise ValueError("lobpcg.backward does not support backward with B != I yet.")
        return (_eigenpairs_vjp(A, D, U, gD, gU),) + (None,) * 9


def _checked_matrix(M, name, shape):
    if M is None:
        return None
    if not isinstance(M, Tensor):
        raise TypeError(f"lobpcg(): argument '{name}' must be a Tensor or None, but got {type(M).__name__}")
    if M.is_sparse:
        M = M.to_dense()
    if shape is not None and tuple(M.shape) != tuple(shape):
        raise ValueError(f"lobpcg(): argument '{name}' must have shape {tuple(shape)}, but got {tuple(M.shape)}")
    return M


def _refuse_unprovided(tracker, ortho_iparams, ortho_fparams, ortho_bparams):
    given = [
        name
        for name, value in (
            ("tracker", tracker),
            ("ortho_iparams", ortho_iparams),
            ("ortho_fparams", ortho_fparams),
            ("ortho_bparams", ortho_bparams),
        )
        if value is not None
    ]
    if given:
        raise NotImplementedError(
            f"lobpcg(): {', '.join(given)} not provided: the iteration's state is not exposed and its "
            "orthogonalization has fixed parameters; leave them None"
        )


def lobpcg(
    A,
    k=None,
    B=None,
    X=None,
    n=None,
    iK=None,
    niter=None,
    tol=None,
    largest=None,
    method=None,
    tracker=None,
    ortho_iparams=None,
    ortho_fparams=None,
    ortho_bparams=None,
):
    """(E, X): the k largest (largest=True, the default) or smallest eigenvalues of the symmetric (*, m, m) A,
    with B-orthonormal eigenvectors (*, m, k), of A x = e B x (B the identity when None). X (*, m, n) is the start
    (random (m, n) when None, n defaulting to k, k to X's columns or 1); iK a preconditioner; niter the most
    steps (1000 by default, -1 for no limit); tol the relative residual that counts as converged (the square
    root of torch's feps for A's dtype by default). Where A requires grad it is symmetrized first, (A + A^T) / 2,
    and the result is differentiable in A (not with B given)."""
    _refuse_unprovided(tracker, ortho_iparams, ortho_fparams, ortho_bparams)
    if not isinstance(A, Tensor):
        raise TypeError(f"lobpcg(): argument 'A' must be a Tensor, but got {type(A).__name__}")
    if A.ndim < 2 or A.shape[-2] != A.shape[-1]:
        raise AssertionError(f"A must be square, got shape {A.shape}")
    if A.is_sparse:
        if A.requires_grad:
            raise ValueError("lobpcg.backward does not support sparse input yet. Note that lobpcg.forward does though.")
        A = A.to_dense()
    if B is not None and tuple(B.shape) != tuple(A.shape):
        raise AssertionError(f"A and B must have same shape, got {A.shape} vs {B.shape}")
    if not A.dtype.is_floating_point:
        A = A.to(_dtypes.float32)
    m = A.shape[-1]
    k = (1 if X is None else X.shape[-1]) if k is None else k
    n = (k if n is None else n) if X is None else X.shape[-1]
    if m < 3 * n:
        raise ValueError(
            f"LOBPCG algorithm is not applicable when the number of A rows (={m}) is smaller than 3 x the number of "
            f"requested eigenpairs (={n})"
        )
    method = "ortho" if method is None else method
    if method not in _METHODS:
        raise ValueError(f"lobpcg(): method must be 'ortho' or 'basic', but got {method!r}")
    if not 1 <= k <= n:
        raise ValueError(f"lobpcg(): k must be between 1 and n (={n}), but got {k}")
    B = _checked_matrix(B, "B", A.shape)
    X = _checked_matrix(X, "X", tuple(A.shape[:-2]) + (m, n))
    iK = _checked_matrix(iK, "iK", (m, m))
    tol = _TOLERANCE_EPS[A.dtype.name] ** 0.5 if tol is None else float(tol)
    niter = 1000 if niter is None else int(niter)
    largest = True if largest is None else bool(largest)
    if A.requires_grad:
        A = (A + A.mT) / 2
    return LOBPCGAutogradFunction.apply(A, k, B, X, n, iK, niter, tol, largest, method)
