"""Factorizations and solvers beyond torch.linalg's core: LU (lu_factor, lu, lu_solve, lu_unpack), triangular and
Cholesky solves, the *_ex forms with their info codes, svdvals, eigvalsh, pinv, lstsq, cond, matrix_rank,
tensorinv, tensorsolve, householder_product, and torch's deprecated torch.cholesky, qr, svd and triangular_solve."""

import math
import warnings

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from .. import _dtypes
from .._autocast import autocast_policy, wrapped_stacklevel
from .._tensor import Tensor, warn_at_caller
from ._core import Op, apply
from ._derivatives import with_derivative_of
from .linalg import (
    _CHOLESKY,
    _INV,
    _SOLVE,
    LinAlgError,
    _hermitian,
    _matrix,
    _swap,
    _traced,
    inv,
    slogdet,
    solve,
)
from .linalg import cholesky as linalg_cholesky
from .linalg import det as linalg_det
from .linalg import diagonal as _diagonal
from .linalg import qr as linalg_qr
from .linalg import svd as linalg_svd
from .reduction import linalg_norm
from .return_types import return_type
from .shape import cat
from .ternary import where

_RESULTS = {
    name: return_type(name, fields)
    for name, fields in (
        ("linalg_lu_factor", ["LU", "pivots"]),
        ("linalg_lu_factor_ex", ["LU", "pivots", "info"]),
        ("linalg_lu", ["P", "L", "U"]),
        ("lu_unpack", ["P", "L", "U"]),
        ("linalg_cholesky_ex", ["L", "info"]),
        ("linalg_inv_ex", ["inverse", "info"]),
        ("linalg_solve_ex", ["result", "info"]),
        ("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"]),
        ("svd", ["U", "S", "V"]),
        ("qr", ["Q", "R"]),
        ("triangular_solve", ["solution", "cloned_coefficient"]),
        ("linalg_eigh", ["eigenvalues", "eigenvectors"]),
        ("slogdet", ["sign", "logabsdet"]),
    )
}


def _int32(x):
    return Tensor._wrap(np.asarray(x, np.int32))


# ---- LU -------------------------------------------------------------------------------------------------------
def _lu_factor(a):
    lu, pivots, _ = jax.lax.linalg.lu(a)
    return lu, (pivots + 1).astype(jnp.int32)  # torch's pivots are 1-based


def _triangles(lu):
    """(L, U) packed in an LU factorization: L unit lower triangular (n x k), U upper triangular (k x m)."""
    n, m = lu.shape[-2:]
    k = min(n, m)
    return jnp.tril(lu, -1)[..., :, :k] + jnp.eye(n, k, dtype=lu.dtype), jnp.triu(lu)[..., :k, :]


def _unpack(lu, pivots):
    return (_permutation(pivots, lu.shape[-2], lu.dtype),) + _triangles(lu)


def _permutation(pivots, n, dtype):
    """P with A = P L U, from LAPACK's row interchanges (1-based, applied in order)."""

    def swap_all(p):
        order = jnp.arange(n)
        for i in range(p.shape[-1]):
            j = p[i] - 1
            oi, oj = order[i], order[j]
            order = order.at[i].set(oj).at[j].set(oi)
        return jnp.eye(n, dtype=dtype)[order].T  # P^T A has A's rows in `order`

    flat = pivots.reshape(-1, pivots.shape[-1])
    return jax.vmap(swap_all)(flat).reshape(pivots.shape[:-1] + (n, n))


_LU_FACTOR = Op("linalg_lu_factor_ex", _lu_factor, multi=True)
_LU = Op("linalg_lu", lambda a: _triangles(_lu_factor(a)[0]), multi=True)  # (L, U); P comes from the pivots
_LU_UNPACK = Op("lu_unpack", _triangles, multi=True)
_PERMUTATION = Op("lu_permutation", lambda pivots, *, n, dtype: _permutation(pivots, n, dtype))


def _lu_info(lu):
    """The 1-based index of the first zero on U's diagonal, or 0: LAPACK's getrf info."""
    diagonal = jnp.diagonal(lu, axis1=-2, axis2=-1)
    zero = diagonal == 0
    return jnp.where(jnp.any(zero, -1), jnp.argmax(zero, -1) + 1, 0).astype(jnp.int32)


