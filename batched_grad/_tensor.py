"""Tensor: a JAX array plus autograd metadata (requires_grad, grad, grad_fn, version, view base)."""
import warnings
import weakref

import jax
import numpy as np

from . import _dtypes, _graph
from ._grad_mode import is_grad_enabled

_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
               "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
               "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}

NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't "
    "be populated during autograd.backward(). If you indeed want the .grad field to be populated for a "
    "non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
    "mistake, make sure you access the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for "
    "more information."
)
LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
REQUIRES_GRAD_DTYPE = "Only Tensors of floating point and complex dtype can require gradients"


def type_name(np_dtype):
    return f"torch.{_TYPE_NAMES[_dtypes.from_numpy_dtype(np_dtype).name]}Tensor"


class Size(tuple):
    """A tensor shape: a tuple that prints like torch.Size."""

    def __repr__(self):
        return f"torch.Size({list(self)})"

    def numel(self):
        return int(np.prod(self, dtype=np.int64))


class Tensor:
    """An n-dimensional array (a JAX array) that records the operations applied to it."""

    __slots__ = ("_value", "_requires_grad", "grad_fn", "_output_nr", "_grad", "_version", "_view", "_views",
                 "_hooks", "_retains_grad", "_accumulator", "__weakref__")
    __array_priority__ = 1000  # NumPy defers binary operators to Tensor

    @classmethod
    def _wrap(cls, value, grad_fn=None, output_nr=0, requires_grad=False):
        t = object.__new__(cls)
        t._value, t.grad_fn, t._output_nr = value, grad_fn, output_nr
        t._requires_grad = requires_grad
        t._grad = t._view = t._views = t._hooks = t._accumulator = None
        t._retains_grad = False
        t._version = _graph.VersionCounter()
        return t

    def __init__(self, *args, **kwargs):
        raise TypeError("create tensors with batched_grad.tensor(data), not Tensor(...)")

    # ---- metadata -------------------------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._value.shape)

    @property
    def dtype(self):
        return _dtypes.from_numpy_dtype(self._value.dtype)

    @property
    def ndim(self):
        return self._value.ndim

    @property
    def device(self):
        return "cpu" if isinstance(self._value, jax.core.Tracer) else str(next(iter(self._value.devices())))

    def size(self, dim=None):
        return self.shape if dim is None else self._value.shape[_wrap_dim(dim, self.ndim)]

    def dim(self):
        return self.ndim

    def numel(self):
        return int(np.prod(self._value.shape, dtype=np.int64))

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._value.shape[0]

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def is_complex(self):
        return self.dtype.is_complex

    def element_size(self):
        return self.dtype.itemsize

    # ---- autograd metadata ----------------------------------------------------------------------
    @property
    def requires_grad(self):
        return self.grad_fn is not None or self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        if self.grad_fn is not None:
            if not flag:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                    "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
                )
            return
        if flag and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError(REQUIRES_GRAD_DTYPE)
        self._requires_grad = bool(flag)

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def grad(self):
        if self.grad_fn is not None and not self._retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(f"assigned grad has data of a different size: expected {list(self.shape)}, got {list(value.shape)}")
        self._grad = value

    @property
    def retains_grad(self):
        return self._retains_grad

    def retain_grad(self):
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is not None and not self._retains_grad:
            self._retains_grad = True
            self._register_retain()
        return None

    def _register_retain(self):
        node = self.grad_fn
        if node.retained is None:
            node.retained = {}
        node.retained[self._output_nr] = weakref.ref(self)

    def register_hook(self, hook):
        """hook(grad) -> Tensor or None runs when this tensor's gradient is computed."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return _graph.add_hook(self.grad_fn.pre_hooks_for(self._output_nr), hook)
        if self._hooks is None:
            self._hooks = {}
        return _graph.add_hook(self._hooks, hook)

    @property
    def _version_value(self):
        return self._version.value

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaves) into the leaves' `.grad` (see batched_grad.autograd.backward)."""
        from .autograd import backward

        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self):
        t = Tensor._wrap(self._value)
        t._version = self._version
        return t

    def detach_(self):
        if self._view is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self.grad_fn, self._output_nr, self._requires_grad = None, 0, False
        return self

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, other):
        self._value = other._value

    # ---- in place ----------------------------------------------------------------------------------
    def _check_inplace(self):
        if self.grad_fn is None and self._requires_grad and is_grad_enabled():
            raise RuntimeError(LEAF_INPLACE)

    def _assign(self, result):
        """Make `self` hold `result` (an out-of-place result of the in-place op); update views and version."""
        self._check_inplace()
        if result.shape != self.shape:
            raise RuntimeError(
                f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(result.shape)}"
            )
        if result.dtype is not self.dtype:
            if _dtypes.category(result.dtype) > _dtypes.category(self.dtype):
                raise RuntimeError(
                    f"result type {_TYPE_NAMES[result.dtype.name]} can't be cast to the desired output type "
                    f"{_TYPE_NAMES[self.dtype.name]}"
                )
            result = result.to(self.dtype)
        if self._view is not None:
            from ._ops.shape import scatter_into_view

            base, chain = self._view
            base._rebind(scatter_into_view(base, result, chain))
            self._rebind(result)
            base._refresh_views(skip=self)
        else:
            self._rebind(result)
            self._refresh_views(skip=None)
        self._version.value += 1
        if result.grad_fn is not None:
            result.grad_fn.keep_saved_versions(self._version)
        return self

    def _rebind(self, src):
        """Take `src`'s value; with grad mode on also its place in the graph (off: the value changes silently)."""
        self._value = src._value
        if is_grad_enabled() and (src.grad_fn is not None or self.grad_fn is not None):
            self.grad_fn, self._output_nr = src.grad_fn, src._output_nr
            if self._retains_grad and self.grad_fn is not None:
                self._register_retain()

    def _refresh_views(self, skip):
        from ._ops.shape import replay_view

        for ref in self._views or ():
            view = ref()
            if view is not None and view is not skip:
                view._rebind(replay_view(self, view._view[1]))

    # ---- conversion ---------------------------------------------------------------------------------
    def jax(self):
        """The underlying JAX array."""
        return self._value

    def numpy(self, *, force=False):
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        return np.asarray(self._value)

    def __array__(self, dtype=None, copy=None):
        a = np.asarray(self._value)
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        return np.asarray(self._value).tolist()

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return np.asarray(self._value).reshape(()).item()

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.dtype.is_complex or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __complex__(self):
        return complex(self.item())

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self):
        return id(self)

    def __format__(self, spec):
        return format(self.item(), spec) if self.ndim == 0 else repr(self)

    def __repr__(self):
        return _format(self)

    __str__ = __repr__


