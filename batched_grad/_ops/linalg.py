"""Linear algebra: products, einsum, diagonals, triangles and the torch.linalg decompositions."""
from collections import namedtuple

import jax.numpy as jnp

from .. import _dtypes
from ._core import Op, apply


def _promoted(*tensors):
    return _dtypes.result_type(*tensors).np


def _check_dims(name, expected, *tensors):
    for t, n in zip(tensors, expected):
        if t.ndim != n:
            raise RuntimeError(f"{name}: expected a {n}D tensor, but got a {t.ndim}D tensor")


def _product_op(name, f, backward_name=None):
    return Op(name, lambda a, b, *, dtype: f(a.astype(dtype), b.astype(dtype)), backward_name=backward_name,
              multilinear=True)


_MATMUL = _product_op("matmul", jnp.matmul, "MmBackward0")
_OUTER = _product_op("outer", jnp.outer, "MulBackward0")
_DOT = _product_op("dot", jnp.dot)


def matmul(input, other):
    """Matrix product with torch's rules for 1-D and batched operands."""
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {input.ndim}D and "
                           f"{other.ndim}D")
    return apply(_MATMUL, [input, other], dtype=_promoted(input, other))


def mm(input, mat2):
    """(n, m) @ (m, p)."""
    _check_dims("mm", (2, 2), input, mat2)
    return matmul(input, mat2)


def bmm(input, mat2):
    """(b, n, m) @ (b, m, p)."""
    _check_dims("bmm", (3, 3), input, mat2)
    return matmul(input, mat2)


def mv(input, vec):
    """(n, m) @ (m,)."""
    _check_dims("mv", (2, 1), input, vec)
    return matmul(input, vec)


def dot(input, other):
    """Inner product of two 1-D tensors."""
    _check_dims("dot", (1, 1), input, other)
    return apply(_DOT, [input, other], dtype=_promoted(input, other))


def outer(input, vec2):
    return apply(_OUTER, [input, vec2], dtype=_promoted(input, vec2))


_EINSUM = Op("einsum", lambda *ops, equation, dtype: jnp.einsum(equation, *[o.astype(dtype) for o in ops]),
             multilinear=True)


