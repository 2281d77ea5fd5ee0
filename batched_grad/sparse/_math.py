"""Arithmetic of sparse COO tensors, each written with dense differentiable ops on the values: products gather dense
rows at the indices and add them into the result (index_add), so their gradients come from the engine."""

import numbers

import numpy as np

from .. import _dtypes, _ops
from .._factories import tensor, zeros
from .._grad_mode import is_recording
from .._meta import NoDenseValue
from .._tensor import Tensor, _wrap_dim
from ._construct import _host_indices, coalesce, linear_index, to_dense
from ._coo import SparseCOO

_NOT_SPARSE_DENSE = "add(sparse, dense) is not supported. Use add(dense, sparse) instead."


def _with_values(s, values, coalesced=None):
    return SparseCOO._of(s._coo_indices, values, s.shape, s._coalesced if coalesced is None else coalesced)


def _check_matrix(s, name):
    if s.ndim != 2 or s.dense_dim():
        raise RuntimeError(
            f"{name}: the sparse operand must be a 2-D matrix with two sparse dimensions, but got size "
            f"{list(s.shape)} with sparse_dim {s.sparse_dim()}"
        )


def _check_operand(s, dense, name, dim, argument):
    if not isinstance(dense, Tensor):
        raise TypeError(f"{name}(): argument '{argument}' must be a Tensor, but got {type(dense).__name__}")
    if dense.ndim != 2:
        raise RuntimeError(f"{name}: argument '{argument}' must be a 2-D matrix, but got size {list(dense.shape)}")
    if dense.dtype is not s.dtype:
        raise RuntimeError(f"expected scalar type {s.dtype.type_name} but found {dense.dtype.type_name}")
    if dense.shape[dim] != s.shape[1 - dim]:
        raise RuntimeError(
            f"{name}: Argument #3 ({argument}): Expected dim {dim} size {s.shape[1 - dim]}, got {dense.shape[dim]}"
        )


def sparse_dense_mm(s, dense, name="mm"):
    """s @ dense for a sparse matrix s: each element s[i, j] adds s[i, j] * dense[j] to row i."""
    _check_matrix(s, name)
    _check_operand(s, dense, name, 0, "dense")
    rows, cols = s._coo_indices[0], s._coo_indices[1]
    terms = s._coo_values.unsqueeze(1) * dense.index_select(0, cols)
    out = zeros((s.shape[0], dense.shape[1]), dtype=s.dtype, device=s.device)
    return _ops.index_add(out, 0, rows, terms)


def dense_sparse_mm(dense, s, name="mm"):
    """dense @ s for a sparse matrix s: each element s[i, j] adds dense[:, i] * s[i, j] to column j."""
    _check_matrix(s, name)
    _check_operand(s, dense, name, 1, "mat1")
    rows, cols = s._coo_indices[0], s._coo_indices[1]
    terms = dense.index_select(1, rows) * s._coo_values
    out = zeros((dense.shape[0], s.shape[1]), dtype=s.dtype, device=s.device)
    return _ops.index_add(out, 1, cols, terms)


def sparse_sparse_mm(a, b):
    """a @ b of two sparse matrices, a sparse (coalesced) result: each pair a[i, k], b[k, j] adds to (i, j)."""
    _check_matrix(a, "mm")
    _check_matrix(b, "mm")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mm: sparse matrices of sizes {list(a.shape)} and {list(b.shape)} cannot be multiplied")
    ia, ib = _host_indices(a._coo_indices), _host_indices(b._coo_indices)
    pa, pb = np.nonzero(ia[1][:, None] == ib[0][None, :])  # the pairs that meet at the same k
    pa, pb = tensor(pa, dtype=_dtypes.int64), tensor(pb, dtype=_dtypes.int64)
    products = a._coo_values.index_select(0, pa) * b._coo_values.index_select(0, pb)
    indices = _ops.stack([a._coo_indices[0].index_select(0, pa), b._coo_indices[1].index_select(0, pb)])
    return coalesce(SparseCOO._of(indices, products, (a.shape[0], b.shape[1])))


