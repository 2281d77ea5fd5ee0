"""Tensor: a JAX array plus autograd metadata (requires_grad, grad, grad_fn, version, view base)."""

import copy
import math
import numbers
import operator
import sys
import warnings

import jax
import numpy as np

from . import _dtypes, _graph, _subclass
from ._format import format_tensor
from ._grad_dtype import AS_DTYPE, get_grad_dtype, grad_dtype_of, set_grad_dtype
from ._grad_mode import _check_bool, is_recording
from ._host import fits, is_shared, read_before, share, to_device, unshared
from ._inference import NO_VERSION, check_requires_grad, counter_like, is_inference
from ._inplace import DETACH, LEAF_INPLACE, VIEW_OF_LEAF_INPLACE, InPlace, _ops_of, remember_view  # noqa: F401
from ._lazy import Pending, materialize
from ._meta import COPY_ERROR, ITEM_ERROR, NUMPY_ERROR, MetaValue, rebuild_meta
from ._tracing import ValueRead, compiling, is_tracer
from ._transform_levels import REQUIRES_GRAD_INSIDE, RETAIN_GRAD_INSIDE, in_transform
from ._view_meta import check_view_creation, grad_fn_unavailable, requires_grad_through_base
from ._vmap_levels import VMAP_CONTROL_FLOW, VMAP_ITEM, is_batched

_PLATFORM_DEVICES = {"cpu": "cpu", "gpu": "cuda", "cuda": "cuda", "rocm": "cuda", "tpu": "xla", "METAL": "mps"}

NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't "
    "be populated during autograd.backward(). If you indeed want the .grad field to be populated for a "
    "non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
    "mistake, make sure you access the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for "
    "more information."
)
REQUIRES_GRAD_DTYPE = "Only Tensors of floating point and complex dtype can require gradients"
NON_LEAF_REQUIRES_GRAD = "you can only change requires_grad flags of leaf variables."
NON_LEAF_NO_GRAD = (
    NON_LEAF_REQUIRES_GRAD + " If you want to use a computed variable in a subgraph that doesn't "
    "require differentiation use var_no_grad = var.detach()."
)
DETACH_VIEW = (
    "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) for "
    "training, and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and hence "
    "detach_() cannot be called on these gradients. To fix this error, please refer to the Optimizer.zero_grad() "
    "function in torch/optim/optimizer.py as the solution."
)
GRAD_DTYPE = (
    "attempting to assign a gradient with dtype '{}' to a tensor with grad_dtype '{}'. The gradient must match the "
    "tensor's grad_dtype (defaults to the tensor's dtype). You can set the tensor's grad_dtype attribute with a "
    "specific dtype, or None to allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and "
    "its gradient may break downstream systems that assume they match."
)
SCALAR_REQUIRES_GRAD = (
    "Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
    "Consider using tensor.detach() first."
)
_UNDELETABLE = {  # torch's errors for `del tensor.<name>` (the properties' deleters)
    "data": "Deleting tensor data is not allowed. Delete tensor instead!",
    "requires_grad": "requires_grad must be a bool",
    "_grad_fn": "Deletion of _grad_fn not allowed. Detach tensor instead!",
    "_backward_hooks": "Deletion of _backwards_hooks not allowed!",
}
INCOMPATIBLE_SET_DATA = (
    "Attempted to call `variable.set_data(tensor)`, but `variable` and `tensor` have incompatible tensor type."
)
_NOT_WRITABLE = "attribute '{}' of 'Tensor' objects is not writable"
_warned = set()
_warn_always = [False]


def warn_once(message, stacklevel=3, key=None):
    """torch's TORCH_WARN_ONCE: each message (or each `key`, where one call site warns with several messages) at
    most once per process, or every time while set_warn_always(True); stacklevel None attributes it to the user's
    line, as warn_at_caller does."""
    key = message if key is None else key
    if _warn_always[0] or key not in _warned:
        _warned.add(key)
        if stacklevel is None:
            warn_at_caller(message)
        else:
            warnings.warn(message, UserWarning, stacklevel=stacklevel)


