"""Linear algebra: products, einsum, diagonals, triangles and the torch.linalg decompositions."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._autocast import autocast_policy
from .._dtypes import not_implemented
from .._foreign import not_a_tensor
from .._tensor import Tensor, _wrap_dim
from ._core import SAVES_BOTH, SAVES_RESULT, Op, apply
from ._host_forms import matmul_vjp, small_floats
from .reduction import matrix_norm, vector_norm
from .return_types import return_type
from .shape import broadcast_shapes


def _type(t):
    return t.dtype.type_name


# ---- products -----------------------------------------------------------------------------------
# torch checks shapes and dtypes per kernel; matmul folds its operands onto one of them first.
_SHAPE_ERRORS = {
    "dot": lambda a, b: (
        a[0] != b[0]
        and (
            f"inconsistent tensor size, expected tensor [{a[0]}] and src [{b[0]}] to have the same number of elements, "
            f"but got {a[0]} and {b[0]} elements respectively"
        )
    ),
    "mv": lambda a, b: a[1] != b[0] and f"size mismatch, got input ({a[0]}), mat ({a[0]}x{a[1]}), vec ({b[0]})",
    "mm": lambda a, b: (
        a[1] != b[0] and (f"mat1 and mat2 shapes cannot be multiplied ({a[0]}x{a[1]} and {b[0]}x{b[1]})")
    ),
    "bmm": lambda a, b: (
        (a[0], a[2]) != b[:2]
        and (
            f"Expected size for first two dimensions of batch2 tensor to be: [{a[0]}, {a[2]}] "
            f"but got: [{b[0]}, {b[1]}]."
        )
    ),
}


def _bmm_dtype_error(a, b, sa, sb):
    # torch's bmm checks dtypes in its naive kernel for a product of under 400 multiply-adds a batch, else in its BLAS
    # path, which names the operands the other way round
    first, second = (a, b) if sa[1] * sa[2] * sb[2] < 400 else (b, a)
    return f"expected scalar type {_type(first)} but found {_type(second)}"


_DTYPE_ERRORS = {
    "dot": lambda a, b, *_: f"dot : expected both vectors to have same dtype, but found {_type(a)} and {_type(b)}",
    "mv": lambda a, b, *_: (
        f"addmv input tensors must have the same dtype, but got {_type(b)}, {_type(a)}, and {_type(b)}"
    ),
    "mm": lambda a, b, *_: (
        f"expected m1 and m2 to have the same dtype, but got: {a.dtype.cpp_name} != {b.dtype.cpp_name}"
    ),
    "bmm": _bmm_dtype_error,
}
_NDIM_ERRORS = {
    "dot": lambda a, b: (a.ndim, b.ndim) != (1, 1) and f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors",
    "mv": lambda a, b: (a.ndim, b.ndim) != (2, 1) and f"vector + matrix @ vector expected, got 1, {a.ndim}, {b.ndim}",
    "mm": lambda a, b: (a.ndim != 2 and "self must be a matrix") or (b.ndim != 2 and "mat2 must be a matrix"),
    "bmm": lambda a, b: (
        (a.ndim != 3 and "batch1 must be a 3D tensor") or (b.ndim != 3 and "batch2 must be a 3D tensor")
    ),
}
_MATMUL_NAMES = {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (1, 2): "SqueezeBackward4", (2, 2): "MmBackward0"}
_PRODUCT_NAMES = (
    "DotBackward0",
    "MvBackward0",
    "SqueezeBackward4",
    "MmBackward0",
    "BmmBackward0",
    "UnsafeViewBackward0",
)
# the inner product of two vectors by np.dot: the same BLAS sum as np.matmul's, for less than its dispatch; its C
# function itself, without the Python call of NumPy's array-function dispatcher where NumPy has one
_INNER = getattr(np.dot, "_implementation", np.dot)
PRODUCTS = {
    name: Op(
        "matmul",
        jnp.matmul,
        backward_name=name,
        multilinear=True,
        host=small_floats(_INNER if name == "DotBackward0" else np.matmul),
        host_vjp=matmul_vjp,
    )
    for name in _PRODUCT_NAMES
}


def _check_product(kind, a, b, a_shape, b_shape):
    error = _SHAPE_ERRORS[kind](a_shape, b_shape) or (
        a.dtype is not b.dtype and _DTYPE_ERRORS[kind](a, b, a_shape, b_shape)
    )
    if error:
        raise RuntimeError(error)


def _folded(sa, sb):
    """The kernel torch's matmul runs on operands of shapes `sa` and `sb`, and the operand shapes it sees."""
    if len(sa) == 1 and len(sb) == 1:
        return "dot", sa, sb
    if len(sb) == 1:
        return "mv", (math.prod(sa[:-1]), sa[-1]), sb
    if len(sa) <= 2 and len(sb) == 2:
        return "mm", sa if len(sa) == 2 else (1,) + sa, sb
    if len(sb) == 2:
        return "mm", (math.prod(sa[:-1]), sa[-1]), sb
    batch = math.prod(broadcast_shapes(sa[:-2], sb[:-2]))
    return "bmm", (batch,) + ((1,) + sa if len(sa) == 1 else sa[-2:]), (batch,) + sb[-2:]