def mm(mat1, mat2):
    """torch.sparse.mm / torch.spmm / torch.mm with a sparse operand: sparse @ dense and dense @ sparse give a dense
    matrix, sparse @ sparse a sparse one (and dense @ dense the dense product)."""
    sparse1, sparse2 = isinstance(mat1, SparseCOO), isinstance(mat2, SparseCOO)
    if not (sparse1 or sparse2):
        return _ops.mm(mat1, mat2)
    if sparse1 and sparse2:
        return sparse_sparse_mm(mat1, mat2)
    return sparse_dense_mm(mat1, mat2) if sparse1 else dense_sparse_mm(mat1, mat2)


def matmul(input, other):
    """input @ other with a sparse operand: mm, and a sparse matrix times a vector."""
    if isinstance(input, SparseCOO) and isinstance(other, Tensor) and other.ndim == 1:
        return sparse_dense_mm(input, other.unsqueeze(1), "matmul").squeeze(1)
    return mm(input, other)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2) with mat1 sparse (torch.sparse.addmm)."""
    if isinstance(mat2, SparseCOO):
        raise RuntimeError(
            "addmm_sparse_dense: expected either 'mat1' to have sparse layout and 'mat2' to have strided layout, got "
            f"'mat1' with layout {'Sparse' if isinstance(mat1, SparseCOO) else 'Strided'} and 'mat2' with layout Sparse"
        )
    return input * beta + mm(mat1, mat2) * alpha


def _cat_sparse(a, b, alpha):
    values = b._coo_values if alpha == 1 else b._coo_values * alpha
    return SparseCOO._of(
        _ops.cat([a._coo_indices, b._coo_indices], 1), _ops.cat([a._coo_values, values.to(a.dtype)], 0), a.shape
    )


def add(input, other, *, alpha=1):
    """sparse + sparse (sparse; coalesced when both are) and dense + sparse (dense); sparse + dense is refused, as
    torch refuses it."""
    if not isinstance(input, SparseCOO):
        if not isinstance(input, Tensor) or input.shape != other.shape:
            got = list(input.shape) if isinstance(input, Tensor) else []  # a number: torch's 0-dim tensor
            raise RuntimeError(
                f"add: expected 'self' and 'other' to have same size, but self has size {got} while other has size "
                f"{list(other.shape)} (FYI: dense-sparse addition does not currently support broadcasting)"
            )
        dense = to_dense(other)
        return input + (dense if alpha == 1 else dense * alpha)
    if not isinstance(other, SparseCOO):
        raise RuntimeError(_NOT_SPARSE_DENSE)
    if input.shape != other.shape:
        raise RuntimeError(
            f"add: expected 'self' and 'other' to have same size, but {list(input.shape)} != {list(other.shape)}"
        )
    if input._coo_indices is other._coo_indices:  # one pattern (s + s, s - 2 * s): the values add
        return _with_values(input, input._coo_values + other._coo_values * alpha)
    both = _cat_sparse(input, other, alpha)
    return coalesce(both) if input._coalesced and other._coalesced else both


def radd(self, other):
    """other + self: dense + sparse, or (a number first) torch's refusal of sparse + dense."""
    return add(other, self) if isinstance(other, Tensor) else add(self, other)


def sub(input, other, *, alpha=1):
    """add(input, other, alpha=-alpha)."""
    return add(input, other, alpha=-alpha)


def sparse_mask(input, mask):
    """The elements of `input` (dense or sparse) at the positions `mask` (sparse, of its size) specifies, as a sparse
    tensor with mask's indices."""
    if not isinstance(mask, SparseCOO):
        raise RuntimeError(
            f"sparse_mask expects mask to be sparse COO, but got a dense tensor of size {list(mask.shape)}"
        )
    if input.shape != mask.shape:
        raise RuntimeError(
            f"sparse_mask(): operands have incompatible sizes; self has size {list(input.shape)} but mask has size "
            f"{list(mask.shape)}."
        )
    dense = to_dense(input).reshape(-1, *input.shape[mask.sparse_dim() :])
    return _with_values(mask, dense.index_select(0, linear_index(mask)))


def _intersect(a, b):
    """a * b of two sparse tensors of one size: the values at the indices both specify."""
    ca, cb = coalesce(a), coalesce(b)
    la, lb = _host_indices(linear_index(ca)), _host_indices(linear_index(cb))
    common, ia, ib = np.intersect1d(la, lb, return_indices=True)
    ia, ib = tensor(ia, dtype=_dtypes.int64), tensor(ib, dtype=_dtypes.int64)
    values = ca._coo_values.index_select(0, ia) * cb._coo_values.index_select(0, ib)
    return SparseCOO._of(ca._coo_indices.index_select(1, ia), values, a.shape, a._coalesced and b._coalesced)


