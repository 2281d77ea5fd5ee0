"""Making sparse COO tensors: sparse_coo_tensor, Tensor.to_sparse, coalesce, to_dense. The indices are data read on
the host (as torch's kernels read them); the values move only through recorded dense ops (gather, index_add), so
their gradients come from the ordinary engine."""

import math
import warnings

import numpy as np

from .. import _dtypes, _ops
from .._factories import tensor, zeros
from .._layout_types import sparse_coo
from .._tensor import Size, Tensor
from .._tracing import is_tracer
from ._coo import SparseCOO


def _as_tensor(x, name):
    if isinstance(x, SparseCOO):
        raise TypeError(f"sparse_coo_tensor(): argument '{name}' must be a dense tensor or array, but got a sparse one")
    return x if isinstance(x, Tensor) else tensor(x)


def _host_indices(indices):
    """The indices as a NumPy array, or None while a transform traces them."""
    v = indices.detach()._value
    return None if is_tracer(v) else np.asarray(v)


def _check_bounds(indices, size):
    host = _host_indices(indices)
    if host is None or host.size == 0:
        return
    for d, (row, n) in enumerate(zip(host, size)):
        low, high = int(row.min()), int(row.max())
        if low < 0:
            raise RuntimeError(f"found negative index {low} for dim {d}")
        if high >= n:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {n} but found index {high}")


def _inferred_size(indices, values):
    host = _host_indices(indices)
    if host is None:
        raise RuntimeError("sparse_coo_tensor(): pass `size` when the indices are traced (it cannot be inferred)")
    sparse = tuple(int(n) + 1 for n in host.max(axis=1)) if host.shape[1] else (0,) * host.shape[0]
    return sparse + tuple(values.shape[1:])


_IMPLICITLY_UNCHECKED = (
    "Sparse invariant checks are implicitly disabled. Memory errors (e.g. SEGFAULT) will occur when operating on a "
    "sparse tensor which violates the invariants, but checks incur performance overhead. To silence this warning, "
    "explicitly opt in or out. See `torch.sparse.check_sparse_tensor_invariants.__doc__` for guidance."
)
# whether the constructors check a sparse tensor's invariants: None until set (torch's default, off, with its notice
# once per process where a constructor is not told), then the bool set
_INVARIANTS = {"checked": None, "noticed": False}


def _invariants_checked(check_invariants):
    if check_invariants is not None:
        return bool(check_invariants)
    if _INVARIANTS["checked"] is None and not _INVARIANTS["noticed"]:
        _INVARIANTS["noticed"] = True
        warnings.warn(_IMPLICITLY_UNCHECKED, UserWarning, stacklevel=3)
    return bool(_INVARIANTS["checked"])


class check_sparse_tensor_invariants:  # noqa: N801  (torch's name)
    """Whether the sparse tensor constructors check the invariants (batched_grad's COO constructor always refuses
    indices out of the size; the switch is torch's state, read by is_enabled): enable() / disable(), or as a context
    manager or decorator that sets it (default True) and restores it on exit."""

    @staticmethod
    def is_enabled():
        """True where the checks were turned on."""
        return bool(_INVARIANTS["checked"])

    @staticmethod
    def enable():
        """Turn the checks on (an explicit choice: the constructors' notice is not given)."""
        _INVARIANTS["checked"] = True

    @staticmethod
    def disable():
        """Turn the checks off (an explicit choice: the constructors' notice is not given)."""
        _INVARIANTS["checked"] = False

    def __init__(self, enable=True):
        self.state = enable
        self.saved_state = None

    def __enter__(self):
        if self.saved_state is not None:
            raise RuntimeError(
                "This context manager instance is already activated. Use a different context manager instance for "
                "context nesting."
            )
        self.saved_state = self.is_enabled()
        _INVARIANTS["checked"] = bool(self.state)

    def __exit__(self, type, value, traceback):  # noqa: A002  (the context manager protocol's names)
        if self.saved_state is None:
            raise AssertionError("saved_state should not be None on exit")
        _INVARIANTS["checked"] = self.saved_state
        self.saved_state = None

    def __call__(self, mth):
        def test_mth(*args, **kwargs):
            with type(self)(self.state):
                return mth(*args, **kwargs)

        return test_mth


def sparse_coo_tensor(
    indices,
    values,
    size=None,
    *,
    dtype=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
    check_invariants=None,
    is_coalesced=None,
):
    """A sparse COO tensor with `values` at `indices` (sparse_dim x nnz); `size` inferred from the indices when None.
    Indices out of `size` are refused (torch checks them only with check_invariants, or where
    check_sparse_tensor_invariants is enabled; left unset, torch's notice that the checks are off is given once)."""
    _invariants_checked(check_invariants)
    if pin_memory:
        raise RuntimeError("sparse_coo_tensor(): pin_memory=True is not provided (there is no pinned host memory)")
    indices, values = _as_tensor(indices, "indices"), _as_tensor(values, "values")
    if indices.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if values.ndim == 0 or indices.shape[1] != values.shape[0]:
        nnz = values.shape[0] if values.ndim else "a 0-dim values tensor"
        raise RuntimeError(
            f"indices and values must have same nnz, but got nnz from indices: {indices.shape[1]}, "
            f"nnz from values: {nnz}"
        )
    indices = indices.detach().to(_dtypes.int64)
    values = values if dtype is None else values.to(dtype)
    values = values if device is None else values.to(device)
    size = _inferred_size(indices, values) if size is None else tuple(int(n) for n in size)
    sparse_dim, dense_dim = indices.shape[0], values.ndim - 1
    if len(size) != sparse_dim + dense_dim:
        raise RuntimeError(
            f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(size)}, "
            f"sparse_dim = {sparse_dim}, dense_dim = {dense_dim}"
        )
    if tuple(size[sparse_dim:]) != tuple(values.shape[1:]):
        raise RuntimeError(
            f"values has incorrect size, expected {[values.shape[0], *size[sparse_dim:]]}, got {list(values.shape)}"
        )
    _check_bounds(indices, size)
    if requires_grad:
        values = values.detach().requires_grad_()
    elif values.requires_grad:
        values = values.view(values.shape)  # a node of its own: the sparse tensor is not the values' leaf
    coalesced = indices.shape[1] <= 1 if is_coalesced is None else bool(is_coalesced)  # torch's default
    return SparseCOO._of(indices, values, Size(size), coalesced)