_LU_INFO = Op("lu_info", _lu_info)


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info): the LU factorization with partial pivoting, packed; info > 0 names a zero pivot."""
    _matrix("lu_factor_ex", A, square=False)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu, pivots = apply(_LU_FACTOR, [A])
    info = apply(_LU_INFO, [lu.detach()])
    if check_errors and not _traced(info) and info.numel() and int(np.max(np.asarray(info._value))) > 0:
        raise LinAlgError(
            f"torch.linalg.lu_factor_ex: U[{int(np.max(np.asarray(info._value)))},"
            f"{int(np.max(np.asarray(info._value)))}] is zero and using it on lu_solve would result in "
            "a division by zero. If you still want to perform the factorization, consider calling "
            "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
        )
    return _RESULTS["linalg_lu_factor_ex"](lu, pivots, info)


@autocast_policy("fp32")
def lu_factor(A, *, pivot=True):
    """(LU, pivots): the LU factorization with partial pivoting, packed (pivots 1-based, int32)."""
    lu, pivots, info = lu_factor_ex(A, pivot=pivot)
    if not _traced(info) and info.numel() and int(np.max(np.asarray(info._value))) > 0:
        k = int(np.max(np.asarray(info._value)))
        raise LinAlgError(
            f"torch.linalg.lu_factor: U[{k},{k}] is zero and using it on lu_solve would result in a "
            "division by zero. If you still want to perform the factorization, consider calling "
            "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
        )
    return _RESULTS["linalg_lu_factor"](lu, pivots)


def lu(A, *, pivot=True):
    """(P, L, U) with A = P @ L @ U, L unit lower triangular and U upper triangular."""
    _matrix("lu", A, square=False)
    if not pivot:
        raise RuntimeError("linalg.lu: LU without pivoting is not implemented on the CPU")
    pivots = apply(_LU_FACTOR, [A.detach()])[1]
    return _RESULTS["linalg_lu"](apply(_PERMUTATION, [pivots], n=A.shape[-2], dtype=A.dtype.np), *apply(_LU, [A]))


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from lu_factor's packed LU and pivots; P is empty unless unpack_pivots, L and U unless
    unpack_data."""
    empty = Tensor._wrap(np.zeros((0,), LU_data.dtype.np))
    permutation = (
        apply(_PERMUTATION, [LU_pivots.detach()], n=LU_data.shape[-2], dtype=LU_data.dtype.np)
        if unpack_pivots
        else empty
    )
    triangles = apply(_LU_UNPACK, [LU_data]) if unpack_data else (empty, empty)
    return _RESULTS["lu_unpack"](permutation, *triangles)


def _lu_solve(lu, pivots, b, *, left, adjoint):
    p, lower, upper = _unpack(lu, pivots)
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return _swap(_lu_solve(lu, pivots, _swap(b).conj(), left=True, adjoint=not adjoint).conj())
    if adjoint:  # A^H X = B with A = P L U
        y = jsl.solve_triangular(upper, b, trans="C", lower=False)
        z = jsl.solve_triangular(lower, y, trans="C", lower=True, unit_diagonal=True)
        return p @ z
    y = jsl.solve_triangular(lower, _swap(p) @ b, lower=True, unit_diagonal=True)
    return jsl.solve_triangular(upper, y, lower=False)


_LU_SOLVE = Op("linalg_lu_solve", _lu_solve)


def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A @ X = B (X @ A = B when not left; A^H when adjoint) for A = lu_factor's (LU, pivots)."""
    _matrix("lu_solve", LU)
    if LU.dtype is not B.dtype:
        raise RuntimeError(
            f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
            f"{LU.dtype.type_name} and B of type {B.dtype.type_name} instead"
        )
    return apply(_LU_SOLVE, [LU, pivots.detach(), B], left=bool(left), adjoint=bool(adjoint))


