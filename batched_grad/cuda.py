"""batched_grad.cuda: torch.cuda's queries and the calls CPU-only programs make (seeding, synchronize,
empty_cache), answered from JAX's GPU backend. Without one, the calls that need a GPU raise torch's error for a
build without CUDA, and the rest do what torch does then (seeding is accepted, memory counts are 0)."""

import jax

from ._devices import jax_devices

NO_CUDA = "Torch not compiled with CUDA enabled"


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
    index = getattr(device, "index", device)
    if isinstance(index, str):
        index = int(index.partition(":")[2] or 0)
    return gpus[index or 0]


def current_device():
    """The index of the current GPU: 0 (JAX places on the first GPU unless told otherwise)."""
    _gpus()
    return 0


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
    return _gpu(device).memory_stats().get("peak_bytes_in_use", 0)


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


def is_bf16_supported(including_emulation=True):
    """Whether bfloat16 runs on the GPU (False without one, as torch)."""
    return is_available()


__all__ = [
    "current_device",
    "device_count",
    "empty_cache",
    "get_device_name",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "memory_allocated",
    "seed",
    "seed_all",
    "synchronize",
]