def einsum(equation, *operands):
    """Einstein summation, e.g. einsum("ij,jk->ik", a, b)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return apply(_EINSUM, list(operands), equation=equation.replace(" ", ""), dtype=_promoted(*operands))


_TENSORDOT = Op("tensordot", lambda a, b, *, axes, dtype: jnp.tensordot(a.astype(dtype), b.astype(dtype), axes),
                multilinear=True)


def tensordot(a, b, dims=2):
    if not isinstance(dims, int):
        dims = tuple(tuple(d) if not isinstance(d, int) else (d,) for d in dims)
    return apply(_TENSORDOT, [a, b], axes=dims, dtype=_promoted(a, b))


_TRACE = Op("trace", lambda a: jnp.trace(a), linear=True)
_DIAG = Op("diag", lambda a, *, k: jnp.diag(a, k), linear=True)
_DIAGONAL = Op("diagonal", lambda a, *, offset, dim1, dim2: jnp.diagonal(a, offset, dim1, dim2), linear=True, view=True)
_TRIL = Op("tril", lambda a, *, k: jnp.tril(a, k), linear=True)
_TRIU = Op("triu", lambda a, *, k: jnp.triu(a, k), linear=True)


def trace(input):
    _check_dims("trace", (2,), input)
    return apply(_TRACE, [input])


def diag(input, diagonal=0):
    """1-D -> a matrix with `input` on a diagonal; 2-D -> that diagonal."""
    if input.ndim not in (1, 2):
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " f"{input.ndim}D")
    return apply(_DIAG, [input], k=int(diagonal))


def diagonal(input, offset=0, dim1=0, dim2=1):
    """A view of the diagonal over (dim1, dim2), appended as the last dimension."""
    from .._tensor import _wrap_dim

    return apply(_DIAGONAL, [input], offset=int(offset), dim1=_wrap_dim(dim1, input.ndim), dim2=_wrap_dim(dim2, input.ndim))


def tril(input, diagonal=0):
    return apply(_TRIL, [input], k=int(diagonal))


def triu(input, diagonal=0):
    return apply(_TRIU, [input], k=int(diagonal))


def _sym(a, upper):
    # torch's eigh/cholesky read one triangle only; symmetrising that triangle gives the same gradient rule
    t = jnp.triu(a) if upper else jnp.tril(a)
    d = jnp.diagonal(a, axis1=-2, axis2=-1)
    return t + jnp.swapaxes(t, -1, -2).conj() - d[..., None] * jnp.eye(a.shape[-1], dtype=a.dtype)


_SOLVE = Op("linalg_solve", lambda a, b, *, left, vector: jnp.linalg.solve(a, b[..., None])[..., 0] if vector else (
    jnp.linalg.solve(a, b) if left else jnp.swapaxes(jnp.linalg.solve(jnp.swapaxes(a, -1, -2), jnp.swapaxes(b, -1, -2)), -1, -2)),
    backward_name="LinalgSolveExBackward0")
_INV = Op("linalg_inv", lambda a: jnp.linalg.inv(a), backward_name="LinalgInvExBackward0")
_DET = Op("linalg_det", lambda a: jnp.linalg.det(a))
_SLOGDET = Op("linalg_slogdet", lambda a: tuple(jnp.linalg.slogdet(a)), multi=True)
_CHOLESKY = Op("linalg_cholesky", lambda a, *, upper: (
    jnp.swapaxes(jnp.linalg.cholesky(_sym(a, False)), -1, -2).conj() if upper else jnp.linalg.cholesky(_sym(a, False))),
    backward_name="LinalgCholeskyExBackward0")
_EIGH = Op("linalg_eigh", lambda a, *, upper: tuple(jnp.linalg.eigh(_sym(a, upper), symmetrize_input=False)), multi=True)
_SVD = Op("linalg_svd", lambda a, *, full_matrices: tuple(jnp.linalg.svd(a, full_matrices=full_matrices)), multi=True)
_QR = Op("linalg_qr", lambda a, *, mode: tuple(jnp.linalg.qr(a, mode=mode)), multi=True)
_QR_R = Op("linalg_qr", lambda a: jnp.linalg.qr(a, mode="r"))

slogdet_result = namedtuple("slogdet", ["sign", "logabsdet"])
eigh_result = namedtuple("eigh", ["eigenvalues", "eigenvectors"])
svd_result = namedtuple("svd", ["U", "S", "Vh"])
qr_result = namedtuple("qr", ["Q", "R"])


def _square(name, a):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                           f"{a.shape[-2] if a.ndim >= 2 else a.ndim} by {a.shape[-1] if a.ndim else 0} matrices")


def solve(A, B, *, left=True):
    """X with A @ X = B (or X @ A = B when left=False)."""
    _square("solve", A)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    dtype = _dtypes.result_type(A, B)
    return apply(_SOLVE, [A.to(dtype), B.to(dtype)], left=left, vector=vector)


def inv(A):
    _square("inv", A)
    return apply(_INV, [A])


def det(A):
    _square("det", A)
    return apply(_DET, [A])


def slogdet(A):
    _square("slogdet", A)
    return slogdet_result(*apply(_SLOGDET, [A]))


def cholesky(A, *, upper=False):
    _square("cholesky", A)
    return apply(_CHOLESKY, [A], upper=upper)


def eigh(A, UPLO="L"):
    _square("eigh", A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return eigh_result(*apply(_EIGH, [A], upper=UPLO == "U"))


def svd(A, full_matrices=True):
    return svd_result(*apply(_SVD, [A], full_matrices=full_matrices))


def qr(A, mode="reduced"):
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           "'r', or 'complete'")
    if mode == "r":
        return qr_result(None, apply(_QR_R, [A]))
    return qr_result(*apply(_QR, [A], mode=mode))
