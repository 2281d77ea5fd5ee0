"""torch's legacy tensor constructors: `Tensor(...)` itself, the typed tensor classes (`FloatTensor`, `LongTensor`,
...) and `Tensor.new(...)`. Their forms, as torch parses them: no argument (an empty tensor); sizes, as ints or one
torch.Size (a tensor of that shape: zeros here, where torch leaves it uninitialized); a sequence or an array (its
values, converted to the constructor's dtype); a tensor (an alias of it: its values and its place in the graph).
Only `device` (the cpu) is accepted as a keyword, besides `size` or `data` alone."""

import operator

import jax
import numpy as np

from . import _dtypes
from ._factories import tensor, zeros
from ._meta import device_for
from ._ops.shape import _reshaped
from ._tensor import Size, Tensor, device, python_type_name, warn_once

_OVERLOADS = (
    " * (*, torch.device device = None)\n"
    " * (torch.Storage storage)\n"
    " * (Tensor other)\n"
    " * (tuple of ints size, *, torch.device device = None)\n"
    " * (object data, *, torch.device device = None)\n"
)
_TORCH_TYPE_NAMES = {Size: "torch.Size", _dtypes.dtype: "torch.dtype", device: "torch.device"}
_DATA = (list, tuple, range, np.ndarray, jax.Array)
_TENSOR_DEVICE = {
    "constructor": "Legacy tensor constructor of the form torch.Tensor(tensor, device=device) is not supported.  Use "
    "torch.tensor(...) or torch.as_tensor(...) instead.",
    "new": "Legacy tensor new of the form tensor.new(tensor, device=device) is not supported.  Use "
    "torch.as_tensor(...) instead.",
}
_OPTIONS = (
    "TensorOptions(dtype={}, device=cpu, layout=Strided, requires_grad=false (default), pinned_memory=false "
    "(default), memory_format=(nullopt))"
)


def _type_name(value):
    return _TORCH_TYPE_NAMES.get(type(value)) or python_type_name(value)


def _invalid_combination(args, kwargs):
    given = ", ".join(_type_name(a) for a in args)
    named = ", ".join(f"{k}={_type_name(v)}" for k, v in kwargs.items())
    got = f"{given}, {named}" if given and named else given or f"{named}, "
    return TypeError(
        f"new() received an invalid combination of arguments - got ({got}), but expected one of:\n{_OVERLOADS}"
    )


def _index(x):
    """x as a dimension size, or None where torch would not take it as one."""
    if isinstance(x, (bool, np.bool_)):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def _parse(args, kwargs):
    """(form, value): ("empty", None), ("size", shape), ("data", data) or ("alias", tensor)."""
    keywords = {k: v for k, v in kwargs.items() if k != "device"}
    if keywords:
        (key, value), *more = keywords.items()
        if args or more or key not in ("size", "data") or (key == "size" and not isinstance(value, (tuple, list))):
            raise _invalid_combination(args, kwargs)
        return ("size", _shape(tuple(value), args, kwargs)) if key == "size" else _one_argument(value)
    if not args:
        return "empty", None
    if len(args) == 1:
        return _one_argument(args[0])
    return "size", _shape(args, args, kwargs)


def _one_argument(arg):
    if isinstance(arg, Tensor):
        return "alias", arg
    if isinstance(arg, Size) or _index(arg) is not None:
        return "size", _shape(tuple(arg) if isinstance(arg, Size) else (arg,), (arg,), {})
    if isinstance(arg, str):
        raise TypeError("new(): invalid data type 'str'")
    if isinstance(arg, (bytes, bytearray)):
        return "data", list(arg)
    if not isinstance(arg, _DATA):
        raise TypeError(f"new(): data must be a sequence (got {python_type_name(arg)})")
    return "data", arg


def _shape(sizes, args, kwargs):
    """The shape `sizes` gives (torch's errors name the arguments `args`, `kwargs`): the first must be an int, the
    others anything int() takes exactly (a bool too)."""
    if sizes and _index(sizes[0]) is None:
        raise _invalid_combination(args, kwargs)
    shape = []
    for position, size in enumerate(sizes, 1):
        n = operator.index(size) if isinstance(size, (bool, np.bool_)) else _index(size)
        if n is None:
            raise TypeError(
                f"new(): argument 'size' failed to unpack the object at pos {position} with error \"type must be "
                f'tuple of ints,but got {_type_name(size)}"'
            )
        shape.append(n)
    for n in shape:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {shape}")
    return tuple(shape)


def _check_device(kwargs):
    spec = kwargs.get("device")
    if spec is not None and device(spec).type != "cpu":
        raise RuntimeError(
            f"legacy constructor expects device type: cpu but device type: {device(spec).type} was passed"
        )


