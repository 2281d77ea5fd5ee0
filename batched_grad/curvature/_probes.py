"""Random probes drawn as one batch, and the product of an operator (or a matrix) with a block of columns, as the
estimators use them: NumPy arrays `(dim, K)` on the host, one batched product per block."""

import numpy as np

from .._tensor import Tensor
from ._base import LinearOperator

DISTRIBUTIONS = ("rademacher", "normal")


def draw_probes(dim, num, distribution="rademacher", generator=None):
    """`num` probe vectors of length `dim` as the columns of a float64 array `(dim, num)`, drawn in one call from
    batched_grad's generator (`generator`, else the default one that `bg.manual_seed` seeds): i.i.d. signs
    ('rademacher') or standard normals ('normal'); each column in turn holds the values a draw of `(dim,)` would."""
    return draw_probe_rows(dim, num, distribution, generator).T


def draw_probe_rows(dim, num, distribution="rademacher", generator=None):
    """draw_probes' probes as the rows of a C-contiguous array `(num, dim)` (the layout of a batched product)."""
    from .. import float64, rand, randn

    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, but got {distribution!r}")
    draw = randn if distribution == "normal" else rand
    drawn = np.asarray(draw(num, dim, generator=generator, dtype=float64).numpy(), dtype=np.float64)
    if distribution == "normal":
        return np.array(drawn)
    rows = np.subtract(drawn, 0.5)
    return np.copysign(1.0, rows, out=rows)  # -1 below 0.5, else 1


def square_size(A):
    """The size of a square operator or matrix; ValueError otherwise."""
    shape = tuple(A.shape)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"the operator must be square, but has shape {shape}")
    return shape[0]


def check_matvecs(A, num_matvecs, divisor=1):
    """num_matvecs must be a positive int below the operator's size (else the exact answer costs as much), divisible
    by `divisor`."""
    if isinstance(num_matvecs, bool) or not isinstance(num_matvecs, int) or num_matvecs < 1:
        raise ValueError(f"num_matvecs must be a positive int, but got {num_matvecs!r}")
    if any(num_matvecs >= d for d in A.shape):
        raise ValueError(f"num_matvecs ({num_matvecs}) must be less than the operator's size {tuple(A.shape)}")
    if num_matvecs % divisor:
        raise ValueError(f"num_matvecs ({num_matvecs}) must be divisible by {divisor}")


def dtype_of(A):
    from .. import float64

    return getattr(A, "dtype", float64)


def product(A, columns, adjoint=False):
    """A @ columns (or A^T @ columns) for a NumPy array `(dim, K)`: product_rows on its transpose; `(dim, K)`."""
    return product_rows(A, columns.T, adjoint).T


def product_rows(A, rows, adjoint=False):
    """The products of A (or A^T) with the rows of a NumPy array `(K, dim)`, as rows: one batched product of an
    operator with all K rows, or a matrix product for a Tensor or array; a float64 array `(K, dim)`."""
    from .. import as_tensor

    if isinstance(A, LinearOperator):
        op = A.adjoint() if adjoint else A
        R = as_tensor(np.ascontiguousarray(rows), dtype=op.dtype)
        return np.asarray(op._matmat_rows(R).numpy(), dtype=np.float64)
    matrix = np.asarray(A.detach().numpy() if isinstance(A, Tensor) else A, dtype=np.float64)
    return rows @ (matrix if adjoint else matrix.T)


def result(value, A):
    """An estimate as a Tensor of the operator's dtype."""
    from .. import as_tensor

    return as_tensor(np.asarray(value), dtype=dtype_of(A))
