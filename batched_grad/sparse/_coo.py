"""The sparse COO tensor: an int64 `indices` tensor (sparse_dim x nnz), a `values` tensor (nnz x the dense dims) and a
size. Its autograd identity is its values tensor: requires_grad, grad_fn and .grad are the values', so gradients reach
a sparse tensor through the ordinary engine and come back with its pattern."""

import numpy as np

from .. import _dtypes
from .._factories import tensor
from .._format import PRINT_OPTS, _value_suffixes, _values_body, autograd_suffixes
from .._layout_types import sparse_coo
from .._meta import SPARSE_NOT_PROVIDED, NoDenseValue
from .._subclass import disabled_torch_function_impl
from .._tensor import INCOMPATIBLE_SET_DATA, Size, Tensor


class SparseCOO(Tensor):
    """A sparse tensor in COO form (torch.sparse_coo): construct it with sparse_coo_tensor or Tensor.to_sparse."""

    __slots__ = ("_coo_indices", "_coo_values", "_coalesced")
    __torch_function__ = staticmethod(disabled_torch_function_impl)

    @classmethod
    def _of(cls, indices, values, size, coalesced=False):
        """The sparse tensor of `indices` (int64, sparse_dim x nnz), `values` (nnz x dense dims) and `size`, as they
        are (the caller checked them)."""
        t = cls._wrap(NoDenseValue(size, values._v.dtype))
        t._coo_indices, t._coo_values, t._coalesced = indices, values, bool(coalesced)
        return t

    def __new__(cls, *args, **kwargs):
        raise TypeError("sparse COO tensors are made with sparse_coo_tensor(indices, values, size) or .to_sparse()")

    # ---- metadata -------------------------------------------------------------------------------
    @property
    def _value(self):
        raise RuntimeError(SPARSE_NOT_PROVIDED)

    @property
    def _held(self):
        raise RuntimeError(SPARSE_NOT_PROVIDED)

    @property
    def device(self):
        """The device holding the values."""
        return self._coo_values.device

    @property
    def layout(self):
        """torch.sparse_coo."""
        return sparse_coo

    @property
    def is_sparse(self):
        """True: a sparse COO tensor."""
        return True

    def sparse_dim(self):
        """The number of sparse dimensions (the rows of indices)."""
        return self._coo_indices.shape[0]

    def dense_dim(self):
        """The number of dense dimensions (the values' dimensions after the first)."""
        return self._coo_values.ndim - 1

    def _nnz(self):
        """The number of specified elements (the indices' columns; duplicates count until coalesced)."""
        return self._coo_indices.shape[1]

    _dimI, _dimV = sparse_dim, dense_dim  # torch's older names

    def is_coalesced(self):
        """Whether the indices are known sorted and free of duplicates."""
        return self._coalesced

    def _coalesced_(self, coalesced):
        """Mark the tensor coalesced or not, in place, without checking its indices (the caller knows them sorted
        and unique); returns the tensor."""
        if type(coalesced) is not bool:
            raise TypeError(
                f"_coalesced_(): argument 'coalesced' (position 1) must be bool, not {type(coalesced).__name__}"
            )
        self._coalesced = coalesced
        return self

    def _indices(self):
        """The indices tensor, also of an uncoalesced tensor."""
        return self._coo_indices

    def _values(self):
        """The values tensor, also of an uncoalesced tensor: outside the graph, as torch's (values() of a coalesced
        tensor is differentiable)."""
        return self._coo_values.detach()

    def indices(self):
        """The indices of a coalesced tensor."""
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._coo_indices

    def values(self):
        """The values of a coalesced tensor (differentiable)."""
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._coo_values.view(self._coo_values.shape)

    # ---- autograd metadata: the values' -------------------------------------------------------------
    @property
    def requires_grad(self):
        """Whether gradients are computed for the values."""
        return self._coo_values.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self._coo_values.requires_grad = flag

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad on this leaf's values in place and return the sparse tensor."""
        self._coo_values.requires_grad_(requires_grad)
        return self

    def _requires_grad_(self, requires_grad=True):
        self._coo_values._requires_grad_(requires_grad)
        return self

    @property
    def grad_fn(self):
        """The node that made the values (None for a leaf)."""
        return self._coo_values.grad_fn

    @property
    def _grad_fn(self):
        return self._coo_values.grad_fn

    @property
    def grad(self):
        """The accumulated gradient: a sparse tensor with this tensor's indices, None until backward() reaches it."""
        g = self._coo_values.grad
        return None if g is None else sparse_gradient(self, g)

    @grad.setter
    def grad(self, value):
        if value is not None and not (
            isinstance(value, SparseCOO) and value.shape == self.shape and _same_pattern(value, self)
        ):
            raise RuntimeError(
                "a sparse tensor's .grad can be set to None or to a sparse tensor of its size with its indices, "
                f"but got {_described(value)}"
            )
        self._coo_values.grad = None if value is None else value._coo_values

    @grad.deleter
    def grad(self):
        self._coo_values.grad = None

    def register_hook(self, hook):
        """hook(grad) -> Tensor or None runs when this tensor's gradient (sparse, with its indices) is computed; a
        returned sparse tensor of its size and dtype replaces the gradient at its indices."""
        from .._hooks import _checked
        from ._autograd import values_gradient

        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")

        def on_values(values_grad):
            grad = None if values_grad is None else sparse_gradient(self, values_grad)
            result = hook(grad)
            if result is None:
                return None
            if isinstance(result, Tensor) and grad is not None and result.type() != grad.type():  # layout and dtype
                raise RuntimeError(
                    f"hook '{on_values.__name__}' has changed the type of value (was {grad.type()} got {result.type()})"
                )
            return values_gradient(self, _checked(hook, result, grad))

        on_values.__name__ = getattr(hook, "__name__", "<unknown>")  # the hook errors name the user's hook
        return self._coo_values.register_hook(on_values)

    def retain_grad(self):
        """Keep the gradient of this non-leaf's values, read through .grad."""
        self._coo_values.retain_grad()

    @property
    def retains_grad(self):
        return self._coo_values.retains_grad

    def detach(self):
        """The same indices and values, outside the graph."""
        return SparseCOO._of(self._coo_indices, self._coo_values.detach(), self.shape, self._coalesced)

    def numpy(self, *, force=False):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def tolist(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def item(self):
        """The one element's value, as a Python number."""
        return self.to_dense().item()

    def __bool__(self):
        return bool(self.to_dense())

    @property
    def data(self):
        """The same indices and values outside the graph (the values' .data)."""
        return SparseCOO._of(self._coo_indices, self._coo_values.data, self.shape, self._coalesced)

    @data.setter
    def data(self, other):
        if not isinstance(other, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(other).__name__}")
        if not isinstance(other, SparseCOO):
            raise RuntimeError(INCOMPATIBLE_SET_DATA)
        self._coo_values.data = other._coo_values
        self._v = NoDenseValue(other.shape, other._coo_values._v.dtype)
        self._coo_indices, self._coalesced = other._coo_indices, other._coalesced

    @property
    def T(self):
        """The transpose of a tensor of at most 2 dimensions."""
        return self.t()

    def type(self, dtype=None, non_blocking=False):
        """The type name (torch.sparse.FloatTensor, ...) without `dtype`; with one, the tensor with values of it."""
        if dtype is None:
            return f"torch.sparse.{self.dtype.type_name}Tensor"
        return self.to(dtype)

    def __reduce_ex__(self, protocol):
        return _rebuild, (self._coo_indices, self._coo_values.detach(), tuple(self.shape), self._coalesced)

    def __deepcopy__(self, memo):
        import copy

        return SparseCOO._of(
            copy.deepcopy(self._coo_indices, memo),
            copy.deepcopy(self._coo_values.detach(), memo).requires_grad_(self.requires_grad and self.is_leaf),
            self.shape,
            self._coalesced,
        )

    def __repr__(self):
        return format_sparse(self)

    __str__ = __repr__


def sparse_gradient(s, values_grad):
    """The gradient of `s` as torch gives it, from its values' gradient: on s's indices, each position once (sorted,
    where s is not coalesced). Every op reads a sparse tensor as the dense tensor it stands for, so the entries that
    share a position have one gradient."""
    if s._coalesced:
        return SparseCOO._of(s._coo_indices, values_grad, s.shape, True)
    host = np.asarray(s._coo_indices.detach()._value)
    sparse_shape = tuple(s.shape[: s.sparse_dim()])
    flat = np.ravel_multi_index(tuple(host), sparse_shape) if host.size else np.zeros(host.shape[1], np.int64)
    unique, first = np.unique(flat, return_index=True)
    positions = tensor(first.astype(np.int64))
    indices = tensor(np.stack(np.unravel_index(unique, sparse_shape)).reshape(len(sparse_shape), -1).astype(np.int64))
    return SparseCOO._of(indices, values_grad.index_select(0, positions), s.shape, False)


def _rebuild(indices, values, size, coalesced):
    return SparseCOO._of(indices, values, Size(size), coalesced)


def _same_pattern(a, b):
    ia, ib = a._coo_indices, b._coo_indices
    return ia.shape == ib.shape and bool((ia == ib).all())


def _described(value):
    if isinstance(value, SparseCOO):
        return f"a sparse tensor of size {list(value.shape)} with other indices"
    if isinstance(value, Tensor):
        return f"a dense tensor of size {list(value.shape)}"
    return type(value).__name__


def _part(prefix, t, indent):
    """'indices=tensor(...)' or 'values=tensor(...)' as torch prints it inside a sparse tensor's repr."""
    body = _values_body(t.detach()._value, t.dtype, indent + len(prefix))
    if t.numel() == 0:
        body += f", size={tuple(t.shape)}"
    return prefix + body + ")"


def format_sparse(t):
    """repr(t) as torch prints a sparse COO tensor."""
    indent = len("tensor(")
    out = (
        "tensor("
        + _part("indices=tensor(", t._coo_indices, indent)
        + ",\n"
        + " " * indent
        + _part("values=tensor(", t._coo_values, indent)
    )
    default = _dtypes.get_default_dtype()
    dtype = [f"dtype={t.dtype!r}"] if _value_suffixes((1,), t.dtype, default) else []
    suffixes = [f"size={tuple(t.shape)}", f"nnz={t._nnz()}", *dtype, "layout=torch.sparse_coo", *autograd_suffixes(t)]
    last_line, force_newline = len(out) - out.rfind("\n") + 1, True
    for s in suffixes:
        if force_newline or last_line + len(s) + 2 > PRINT_OPTS.linewidth:
            out += ",\n" + " " * indent + s
            last_line, force_newline = indent + len(s), False
        else:
            out += ", " + s
            last_line += len(s) + 2
    return out + ")"