_CHECKED = {}  # {(kernel, operand shapes and dtypes): its op}: the operands of a product that passed torch's checks
_MAX_CHECKED = 4096


def require_tensors(fn, arguments, operands):
    """torch's TypeError for the first of `operands` of `fn` (its `arguments`, by position from 1) that is not a
    Tensor."""
    for position, (argument, x) in enumerate(zip(arguments, operands), 1):
        if not isinstance(x, Tensor):
            raise not_a_tensor(fn, argument, x, position)


_PRODUCT_ARGUMENTS = {
    "matmul": ("input", "other"),
    "dot": ("input", "tensor"),
    "mv": ("input", "vec"),
    "mm": ("input", "mat2"),
    "bmm": ("input", "mat2"),
}


def _product(kernel, a, b):
    """The product `kernel` ("matmul", "dot", "mv", "mm" or "bmm") of `a` and `b`, after torch's checks, which are
    remembered for Tensors of the same shapes and dtypes."""
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
        require_tensors(kernel, _PRODUCT_ARGUMENTS[kernel], (a, b))
    va, vb = a._v, b._v
    key = (kernel, va.shape, vb.shape, va.dtype, vb.dtype)
    op = _CHECKED.get(key)
    if op is None:
        op = _checked_op(kernel, a, b)
        if len(_CHECKED) >= _MAX_CHECKED:
            _CHECKED.clear()
        _CHECKED[key] = op
    return apply(op, [a, b])


def _checked_op(kernel, a, b):
    """The op of the product `kernel` of `a` and `b`, or torch's error for them."""
    if kernel == "matmul":
        sa, sb = tuple(a.shape), tuple(b.shape)
        if not sa or not sb:
            raise RuntimeError(
                f"both arguments to matmul need to be at least 1D, but they are {len(sa)}D and {len(sb)}D"
            )
        kind, a_shape, b_shape = _folded(sa, sb)
        _check_product(kind, a, b, a_shape, b_shape)
        return PRODUCTS[_MATMUL_NAMES.get((len(sa), len(sb)), "UnsafeViewBackward0")]
    error = _NDIM_ERRORS[kernel](a, b)
    if error:
        raise RuntimeError(error)
    _check_product(kernel, a, b, tuple(a.shape), tuple(b.shape))
    return PRODUCTS[_KERNEL_NAMES[kernel]]


_KERNEL_NAMES = {"dot": "DotBackward0", "mv": "MvBackward0", "mm": "MmBackward0", "bmm": "BmmBackward0"}


@autocast_policy("lower")
def matmul(input, other):
    """Matrix product with torch's rules for 1-D and batched operands."""
    return _product("matmul", input, other)


@autocast_policy("lower")
def mm(input, mat2):
    """(n, m) @ (m, p)."""
    return _product("mm", input, mat2)


@autocast_policy("lower")
def bmm(input, mat2):
    """(b, n, m) @ (b, m, p)."""
    return _product("bmm", input, mat2)


def mv(input, vec):
    """(n, m) @ (m,)."""
    return _product("mv", input, vec)


def dot(input, other):
    """Inner product of two 1-D tensors."""
    return _product("dot", input, other)


_OUTER = Op(
    "outer",
    lambda a, b, *, dtype: jnp.outer(a.astype(dtype), b.astype(dtype)),
    multilinear=True,
    backward_name="MulBackward0",
)


def outer(input, vec2):
    """The outer product of two 1-D tensors: out[i, j] = input[i] * vec2[j]."""
    require_tensors("outer", ("input", "vec2"), (input, vec2))
    for name, t in (("self", input), ("vec2", vec2)):
        if t.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.ndim}-D")
    return apply(_OUTER, [input, vec2], dtype=_dtypes.result_type(input, vec2).np)


# ---- diagonals and triangles --------------------------------------------------------------------

