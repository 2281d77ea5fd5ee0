"""torch's meta device: a meta tensor has a shape and a dtype but no values. Its value is a MetaValue (a shape and a
dtype); an op reading one computes only the shapes and dtypes of its results (jax.eval_shape of the op's function),
and reading its values raises torch's errors."""

import math

import jax
import numpy as np

NO_DATA = "Cannot copy out of meta tensor; no data!"
NO_NUMPY = "can't convert meta device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
NO_ITEM = "Tensor.item() cannot be called on meta tensors"
MODULE_NO_DATA = (
    NO_DATA + " Please use torch.nn.Module.to_empty() instead of torch.nn.Module.to() when moving "
    "module from meta to a different device."
)
# what reading the values of a meta tensor raises, per way of reading them, as torch
NUMPY_ERROR, COPY_ERROR, ITEM_ERROR = (TypeError, NO_NUMPY), (NotImplementedError, NO_DATA), (RuntimeError, NO_ITEM)
VMAP_OVER_META = (
    "vmap over meta tensors is not supported: batched_grad's vmap maps compiled programs over the "
    "rows' values, which a meta tensor does not have"
)
VALUE_DEPENDENT = (
    "{} cannot run on meta tensors: the shape of its result depends on the values of its input, "
    "which a meta tensor does not have"
)


class MetaValue:
    """The value of a meta tensor: a shape and a dtype, as a jax.ShapeDtypeStruct has. Unlike one, JAX refuses it as
    an argument of any compiled function (a TypeError, on which `apply` finds the result's shapes alone), even one
    reading only its shape; and code reading values host-side (NumPy) raises torch's error."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    def __array__(self, dtype=None, copy=None):
        raise NotImplementedError(NO_DATA)

    def __repr__(self):
        return f"MetaValue(shape={self.shape}, dtype={self.dtype})"


SPARSE_NOT_PROVIDED = (
    "this operation is not provided for sparse COO tensors (layout torch.sparse_coo); convert the tensor with "
    ".to_dense() first"
)


class NoDenseValue:
    """What a sparse tensor holds where a dense tensor holds its array (batched_grad/sparse): its shape and dtype;
    an op that reads it as an array raises."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype

    @property
    def ndim(self):
        return len(self.shape)

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError(SPARSE_NOT_PROVIDED)


def meta_value(shape, dtype):
    """The value of a meta tensor of `shape` and `dtype` (a NumPy dtype)."""
    return MetaValue(shape, dtype)


def rebuild_meta(cls, shape, dtype, requires_grad):
    """A meta tensor unpickled."""
    from ._tensor import Tensor

    return Tensor._wrap.__func__(cls, MetaValue(shape, dtype), requires_grad=requires_grad)


def is_meta(tensor):
    """Whether `tensor` (a Tensor) is on the meta device."""
    return type(tensor._v) is MetaValue


def names_meta(spec):
    """Whether a device argument (a string, a batched_grad.device, an int, or None for the default device) names
    the meta device."""
    from ._tensor import default_device, device

    if spec is None:
        spec = default_device()
    return isinstance(spec, (str, device)) and device(spec).type == "meta"


def device_for(spec, like):
    """The device argument of a *_like or new_* factory: `spec` if given, else `like`'s (meta or not; the default
    device does not apply)."""
    if spec is not None:
        return spec
    return "meta" if is_meta(like) else "cpu"


_COPIES = frozenset({"copy", "index_put", "copy_slices"})  # ops writing operand 1 into (a copy of) operand 0


def check_devices(op, tensors):
    """torch's check that `op`'s tensors share a device (a 0-dimensional tensor off the meta device counts as a
    number): the first tensor's device is the one expected. A copy goes by its destination's device: into a meta
    tensor anything copies, out of one nothing does. Only meta or not is compared: the devices are read for the
    message alone."""
    if op.name in _COPIES and tensors:
        if not is_meta(tensors[0]) and any([is_meta(t) for t in tensors[1:]]):
            raise NotImplementedError(NO_DATA)
        return
    first = None
    for t in tensors:
        if first is None:
            if is_meta(t) or t.ndim != 0:
                first = t
        elif is_meta(t) is not is_meta(first) and (is_meta(t) or t.ndim != 0):
            raise RuntimeError(f"Tensor on device {t.device} is not on the expected device {first.device}!")


def shapes_of(op, signature_of, static, arrays):
    """The Signature of `op` on `arrays` (meta values, arrays or deferred values), with its output avals, from
    `signature_of` (the cached jax.eval_shape of an op); an op whose result's shape depends on values raises
    NotImplementedError, as torch's ops without a meta kernel do."""
    try:
        return signature_of(op, static, tuple([(a.shape, a.dtype) for a in arrays]))
    except jax.errors.ConcretizationTypeError as e:
        raise NotImplementedError(VALUE_DEPENDENT.format(op.name)) from e


@jax.custom_vjp
def onto_meta(a):
    """The function of the op moving a tensor onto the meta device: its derivative would copy a meta gradient
    back to the tensor's device, which torch refuses."""
    return a


def _onto_meta_forward(a):
    return a, None


def _onto_meta_backward(_, g):
    raise NotImplementedError(NO_DATA)


onto_meta.defvjp(_onto_meta_forward, _onto_meta_backward)