def _wrap_dim(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def _format(t):
    if isinstance(t._value, jax.core.Tracer):
        body = f"<traced {t.dtype.name}{list(t.shape)}>"
    else:
        body = _format_values(np.asarray(t._value))
    extras = []
    if t.dtype not in (_dtypes.get_default_dtype(), _dtypes.int64, _dtypes.bool) or (t.numel() == 0 and t.dtype is not _dtypes.get_default_dtype()):
        extras.append(f"dtype={t.dtype!r}")
    if t.numel() == 0 and t.ndim != 1:
        extras.insert(0, f"size={tuple(t.shape)}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + ", ".join([body] + extras) + ")"


def _format_values(a):
    if a.dtype.kind == "f" or a.dtype.kind == "c" or a.dtype == np.dtype("bfloat16"):
        a = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        finite = np.abs(a[np.isfinite(a)]) if a.size else np.zeros(0)
        if a.dtype.kind == "f" and finite.size and np.all(finite == np.round(finite)) and finite.max() < 1e8:
            fmt = lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)
        elif finite.size and (finite.max() >= 1e8 or (finite[finite > 0].size and finite.max() / max(finite[finite > 0].min(), 1e-300) > 1000)):
            fmt = lambda v: f"{v:.4e}"
        else:
            fmt = lambda v: f"{v:.4f}"
        formatter = {"float_kind": fmt, "complex_kind": lambda v: f"{fmt(v.real)}{'+' if v.imag >= 0 else '-'}{fmt(abs(v.imag))}j"}
    elif a.dtype.kind == "b":
        formatter = {"bool": lambda v: "True" if v else "False"}
    else:
        formatter = None
    return np.array2string(a, separator=", ", formatter=formatter, prefix="tensor(", threshold=1000)