@autocast_policy("fp32")
def lu_solve(b, LU_data, LU_pivots):
    """torch.lu_solve (deprecated, arguments reversed): linalg.lu_solve(LU_data, LU_pivots, b)."""
    warnings.warn(
        "torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future "
        "PyTorch release.\nNote that torch.linalg.lu_solve has its arguments reversed.\nX = "
        "torch.lu_solve(B, LU, pivots)\nshould be replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)",
        UserWarning,
        stacklevel=wrapped_stacklevel(2),
    )
    return linalg_lu_solve(LU_data, LU_pivots, b)


# ---- triangular and Cholesky solves ------------------------------------------------------------------------------
def _solve_triangular(a, b, *, upper, left, unitriangular):
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return _swap(_solve_triangular(_swap(a), _swap(b), upper=not upper, left=True, unitriangular=unitriangular))
    a = jnp.triu(a) if upper else jnp.tril(a)
    a, b = (
        jnp.broadcast_to(a, jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + a.shape[-2:]),
        jnp.broadcast_to(b, jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:]),
    )
    return jsl.solve_triangular(a, b, lower=not upper, unit_diagonal=unitriangular)


_SOLVE_TRIANGULAR = Op("linalg_solve_triangular", _solve_triangular)
_TRIANGULAR_SOLVE = Op("triangular_solve", _solve_triangular)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A @ X = B (X @ A = B when not left) for the triangle of A that `upper` names."""
    _matrix("solve_triangular", A)
    if B.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    if A.dtype is not B.dtype:
        raise RuntimeError(
            f"linalg.solve_triangular: Expected A and B to have the same dtype, but found A of type "
            f"{A.dtype.type_name} and B of type {B.dtype.type_name} instead"
        )
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        rows, cols = B.shape[-2:]
        raise RuntimeError(
            f"linalg.solve_triangular: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {rows}x{cols})"
        )
    return apply(_SOLVE_TRIANGULAR, [A, B], upper=bool(upper), left=bool(left), unitriangular=bool(unitriangular))


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """(solution, cloned_coefficient) of A X = b (A^T X = b with transpose) for the triangle of A: deprecated."""
    warnings.warn(
        "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed "
        "in a future PyTorch release.\ntorch.linalg.solve_triangular has its arguments reversed and does "
        "not return a copy of one of the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be "
        "replaced with\nX = torch.linalg.solve_triangular(A, B).",
        UserWarning,
        stacklevel=2,
    )
    coefficient = A.transpose(-2, -1) if transpose else A
    solve_triangular(coefficient.detach(), b.detach(), upper=upper != transpose)  # its checks
    solution = apply(
        _TRIANGULAR_SOLVE, [coefficient, b], upper=upper != transpose, left=True, unitriangular=bool(unitriangular)
    )
    return _RESULTS["triangular_solve"](solution, A.clone())


def _from_factor(factor, upper):
    # the matrix L L^H (U^H U) of a Cholesky factor, read from its whole matrix, as torch differentiates it
    return _swap(factor).conj() @ factor if upper else factor @ _swap(factor).conj()


def _cholesky_solve(b, factor, *, upper):
    triangle = jnp.triu(factor) if upper else jnp.tril(factor)
    value = jsl.cho_solve((triangle, not upper), b)
    return with_derivative_of(value, jnp.linalg.solve(_from_factor(factor, upper), b))


def _cholesky_inverse(factor, *, upper):
    triangle = jnp.triu(factor) if upper else jnp.tril(factor)
    eye = jnp.broadcast_to(jnp.eye(factor.shape[-1], dtype=factor.dtype), factor.shape)
    return with_derivative_of(jsl.cho_solve((triangle, not upper), eye), jnp.linalg.inv(_from_factor(factor, upper)))


_CHOLESKY_SOLVE = Op("cholesky_solve", _cholesky_solve)
_CHOLESKY_INVERSE = Op("cholesky_inverse", _cholesky_inverse)


@autocast_policy("fp32")
def cholesky_solve(B, L, upper=False):
    """X with A @ X = B for A = L @ L^H given its Cholesky factor L (U^H U with upper)."""
    if B.ndim < 2 or L.ndim < 2:
        raise RuntimeError(
            f"b should have at least 2 dimensions, but has {B.ndim} dimensions instead"
            if B.ndim < 2
            else f"u should have at least 2 dimensions, but has {L.ndim} dimensions instead"
        )
    if B.dtype is not L.dtype:
        raise RuntimeError(
            f"Expected b and A to have the same dtype, but found b of type "
            f"{B.dtype.type_name} and A of type {L.dtype.type_name} instead."
        )
    return apply(_CHOLESKY_SOLVE, [B, L], upper=bool(upper))


@autocast_policy("fp32")
def cholesky_inverse(L, upper=False):
    """The inverse of A = L @ L^H (U^H U with upper) from its Cholesky factor."""
    _matrix("cholesky_inverse", L)
    return apply(_CHOLESKY_INVERSE, [L], upper=bool(upper))


@autocast_policy("fp32")
def cholesky(A, upper=False):
    """torch.cholesky (deprecated): linalg.cholesky, or its conjugate transpose with upper."""
    warnings.warn(
        "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
        "PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)\n"
        "and\nU = torch.cholesky(A, upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH\n"
        "This transform will produce equivalent results for all valid (symmetric positive definite) "
        "inputs.",
        UserWarning,
        stacklevel=wrapped_stacklevel(2),
    )
    return apply(_TORCH_CHOLESKY, [A], upper=bool(upper)) if A.ndim >= 2 else linalg_cholesky(A)


_TORCH_CHOLESKY = Op("cholesky", lambda a, *, upper: jnp.linalg.cholesky(_hermitian(a, False), upper=upper))


# ---- the *_ex forms -------------------------------------------------------------------------------------------------
def _partial_cholesky(m):
    """(info, L) for the lower triangle of one matrix as LAPACK's unblocked left-looking potf2 leaves it, which
    torch's cholesky_ex returns: info the order of the first leading minor that is not positive-definite (0 if
    none); on failure at column j, the columns before it factored, L[j, j] the non-positive pivot a_jj - |L[j, :j]|^2
    and the columns after it the input's. Trust-region solvers read the failed pivot's row."""
    a = np.tril(m).astype(np.result_type(m, np.float32))
    for j in range(a.shape[0]):
        pivot = a[j, j].real - (a[j, :j] @ a[j, :j].conj()).real  # a Hermitian matrix's diagonal is real
        if not pivot > 0:
            a[j, j] = pivot
            return j + 1, a
        a[j, j] = np.sqrt(pivot)
        a[j + 1 :, j] = (a[j + 1 :, j] - a[j + 1 :, :j] @ a[j, :j].conj()) / a[j, j]
    return 0, a


def _minor_info(A, upper=False):
    """Per matrix of A: the order of its first leading minor that is not positive-definite (0 if none); and where
    one is not, A's factors as torch leaves them (_partial_cholesky, `upper` from its upper triangle), else None."""
    matrices = np.asarray(A.detach()._value).reshape((-1,) + A.shape[-2:])
    orders, factors = [], []
    for m in matrices:
        order, partial = _partial_cholesky(m.conj().T if upper else m)
        orders.append(order)
        factors.append(partial.conj().T if upper else partial)
    partial = np.stack(factors).reshape(A.shape).astype(matrices.dtype) if any(orders) else None
    return _int32(np.asarray(orders).reshape(A.shape[:-2])), partial


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info): linalg.cholesky, with info > 0 the order of the first leading minor that is not
    positive-definite instead of an error (unless check_errors), and L as far as LAPACK got (_partial_cholesky)."""
    _matrix("cholesky_ex", A)
    if check_errors:
        return _RESULTS["linalg_cholesky_ex"](linalg_cholesky(A, upper=upper), _int32(np.zeros(A.shape[:-2])))

    out = apply(_CHOLESKY, [A], upper=bool(upper))
    info, partial = _minor_info(A, upper)
    if partial is not None:
        failed = np.asarray(info._value).reshape(info.shape + (1, 1)) > 0
        out = where(Tensor._wrap(failed), Tensor._wrap(partial), out)
    return _RESULTS["linalg_cholesky_ex"](out, info)


@autocast_policy("fp32")
def inv_ex(A, *, check_errors=False):
    """(inverse, info): linalg.inv, with info > 0 naming a zero pivot instead of an error (unless check_errors)."""
    _matrix("inv_ex", A)
    if check_errors:
        return _RESULTS["linalg_inv_ex"](inv(A), _int32(np.zeros(A.shape[:-2])))

    info = apply(_LU_INFO, [apply(_LU_FACTOR, [A.detach()])[0]])
    return _RESULTS["linalg_inv_ex"](apply(_INV, [A]), info)


def solve_ex(A, B, *, left=True, check_errors=False):
    """(result, info): linalg.solve, with info > 0 naming a zero pivot instead of an error (unless check_errors)."""
    _matrix("solve_ex", A)
    if check_errors:
        return _RESULTS["linalg_solve_ex"](solve(A, B, left=left), _int32(np.zeros(A.shape[:-2])))

    info = apply(_LU_INFO, [apply(_LU_FACTOR, [A.detach()])[0]])
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    return _RESULTS["linalg_solve_ex"](apply(_SOLVE, [A, B], left=bool(left), vector=vector), info)


# ---- spectra ------------------------------------------------------------------------------------------------------
_SVDVALS = Op("linalg_svd", lambda a: jnp.linalg.svd(a, compute_uv=False), "LinalgSvdBackward0")
_EIGVALSH = Op(
    "linalg_eigh",
    lambda a, *, upper: jnp.linalg.eigh(_hermitian(a, upper), symmetrize_input=False)[0],
    "LinalgEighBackward0",
)


@autocast_policy("fp32")
def svdvals(A, *, driver=None):
    """The singular values of A, descending."""
    _matrix("svdvals", A, square=False)
    return apply(_SVDVALS, [A])


@autocast_policy("fp32")
def eigvalsh(A, UPLO="L"):
    """The eigenvalues (ascending) of the Hermitian matrix whose UPLO triangle A holds."""
    _matrix("eigvalsh", A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return apply(_EIGVALSH, [A], upper=UPLO == "U")


def _tolerances(A, atol, rtol, svals):
    """torch's threshold max(atol, rtol * largest singular value), with rtol eps * max(m, n) by default."""
    eps = float(
        np.finfo(
            np.dtype(A.dtype.np)
            if not A.dtype.is_complex
            else np.float64
            if A.dtype.name == "complex128"
            else np.float32
        ).eps
    )
    if rtol is None:
        rtol = 0.0 if atol is not None and (not isinstance(atol, (int, float)) or atol > 0) else eps * max(A.shape[-2:])
    largest = svals.amax(-1, keepdim=True) if svals.shape[-1] else svals.sum(-1, keepdim=True)
    threshold = largest * rtol
    if atol is not None:
        threshold = (
            threshold.clamp(min=atol)
            if not isinstance(atol, Tensor)
            else threshold.maximum(atol.unsqueeze(-1) if atol.ndim else atol)
        )
    return threshold