_PACKAGE = __file__.rsplit("/", 1)[0] + "/"


def warn_at_caller(message, once=False, key=None):
    """torch's TORCH_WARN (TORCH_WARN_ONCE with `once`, per message or per `key`), as a UserWarning attributed to
    the first frame outside batched_grad (the user's line, however many of the package's frames lie between)."""
    key = message if key is None else key
    if once and not _warn_always[0] and key in _warned:
        return
    _warned.add(key)
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


def warn_once_at_caller(message):
    """warn_once's once per process (or always, under set_warn_always(True)), attributed as warn_at_caller's."""
    if _warn_always[0] or message not in _warned:
        _warned.add(message)
        warn_at_caller(message)


def set_warn_always(b):
    """With True, the warnings given once per process (such as backward's create_graph warning) are given every
    time; False restores the default."""
    if type(b) is not bool:
        raise RuntimeError(f"setWarnOnlyOnce expects a bool, but got {type(b).__name__}")
    _warn_always[0] = b


def is_warn_always_enabled():
    """Whether set_warn_always(True) is in effect."""
    return _warn_always[0]


def python_type_name(value):
    """The type of `value` as torch's messages name it (CPython's tp_name): `float`, `numpy.ndarray`, or a class
    made in Python by its name alone."""
    kind = type(value)
    if kind.__module__ == "builtins" or kind.__flags__ & (1 << 9):  # Py_TPFLAGS_HEAPTYPE: a class made in Python
        return kind.__name__
    return f"{kind.__module__}.{kind.__name__}"


DEEPCOPY_SUBCLASS = (
    "The default implementation of __deepcopy__() for non-wrapper subclasses only works for subclass types that "
    "implement new_empty() and for which that function returns another instance of the same subclass. You should "
    "either properly implement new_empty() for your subclass or override __deepcopy__() if it is intended behavior "
    "for new_empty() to return an instance of a different type."
)
DEEPCOPY_NON_LEAF = (
    "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the moment.  If you "
    "were attempting to deepcopy a module, this may be because of a torch.nn.utils.weight_norm usage, see "
    "https://github.com/pytorch/pytorch/pull/103001"
)


def type_name(np_dtype):
    return f"torch.{_dtypes.from_numpy_dtype(np_dtype).type_name}Tensor"


_LEGACY_TENSOR_TYPES = {"Double", "Float", "Half", "Long", "Int", "Short", "Char", "Byte"}


def type_string(np_dtype):
    """How torch's C++ messages name a CPU tensor's type: the legacy class where one exists (torch.FloatTensor),
    CPUBoolType and the like otherwise."""
    name = _dtypes.from_numpy_dtype(np_dtype).type_name
    return f"torch.{name}Tensor" if name in _LEGACY_TENSOR_TYPES else f"CPU{name}Type"


class Size(tuple):
    """A tensor shape: a tuple that prints like torch.Size. Its entries are Python ints, read from anything with
    __index__ (an integer tensor of one element too) as torch reads them."""

    def __new__(cls, sizes=()):
        sizes = sizes if type(sizes) is tuple else tuple(sizes)
        try:
            return tuple.__new__(cls, map(operator.index, sizes))  # one C pass: every .shape read makes a Size
        except TypeError:
            return tuple.__new__(cls, [_size_entry(i, s) for i, s in enumerate(sizes)])  # raises torch's error

    def __repr__(self):
        return f"torch.Size({list(self)})"

    def numel(self):
        """The number of elements of a tensor of this shape."""
        return math.prod(self)


def _size_entry(position, value):
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"torch.Size() takes an iterable of 'int' (item {position} is '{type(value).__name__}')"
        ) from None


