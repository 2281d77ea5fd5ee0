"""torch.autograd.grad_mode: the grad-mode switches (no_grad, enable_grad, set_grad_enabled, inference_mode, which
live in batched_grad._grad_mode), set_multithreading_enabled, and _unsafe_preserve_version_counter."""

from .._grad_mode import _GradMode, enable_grad, inference_mode, no_grad, set_grad_enabled
from .._tensor import Tensor

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "set_multithreading_enabled"]

_multithreading = [True]  # the engine's switch, process-wide as torch's


def is_multithreading_enabled():
    """Whether set_multithreading_enabled allows the engine threads of accelerators (True unless switched off)."""
    return _multithreading[0]


class set_multithreading_enabled:
    """Allow (True) or forbid (False) backward work on the engine's per-device threads, from construction until the
    block ends (a context manager), or inside each call of a decorated function. As on torch's CPU build, work on
    CPU tensors runs on the thread that called backward either way: there are no device threads to use."""

    def __init__(self, mode):
        self.prev, self.mode = _multithreading[0], mode
        _multithreading[0] = mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _multithreading[0] = self.prev

    def clone(self):
        """A new context manager of the same mode (torch's decorator protocol)."""
        return type(self)(self.mode)

    __call__ = _GradMode.__call__


class _unsafe_preserve_version_counter:
    """On leaving the block, set the version counters of `tensors` (a tensor or a tuple of them) back to what they
    were on entering it, whatever in-place ops ran in it: those ops then do not make saved tensors stale (unsafe
    where they really changed what a node saved)."""

    def __init__(self, tensors):
        self.tensors = (tensors,) if isinstance(tensors, Tensor) else tensors
        if not isinstance(self.tensors, tuple):
            raise TypeError(
                "_unsafe_preserve_version_counter(): argument 'tensors' must be a Tensor or a tuple of Tensors, not "
                f"{type(tensors).__name__}"
            )
        self.prev_versions = tuple(t._version for t in self.tensors)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        for t, version in zip(self.tensors, self.prev_versions):
            t._counter.value = version

    def clone(self):
        return type(self)(self.tensors)

    __call__ = _GradMode.__call__
