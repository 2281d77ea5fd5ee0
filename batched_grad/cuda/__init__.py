"""batched_grad.cuda: torch.cuda's queries and the calls CPU-only programs make (seeding, synchronize,
empty_cache), answered from JAX's GPU backend. Without one, the calls that need a GPU raise torch's error for a
build without CUDA, and the rest do what torch does then (seeding is accepted, memory counts are 0)."""

from collections import namedtuple

import jax

from .._devices import jax_devices
from . import amp  # noqa: E402,F401  (torch.cuda.amp)

NO_CUDA = "Torch not compiled with CUDA enabled"
_current = [0]  # the index of the current GPU, which set_device changes
_peak_at_reset = {}  # GPU index -> its peak bytes in use when reset_peak_memory_stats was called

# what get_device_properties reports (torch's _CudaDeviceProperties' main fields)
DeviceProperties = namedtuple("DeviceProperties", "name major minor total_memory multi_processor_count")


def is_available():
    """Whether JAX has a GPU backend in this process (then tensors can move to 'cuda')."""
    return bool(jax_devices("cuda"))


def device_count():
    """The number of GPU devices JAX has (0 without a GPU backend)."""
    return len(jax_devices("cuda"))


def is_initialized():
    """Whether the GPU backend is up (JAX starts it with the process)."""
    return is_available()


def _gpus():
    gpus = jax_devices("cuda")
    if not gpus:
        raise AssertionError(NO_CUDA)
    return gpus


def _gpu(device):
    """The JAX device of a torch GPU spec (None: the current one, an int, 'cuda:1', a batched_grad.device)."""
    gpus = _gpus()
    return gpus[_index(device)]


def _index(device):
    index = getattr(device, "index", device)
    if isinstance(index, str):
        index = int(index.partition(":")[2] or 0)
    return _current[0] if index is None else index


def current_device():
    """The index of the current GPU: 0 unless set_device chose another."""
    _gpus()
    return _current[0]


def set_device(device):
    """Make GPU `device` the current one (where new arrays go); a negative index changes nothing, as torch's.
    Without a GPU this raises the AttributeError of torch built without CUDA."""
    if getattr(device, "type", "cuda") != "cuda" or (isinstance(device, str) and not device.startswith("cuda")):
        raise ValueError(f"Expected a cuda device, but got: {device}")
    index = _index(device) if not isinstance(device, int) else device
    if index < 0:
        return
    if not is_available():
        raise AttributeError("module 'torch._C' has no attribute '_cuda_setDevice'")
    jax.config.update("jax_default_device", _gpus()[index])
    _current[0] = index


def get_device_properties(device=None):
    """The GPU's name, compute capability (major, minor), memory in bytes and multiprocessor count."""
    gpu = _gpu(device)
    major, _, minor = str(getattr(gpu, "compute_capability", "0.0")).partition(".")
    total = (gpu.memory_stats() or {}).get("bytes_limit", 0)
    return DeviceProperties(gpu.device_kind, int(major), int(minor or 0), total, getattr(gpu, "core_count", 0))


def get_device_name(device=None):
    """The GPU's name as its driver reports it."""
    return _gpu(device).device_kind


def synchronize(device=None):
    """Wait until the work queued on the GPU has finished."""
    _gpus()
    jax.effects_barrier()


def empty_cache():
    """torch frees its caching allocator's unused blocks; JAX's allocator frees buffers once unreferenced, so
    there is nothing cached to release."""


def memory_allocated(device=None):
    """The bytes of GPU memory in use by arrays (0 without a GPU, as torch)."""
    if not is_available():
        return 0
    return _gpu(device).memory_stats().get("bytes_in_use", 0)


def max_memory_allocated(device=None):
    """The peak bytes of GPU memory in use (0 without a GPU, as torch)."""
    if not is_available():
        return 0
    stats = _gpu(device).memory_stats()
    peak = stats.get("peak_bytes_in_use", 0)
    # JAX's peak cannot be reset: after reset_peak_memory_stats it counts once it passes the peak of then
    return peak if peak > _peak_at_reset.get(_index(device), -1) else stats.get("bytes_in_use", 0)


def reset_peak_memory_stats(device=None):
    """Start the peak counts afresh. Without a GPU this raises the AttributeError of torch built without CUDA."""
    if not is_available():
        raise AttributeError("module 'torch._C' has no attribute '_cuda_resetPeakMemoryStats'")
    _peak_at_reset[_index(device)] = _gpu(device).memory_stats().get("peak_bytes_in_use", 0)


def memory_reserved(device=None):
    """The bytes of GPU memory the allocator holds (0 without a GPU, as torch)."""
    if not is_available():
        return 0
    return _gpu(device).memory_stats().get("bytes_reserved", 0)


def max_memory_reserved(device=None):
    """The peak bytes of GPU memory the allocator held (0 without a GPU, as torch)."""
    if not is_available():
        return 0
    return _gpu(device).memory_stats().get("peak_bytes_reserved", 0)


def manual_seed(seed):
    """Seed the GPU's random numbers. batched_grad draws every device's random numbers from the host generator
    that batched_grad.manual_seed seeds, so there is no separate GPU stream to seed: as torch without a GPU, the
    call is accepted and changes nothing."""
    int(seed)


def manual_seed_all(seed):
    """Seed every GPU's random numbers: as manual_seed."""
    int(seed)


def seed():
    """Seed the GPU's random numbers non-deterministically: nothing to seed (see manual_seed)."""


def seed_all():
    """As seed(), for every GPU."""


def get_rng_state_all():
    """The states of the GPUs' own generators: none (an empty list, as torch without a GPU), since every device's
    random numbers come from the host generator, whose state torch.get_rng_state holds."""
    return []


def set_rng_state_all(new_states):
    """Restore what get_rng_state_all returned: a list of uint8 state tensors, of which there are none here (the
    host generator, restored by torch.set_rng_state, holds every device's random state)."""
    from .._tensor import Tensor

    states = list(new_states)
    for state in states:
        if not isinstance(state, Tensor) or state.dtype.name != "uint8":
            raise TypeError(f"set_rng_state_all: expected uint8 state tensors, but got {type(state).__name__}")


def is_bf16_supported(including_emulation=True):
    """Whether bfloat16 runs on the GPU (False without one, as torch)."""
    return is_available()


__all__ = [
    "current_device",
    "device_count",
    "empty_cache",
    "get_device_name",
    "get_device_properties",
    "get_rng_state_all",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state_all",
    "synchronize",
]


def _typed_classes():
    from .._legacy_constructors import CUDA_TYPED  # imports Tensor: after this module, which Tensor's module imports

    return CUDA_TYPED


def __getattr__(name):
    """torch.cuda.FloatTensor and its kind: constructors of GPU tensors (torch's TypeError without a GPU), and types
    for isinstance()."""
    typed = _typed_classes()
    if name in typed:
        return typed[name]
    raise AttributeError(f"module 'batched_grad.cuda' has no attribute '{name}'")
