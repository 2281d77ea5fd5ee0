"""torch.utils.dlpack: tensors exchanged with other array libraries (NumPy, torch, JAX, CuPy, ...) through DLPack
without copying where the memory allows. On the host, from_dlpack shares the producer's memory as from_numpy does
(writes on either side are seen by the other); on a GPU it is JAX's import of the buffer. to_dlpack and a tensor's
__dlpack__ export the buffer that holds the tensor's values now: batched_grad's own in-place ops give a tensor a new
buffer (JAX arrays are immutable) unless it shares memory with NumPy, so a consumer does not see those later writes."""

import ctypes
import enum

import jax
import numpy as np

from .._devices import device as _device
from .._factories import from_numpy
from .._host import is_shared
from .._meta import MetaValue
from .._tensor import Tensor

__all__ = ["DLDeviceType", "from_dlpack"]


class DLDeviceType(enum.IntEnum):
    """DLPack's device kinds, with their protocol numbers."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


_INVALID_CAPSULE = (
    "from_dlpack received an invalid capsule. Note that DLTensor capsules can be consumed only once, so you might "
    "have already constructed a tensor from it once."
)


def _exported_value(tensor):
    """The array holding the tensor's values now (computed if deferred), as a DLPack producer: memory shared with
    NumPy (from_numpy) itself, other host data when NumPy can export it compact, else the device array."""
    if type(tensor._v) is MetaValue:
        raise BufferError("Cannot pack tensors on meta")
    value = tensor._held
    if isinstance(value, np.ndarray) and not _exportable(value):
        return tensor._value
    return value


def _exportable(array):
    """Whether NumPy exports the host array as it is: it refuses read-only arrays (unversioned protocol) and
    bfloat16; a strided view (an internal form of a slice) goes as its compact device array, as JAX needs."""
    if not array.flags.writeable or array.dtype.kind not in "biufc":
        return False
    return is_shared(array) or array.flags.c_contiguous


def to_dlpack(tensor):
    """A DLPack capsule of `tensor`'s values (consumable once), sharing their memory."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack(): argument 'data' (position 1) must be Tensor, not {type(tensor).__name__}")
    return _exported_value(tensor).__dlpack__()


def tensor_dlpack(tensor, stream=None, max_version=None, dl_device=None, copy=None):
    """Tensor.__dlpack__: the DLPack capsule of the producer protocol; refused for a tensor that requires grad."""
    if tensor.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    options = dict(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
    return _exported_value(tensor).__dlpack__(**{k: v for k, v in options.items() if v is not None})


def tensor_dlpack_device(tensor):
    """Tensor.__dlpack_device__: (DLDeviceType, device index) of the tensor's values."""
    if type(tensor._v) is MetaValue:
        raise BufferError("Cannot pack tensors on meta")
    kind, index = _exported_value(tensor).__dlpack_device__()
    return DLDeviceType(int(kind)), int(index)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _Capsule:
    """A bare DLPack capsule (unversioned "dltensor", or "dltensor_versioned") as a producer object, with its
    device read from the DLTensor it points to."""

    def __init__(self, capsule):
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        name = get_name(capsule) if type(capsule).__name__ == "PyCapsule" else None
        if name not in (b"dltensor", b"dltensor_versioned"):
            raise RuntimeError(_INVALID_CAPSULE)
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        managed = get_pointer(capsule, name)
        # DLManagedTensor starts with its DLTensor {void *data; DLDevice device; ...}; the versioned struct has
        # {DLPackVersion (2 x uint32); void *manager_ctx; deleter; uint64 flags} before it
        tensor_at = managed + (8 + 3 * ctypes.sizeof(ctypes.c_void_p) if name == b"dltensor_versioned" else 0)
        found = _DLDevice.from_address(tensor_at + ctypes.sizeof(ctypes.c_void_p))
        self.capsule, self.device = capsule, (found.device_type, found.device_id)

    def __dlpack__(self, **options):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def _target(device):
    """(batched_grad device, its DLPack (type, index)) for from_dlpack's `device` argument."""
    if isinstance(device, str):
        device = _device(device)
    if not isinstance(device, _device):
        raise AssertionError(f"from_dlpack: unsupported device type: {type(device)}")
    kind = {"cpu": DLDeviceType.kDLCPU, "cuda": DLDeviceType.kDLCUDA}.get(device.type)
    if kind is None:
        raise BufferError(f"Cannot pack tensors on {device.type}")
    return device, (kind, device.index or 0)


def _imported(producer, copy):
    """A Tensor of the producer's values: host memory through NumPy (shared, as from_numpy shares it; NumPy
    has no bfloat16 and JAX takes that), device memory through JAX."""
    if producer.__dlpack_device__()[0] == DLDeviceType.kDLCPU:
        try:
            array = np.from_dlpack(producer, copy=copy)
        except (TypeError, BufferError, RuntimeError):  # a dtype NumPy lacks
            array = None
        if array is not None:
            return from_numpy(array) if array.flags.writeable else Tensor._wrap(array)
    return Tensor._wrap(jax.dlpack.from_dlpack(producer, copy=copy))


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A Tensor of `ext_tensor`'s values: an object with __dlpack__ (a NumPy array, a torch tensor, a JAX array,
    ...) or a DLPack capsule (from to_dlpack). Memory is shared unless `copy` is True; `device` moves the result
    (copy=False refuses a move)."""
    if not hasattr(ext_tensor, "__dlpack__"):
        if device is not None or copy is not None:
            raise AssertionError("device and copy kwargs not supported when ext_tensor is already a DLPack capsule.")
        producer = _Capsule(ext_tensor)
        try:
            return _imported(producer, None)
        except (ValueError, RuntimeError) as error:
            raise RuntimeError(_INVALID_CAPSULE) from error
    source = ext_tensor.__dlpack_device__()
    moved_to = None
    if device is not None:
        target, dl_target = _target(device)
        if (int(source[0]), int(source[1])) != dl_target:
            if copy is False:
                raise ValueError(
                    f"cannot move DLPack tensor from device {source} to {dl_target} without copying. "
                    "Set copy=None or copy=True."
                )
            moved_to = target
    tensor = _imported(ext_tensor, copy)
    return tensor if moved_to is None else tensor.to(moved_to)