_TRACE = Op("trace", lambda a, *, dtype: jnp.trace(a).astype(dtype), linear=True)
_DIAG = {
    name: Op("diag", lambda a, *, k: jnp.diag(a, k), linear=True, backward_name=name)
    for name in ("DiagEmbedBackward0", "DiagonalBackward0_copy")
}
_DIAGONAL = Op("diagonal", lambda a, *, offset, dim1, dim2: jnp.diagonal(a, offset, dim1, dim2), linear=True, view=True)
_TRIANGLE = {
    name: Op(
        name,
        lambda a, *, k, upper: (jnp.triu if upper else jnp.tril)(a, k),
        linear=True,
        backward_name=name.capitalize() + "Backward0",
    )
    for name in ("tril", "triu")
}


@autocast_policy("fp32")
def trace(input):
    """The sum of the main diagonal of a matrix."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    if input.dtype is _dtypes.bool:
        raise not_implemented("trace", _dtypes.bool)
    dtype = _dtypes.int64 if _dtypes.category(input.dtype) < 2 else input.dtype
    return apply(_TRACE, [input], dtype=dtype.np)


def diag(input, diagonal=0):
    """1-D -> a matrix with `input` on a diagonal; 2-D -> that diagonal."""
    if input.ndim not in (1, 2):
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")
    return apply(_DIAG["DiagEmbedBackward0" if input.ndim == 1 else "DiagonalBackward0_copy"], [input], k=int(diagonal))


def diagonal(input, offset=0, dim1=0, dim2=1):
    """A view of the diagonal over (dim1, dim2), appended as the last dimension."""
    d1, d2 = _wrap_dim(dim1, input.ndim), _wrap_dim(dim2, input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply(_DIAGONAL, [input], offset=int(offset), dim1=d1, dim2=d2)


def _triangle(name, input, diagonal):
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    return apply(_TRIANGLE[name], [input], k=int(diagonal), upper=name == "triu")


def tril(input, diagonal=0):
    """The lower triangle (on and below the `diagonal`-th diagonal); the rest is zero."""
    return _triangle("tril", input, diagonal)


def triu(input, diagonal=0):
    """The upper triangle (on and above the `diagonal`-th diagonal); the rest is zero."""
    return _triangle("triu", input, diagonal)


# ---- torch.linalg -------------------------------------------------------------------------------


class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError: a matrix is singular or not positive-definite."""


LinAlgError.__name__ = LinAlgError.__qualname__ = "_LinAlgError"  # torch's class name, which error reports print


slogdet_result = return_type("linalg_slogdet", ["sign", "logabsdet"])
eigh_result = return_type("linalg_eigh", ["eigenvalues", "eigenvectors"])
svd_result = return_type("linalg_svd", ["U", "S", "Vh"])
qr_result = return_type("linalg_qr", ["Q", "R"])


def _matrix(name, A, square=True, integers=False):
    """torch's checks of a (batch of) matrix argument: its rank, its dtype (unless `integers` are taken too) and,
    with `square`, its shape."""
    if A.ndim < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 dimensions.")
    if not (A.dtype.is_floating_point or A.dtype.is_complex or integers):
        if name == "eigh":
            raise not_implemented("linalg_eigh_cpu", A.dtype)
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as input. Got {_type(A)}")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            f"linalg.{name}: A must be batches of square matrices, but they are {A.shape[-2]} by {A.shape[-1]} matrices"
        )


def _swap(a):
    return jnp.swapaxes(a, -1, -2)


def _hermitian(a, upper):
    # torch reads one triangle of A but gives the gradient of the Hermitian part (A + A^H) / 2
    t = jnp.triu(a) if upper else jnp.tril(a)
    read = t + _swap(jnp.triu(a, 1) if upper else jnp.tril(a, -1)).conj()
    part = (a + _swap(a).conj()) / 2
    return part + jax.lax.stop_gradient(read - part)


def _raise_in_backward(x, message):
    """x, with a backward that raises RuntimeError(message) (where torch has no derivative)."""

    @jax.custom_vjp
    def f(y):
        return y

    def bwd(_, g):
        raise RuntimeError(message)

    f.defvjp(lambda y: (y, None), bwd)
    return f(x)


_QR_COMPLETE = "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."
_QR_R = (
    "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
    "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr."
)


def _qr_forward_error(a, *, mode):
    """torch's forward-mode derivative of QR raises as its backward does."""
    if mode == "r":
        return RuntimeError(_QR_R)
    if mode == "complete" and a.shape[-2] > a.shape[-1]:
        return RuntimeError(_QR_COMPLETE)
    return None


