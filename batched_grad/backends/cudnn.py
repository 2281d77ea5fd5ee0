"""torch.backends.cudnn: the cuDNN switches (deterministic, benchmark, enabled, allow_tf32), settable as torch's.
XLA picks its own GPU kernels, so they are recorded and change nothing."""

import contextlib

from .. import cuda as _cuda

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10

_SWITCHES = ("enabled", "benchmark", "deterministic", "allow_tf32")


def is_available():
    """Whether cuDNN can run here: with a GPU backend (XLA calls cuDNN on NVIDIA GPUs)."""
    return _cuda.is_available()


def version():
    """None, as torch without cuDNN: the cuDNN that XLA links is not exposed to Python."""
    return None


def is_acceptable(tensor):
    """Whether cuDNN would take this tensor: a floating GPU tensor when cuDNN is available and enabled."""
    return enabled and is_available() and tensor.is_cuda and tensor.is_floating_point()


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """Set the switches inside the block, restoring them after."""
    module = globals()
    saved = {name: module[name] for name in (*_SWITCHES, "benchmark_limit")}
    module.update(
        enabled=enabled,
        benchmark=benchmark,
        benchmark_limit=benchmark_limit,
        deterministic=deterministic,
        allow_tf32=allow_tf32,
    )
    try:
        yield
    finally:
        module.update(saved)