def mul(input, other):
    """sparse * number, sparse * sparse (where both specify an element) and sparse * dense (the dense tensor read
    at the sparse indices, broadcast to the sparse size); a sparse result."""
    if not isinstance(input, SparseCOO):
        input, other = other, input
    if isinstance(other, SparseCOO):
        if input.shape != other.shape:
            raise RuntimeError(f"mul: sparse sizes {list(input.shape)} and {list(other.shape)} differ")
        return _intersect(input, other)
    if isinstance(other, numbers.Number) or isinstance(other, Tensor) and other.ndim == 0:
        return _with_values(input, input._coo_values * other)
    dense = other.expand(input.shape).reshape(-1, *input.shape[input.sparse_dim() :])
    return _with_values(input, input._coo_values * dense.index_select(0, linear_index(input)))


def div(input, other):
    """sparse / number (or a 0-dim tensor)."""
    if not isinstance(input, SparseCOO) or not (
        isinstance(other, numbers.Number) or isinstance(other, Tensor) and other.ndim == 0
    ):
        raise RuntimeError("div: a sparse tensor can be divided only by a number or a 0-dim dense tensor")
    return _with_values(input, input._coo_values / other)


_LINEAR = {"neg", "negative", "conj"}  # f(a + b) = f(a) + f(b): duplicates may stay


def valuewise(name):
    """The sparse form of an elementwise function that keeps zeros zero: the function of the values (coalesced
    first, unless the function is additive)."""

    def function(input, *args, **kwargs):
        s = input if name in _LINEAR else coalesce(input)
        return _with_values(s, getattr(s._coo_values, name)(*args, **kwargs))

    function.__name__ = name
    function.__doc__ = f"{name} of each specified element (the values), with the same indices."
    return function


def pow(input, exponent):
    """input ** exponent for a nonzero number exponent, on the specified elements."""
    if not isinstance(input, SparseCOO) or not isinstance(exponent, numbers.Number):
        raise RuntimeError("pow: a sparse tensor can be raised only to a number power (a sparse exponent is dense)")
    if exponent == 0:
        raise RuntimeError("pow: cannot raise to zeroth power on sparse tensor; it would make the result tensor dense")
    s = coalesce(input)
    return _with_values(s, s._coo_values**exponent)


def clone(input, *, memory_format=None):
    """A copy: its own indices and values, in the graph as the values' clone."""
    return SparseCOO._of(input._coo_indices.clone(), input._coo_values.clone(), input.shape, input._coalesced)


def transpose(input, dim0, dim1):
    """input with dimensions dim0 and dim1 swapped: index rows for sparse dimensions, the values' for dense ones."""
    d0, d1 = _wrap_dim(dim0, input.ndim), _wrap_dim(dim1, input.ndim)
    sparse_dim = input.sparse_dim()
    shape = list(input.shape)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    if d0 < sparse_dim and d1 < sparse_dim:
        order = list(range(sparse_dim))
        order[d0], order[d1] = order[d1], order[d0]
        indices = input._coo_indices.index_select(0, tensor(order, dtype=_dtypes.int64))
        values = input._coo_values.view(input._coo_values.shape)  # a node of its own, as every op's result
        return SparseCOO._of(indices, values, shape, coalesced=d0 == d1 and input._coalesced)
    if d0 >= sparse_dim and d1 >= sparse_dim:
        values = input._coo_values.transpose(d0 - sparse_dim + 1, d1 - sparse_dim + 1)
        return SparseCOO._of(input._coo_indices, values, shape, input._coalesced)
    raise RuntimeError("transpose(): cannot swap a sparse dimension with a dense one of a sparse COO tensor")


def t(input):
    """The transpose of a sparse tensor of at most 2 dimensions."""
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but got {input.ndim}")
    return transpose(input, 0, 1) if input.ndim == 2 else input