def _qr_fn(a, *, mode):
    if mode == "r":
        return _raise_in_backward(jnp.linalg.qr(a, mode="r"), _QR_R)
    q, r = jnp.linalg.qr(a, mode=mode)
    if mode == "complete" and a.shape[-2] > a.shape[-1]:
        q, r = _raise_in_backward(q, _QR_COMPLETE), _raise_in_backward(r, _QR_COMPLETE)
    return q, r


def _svd_fn(a, *, full_matrices):
    m, n = a.shape[-2:]
    if not full_matrices or m == n:
        return tuple(jnp.linalg.svd(a, full_matrices=full_matrices))
    # JAX has no derivative for the extra columns of a full U (rows of Vh) and torch ignores their gradient:
    # differentiate the reduced factors, phase-aligned to the full ones, and complete them with constants.
    k = min(m, n)
    U, _, Vh = jnp.linalg.svd(jax.lax.stop_gradient(a), full_matrices=True)
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    phase = jax.lax.stop_gradient(jnp.sum(U[..., :k].conj() * u, axis=-2))
    phase = phase / jnp.abs(phase)
    u, vh = u * phase.conj()[..., None, :], vh * phase[..., :, None]
    return jnp.concatenate([u, U[..., k:]], -1), s, jnp.concatenate([vh, Vh[..., k:, :]], -2)


def _solve_fn(a, b, *, left, vector):
    b = b[..., None] if vector else b
    x = jnp.linalg.solve(a, b) if left else _swap(jnp.linalg.solve(_swap(a), _swap(b)))
    return x[..., 0] if vector else x


_SOLVE = Op("linalg_solve", _solve_fn, backward_name="LinalgSolveExBackward0", torch_saves=SAVES_BOTH)
_INV = Op("linalg_inv", jnp.linalg.inv, backward_name="LinalgInvExBackward0", torch_saves=SAVES_RESULT)
_DET = Op("linalg_det", jnp.linalg.det, torch_saves=SAVES_BOTH)
_SLOGDET = Op("linalg_slogdet", lambda a: tuple(jnp.linalg.slogdet(a)), multi=True)
_CHOLESKY = Op(
    "linalg_cholesky",
    lambda a, *, upper: jnp.linalg.cholesky(_hermitian(a, upper), upper=upper, symmetrize_input=False),
    backward_name="LinalgCholeskyExBackward0",
    torch_saves=SAVES_RESULT,
)
_EIGH = Op(
    "linalg_eigh",
    lambda a, *, upper: tuple(jnp.linalg.eigh(_hermitian(a, upper), symmetrize_input=False)),
    multi=True,
    torch_saves=SAVES_RESULT,
)
_SVD = Op("linalg_svd", _svd_fn, multi=True, torch_saves=SAVES_RESULT)
_QR = Op("linalg_qr", _qr_fn, multi=True, torch_saves=SAVES_RESULT, forward_error=_qr_forward_error)
_QR_R_ONLY = Op(
    "linalg_qr",
    _qr_fn,
    backward_name="LinalgQrBackward0",
    torch_saves=SAVES_RESULT,
    forward_error=_qr_forward_error,
)


def _traced(*tensors):
    return any(isinstance(t._value, jax.core.Tracer) for t in tensors)


def _failure(out, A):
    """(batch prefix, matrix) of the first matrix of A whose result is not finite though it is (torch's
    LinAlgError cases: singular, not positive-definite), or None."""
    given = np.asarray(A._value).reshape((-1,) + A.shape[-2:])
    bad = ~np.isfinite(np.asarray(out._value)).reshape(len(given), -1).all(-1)
    bad &= np.isfinite(given).reshape(len(given), -1).all(-1)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    return f"(Batch element {i}): " if A.ndim > 2 else "", given[i]


def _zero_pivot(matrix):
    import scipy.linalg  # here: importing it costs every process 0.1 s

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lu, _ = scipy.linalg.lu_factor(matrix, check_finite=False)
    zeros = np.flatnonzero(np.diagonal(lu) == 0)
    return int(zeros[0]) + 1 if zeros.size else matrix.shape[-1]