def construct(dtype, args, kwargs, like=None, cls=Tensor):
    """A tensor made by a legacy constructor of `dtype` (None: bg.Tensor's, the default dtype, whose alias form
    takes a tensor of any dtype); `like` is the tensor whose new() this is."""
    form, value = _parse(args, kwargs)
    _check_device(kwargs)
    if form == "alias":
        alias = _alias(value, dtype, kwargs, "constructor" if like is None else "new")
        if cls is not Tensor:
            alias.__class__ = cls
        return alias
    d = dtype or _dtypes.get_default_dtype()
    where = device_for(None, like) if like is not None else None
    if form == "empty":
        made = zeros(0, dtype=d, device=where)
    elif form == "size":
        made = zeros(value, dtype=d, device=where)
    else:
        made = tensor(value, dtype=d, device=where)
    return made if cls is Tensor else Tensor._wrap.__func__(cls, made._v)


def _alias(other, dtype, kwargs, kind):
    if kwargs.get("device") is not None:
        raise RuntimeError(_TENSOR_DEVICE[kind])
    if dtype is not None and other.dtype is not dtype:
        raise TypeError(f"expected {_OPTIONS.format(dtype.cpp_name)} (got {_OPTIONS.format(other.dtype.cpp_name)})")
    return _reshaped(other, other.shape, "AliasBackward0")


def new(self, *args, **kwargs):
    """torch's legacy Tensor.new: the forms of Tensor(...) (sizes, data, a tensor), with this tensor's dtype."""
    return construct(self.dtype, args, kwargs, like=self)


class LegacyTensorType(type):
    """The class of the typed tensor classes (torch.tensortype): FloatTensor(...) constructs a tensor of its dtype
    as Tensor(...) does, and isinstance(x, FloatTensor) holds for a tensor of that dtype on the class's device type
    (cpu, or cuda for torch.cuda.FloatTensor and its kind)."""

    def __call__(cls, *args, **kwargs):
        if not cls.is_cuda:
            return construct(cls.dtype, args, kwargs)
        from . import cuda

        if not cuda.is_available():
            raise TypeError(f"type torch.cuda.{cls.__name__} not available. Torch not compiled with CUDA enabled.")
        return construct(cls.dtype, args, kwargs).to("cuda")

    def __instancecheck__(cls, instance):
        device = "cuda" if cls.is_cuda else "cpu"
        return isinstance(instance, Tensor) and instance.dtype is cls.dtype and instance.device.type == device

    def __repr__(cls):
        return f"<class 'torch.{'cuda.' * cls.is_cuda}{cls.__name__}'>"


def _typed(d, cuda):
    name = f"{d.type_name}Tensor"
    attributes = {"dtype": d, "is_cuda": cuda, "is_sparse": False, "__module__": "batched_grad" + ".cuda" * cuda}
    attributes["__doc__"] = f"The legacy constructor of {d} tensors, and their type for isinstance()."
    return LegacyTensorType(name, (), attributes)


_LEGACY_DTYPES = (
    _dtypes.float32,
    _dtypes.float64,
    _dtypes.float16,
    _dtypes.bfloat16,
    _dtypes.uint8,
    _dtypes.int8,
    _dtypes.int16,
    _dtypes.int32,
    _dtypes.int64,
    _dtypes.bool,
)
TYPED = {f"{d.type_name}Tensor": _typed(d, cuda=False) for d in _LEGACY_DTYPES}
CUDA_TYPED = {f"{d.type_name}Tensor": _typed(d, cuda=True) for d in _LEGACY_DTYPES}


def set_default_tensor_type(t):
    """torch's deprecated set_default_tensor_type: a floating typed class (or its name, 'torch.DoubleTensor')
    sets the default dtype, and the device: cuda for torch.cuda's classes, else JAX's default."""
    from . import cuda
    from ._devices import set_default_device

    warn_once(
        "torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use torch.set_default_dtype() and "
        "torch.set_default_device() as alternatives."
    )
    if isinstance(t, str):
        module, _, name = t.rpartition(".")
        t = {"torch": TYPED, "torch.cuda": CUDA_TYPED}.get(module, {}).get(name)
        if t is None:
            raise TypeError(
                f"set_default_tensor_type(): expected the name of a typed tensor class, got '{module}.{name}'"
            )
    if not isinstance(t, LegacyTensorType):
        raise TypeError("invalid type object: only floating-point types are supported as the default type")
    if t.is_cuda and not cuda.is_available():
        raise TypeError(f"type torch.cuda.{t.__name__} not available. Torch not compiled with CUDA enabled.")
    if not t.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _dtypes.set_default_dtype(t.dtype)
    set_default_device("cuda" if t.is_cuda else None)
