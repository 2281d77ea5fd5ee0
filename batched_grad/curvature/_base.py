"""Linear operators over Tensors, with curvlinops 3's interface: `A @ X` for a vector or a matrix given as one Tensor
(`(N,)` or `(N, K)`) or as a list of Tensors shaped like the operator's input space (each with a trailing axis of K
columns for a matrix), `A @ B` / `A + B` / `A - B` / `c * A` for operators, `adjoint()` (and `.T`) and `to_scipy()`.

Internally an operator multiplies `_matmat(M)`, M a list of Tensors `(K, *shape)` with the columns leading: that is
the layout of a batch of cotangents (`is_grads_batched=True`), so the K columns go through one batched call."""

import numpy as np

from .._tensor import Tensor


def _size(shape):
    return int(np.prod(shape, dtype=np.int64))


class LinearOperator:
    """A linear map between spaces that are each a list of Tensor shapes (`in_shape` -> `out_shape`).

    Subclasses implement `_matmat(M)` (M: list of `(K, *in_shape[i])` Tensors; returns the `(K, *out_shape[j])`
    list) and `_adjoint()` unless SELF_ADJOINT, and the `dtype` and `device` properties."""

    SELF_ADJOINT = False

    def __init__(self, in_shape, out_shape):
        self._in_shape = [tuple(int(n) for n in s) for s in in_shape]
        self._out_shape = [tuple(int(n) for n in s) for s in out_shape]
        self._in_shape_flat = [_size(s) for s in self._in_shape]
        self._out_shape_flat = [_size(s) for s in self._out_shape]
        self.shape = (sum(self._out_shape_flat), sum(self._in_shape_flat))

    # -- products ---------------------------------------------------------------------------------------------------

    def __matmul__(self, X):
        """`A @ X`: X a Tensor `(N,)` or `(N, K)`, a list of Tensors in the input space's shapes (a vector) or in
        those shapes with a trailing K (a matrix), or another operator (their product, as an operator). The result has
        X's format: a Tensor `(M,)` / `(M, K)`, or a list in the output space's shapes."""
        if isinstance(X, LinearOperator):
            return _ChainLinearOperator(self, X)
        if isinstance(X, Tensor):
            rows, is_vector = self._rows_of(X)
            product = self._matmat_rows(rows)
            return product[0] if is_vector else product.T
        columns, is_vector = self._columns_of(X)
        return self._format(self._matmat(columns), is_vector)

    def _matmat(self, M):
        raise NotImplementedError(f"{type(self).__name__} does not implement _matmat")

    def _matmat_rows(self, R):
        """The product with the columns of R given as rows: R `(K, N)` -> `(K, M)` (what the estimators use)."""
        from .. import cat

        AM = self._matmat(self._split_rows(R))
        if len(AM) != len(self._out_shape):
            raise ValueError(f"{type(self).__name__}: the product has {len(AM)} Tensors, not {len(self._out_shape)}")
        return cat([a.reshape(R.shape[0], -1) for a in AM], dim=1)

    def _rows_of(self, X):
        """(the columns of Tensor X as the rows of a `(K, N)` Tensor, whether X was a vector)."""
        n = self.shape[1]
        if X.ndim not in (1, 2) or X.shape[0] != n:
            raise ValueError(
                f"{type(self).__name__} @ X: X must have shape ({n},) or ({n}, K), but got {tuple(X.shape)}"
            )
        is_vector = X.ndim == 1
        return (X.reshape(1, n) if is_vector else X.T), is_vector

    def _columns_of(self, X):
        """(X, a list of Tensors, as a list of `(K, *shape)` Tensors, whether X was a vector)."""
        if isinstance(X, (list, tuple)) and X and all(isinstance(x, Tensor) for x in X):
            return self._columns_of_list(list(X))
        raise ValueError(
            f"{type(self).__name__} @ X: X must be a Tensor, a list of Tensors or a linear operator, "
            f"but got {type(X).__name__}"
        )

    def _columns_of_list(self, X):
        shapes = self._in_shape
        if len(X) != len(shapes):
            raise ValueError(f"{type(self).__name__} @ X: X must be a list of {len(shapes)} Tensors, got {len(X)}")
        got = [tuple(x.shape) for x in X]
        if got == shapes:
            return [x.unsqueeze(0) for x in X], True
        trailing = {g[-1] for g in got if g}
        if all(len(g) == len(s) + 1 and g[:-1] == s for g, s in zip(got, shapes)) and len(trailing) == 1:
            return [x.movedim(-1, 0) for x in X], False
        raise ValueError(
            f"{type(self).__name__} @ X: the Tensors of X must have the shapes {shapes}, each with an optional "
            f"trailing axis of the same number of columns, but got {got}"
        )

    def _split_rows(self, rows):
        k = rows.shape[0]
        return [p.reshape(k, *s) for p, s in zip(rows.split(self._in_shape_flat, dim=1), self._in_shape)]

    def _format(self, AM, is_vector):
        """The product `(K, *out_shape[j])` in the input list's format: the output space's shapes, K trailing."""
        if len(AM) != len(self._out_shape):
            raise ValueError(f"{type(self).__name__}: the product has {len(AM)} Tensors, not {len(self._out_shape)}")
        return [a[0] for a in AM] if is_vector else [a.movedim(0, -1) for a in AM]

    # -- adjoints and algebra ---------------------------------------------------------------------------------------

    def adjoint(self):
        """The adjoint operator (the transpose: these operators are real)."""
        return self if self.SELF_ADJOINT else self._adjoint()

    @property
    def T(self):  # noqa: N802  (torch's name)
        """The adjoint (the transpose), as `adjoint()`."""
        return self.adjoint()

    def _adjoint(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement its adjoint")

    def __add__(self, other):
        return _SumLinearOperator(self, other, 1.0)

    def __sub__(self, other):
        return _SumLinearOperator(self, other, -1.0)

    def __mul__(self, scalar):
        if isinstance(scalar, bool) or not isinstance(scalar, (int, float)):
            return NotImplemented
        return _ScaledLinearOperator(self, scalar)

    __rmul__ = __mul__

    def __neg__(self):
        return _ScaledLinearOperator(self, -1.0)

    # -- properties and SciPy ---------------------------------------------------------------------------------------

    @property
    def dtype(self):
        """The dtype of the operator's products (subclasses say)."""
        raise NotImplementedError(f"{type(self).__name__} does not say its dtype")

    @property
    def device(self):
        """The device of the operator's products (subclasses say)."""
        raise NotImplementedError(f"{type(self).__name__} does not say its device")

    def to_scipy(self, dtype=None):
        """A `scipy.sparse.linalg.LinearOperator` whose products run through this operator (for `eigsh`, `cg`,
        `minres`, ...); NumPy arrays go in and come out. `dtype`: the SciPy operator's (default NumPy's float64)."""
        import scipy.sparse.linalg  # optional: only this method needs SciPy

        adjoint = self.adjoint()
        return scipy.sparse.linalg.LinearOperator(
            self.shape,
            matvec=self._numpy_product(self),
            rmatvec=self._numpy_product(adjoint),
            matmat=self._numpy_product(self),
            rmatmat=self._numpy_product(adjoint),
            dtype=np.dtype(dtype) if dtype is not None else np.dtype(np.float64),
        )

    def _numpy_product(self, op):
        from .. import as_tensor

        dtype = self.dtype

        def product(x):
            x = np.asarray(x)
            result = op @ as_tensor(np.ascontiguousarray(x), dtype=dtype)
            return np.asarray(result.numpy()).astype(x.dtype)

        return product


def _check_same_space(a, b, what):
    if a._in_shape != b._in_shape or a._out_shape != b._out_shape:
        raise ValueError(
            f"{what} needs operators on the same spaces, but got {a._in_shape} -> {a._out_shape} and "
            f"{b._in_shape} -> {b._out_shape}"
        )
    if a.dtype != b.dtype:
        raise ValueError(f"{what} needs operators of one dtype, but got {a.dtype} and {b.dtype}")


class _SumLinearOperator(LinearOperator):
    """A + sign * B."""

    def __init__(self, A, B, sign):
        if not isinstance(B, LinearOperator):
            raise TypeError(f"a linear operator can be added only to a linear operator, not {type(B).__name__}")
        _check_same_space(A, B, "A + B")
        super().__init__(A._in_shape, A._out_shape)
        self._A, self._B, self._sign = A, B, sign
        self.SELF_ADJOINT = A.SELF_ADJOINT and B.SELF_ADJOINT

    def _matmat(self, M):
        return [a + self._sign * b for a, b in zip(self._A._matmat(M), self._B._matmat(M))]

    def _adjoint(self):
        return _SumLinearOperator(self._A.adjoint(), self._B.adjoint(), self._sign)

    dtype = property(lambda self: self._A.dtype)
    device = property(lambda self: self._A.device)


class _ScaledLinearOperator(LinearOperator):
    """scalar * A."""

    def __init__(self, A, scalar):
        super().__init__(A._in_shape, A._out_shape)
        self._A, self._scalar = A, scalar
        self.SELF_ADJOINT = A.SELF_ADJOINT

    def _matmat(self, M):
        return [self._scalar * a for a in self._A._matmat(M)]

    def _adjoint(self):
        return _ScaledLinearOperator(self._A.adjoint(), self._scalar)

    dtype = property(lambda self: self._A.dtype)
    device = property(lambda self: self._A.device)


class _ChainLinearOperator(LinearOperator):
    """A @ B."""

    def __init__(self, A, B):
        if A._in_shape != B._out_shape:
            raise ValueError(f"A @ B: A's input space {A._in_shape} is not B's output space {B._out_shape}")
        if A.dtype != B.dtype:
            raise ValueError(f"A @ B needs operators of one dtype, but got {A.dtype} and {B.dtype}")
        super().__init__(B._in_shape, A._out_shape)
        self._A, self._B = A, B

    def _matmat(self, M):
        return self._A._matmat(self._B._matmat(M))

    def _adjoint(self):
        return _ChainLinearOperator(self._B.adjoint(), self._A.adjoint())

    dtype = property(lambda self: self._A.dtype)
    device = property(lambda self: self._A.device)
