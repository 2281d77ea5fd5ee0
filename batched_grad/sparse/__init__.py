"""torch.sparse for COO tensors: the sparse products and reductions, and the layout's constructors."""

import warnings

import numpy as np

from .. import _dtypes
from .._factories import zeros
from .._layout_types import sparse_coo, strided
from .._ops import _CONVERSIONS
from .._ops._public import SPARSE_DISPATCHED, SPARSE_VALUEWISE
from .._tensor import Tensor
from . import _math
from ._construct import check_sparse_tensor_invariants, coalesce, sparse_coo_tensor, to_dense, to_sparse, to_sparse_coo
from ._coo import SparseCOO
from ._math import addmm, log_softmax, mm, softmax

__all__ = [
    "addmm",
    "check_sparse_tensor_invariants",
    "log_softmax",
    "mm",
    "softmax",
    "sum",
    "FloatTensor",
    "DoubleTensor",
    "LongTensor",
]


def sum(input, dim=None, dtype=None):  # noqa: A001  (torch.sparse's name)
    """The sum of a sparse tensor's elements (a dense 0-dim tensor), or over `dim` (sparse while sparse dimensions
    remain)."""
    if not isinstance(input, SparseCOO):
        raise RuntimeError("coalesce expected sparse coordinate tensor layout but got Strided")
    return _math.sparse_sum(input, dim, dtype=dtype)


def spmm(input, mat2):
    """input @ mat2 with either sparse (torch.spmm; dense operands give their dense product)."""
    return _math.mm(input, mat2)


_LEGACY_DEPRECATED = (
    "torch.sparse.SparseTensor({}*, device=) is deprecated.  Please use torch.sparse_coo_tensor({}dtype=, device=)."
)


_LEGACY_WARNED = set()  # torch gives each form's deprecation once per process


def _warn_legacy(form):
    if form not in _LEGACY_WARNED:
        _LEGACY_WARNED.add(form)
        warnings.warn(_LEGACY_DEPRECATED.format(form, form), UserWarning, stacklevel=3)


def _legacy(dtype):
    def construct(*args):
        if len(args) in (2, 3) and all(isinstance(a, Tensor) for a in args[:2]):
            _warn_legacy("indices, values, shape, " if len(args) == 3 else "indices, values, ")
            size = args[2] if len(args) == 3 else None
            # the values keep their dtype, as torch's; the legacy form does not give the invariants' notice
            return sparse_coo_tensor(args[0], args[1], size, check_invariants=False)
        if all(isinstance(n, int) for n in args):
            _warn_legacy("shape, ")
            empty = np.zeros((len(args), 0), np.int64)
            return sparse_coo_tensor(empty, zeros(0, dtype=dtype), args, check_invariants=False)
        raise TypeError(
            f"torch.sparse.{dtype.type_name}Tensor() takes (indices, values[, size]) or sizes (ints), but got "
            f"({', '.join(type(a).__name__ for a in args)})"
        )

    construct.__name__ = construct.__qualname__ = f"{dtype.type_name}Tensor"
    construct.__doc__ = f"torch.sparse's legacy constructor of {dtype!r} COO tensors: (indices, values[, size])."
    return construct


FloatTensor = _legacy(_dtypes.float32)
DoubleTensor = _legacy(_dtypes.float64)
LongTensor = _legacy(_dtypes.int64)


def _layout(self):
    return strided


def _dense_sparse_dim(self):
    """0: a dense tensor has no sparse dimensions."""
    return 0


def _dense_dense_dim(self):
    """The number of dimensions: all of a dense tensor's are dense."""
    return self.ndim


def _sparse_only(name, kind="sparse coordinate tensor"):
    def method(self):
        raise RuntimeError(f"{name} expected {kind} layout but got Strided")

    method.__name__ = name
    method.__doc__ = f"A sparse tensor's {name}() (a dense tensor raises, as torch's)."
    return method


def _sparse_operator(name):
    def method(self, *args):
        raise NotImplementedError(
            f"Could not run 'aten::{name}' with arguments from the '{self.device.type.upper()}' backend: it is an "
            "operator of sparse tensors, and this tensor is dense (layout torch.strided)"
        )

    method.__name__ = name
    method.__doc__ = f"A sparse tensor's {name}() (a dense tensor raises, as torch's)."
    return method


# the module functions (torch.mm, torch.add, ...) that take a sparse operand: their sparse forms
SPARSE_FUNCTIONS = {
    "mm": _math.mm,
    "matmul": _math.matmul,
    "addmm": _math.addmm,
    "add": _math.add,
    "sub": _math.sub,
    "mul": _math.mul,
    "div": _math.div,
    "pow": _math.pow,
    "t": _math.t,
    "transpose": _math.transpose,
    "sum": _math.sparse_sum,
    "clone": _math.clone,
    **{name: _math.valuewise(name) for name in SPARSE_VALUEWISE},
}
if set(SPARSE_FUNCTIONS) != SPARSE_DISPATCHED:
    raise ImportError(f"sparse forms missing for {sorted(SPARSE_DISPATCHED - set(SPARSE_FUNCTIONS))}")
# the sparse tensor's own forms of Tensor's methods (a dense op on it says the op is not provided)
SPARSE_METHODS = {
    **SPARSE_FUNCTIONS,
    "coalesce": coalesce,
    "sparse_mask": _math.sparse_mask,
    "to_dense": to_dense,
    "to_sparse": to_sparse,
    "to_sparse_coo": to_sparse_coo,
    "__matmul__": _math.matmul,
    "__rmatmul__": lambda self, other: _math.matmul(other, self),
    "__add__": _math.add,
    "__radd__": _math.radd,
    "__sub__": _math.sub,
    "__rsub__": lambda self, other: _math.sub(other, self),
    "__mul__": _math.mul,
    "__rmul__": _math.mul,
    "__truediv__": _math.div,
    "__neg__": SPARSE_FUNCTIONS["neg"],
    "__pow__": _math.pow,
    "to": _math.to,
    "copy_": _math.copy_,
    "cpu": lambda self: _math.to(self, "cpu"),
    "cuda": lambda self, device=None, non_blocking=False: _math.to(self, "cuda" if device is None else device),
    **{name: _math.cast(dtype) for name, dtype in _CONVERSIONS.items()},
}
# the dense tensor's methods of the sparse layout
DENSE_METHODS = {
    "to_dense": to_dense,
    "to_sparse": to_sparse,
    "to_sparse_coo": to_sparse_coo,
    "sparse_mask": _math.sparse_mask,
    "layout": property(_layout, doc="The memory layout: torch.strided for a dense tensor."),
    "is_sparse": property(lambda self: False, doc="False: a dense (strided) tensor."),
    "sparse_dim": _dense_sparse_dim,
    "dense_dim": _dense_dense_dim,
    **{name: _sparse_only(name) for name in ("coalesce", "is_coalesced", "indices")},
    "values": _sparse_only("values", "sparse tensor"),
    **{name: _sparse_operator(name) for name in ("_indices", "_values", "_nnz", "_coalesced_", "_dimI", "_dimV")},
}

for _name, _fn in SPARSE_METHODS.items():
    setattr(SparseCOO, _name, _fn)
for _name, _fn in DENSE_METHODS.items():
    setattr(Tensor, _name, _fn)
SparseCOO._sparse_forms = SPARSE_FUNCTIONS