def _pinv(a, *, threshold, hermitian):
    """The pseudo-inverse from the SVD (or, with hermitian, the eigendecomposition of the lower triangle's
    Hermitian matrix), inverting the singular values above `threshold` (one per matrix)."""
    if hermitian:  # the value reads the lower triangle; torch's derivative is the full matrix's
        lower = jnp.tril(a) + _swap(jnp.tril(a, -1)).conj()
        w, v = jnp.linalg.eigh(lower, symmetrize_input=False)
        keep = jnp.abs(w) > threshold
        inverse_w = jnp.where(keep, 1 / jnp.where(keep, w, 1), 0)
        value = v @ (inverse_w[..., :, None] * _swap(v).conj())
        return with_derivative_of(value, _pinv(a, threshold=threshold, hermitian=False))
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    keep = s > threshold
    inverse_s = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0)
    return _swap(vh).conj() @ (inverse_s[..., :, None] * _swap(u).conj())


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse, dropping singular values at or below max(atol, rtol * the largest)."""
    _matrix("pinv", A, square=False)
    threshold = _tolerances(A, atol, rtol, svdvals(A.detach()))
    return apply(_PINV, [A, threshold.detach()], hermitian=bool(hermitian))


_PINV = Op("linalg_pinv", lambda a, threshold, *, hermitian: _pinv(a, threshold=threshold, hermitian=hermitian))


def pinverse(input, rcond=1e-15):
    """linalg.pinv with relative tolerance rcond."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None):
    """The number of singular values above max(atol, rtol * the largest) (int64)."""
    _matrix("matrix_rank", A, square=False)
    if tol is not None:
        atol, rtol = tol, 0.0
    s = svdvals(A.detach())
    return (s > _tolerances(A, atol, rtol, s)).sum(-1)