def sparse_sum(input, dim=None, keepdim=False, dtype=None):
    """torch.sparse.sum: the sum of all elements (dense), or over `dim`; a sparse result while sparse dimensions
    remain, a dense one otherwise."""
    if keepdim:
        raise RuntimeError("sum: keepdim=True is not provided for sparse COO tensors")
    values = input._coo_values if dtype is None else input._coo_values.to(dtype)
    if dim is None:
        return values.sum()
    dims = sorted({_wrap_dim(d, input.ndim) for d in ((dim,) if isinstance(dim, int) else dim)})
    sparse_dim = input.sparse_dim()
    dense_dims = [d - sparse_dim + 1 for d in dims if d >= sparse_dim]
    values = values.sum(dense_dims) if dense_dims else values
    kept = [d for d in range(sparse_dim) if d not in dims]
    if not kept:
        return values.sum(0)
    indices = input._coo_indices.index_select(0, tensor(kept, dtype=_dtypes.int64))
    shape = [input.shape[d] for d in kept] + [n for d, n in enumerate(input.shape) if d >= sparse_dim and d not in dims]
    return coalesce(SparseCOO._of(indices, values, shape))


def _groups(s, dim):
    """Each element's group for a softmax along sparse dimension `dim`: the element's position in the other sparse
    dimensions, numbered 0, 1, ... on the host."""
    host = _host_indices(s._coo_indices)
    others = np.delete(host, dim, axis=0)
    _, group = np.unique(others.T, axis=0, return_inverse=True) if others.size else (None, np.zeros(s._nnz(), int))
    return tensor(group.reshape(-1), dtype=_dtypes.int64), int(group.max()) + 1 if group.size else 0


def _softmax_parts(input, dim, dtype, name):
    if not isinstance(input, SparseCOO):
        raise RuntimeError(f"torch.sparse.{name}: input must be a sparse COO tensor, but got a dense one")
    if input.dense_dim():
        raise RuntimeError(f"{name}: sparse tensors with dense dimensions are not provided")
    s = coalesce(input)
    values = s._coo_values if dtype is None else s._coo_values.to(dtype)
    group, count = _groups(s, _wrap_dim(dim, s.ndim))
    # shift each group by its maximum (a constant for the derivative) so that exp cannot overflow
    top = zeros(count, dtype=values.dtype).scatter_reduce(0, group, values.detach(), "amax", include_self=False)
    shifted = values - top.index_select(0, group)
    totals = _ops.index_add(zeros(count, dtype=values.dtype), 0, group, shifted.exp())
    return s, shifted, totals.index_select(0, group)


def softmax(input, dim, dtype=None):
    """torch.sparse.softmax: a softmax along `dim` over the specified elements only (absent ones are -inf)."""
    s, shifted, totals = _softmax_parts(input, dim, dtype, "softmax")
    return _with_values(s, shifted.exp() / totals)


def log_softmax(input, dim, dtype=None):
    """torch.sparse.log_softmax: log(softmax(input, dim)) on the specified elements."""
    s, shifted, totals = _softmax_parts(input, dim, dtype, "log_softmax")
    return _with_values(s, shifted - totals.log())


def to(input, *args, **kwargs):
    """The sparse tensor with its values moved or cast by Tensor.to(*args, **kwargs); the indices follow the
    device."""
    values = input._coo_values.to(*args, **kwargs)
    if values is input._coo_values:
        return input
    return SparseCOO._of(input._coo_indices.to(values.device), values, input.shape, input._coalesced)


def cast(dtype):
    def method(self):
        return to(self, dtype)

    method.__name__ = dtype.name
    method.__doc__ = f"The sparse tensor with {dtype!r} values."
    return method


def copy_(self, src, non_blocking=False):
    """Make this sparse tensor a copy of the sparse `src` (its indices, values cast to this dtype, size), in place and
    outside the graph (as load_state_dict copies under no_grad)."""
    if not isinstance(src, SparseCOO):
        raise RuntimeError("copy_: a sparse COO tensor can be copied only from a sparse COO tensor; got a dense one")
    if is_recording() and (self.requires_grad or src.requires_grad):
        raise RuntimeError("copy_ into a sparse COO tensor is provided outside the graph only (under no_grad)")
    values = src._coo_values.to(self.dtype).clone()
    self._coo_indices, self._coo_values, self._coalesced = src._coo_indices.clone(), values, src._coalesced
    self._v = NoDenseValue(src.shape, values._v.dtype)
    return self
