"""torch.cpu: the queries of the cpu device (there is one, always available) and the deprecated torch.cpu.amp forms
(torch.amp.autocast("cpu") and GradScaler("cpu"))."""

import jax

from . import amp

__all__ = ["amp", "current_device", "device_count", "is_available", "synchronize"]


def is_available():
    """True: tensors can always live on the cpu."""
    return True


def device_count():
    """1: torch counts the cpu as one device."""
    return 1


def current_device():
    """The cpu, the only cpu device."""
    return "cpu"


def synchronize(device=None):
    """Wait until the work queued on the cpu has finished, as cuda.synchronize does on a GPU."""
    jax.effects_barrier()
