"""SparseMatrix: a sparse Jacobian or Hessian block as returned by `sparsity=`: its nonzeros' values (a Tensor,
differentiable under create_graph) at fixed coordinates, converted without densifying."""

import numpy as np

from .._tensor import Tensor


class SparseMatrix:
    """An (m, n) sparse matrix: `values` (a 1-D Tensor of nnz) at rows `rows` and columns `cols` (NumPy int64
    arrays, in CSR order: by row, then column). A block of a Jacobian whose output has shape `out_shape` and input
    `in_shape` (flattened to m and n); `to_dense().reshape(out_shape + in_shape)` is the dense block.

    Conversions keep it sparse: `to_scipy("csr" | "csc" | "coo")`, `tocsr()`, `tocsc()` (scipy.sparse, imported
    when asked), `to_bcoo()` (jax.experimental.sparse.BCOO). `A @ v` for a Tensor v of n elements (or (n, k))
    multiplies without forming A; `to_dense()` gives the (m, n) Tensor."""

    __slots__ = ("values", "rows", "cols", "shape", "out_shape", "in_shape", "_indptr")
    __array_priority__ = 1000  # numpy defers `ndarray @ SparseMatrix` to us

    def __init__(self, values, rows, cols, shape, out_shape=None, in_shape=None):
        self.values, self.rows, self.cols = values, rows, cols
        self.shape = (int(shape[0]), int(shape[1]))
        self.out_shape = tuple(out_shape) if out_shape is not None else (self.shape[0],)
        self.in_shape = tuple(in_shape) if in_shape is not None else (self.shape[1],)
        self._indptr = None

    @property
    def nnz(self):
        """The number of stored nonzeros."""
        return len(self.rows)

    @property
    def dtype(self):
        """The dtype of the values."""
        return self.values.dtype

    @property
    def indptr(self):
        """The CSR row pointers (NumPy int64, m + 1 of them)."""
        if self._indptr is None:
            indptr = np.zeros(self.shape[0] + 1, np.int64)
            np.cumsum(np.bincount(self.rows, minlength=self.shape[0]), out=indptr[1:])
            self._indptr = indptr
        return self._indptr

    def __repr__(self):
        return f"SparseMatrix(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype})"

    def to_dense(self):
        """The (m, n) dense Tensor (differentiable where `values` is)."""
        from .. import _factories

        dense = _factories.zeros(self.shape[0] * self.shape[1], dtype=self.values.dtype)
        flat = self.rows * self.shape[1] + self.cols
        return dense.index_put((Tensor._wrap(flat),), self.values).view(self.shape)

    def _host_values(self):
        return np.asarray(self.values.detach().numpy())

    def to_scipy(self, format="csr"):
        """The matrix as a scipy.sparse matrix of `format` ("csr", "csc", "coo", ...), built from the CSR arrays
        directly."""
        import scipy.sparse

        csr = scipy.sparse.csr_matrix((self._host_values(), self.cols, self.indptr), shape=self.shape)
        return csr if format == "csr" else csr.asformat(format)

    def tocsr(self):
        """scipy.sparse.csr_matrix of the matrix."""
        return self.to_scipy("csr")

    def tocsc(self):
        """scipy.sparse.csc_matrix of the matrix."""
        return self.to_scipy("csc")

    def tocoo(self):
        """scipy.sparse.coo_matrix of the matrix."""
        return self.to_scipy("coo")

    def to_bcoo(self):
        """The matrix as a jax.experimental.sparse.BCOO (values on the device, indices (nnz, 2))."""
        from jax.experimental import sparse

        indices = np.stack([self.rows, self.cols], axis=1)
        values = self.values.detach()._value
        return sparse.BCOO((values, indices), shape=self.shape, indices_sorted=True, unique_indices=True)

    def __matmul__(self, other):
        """A @ v: v a Tensor (or array) of shape (n,) or (n, k), or shaped like the input block (in_shape)."""
        v = other if isinstance(other, Tensor) else Tensor._wrap(np.asarray(other))
        if tuple(v.shape) == self.in_shape and v.ndim != 1:
            v = v.reshape(-1)
        if v.ndim not in (1, 2) or v.shape[0] != self.shape[1]:
            raise ValueError(
                f"SparseMatrix @ v: v must have shape ({self.shape[1]},) or ({self.shape[1]}, k), got {tuple(v.shape)}"
            )
        rows, cols = Tensor._wrap(self.rows), Tensor._wrap(self.cols)
        products = self.values.reshape((-1,) + (1,) * (v.ndim - 1)) * v.index_select(0, cols)
        from .. import _factories

        out = _factories.zeros((self.shape[0],) + tuple(v.shape[1:]), dtype=products.dtype)
        return out.index_add(0, rows, products)

    def __rmatmul__(self, other):
        """u @ A for u of shape (m,) or (k, m): the transposed product."""
        u = other if isinstance(other, Tensor) else Tensor._wrap(np.asarray(other))
        if u.ndim not in (1, 2) or u.shape[-1] != self.shape[0]:
            raise ValueError(
                f"u @ SparseMatrix: u must have shape ({self.shape[0]},) or (k, {self.shape[0]}), got {tuple(u.shape)}"
            )
        return (self.T @ u.T).T if u.ndim == 2 else self.T @ u

    @property
    def T(self):
        """The transpose, as a SparseMatrix (in CSR order of its own)."""
        order = np.lexsort((self.rows, self.cols))
        values = self.values.index_select(0, Tensor._wrap(order)) if self.nnz else self.values
        return SparseMatrix(values, self.cols[order], self.rows[order], self.shape[::-1], self.in_shape, self.out_shape)