def _failed_minor(matrix):
    for k in range(1, matrix.shape[-1] + 1):
        try:
            np.linalg.cholesky(matrix[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return matrix.shape[-1]


@autocast_policy("fp32")
def solve(A, B, *, left=True):
    """X with A @ X = B (or X @ A = B when left=False); B may be a (batch of) vector(s)."""
    _matrix("solve", A)
    if A.dtype is not B.dtype:
        raise RuntimeError(
            f"linalg.solve: Expected A and B to have the same dtype, but found A of type {_type(A)} "
            f"and B of type {_type(B)} instead"
        )
    n = A.shape[-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    rows, cols = (B.shape[-1], 1) if vector else B.shape[-2:]
    if (rows if left else cols) != n:
        equation = "AX = B" if left else "XA = B"
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation {equation} ({n}x{n} and {rows}x{cols})"
        )
    broadcast_shapes(A.shape[:-2], B.shape[: -1 if vector else -2])
    out = apply(_SOLVE, [A, B], left=bool(left), vector=vector)
    singular = not _traced(out, A) and not np.isfinite(np.asarray(out._value)).all()
    if singular and np.isfinite(np.asarray(A._value)).all():
        raise LinAlgError("torch.linalg.solve: The solver failed because the input matrix is singular.")
    return out


@autocast_policy("fp32")
def inv(A):
    """The inverse of a square matrix (or of each in a batch); LinAlgError when one is singular."""
    _matrix("inv", A)
    out = apply(_INV, [A])
    failed = None if _traced(out, A) else _failure(out, A)
    if failed:
        raise LinAlgError(
            f"linalg.inv: {failed[0]}The diagonal element {_zero_pivot(failed[1])} is zero, the "
            "inversion could not be completed because the input matrix is singular."
        )
    return out


def det(A):
    """The determinant of a square matrix (or of each in a batch)."""
    _matrix("det", A)
    return apply(_DET, [A])


def slogdet(A):
    """(sign, logabsdet): the determinant of a square matrix (or of each in a batch) as sign * exp(logabsdet)."""
    _matrix("slogdet", A)
    return slogdet_result(*apply(_SLOGDET, [A]))


@autocast_policy("fp32")
def cholesky(A, *, upper=False):
    """L with A = L @ L.mH for a Hermitian positive-definite A (U with A = U.mH @ U when upper)."""
    _matrix("cholesky", A)
    out = apply(_CHOLESKY, [A], upper=bool(upper))
    failed = None if _traced(out, A) else _failure(out, A)
    if failed:
        a = failed[1]
        matrix = np.triu(a) + np.triu(a, 1).T.conj() if upper else np.tril(a) + np.tril(a, -1).T.conj()
        raise LinAlgError(
            f"linalg.cholesky: {failed[0]}The factorization could not be completed because the input "
            f"is not positive-definite (the leading minor of order {_failed_minor(matrix)} is not "
            "positive-definite)."
        )
    return out


@autocast_policy("fp32")
def eigh(A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors) of the Hermitian matrix whose UPLO triangle A holds."""
    _matrix("eigh", A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return eigh_result(*apply(_EIGH, [A], upper=UPLO == "U"))


@autocast_policy("fp32")
def svd(A, full_matrices=True, *, driver=None):
    """(U, S, Vh) with A = U @ diag(S) @ Vh, singular values descending; reduced when not full_matrices."""
    _matrix("svd", A, square=False)
    return svd_result(*apply(_SVD, [A], full_matrices=bool(full_matrices)))


@autocast_policy("fp32")
def qr(A, mode="reduced"):
    """(Q, R) with A = Q @ R, Q orthonormal columns and R upper triangular; mode 'reduced', 'complete' or 'r'."""
    _matrix("qr", A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'"
        )
    if mode == "r":
        return qr_result(Tensor._wrap(np.zeros((0,), A.dtype.np)), apply(_QR_R_ONLY, [A], mode="r"))
    return qr_result(*apply(_QR, [A], mode=mode))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a matrix norm over 2 dims when ord is given for them (or is a string), else a vector norm."""
    dim = (dim,) if isinstance(dim, int) else None if dim is None else tuple(dim)
    if dim is not None and len(dim) not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dim)}")
    if dim is None and (ord is not None) and A.ndim not in (1, 2):
        raise RuntimeError(
            f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D."
        )
    matrix = isinstance(ord, str) or (ord is not None and (len(dim) == 2 if dim is not None else A.ndim == 2))
    kind = "matrix_norm" if matrix else "vector_norm"
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(f"linalg.{kind}: Expected a floating point or complex tensor as input. Got {_type(A)}")
    if not matrix:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if dim is not None and len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {len(dim)}")
    return matrix_norm(A if dtype is None else A.to(dtype), ord, dim or (-2, -1), keepdim)
