"""Converting and moving tensors: to(device, dtype), cpu(), cuda(), type(); and where a tensor is (is_cuda,
get_device)."""

import jax

from .. import _dtypes, _memory_format
from .._devices import only_cpu, resolve
from .._grad_mode import is_recording
from .._meta import NO_DATA, is_meta, onto_meta
from .._tensor import Tensor, device, type_name, warn_once
from ._core import Op, apply, apply_onto_meta

DISCARDS_IMAGINARY = "Casting complex values to real discards the imaginary part"


_TO = Op("to_copy", _dtypes.cast, linear=True, backward_name="ToCopyBackward0", diagonal=True)
_TO_DEVICE = Op(
    "to_copy",
    lambda a, *, device: jax.device_put(a, device),
    linear=True,
    backward_name="ToCopyBackward0",
    diagonal=True,
)
_TO_META = Op("to_copy", onto_meta, linear=True, backward_name="ToCopyBackward0")
_BY_TYPE_NAME = {f"torch.{d.type_name}Tensor": d for d in _dtypes.ALL}
_DEVICE_TYPES = (str, device, int)


def _is_device(x):
    return isinstance(x, _DEVICE_TYPES) and not isinstance(x, bool)


def _to_arguments(args, device, dtype, non_blocking, copy):
    """torch's overloads of to(): (dtype | device[, dtype] | other tensor)[, non_blocking[, copy]], with keywords."""
    args = list(args)
    if args and isinstance(args[0], Tensor):
        other = args.pop(0)
        device, dtype = other.device, other.dtype
    elif args and _is_device(args[0]):
        device = args.pop(0)
        if args and not isinstance(args[0], bool):
            dtype = args.pop(0)
    elif args:
        dtype = args.pop(0)
    flags = args + [non_blocking, copy][len(args) :]
    if len(flags) > 2 or not all(isinstance(f, bool) for f in flags):
        raise TypeError(
            f"to() received an invalid combination of arguments - got "
            f"({', '.join(type(a).__name__ for a in args)}), expected (dtype | device[, dtype] | "
            "Tensor)[, non_blocking: bool[, copy: bool]]"
        )
    return device, dtype, flags[1]


def to(input, *args, device=None, dtype=None, non_blocking=False, copy=False, memory_format=None):
    """This tensor on `device` (a string such as 'cpu' or 'cuda:0', a batched_grad.device, or an index) and of
    `dtype`, given positionally, by keyword, or as another tensor's; `input` itself when nothing changes, unless
    `copy=True`. Moving to a device JAX lacks here raises torch's error; on the meta device a tensor keeps its
    shape and dtype but no values, and moving one off it raises torch's NotImplementedError."""
    device, dtype, copy = _to_arguments(args, device, dtype, non_blocking, copy)
    _memory_format.check(memory_format, "to", input.dim())
    d = input.dtype if dtype is None else _dtypes.to_dtype(dtype)
    result = input if device is None else _to_device(input, device)
    if d is not result.dtype or (copy and result is input):
        if result.dtype.is_complex and not d.is_complex:
            warn_once(DISCARDS_IMAGINARY)
        result = apply(_TO, [result], dtype=d.np)
    return result


def _to_device(t, spec):
    target, jax_device = resolve(spec)
    if target.type == "meta" or is_meta(t):
        return _meta_to_device(t, target)
    if isinstance(spec, (str, device)) and device(spec) == device("cpu", 0):
        return apply(_TO, [t], dtype=t.dtype.np)  # torch copies for an explicit cpu:0 (the cpu's index is None)
    if only_cpu() or t.device == target:
        return t
    if t.requires_grad and is_recording():
        return apply(_TO_DEVICE, [t], device=jax_device)
    return Tensor._wrap(jax.device_put(t._value, jax_device))


def _meta_to_device(t, target):
    """A move onto, within or off the meta device."""
    if target.type != "meta":
        raise NotImplementedError(NO_DATA)
    return t if is_meta(t) else apply_onto_meta(_TO_META, t)


def cpu(self):
    """This tensor on the cpu (itself if it is there)."""
    return to(self, "cpu")


def cuda(self, device=None, non_blocking=False):
    """This tensor on a CUDA device (the first one unless `device`, an index or a device); torch's error where JAX
    has no GPU backend."""
    if isinstance(device, int) and not isinstance(device, bool):
        device = f"cuda:{device}"
    return to(self, "cuda" if device is None else device, non_blocking=non_blocking)


def type_(self, dtype=None, non_blocking=False):
    """With no argument, the tensor's type as torch names it ('torch.FloatTensor', 'torch.cuda.FloatTensor');
    given a dtype, such a name, a typed tensor class (bg.FloatTensor) or bg.Tensor (the default dtype), this tensor
    converted to it."""
    if dtype is None:
        name = type_name(self._v.dtype)
        if is_meta(self):
            return name.replace("torch.", "torch.meta.")
        return name.replace("torch.", "torch.cuda.") if is_cuda(self) else name
    if isinstance(dtype, str):
        on_cuda = dtype.startswith("torch.cuda.")
        target = _BY_TYPE_NAME.get(dtype.replace("torch.cuda.", "torch.", 1))
        if target is None:
            raise ValueError(f"invalid type: '{dtype}'")
        return to(self, "cuda" if on_cuda else "cpu", target, non_blocking)
    if isinstance(dtype, _dtypes.dtype):
        return to(self, dtype, non_blocking)
    if isinstance(dtype, type):  # bg.Tensor (the default dtype) or a typed tensor class (bg.FloatTensor)
        if dtype is Tensor:
            return to(self, _dtypes.get_default_dtype(), non_blocking)
        from .._legacy_constructors import LegacyTensorType

        if isinstance(dtype, LegacyTensorType):
            return to(self, dtype.dtype, non_blocking)
        module = "" if dtype.__module__ == "builtins" else f"{dtype.__module__}."
        raise ValueError(f"invalid type: '{module}{dtype.__qualname__}'")
    raise TypeError("dtype must be a type, str, or dtype object")


def is_cuda(self):
    """Whether the tensor is on a CUDA device (a device of JAX's GPU backend)."""
    return not only_cpu() and self.device.type == "cuda"


def get_device(self):
    """The index of the CUDA device holding the tensor; -1 on the cpu."""
    return self.device.index if is_cuda(self) else -1


def _never(what):
    prop = property(lambda self: False)
    prop.__doc__ = f"False: batched_grad has no {what} tensors."
    return prop


METHODS = {
    "to": to,
    "cpu": cpu,
    "cuda": cuda,
    "type": type_,
    "is_cuda": property(is_cuda),
    "get_device": get_device,
    "is_meta": property(is_meta, doc="Whether the tensor is a meta tensor: a shape and a dtype, without values."),
    "is_quantized": _never("quantized"),
}