_TORCH_DEVICES = (
    "cpu",
    "cuda",
    "ipu",
    "xpu",
    "mkldnn",
    "opengl",
    "opencl",
    "ideep",
    "hip",
    "ve",
    "fpga",
    "maia",
    "xla",
    "lazy",
    "vulkan",
    "mps",
    "meta",
    "hpu",
    "mtia",
    "privateuseone",
)


_default_device = [None]  # set_default_device's device (None: JAX's default backend)
_device_blocks = []  # the devices of the `with device(...)` blocks running, innermost last


def default_device():
    """The device factories make tensors on when given none: the innermost `with device(...)` block's, else
    set_default_device's; None for JAX's default backend."""
    return _device_blocks[-1] if _device_blocks else _default_device[0]


class device:
    """Where a tensor lives, printed like torch: device(type='cpu'), str() 'cpu'. As a context manager, the device
    of the factories called in its block (torch's: `with device("meta"):` builds a module without values)."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        elif index is None and ":" in type:  # "cuda:0"
            name, _, number = type.partition(":")
            if not number.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            type, index = name, int(number)
        if type not in _TORCH_DEVICES:
            raise RuntimeError(
                f"Expected one of {', '.join(_TORCH_DEVICES)} device type at start of device string: {type}"
            )
        self.type, self.index = type, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return (
            f"device(type='{self.type}')" if self.index is None else f"device(type='{self.type}', index={self.index})"
        )

    def __eq__(self, other):
        return isinstance(other, device) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))

    def __enter__(self):
        _device_blocks.append(self)
        return self

    def __exit__(self, *exc):
        _device_blocks.pop()


class Tensor(InPlace):
    """An n-dimensional array (a JAX array) that records the operations applied to it."""

    __slots__ = (
        "_v",
        "_requires_grad",
        "_node",  # grad_fn: a slot of another name, so that `del t.grad_fn` fails as torch's
        "_output_nr",
        "_grad",
        "_counter",
        "_view",
        "_views",
        "_hooks",
        "_post_accumulate_hooks",
        "_retains_grad",
        "_accumulator",
        "_grad_dtype",  # AS_DTYPE while it is the tensor's dtype (_grad_dtype.py)
        "_creation",  # None for a view made the ordinary way, or no view (_view_meta.py)
        "__weakref__",
        "__dict__",  # attributes a program adds (p.hess = ...), as on torch's tensors; made at the first one
    )
    __array_priority__ = 1000  # NumPy defers binary operators to Tensor
    _sparse_forms = None  # a sparse tensor's table of the module functions' sparse forms (sparse/__init__.py)

    @classmethod
    def _wrap(cls, value, grad_fn=None, output_nr=0, requires_grad=False):
        t = object.__new__(cls)
        t._v, t._node, t._output_nr = value, grad_fn, output_nr
        t._requires_grad = requires_grad
        t._grad = t._view = t._views = t._hooks = t._post_accumulate_hooks = t._accumulator = t._creation = None
        t._grad_dtype = AS_DTYPE
        t._retains_grad = False
        t._counter = _graph.new_counter()
        return t

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _subclass.register(cls, Tensor)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch's default: `func` on `args` with the protocol off, its tensors returned as instances of `cls`."""
        return _subclass.default_torch_function(cls, func, types, args, kwargs, Tensor)

    @staticmethod
    def _make_subclass(cls, data, require_grad=False):
        """A new leaf of class `cls` sharing `data`'s values, requiring grad as `require_grad` says (how torch's
        subclasses, Parameter among them, are made)."""
        made = data.detach()
        made.__class__ = cls
        return made.requires_grad_(require_grad)

    def as_subclass(self, cls):
        """An alias of this tensor (its values and its place in the graph) as an instance of `cls`."""
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError(
                "Creating a Tensor subclass from a class that does not inherit from Tensor is not possible. Make "
                "sure your class inherits from Tensor."
            )
        from ._ops.shape import _reshaped

        alias = _reshaped(self, self.shape, "AliasBackward0")
        alias.__class__ = cls
        return alias

    def __new__(cls, *args, **kwargs):
        """torch's legacy constructor: Tensor() (empty), Tensor(2, 3) or Tensor(torch.Size) (of that shape),
        Tensor(data) (a sequence or array, in the default dtype), Tensor(tensor) (an alias of it)."""
        from ._legacy_constructors import construct

        return construct(None, args, kwargs, cls=cls)

    @property
    def _value(self):
        """The JAX array (a recorded op's result is computed here, when first read; see _lazy.py)."""
        v = self._v
        if type(v) is Pending:  # computed by a kernel, or by a host form (a NumPy array)
            v = self._v = materialize(v)
        if type(v) is np.ndarray:  # data from the host (bg.tensor), moved to the device when first read
            if is_shared(v):  # memory shared with the user (from_numpy): what it holds now, on the device
                copy = to_device(v.copy())
                if compiling.name is not None:
                    compiling.copies[id(copy)] = self
                return copy
            v = self._v = to_device(v)
            if compiling.name is not None:  # bg.compile reads this constant of its trace from the Tensor
                compiling.copies[id(v)] = self
        return v

    @property
    def _held(self):
        """The value, computed now if deferred, wherever it is: a host array stays on the host."""
        v = self._v
        if type(v) is Pending:
            v = self._v = materialize(v)
        return v

    @_value.setter
    def _value(self, value):
        """Hold `value` (an array, a deferred or host value) where it is: nothing moves between host and device."""
        v = self._v
        if type(v) is np.ndarray and is_shared(v):  # an in-place change of from_numpy's memory
            value = materialize(value) if type(value) is Pending else value
            if fits(v, value):
                np.copyto(v, np.asarray(value))
                return
        self._v = unshared(value)

    # ---- metadata -------------------------------------------------------------------------------
    @property
    def shape(self):
        """The tensor's shape, a torch.Size (a tuple)."""
        return Size(self._v.shape)

    @property
    def dtype(self):
        """The tensor's dtype (bg.float32, bg.int64, ...)."""
        return _dtypes.from_numpy_dtype(self._v.dtype)

    @property
    def ndim(self):
        """The number of dimensions."""
        return len(self._v.shape)

    @property
    def device(self):
        """The device holding the values (cpu for a traced value, and for memory shared with NumPy; meta for a
        tensor without values)."""
        v = self._v
        if type(v) is MetaValue:
            return device("meta")
        if type(v) is np.ndarray and is_shared(v):
            return device("cpu")
        if isinstance(self._value, jax.core.Tracer):
            return device("cpu")
        d = next(iter(self._value.devices()))
        kind = _PLATFORM_DEVICES.get(d.platform, "privateuseone")
        return device(kind, None if kind == "cpu" else d.id)

    def size(self, dim=None):
        """The shape, or with `dim` the size of that dimension (negative dims count from the end)."""
        if dim is None:
            return self.shape
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise TypeError(f"size(): argument 'dim' (position 1) must be int, not {type(dim).__name__}")
        return self._v.shape[_wrap_dim(dim, self.ndim)]

    def dim(self):
        """The number of dimensions (ndim)."""
        return self.ndim

    def numel(self):
        """The number of elements."""
        return math.prod(self._v.shape)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._v.shape[0]

    def is_floating_point(self):
        """Whether the dtype is a floating point type."""
        return self.dtype.is_floating_point

    def is_complex(self):
        """Whether the dtype is a complex type."""
        return self.dtype.is_complex

    def element_size(self):
        """The size of one element in bytes."""
        return self.dtype.itemsize

    # ---- autograd metadata ----------------------------------------------------------------------
    @property
    def requires_grad(self):
        """Whether gradients are computed for this tensor (settable on leaves)."""
        return (
            self._node is not None
            or self._requires_grad
            or self._creation is not None
            and requires_grad_through_base(self)
        )

    @requires_grad.setter
    def requires_grad(self, flag):
        if not isinstance(flag, bool):
            raise RuntimeError("requires_grad must be a bool")
        self._set_requires_grad(flag, REQUIRES_GRAD_DTYPE[0].lower() + REQUIRES_GRAD_DTYPE[1:])

    @requires_grad.deleter
    def requires_grad(self):
        raise RuntimeError(_UNDELETABLE["requires_grad"])

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad on this leaf in place and return it (True on a non-leaf is a no-op). As torch's, refused
        inside the function of a function transform (batched_grad.func, vmap.vmap)."""
        _check_bool("requires_grad_", "requires_grad", requires_grad)
        if in_transform():
            raise RuntimeError(REQUIRES_GRAD_INSIDE)
        return self._requires_grad_(requires_grad)

    def _requires_grad_(self, requires_grad=True):
        """requires_grad_ for batched_grad itself (a factory's requires_grad=True), also inside a transform."""
        if not (requires_grad and self.grad_fn is not None):  # True on a non-leaf is a no-op
            self._set_requires_grad(requires_grad, "only Tensors of floating point dtype can require gradients")
        return self

    def _set_requires_grad(self, flag, dtype_message):
        if flag:
            check_requires_grad(self)
        if self.grad_fn is not None:
            if not flag:
                raise RuntimeError(NON_LEAF_NO_GRAD)
            raise RuntimeError(NON_LEAF_REQUIRES_GRAD)
        if flag and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError(dtype_message)
        self._requires_grad = flag

    @property
    def is_leaf(self):
        """Whether this tensor has no grad_fn: created by the user, or not requiring grad."""
        return self.grad_fn is None

    @property
    def grad(self):
        """The gradient accumulated by backward(), None until then; settable to a same-shape, same-dtype Tensor."""
        if self.grad_fn is not None and not self._retains_grad and self._grad is None:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}"
                )
            if value is self:
                raise RuntimeError("can't assign Variable as its own grad")
            want = grad_dtype_of(self)
            if want is not None and value.dtype is not want:
                raise RuntimeError(GRAD_DTYPE.format(value.dtype.cpp_name, want.type_name))
            if value.shape != self.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of "
                    f"size '{list(self.shape)}'. Please ensure that the gradient and the tensor are "
                    "the same size"
                )
        self._grad = value

    @grad.deleter
    def grad(self):
        self._grad = None

    @property
    def grad_dtype(self):
        """The dtype `.grad` must have and incoming gradients are cast to (a leaf's; default: its dtype), or None to
        let gradients keep theirs."""
        return get_grad_dtype(self)

    @grad_dtype.setter
    def grad_dtype(self, value):
        set_grad_dtype(self, value)

    @property
    def grad_fn(self):
        """The node that made this tensor (None for a leaf). As torch's, it raises for a view made with grad mode off
        or in inference mode whose base requires grad, changed in place since (its history cannot be rebuilt)."""
        if self._creation is not None and grad_fn_unavailable(self):
            check_view_creation(self, indirect=True)
        return self._node

    @grad_fn.setter
    def grad_fn(self, value):
        raise AttributeError(_NOT_WRITABLE.format("grad_fn"))

    @grad_fn.deleter
    def grad_fn(self):
        raise AttributeError(_NOT_WRITABLE.format("grad_fn"))

    @property
    def _grad_fn(self):
        """grad_fn, by torch's other name for it (which cannot be deleted)."""
        return self._node

    @_grad_fn.deleter
    def _grad_fn(self):
        raise RuntimeError(_UNDELETABLE["_grad_fn"])

    @property
    def _backward_hooks(self):
        """The hooks register_hook added to this tensor, by their handles' ids (None before the first)."""
        node = self._node
        registered = (
            None if node is None or node.tensor_pre_hooks is None else node.tensor_pre_hooks.get(self._output_nr)
        )
        return self._hooks if registered is None else registered

    @_backward_hooks.setter
    def _backward_hooks(self, hooks):
        """A dict of hooks put in place of register_hook's (None for none), as torch's legacy code assigns it: a
        leaf's run when its gradient is computed; a non-leaf keeps the dict, but as in torch its hooks do not run."""
        self._hooks = hooks

    @_backward_hooks.deleter
    def _backward_hooks(self):
        raise RuntimeError(_UNDELETABLE["_backward_hooks"])

    @property
    def retains_grad(self):
        """Whether retain_grad() was called on this non-leaf."""
        return self._retains_grad

    def retain_grad(self):
        """Make backward() populate `.grad` of this non-leaf tensor too."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if in_transform():
            raise RuntimeError(RETAIN_GRAD_INSIDE)
        self._retain_grad()

    def _retain_grad(self):
        """retain_grad for batched_grad itself (backward's non-leaf inputs), also inside a transform."""
        if self.grad_fn is not None and not self._retains_grad:
            self._retains_grad = True
            self._register_retain()
        return None

    def _register_retain(self):
        self.grad_fn.retain_grad_of(self)

    def register_hook(self, hook):
        """hook(grad) -> Tensor or None runs when this tensor's gradient is computed (with None where the backward
        reaches this tensor's node but no gradient flows into this tensor, as torch's)."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return _graph.add_hook(self.grad_fn.pre_hooks_for(self._output_nr), hook)
        if self._hooks is None:
            with _graph._lock:
                if self._hooks is None:
                    self._hooks = {}
        return _graph.add_hook(self._hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """hook(tensor) runs after backward() has accumulated a gradient into this leaf's `.grad`."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_accumulate_hooks is None:
            with _graph._lock:
                if self._post_accumulate_hooks is None:
                    self._post_accumulate_hooks = {}
        return _graph.add_hook(self._post_accumulate_hooks, hook)

    @property
    def _version(self):
        """How many in-place changes this tensor (or a view sharing its storage) has had, as torch's _version (which
        an inference tensor does not track)."""
        if is_inference(self):
            raise RuntimeError(NO_VERSION)
        return self._counter.value

    def _is_view(self):
        """Whether this tensor is a view of another for autograd (views of inference tensors are not, as torch's)."""
        view = self._view
        return view is not None and DETACH not in view[1] and not is_inference(self)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaves) into the leaves' `.grad` (see batched_grad.autograd.backward)."""
        from .autograd import backward

        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def _alias(self, traced_derivative=False):
        """A new leaf sharing this tensor's values (in-place writes flow both ways) but not its graph. Host data
        is shared as it is (nothing writes into it): it moves to the device when an op reads it, not here, unless
        an op has read it already (the functional API's input, detached on every call, moves once). With
        `traced_derivative`, a value traced by a JAX transform keeps its derivative (torch's tensor_data of a
        saved tensor keeps its forward gradient)."""
        t = Tensor._wrap(self._detached_value(stop_gradient=not traced_derivative))
        root, chain = self._view if self._view is not None else (self, ())
        t._view = (root, chain + (DETACH,))
        remember_view(root, t)
        return t

    def _detached_value(self, stop_gradient=True):
        """This tensor's value as a tensor outside the graph holds it: host data as it is (moved to the device if
        an op has read it already), a row of vmap.vmap still deferred, a traced value with its derivative stopped."""
        v = self._v
        if type(v) is np.ndarray and not is_shared(v) and read_before(v, record=False):
            v = self._v = to_device(v)
        if type(v) is not np.ndarray and not (type(v) is Pending and v.call.mapped):
            v = self._value
            # traced by a JAX transform (forward mode, jax.jit): no derivative flows through it
            if stop_gradient and is_tracer(v):
                v = jax.lax.stop_gradient(v)
        return v

    def detach(self):
        """The same values (shared, with the version counter) as a new leaf outside the graph."""
        t = self._alias()
        t._counter = self._counter
        return t

    def detach_(self):
        """Detach this tensor from the graph in place: it becomes a leaf that does not require grad."""
        if self._view is not None and DETACH not in self._view[1]:
            raise RuntimeError(DETACH_VIEW)
        self._node, self._output_nr, self._requires_grad = None, 0, False
        return self

    @property
    def data(self):
        """Like detach(), but with its own version counter (in-place writes through it go unnoticed)."""
        if is_batched(self._v):
            raise RuntimeError("accessing `data` under vmap transform is not allowed")
        alias = self._alias()
        alias._counter = counter_like(self)
        return alias

    @data.setter
    def data(self, other):
        if not isinstance(other, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(other).__name__}")
        if other._sparse_forms is not None:
            raise RuntimeError(INCOMPATIBLE_SET_DATA)
        if is_batched(self._v) or is_batched(other._v):
            raise RuntimeError("mutating directly with `.data` under vmap transform is not allowed.")
        if self.requires_grad and not (other.dtype.is_floating_point or other.dtype.is_complex):
            raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex dtype")
        self._v = other._value  # the other's values, not written into memory shared with NumPy (as torch)
        for ref in self._views or ():  # old views keep the old values
            if ref() is not None:
                ref()._view = None
        self._views = None

    @data.deleter
    def data(self):
        raise RuntimeError(_UNDELETABLE["data"])

    # ---- conversion ---------------------------------------------------------------------------------
    def jax(self):
        """The underlying JAX array (a MetaValue for a meta tensor)."""
        return self._value

    def numpy(self, *, force=False):
        """The values as a writable NumPy array. As torch's, it is the tensor's memory: a tensor that is not a view
        holds its values from now on as host memory shared with NumPy (from_numpy's kind, which each op reading it
        copies), so writes through the array reach the tensor and the tensor's in-place writes reach the array; a
        view's array is a copy (its writes do not reach the view or its base). Like torch, refused for a tensor that
        requires grad while grad mode is on, unless `force=True`."""
        if not force:
            self._check_numpy_view()
        v = self._held
        if compiling.name is not None or type(v) is not np.ndarray and not isinstance(v, jax.Array) or is_tracer(v):
            return self._array(NUMPY_ERROR, "Tensor.numpy()")  # refused: compiling, meta, batched or traced
        if type(v) is np.ndarray and is_shared(v):
            return v.view()
        if self._view is not None:
            return np.array(v)
        self._v = shared = share(np.array(v))
        return shared.view()

    def _check_numpy_view(self):
        """torch's refusals of numpy() without force (np.asarray(tensor) and NumPy's operators on a tensor too)."""
        if self.requires_grad and is_recording():
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if self.is_conj():
            raise RuntimeError(
                "Can't call numpy() on Tensor that has conjugate bit set. Use tensor.resolve_conj().numpy() instead."
            )
        if self.is_neg():
            raise RuntimeError(
                "Can't call numpy() on Tensor that has negative bit set. Use tensor.resolve_neg().numpy() instead."
            )

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        from .utils.dlpack import tensor_dlpack

        return tensor_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        from .utils.dlpack import tensor_dlpack_device

        return tensor_dlpack_device(self)

    def __array__(self, dtype=None, copy=None):
        self._check_numpy_view()  # torch's __array__ is numpy()
        a = self._array(NUMPY_ERROR, "a conversion to a NumPy array")
        if dtype is not None and a.dtype != dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def __array_wrap__(self, array):
        """NumPy hands a function's result on a Tensor back here (np.exp(t), np.argmax(t, axis=1)): a tensor, as
        torch's, booleans as uint8."""
        from ._factories import from_numpy

        return from_numpy(array.astype(np.uint8) if array.dtype == bool else array)

    def _array(self, meta_error, read):
        """The values as a NumPy array; for a meta tensor (it has none) `meta_error`, an (exception, message).
        `read` names the read in bg.compile's error: a compiled function cannot read values."""
        if compiling.name is not None:
            raise ValueRead(f"{read} of a tensor of shape {tuple(self.shape)}")
        v = self._v
        if type(v) is np.ndarray and is_shared(v):
            return v.view()
        if type(v) is np.ndarray:  # host data, which nothing writes into: a read-only view, not moved to the device
            view = v.view()
            view.flags.writeable = False
            return view
        if type(v) is MetaValue:
            raise meta_error[0](meta_error[1])
        return np.asarray(self._value)

    def tolist(self):
        """The values as (nested lists of) Python numbers."""
        return self._array(COPY_ERROR, "Tensor.tolist()").tolist()

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        if is_batched(self._v):
            raise RuntimeError(VMAP_ITEM)
        return (
            self._array(ITEM_ERROR, "Tensor.item() (or bool(), float(), int(): a branch on a tensor)")
            .reshape(())
            .item()
        )

    def _scalar(self):
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __bool__(self):
        if self.numel() != 1:
            amount = "no values" if self.numel() == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {amount} is ambiguous")
        if is_batched(self._v):
            raise RuntimeError(VMAP_CONTROL_FLOW)
        return bool(self.item())

    __nonzero__ = __bool__

    def __float__(self):
        self._warn_if_converted_with_grad()
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    __long__ = __int__

    def __complex__(self):
        self._warn_if_converted_with_grad()
        return complex(self._scalar())

    def _warn_if_converted_with_grad(self):
        """torch's warning when float() or complex() drops a gradient: only while grad mode is on (an optimizer's
        step, under no_grad, converts its closure's loss without it)."""
        if self.requires_grad and is_recording():
            warn_once(SCALAR_REQUIRES_GRAD, stacklevel=None)  # at the line calling float() or complex()

    def __index__(self):
        if self.dtype.is_floating_point or self.dtype.is_complex or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __reversed__(self):
        return self if self.ndim == 0 else self.flip(0)

    def __contains__(self, element):
        if isinstance(element, (Tensor, numbers.Number)):
            return bool((element == self).any().item())
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a {type(element)}.")

    def __delitem__(self, index):
        raise TypeError("Tensor does not support deleting items")

    def __hash__(self):
        return id(self)

    def __deepcopy__(self, memo):
        """A new leaf with the same values, requires_grad and (copied) grad; views and aliases are not copied."""
        if self.grad_fn is not None:
            raise RuntimeError(DEEPCOPY_NON_LEAF)
        if type(self) in _subclass.DISPATCHING:
            with _subclass.DisableTorchFunctionSubclass():
                if type(self.new_empty([])) is not type(self):  # torch's test that the copy keeps the class
                    raise RuntimeError(DEEPCOPY_SUBCLASS)
        t = Tensor._wrap.__func__(type(self), self._value, requires_grad=self._requires_grad)
        memo[id(self)] = t
        if self._grad is not None:
            t._grad = copy.deepcopy(self._grad, memo)
        if self.__dict__:  # attributes the program added, deep-copied as torch does
            t.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return t

    def __reduce_ex__(self, protocol):
        v = self._value  # a non-leaf comes back as a leaf that requires grad, as torch's
        added = self.__dict__ or None  # attributes the program added travel with it, as torch's
        if type(v) is MetaValue:
            return rebuild_meta, (type(self), v.shape, v.dtype, self.requires_grad), added
        return _rebuild, (type(self), np.asarray(v), self.requires_grad), added

    def __format__(self, spec):
        if self.ndim == 0 and type(self._v) is not MetaValue:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __repr__(self):

        return format_tensor(self)


def _rebuild(cls, array, requires_grad):
    return Tensor._wrap.__func__(cls, np.asarray(array), requires_grad=requires_grad)  # host data, as bg.tensor's


def _wrap_dim(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


_subclass.PLAIN.add(Tensor)
