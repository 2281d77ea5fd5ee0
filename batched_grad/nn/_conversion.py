"""Module.to's arguments, parsed as torch's `_parse_to` parses them, and the conversion of one tensor to a device
and dtype: JAX's cpu device, its GPU ones for cuda (an error naming what is missing where JAX has none), or the
meta device."""

import jax

from .. import _dtypes, _memory_format
from .._grad_mode import no_grad
from .._meta import MODULE_NO_DATA, is_meta, meta_value
from .._ops import to as _to_dtype
from .._tensor import Tensor, device
from .._x64 import scoped
from .parameter import is_lazy

_SIGNATURES = (
    " * (torch.device device = None, torch.dtype dtype = None, bool non_blocking = False)\n"
    " * (torch.dtype dtype, bool non_blocking = False)\n"
    " * (Tensor tensor, bool non_blocking = False)\n"
)
_DTYPES_BY_TYPE_NAME = {f"{d.type_name}Tensor": d for d in _dtypes.ALL}
NO_ACCELERATOR = "Cannot access accelerator device when none is available."


def _kind(value):
    """The name torch's argument parser gives a value's type in its messages."""
    if isinstance(value, _dtypes.dtype):
        return "torch.dtype"
    if isinstance(value, device):
        return "torch.device"
    return "Tensor" if isinstance(value, Tensor) else type(value).__name__


def _invalid(args, kwargs):
    got = ", ".join([_kind(a) for a in args] + [f"{k}={_kind(v)}" for k, v in kwargs.items()])
    if kwargs and not args:
        got += ", "
    return TypeError(
        f"to() received an invalid combination of arguments - got ({got}), but expected one of:\n" + _SIGNATURES
    )


def _is_device(value):
    return isinstance(value, (str, device)) or (isinstance(value, int) and not isinstance(value, bool))


def parse_to(args, kwargs):
    """(device, dtype, non_blocking) from Module.to's arguments: (device=None, dtype=None, non_blocking=False),
    (dtype, non_blocking=False) or (tensor, non_blocking=False), positionally or by keyword, and a memory_format.
    (JAX's transfers never block the caller, so every move is non-blocking in torch's sense.)"""
    if "copy" in kwargs:
        raise RuntimeError(".to() does not accept copy argument")
    kwargs = dict(kwargs)
    # torch converts only 4-d and 5-d tensors to channels_last(_3d); batched_grad's layout stays row-major
    _memory_format.check(kwargs.pop("memory_format", None), "to")
    first = args[0] if args else None
    if isinstance(first, Tensor):
        names = ("tensor", "non_blocking")
    elif isinstance(first, _dtypes.dtype):
        names = ("dtype", "non_blocking")
    else:
        names = ("device", "dtype", "non_blocking")
    if len(args) > len(names) or any(name not in names[len(args) :] for name in kwargs):
        raise _invalid(args, kwargs)
    found = dict(zip(names, args), **kwargs)
    tensor = found.pop("tensor", None)
    if tensor is not None:
        found.update(device=tensor.device, dtype=tensor.dtype)
    where, dtype, non_blocking = found.get("device"), found.get("dtype"), found.get("non_blocking", False)
    valid_device = where is None or _is_device(where)
    if not valid_device or not (dtype is None or isinstance(dtype, _dtypes.dtype)) or type(non_blocking) is not bool:
        raise _invalid(args, kwargs)
    return (None if where is None else as_device(where)), dtype, non_blocking


def as_device(where):
    """A bg.device from a device, its name, or an accelerator index (an int, as torch reads it)."""
    if isinstance(where, int):
        if not jax_devices("cuda"):
            raise RuntimeError(NO_ACCELERATOR)
        return device("cuda", where)
    return device(where)


def jax_devices(kind):
    """JAX's devices of a torch device type: its cpu devices for "cpu", its GPUs for "cuda", else none."""
    platform = {"cpu": "cpu", "cuda": "gpu"}.get(kind)
    if platform is None:
        return []
    try:
        return jax.devices(platform)
    except RuntimeError:  # JAX has no backend for that platform
        return []


def jax_device(where):
    """The JAX device that a bg.device names (None for meta: no device holds a meta tensor's values), or torch's
    kind of error where there is none."""
    if where.type == "meta":
        return None
    found = jax_devices(where.type)
    if not found:
        if where.type == "cuda":
            raise AssertionError(
                "batched_grad has no CUDA device: JAX has no GPU backend here (a CUDA-enabled jaxlib gives it one)"
            )
        raise RuntimeError(
            f"batched_grad is not linked with support for {where.type} devices: its tensors live "
            "on JAX's cpu device, its GPUs for cuda, or on meta (without values)"
        )
    index = where.index or 0
    if index >= len(found):
        raise RuntimeError(
            f"Invalid device ordinal: {where} (JAX has {len(found)} {where.type} device{'s' if len(found) > 1 else ''})"
        )
    return found[index]


def dtype_of_type(dst_type):
    """The dtype that Module.type's argument names: a dtype, or a name such as 'torch.DoubleTensor' (with the device
    that 'torch.cuda.DoubleTensor' names)."""
    if isinstance(dst_type, _dtypes.dtype):
        return dst_type, None
    if not isinstance(dst_type, str):
        raise TypeError("dtype must be a type, str, or dtype object")
    prefix, _, name = dst_type.rpartition(".")
    if prefix not in ("torch", "torch.cuda") or name not in _DTYPES_BY_TYPE_NAME:
        raise ValueError(f"invalid type: '{dst_type}'")
    return _DTYPES_BY_TYPE_NAME[name], (device("cuda") if prefix == "torch.cuda" else None)


@scoped
def convert(tensor, where=None, dtype=None):
    """`tensor` with `dtype` (None: its own) on the device `where` (None: where it is); the tensor itself when
    nothing changes, else a new tensor outside the graph. A module's tensor moves onto the meta device, not off it
    (torch's NotImplementedError, which names to_empty)."""
    if tensor._sparse_forms is not None:  # a sparse COO tensor: its values convert
        return tensor.to(*(a for a in (where, dtype) if a is not None))
    if is_lazy(tensor):
        return tensor.converted(dtype, where)
    result = tensor
    with no_grad():
        if dtype is not None and dtype is not tensor.dtype:
            result = _to_dtype(tensor, dtype)
        if where is not None and (where.type == "meta" or is_meta(result)):
            if where.type != "meta":
                raise NotImplementedError(MODULE_NO_DATA)
            return result if is_meta(result) else Tensor._wrap(meta_value(result.shape, result.dtype.np))
        if where is not None:
            target = jax_device(where)
            value = result._value
            if value.devices() != {target}:
                result = Tensor._wrap(jax.device_put(value, target))
    return result