def cond(A, p=None):
    """The condition number of A in the p-norm (the 2-norm's ratio of singular values by default)."""
    if p in (None, 2, -2):
        _matrix("cond", A, square=False)
        s = svdvals(A)
        ratio = s[..., 0] / s[..., -1]
        return ratio if p != -2 else s[..., -1] / s[..., 0]
    _matrix("cond", A)

    return linalg_norm(A, p, (-2, -1)) * linalg_norm(inv(A), p, (-2, -1))


@autocast_policy("fp32")
def lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of the least-squares problem min ||A X - B||, as torch's
    CPU drivers report them (gelsy by default: no residuals or singular values)."""
    driver = driver or "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A.dtype is not B.dtype:
        raise RuntimeError(
            f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
            f"dtype {A.dtype.type_name} and other's dtype {B.dtype.type_name}"
        )
    vector = B.ndim == A.ndim - 1
    m, n = A.shape[-2:]
    s = svdvals(A.detach())
    threshold = _tolerances(A, None, rcond, s)
    solution = apply(_LSTSQ, [A, B, threshold.detach()], vector=vector)
    rank = (s > threshold).sum(-1)
    empty = Tensor._wrap(np.zeros((0,), A.dtype.np))
    residuals = empty
    if m > n and driver != "gelsy" and (driver == "gels" or bool((rank == n).all())):
        b = B.unsqueeze(-1) if vector else B
        fitted = A @ (solution.unsqueeze(-1) if vector else solution)
        residuals = ((fitted - b).abs() ** 2).sum(-2)
    singular = s if driver in ("gelsd", "gelss") else empty
    rank = rank if driver != "gels" else Tensor._wrap(np.zeros((0,), np.int64))
    return _RESULTS["linalg_lstsq"](solution, residuals, rank, singular)


def _least_squares(a, b, threshold, *, vector):
    x = _pinv(a, threshold=threshold, hermitian=False) @ (b[..., None] if vector else b)
    return x[..., 0] if vector else x


_LSTSQ = Op("linalg_lstsq", _least_squares)


# ---- tensor forms and the rest ---------------------------------------------------------------------------------------
def tensorinv(A, ind=2):
    """The inverse of A seen as a linear map from its first `ind` dims to the rest."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    out, rest = A.shape[:ind], A.shape[ind:]
    if math.prod(out) != math.prod(rest):
        raise RuntimeError(
            f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
            f"prod(self.shape[:ind]), but got {math.prod(rest)} != {math.prod(out)}"
        )
    return inv(A.reshape(math.prod(out), -1)).reshape(tuple(rest) + tuple(out))


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B."""
    if dims is not None:
        moved = [d % A.ndim for d in dims]
        A = A.permute(*[d for d in range(A.ndim) if d not in moved], *moved)
    result_shape = A.shape[B.ndim :]
    return solve(A.reshape(B.numel(), -1), B.reshape(-1)).reshape(result_shape)


def linalg_vander(x, *, N=None):
    """The Vandermonde matrix of x along its last dim: powers 0..N-1 (N defaults to x's last size)."""
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: Expected x to have at least 1 dimension. Got 0")
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    d = x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else _dtypes.int64
    powers = x.to(d).unsqueeze(-1).expand(*x.shape, n - 1).cumprod(-1)

    return cat([x.new_ones(tuple(x.shape) + (1,), dtype=d), powers], -1)


def _householder_product(a, tau):
    m, n = a.shape[-2:]
    q = jnp.broadcast_to(jnp.eye(m, dtype=a.dtype), a.shape[:-2] + (m, m))
    rows = jnp.arange(m)
    for i in range(tau.shape[-1]):  # Q = H_0 H_1 ... with H_i = I - tau_i v_i v_i^H, v_i = (0, .., 1, a[i+1:, i])
        v = jnp.where(rows < i, 0, jnp.where(rows == i, 1, a[..., :, i]))
        q = q - tau[..., i, None, None] * (q @ v[..., :, None]) @ v[..., None, :].conj()
    return q[..., :, :n]


_HOUSEHOLDER = Op("linalg_householder_product", _householder_product)


@autocast_policy("fp32")
def householder_product(A, tau):
    """The first n columns of the product of the Householder reflectors I - tau_i v_i v_i^H stored in A's columns
    (LAPACK's orgqr)."""
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.householder_product: input must have at least 2 dimensions.")
    if A.shape[-2] < A.shape[-1]:
        raise RuntimeError(
            "torch.linalg.householder_product: input.shape[-2] must be greater than or equal to input.shape[-1]"
        )
    if tau.shape[-1] > A.shape[-1]:
        raise RuntimeError(
            "torch.linalg.householder_product: input.shape[-1] must be greater than or equal to tau.shape[-1]"
        )
    return apply(_HOUSEHOLDER, [A, tau])


def torch_slogdet(input):
    """torch.slogdet: linalg.slogdet's (sign, logabsdet), under torch's older result name."""
    return _RESULTS["slogdet"](*slogdet(input))


def torch_qr(input, some=True):
    """torch.qr (deprecated): linalg.qr with mode 'reduced' (or 'complete' when not some)."""
    warn_at_caller(
        "torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future PyTorch "
        "release.\nThe boolean parameter 'some' has been replaced with a string parameter 'mode'.\nQ, R = "
        "torch.qr(A, some)\nshould be replaced with\nQ, R = torch.linalg.qr(A, 'reduced' if some else "
        "'complete')"
    )
    return _RESULTS["qr"](*linalg_qr(input, "reduced" if some else "complete"))


def torch_svd(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with input = U diag(S) V^H (V, not V^H); zero U and V without compute_uv."""
    if not compute_uv:
        m, n = input.shape[-2:]  # torch's zero U and V are square, whatever `some` says
        return _RESULTS["svd"](
            Tensor._wrap(np.zeros(input.shape[:-2] + (m, m), input.dtype.np)),
            svdvals(input),
            Tensor._wrap(np.zeros(input.shape[:-2] + (n, n), input.dtype.np)),
        )
    u, s, vh = linalg_svd(input, full_matrices=not some)
    return _RESULTS["svd"](u, s, vh.mH)


def linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """diagonal(A, offset, dim1, dim2) with linalg's defaults: the diagonals of a batch of matrices."""
    return _diagonal(A, offset, dim1, dim2)


LINALG = {
    "lu_factor": lu_factor,
    "lu_factor_ex": lu_factor_ex,
    "lu": lu,
    "lu_solve": linalg_lu_solve,
    "solve_triangular": solve_triangular,
    "cholesky_ex": cholesky_ex,
    "inv_ex": inv_ex,
    "solve_ex": solve_ex,
    "svdvals": svdvals,
    "eigvalsh": eigvalsh,
    "pinv": pinv,
    "matrix_rank": matrix_rank,
    "cond": cond,
    "lstsq": lstsq,
    "tensorinv": tensorinv,
    "tensorsolve": tensorsolve,
    "vander": linalg_vander,
    "householder_product": householder_product,
    "diagonal": linalg_diagonal,
}
FUNCTIONS = {
    "lu_unpack": lu_unpack,
    "lu_solve": lu_solve,
    "triangular_solve": triangular_solve,
    "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse,
    "cholesky": cholesky,
    "pinverse": pinverse,
    "qr": torch_qr,
    "svd": torch_svd,
    "det": linalg_det,
    "slogdet": torch_slogdet,
    "orgqr": householder_product,
}
METHODS = {
    name: FUNCTIONS[name]
    for name in (
        "lu_solve",
        "triangular_solve",
        "cholesky_solve",
        "cholesky_inverse",
        "cholesky",
        "pinverse",
        "qr",
        "svd",
        "det",
        "slogdet",
        "orgqr",
    )
}
