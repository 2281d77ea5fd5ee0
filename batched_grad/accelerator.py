"""torch.accelerator: the device-agnostic queries recent programs pick their device with
(`torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")`). The one
accelerator batched_grad can place tensors on is a GPU of JAX's ("cuda"); without one there is none, and the calls
that need a device raise torch's error."""

from . import cuda
from ._tensor import device

_NONE_AVAILABLE = "Cannot access accelerator device when none is available."


def is_available():
    """Whether an accelerator (a GPU of JAX's) is there."""
    return cuda.is_available()


def current_accelerator(check_available=False):
    """device('cuda') when a GPU is there, else None (as torch on a machine without an accelerator)."""
    return device("cuda") if cuda.is_available() else None


def device_count():
    """The number of accelerator devices (0 without one)."""
    return cuda.device_count()


def _require():
    if not cuda.is_available():
        raise RuntimeError(_NONE_AVAILABLE)


def current_device_index():
    """The index of the current accelerator device."""
    _require()
    return cuda.current_device()


def set_device_index(device):
    """Make `device` (an index, a device or 'cuda:i') the current accelerator device."""
    _require()
    cuda.set_device(device)


def synchronize(device=None):
    """Wait until the work queued on the accelerator has finished."""
    _require()
    cuda.synchronize(device)


def empty_cache():
    """Release cached accelerator memory (JAX frees unreferenced buffers itself; see cuda.empty_cache)."""
    _require()
    cuda.empty_cache()


def memory_allocated(device_index=None):
    """The bytes of accelerator memory in use by arrays."""
    _require()
    return cuda.memory_allocated(device_index)