def _strides(shape):
    return [math.prod(shape[d + 1 :]) for d in range(len(shape))]


def linear_index(s):
    """Each element's position in the flattened sparse dimensions (an int64 tensor of nnz entries)."""
    sparse_shape = s.shape[: s.sparse_dim()]
    strides = tensor(_strides(sparse_shape), dtype=_dtypes.int64)
    return (s._coo_indices * strides.unsqueeze(1)).sum(0)


def to_dense(self, dtype=None, *, masked_grad=None):
    """The dense tensor with the values summed at their indices (zeros elsewhere); differentiable in the values, whose
    gradient is the dense gradient read at the indices (torch's masked_grad=True; masked_grad=False, the whole
    gradient, where that is the same: every element specified). A dense tensor: itself, or converted to `dtype`."""
    if masked_grad is not None and not isinstance(masked_grad, bool):
        raise TypeError(f"to_dense(): argument 'masked_grad' must be bool, not {type(masked_grad).__name__}")
    if not isinstance(self, SparseCOO):
        return self if dtype is None or _dtypes.to_dtype(dtype) is self.dtype else self.to(dtype)
    if masked_grad is False and not every_element_specified(self):
        raise RuntimeError(
            "to_dense(masked_grad=False) is provided for a sparse tensor that specifies every element only: a sparse "
            "tensor's gradient here always has its indices (masked_grad=True)"
        )
    if dtype is not None:
        raise RuntimeError("dtype argument is not supported by sparse_to_dense")
    sparse_shape, dense_shape = self.shape[: self.sparse_dim()], self.shape[self.sparse_dim() :]
    flat = zeros((math.prod(sparse_shape), *dense_shape), dtype=self.dtype, device=self.device)
    return _ops.index_add(flat, 0, linear_index(self), self._coo_values).reshape(self.shape)


def every_element_specified(s):
    """Whether each position of the sparse dimensions of `s` is among its indices: its gradient at its indices is
    then the whole gradient (masked and non-masked semantics agree)."""
    return coalesce(s.detach())._nnz() == math.prod(s.shape[: s.sparse_dim()])


def coalesce(self):
    """The same tensor with sorted, unique indices (duplicates' values summed); itself if already coalesced."""
    if self._coalesced:
        return self
    sparse_shape = tuple(self.shape[: self.sparse_dim()])
    host = _host_indices(self._coo_indices)
    if host is None:
        raise RuntimeError("coalesce() reads the indices, which a transform is tracing here")
    flat = np.ravel_multi_index(tuple(host), sparse_shape) if host.shape[1] else np.zeros(0, np.int64)
    unique, inverse = np.unique(flat, return_inverse=True)
    indices = tensor(np.stack(np.unravel_index(unique, sparse_shape)).reshape(len(sparse_shape), -1))
    values = self._coo_values
    summed = zeros((len(unique), *values.shape[1:]), dtype=values.dtype, device=values.device)
    summed = _ops.index_add(summed, 0, tensor(inverse.reshape(-1), dtype=_dtypes.int64), values)
    return SparseCOO._of(indices.to(_dtypes.int64), summed, self.shape, coalesced=True)


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """This tensor in COO form (coalesced): the positions of the first `sparse_dim` dimensions (all by default)
    whose slices have a nonzero element, with those slices as values."""
    if layout is not None and layout is not sparse_coo or blocksize is not None or dense_dim is not None:
        raise RuntimeError(
            f"to_sparse(): only the COO layout is provided (layout=torch.sparse_coo, no blocksize or dense_dim); got "
            f"layout={layout!r}, blocksize={blocksize!r}, dense_dim={dense_dim!r}"
        )
    if isinstance(self, SparseCOO):
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError(
                "to_sparse: conversion from Sparse to Sparse with sparse_dim argument !=self.sparse_dim() is not "
                "supported"
            )
        return coalesce(self)
    sparse_dim = self.ndim if sparse_dim is None else sparse_dim
    if sparse_dim == 0 and self.ndim:
        raise RuntimeError("dense_to_sparse: sparse_dim argument must be in >0 when self.dim()>0")
    if not 0 <= sparse_dim <= self.ndim:
        raise RuntimeError(
            f"dense_to_sparse: sparse_dim argument must be in [0,{self.ndim}] range, but {sparse_dim} is given"
        )
    host = np.asarray(self.detach()._value) != 0
    present = host.reshape(host.shape[:sparse_dim] + (-1,)).any(axis=-1) if sparse_dim < self.ndim else host
    where = np.nonzero(present) if sparse_dim else ()
    indices = tensor(np.stack(where) if where else np.zeros((0, 1), np.int64), dtype=_dtypes.int64)
    values = self[tuple(tensor(w, dtype=_dtypes.int64) for w in where)] if sparse_dim else self.unsqueeze(0)
    return SparseCOO._of(indices, values, self.shape, coalesced=True)


def to_sparse_coo(self):
    """to_sparse() with the COO layout."""
    return to_sparse(self)
