"""torch's process-wide settings for its CPU kernels: threads, deterministic algorithms, float32 matmul precision and
denormal flushing, with torch's checks and messages. Scripts set them at their top; what each changes here is said
where it differs from torch."""

import os
import warnings
from dataclasses import dataclass

import jax


@dataclass
class _Settings:
    num_threads: int
    num_interop_threads: int
    deterministic: bool = False
    deterministic_warn_only: bool = False
    matmul_precision: str = "highest"


def _cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_settings = _Settings(num_threads=_cores(), num_interop_threads=_cores())

# torch's float32 matmul precisions and the JAX precision of each: "high" allows TensorFloat-32, "medium" bfloat16
_MATMUL_PRECISIONS = {"highest": "highest", "high": "tensorfloat32", "medium": "bfloat16"}
_DEBUG_MODES = ("default", "warn", "error")


def _positive_int(value, name):
    if type(value) is bool or not isinstance(value, int):
        raise RuntimeError(f"{name} expects an int, but got {type(value).__name__}")
    if value <= 0:
        raise RuntimeError(f"{name} expects a positive integer")
    return value


def get_num_threads():
    """The number of threads torch's intra-op parallelism would use: the cores this process may run on, or the last
    set_num_threads."""
    return _settings.num_threads


def set_num_threads(int):  # noqa: A002  (torch's argument name)
    """Set the intra-op thread count get_num_threads reports. XLA sizes its CPU thread pool when its backend starts,
    so the count recorded here does not resize it; results do not depend on it, here or in torch."""
    _settings.num_threads = _positive_int(int, "set_num_threads")


def get_num_interop_threads():
    """The inter-op thread count: the cores this process may run on, or the last set_num_interop_threads."""
    return _settings.num_interop_threads


def set_num_interop_threads(int):  # noqa: A002
    """Set the inter-op thread count get_num_interop_threads reports (ops run one after another here)."""
    _settings.num_interop_threads = _positive_int(int, "set_num_interop_threads")


def init_num_threads():
    """torch initializes its thread pool for a new thread; XLA's pool needs nothing per thread."""


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Require deterministic algorithms. Every op here is deterministic on the CPU (XLA's CPU kernels and the NumPy
    host forms reduce in a fixed order), so nothing raises or warns; the mode is reported as in torch."""
    for name, value in (("'mode' (position 1)", mode), ("'warn_only'", warn_only)):
        if not isinstance(value, bool):
            raise TypeError(
                f"_set_deterministic_algorithms(): argument {name} must be bool, not {type(value).__name__}"
            )
    _settings.deterministic, _settings.deterministic_warn_only = mode, warn_only


def are_deterministic_algorithms_enabled():
    """Whether use_deterministic_algorithms(True) is in effect."""
    return _settings.deterministic


def is_deterministic_algorithms_warn_only_enabled():
    """The warn_only flag of the last use_deterministic_algorithms call."""
    return _settings.deterministic_warn_only


def set_deterministic_debug_mode(debug_mode):
    """use_deterministic_algorithms by level: 0 or "default" (off), 1 or "warn" (warn only), 2 or "error"."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(
                f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got {debug_mode}"
            )
        debug_mode = _DEBUG_MODES.index(debug_mode)
    elif type(debug_mode) is not int:
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    elif debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    """0 (deterministic algorithms off), 1 (on, warn only) or 2 (on)."""
    if not _settings.deterministic:
        return 0
    return 1 if _settings.deterministic_warn_only else 2


def get_float32_matmul_precision():
    """The last set_float32_matmul_precision: "highest" (the default), "high" or "medium"."""
    return _settings.matmul_precision


def set_float32_matmul_precision(precision):
    """The precision of float32 matrix products in compiled programs: "highest" (float32 throughout), "high"
    (TensorFloat-32 where the device has it) or "medium" (bfloat16), set as JAX's default matmul precision. XLA's
    CPU backend computes float32 products in float32 at every setting, as do the host forms."""
    if precision not in _MATMUL_PRECISIONS:
        warnings.warn(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
            "setFloat32MatmulPrecision call has no effect.",
            stacklevel=2,
        )
        return
    _settings.matmul_precision = precision
    jax.config.update("jax_default_matmul_precision", _MATMUL_PRECISIONS[precision])


def set_flush_denormal(mode):
    """torch flushes denormal float32/float64 values to zero where the CPU supports it and returns True. Values
    here are JAX and NumPy arrays, which keep denormals, so the mode cannot be set: False, as torch returns on a
    CPU without the support."""
    if not isinstance(mode, bool):
        raise RuntimeError(f"flush_denormal expects a bool, but got {type(mode).__name__}")
    return False
