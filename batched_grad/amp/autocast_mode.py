"""torch.amp.autocast and the autocast state functions, as torch 2.13 has them on a CPU build.

torch's autocast runs the ops of its per-device lists in a lower precision (on CPU: bfloat16 or float16 for matmul,
linear, convolutions, ...; float32 for the losses, reductions and solvers of its other list). An enabled CPU region
makes those casts (_autocast.py holds the policies; the listed functions carry them). Autocast on the other device
types is refused (NotImplementedError) rather than run at full precision. What torch disables with a warning is
disabled here with the same warning: CUDA autocast without a GPU, a dtype the device does not support.
`enabled=False` runs the region as it is, exactly as torch."""

import functools
import warnings

from .._autocast import ENABLED, REGION, cast_tree
from .._devices import jax_devices
from .._dtypes import bfloat16, float16

__all__ = ["autocast", "autocast_decorator", "custom_bwd", "custom_fwd", "is_autocast_available"]

_AVAILABLE = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "mtia", "maia", "ipu")
_DEVICE_TYPES = _AVAILABLE + ("mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "lazy", "vulkan", "meta")
_NOT_IMPLEMENTED = (
    "autocast on '{device}' with dtype {dtype} is not implemented by batched_grad: torch's autocast runs the ops of "
    "its lists in reduced precision, which batched_grad does not do (an enabled region would silently run in full "
    "precision); pass enabled=False, or cast the model and inputs to {dtype} yourself"
)
_enabled = {}  # device type -> whether autocast is on (only "cpu" can be: the others are refused)
_dtype = {"cpu": bfloat16}  # device type -> its autocast dtype (float16 for the others, as torch's)
_state = {"cache_enabled": True, "nesting": 0}


def _check_device_type(device_type):
    if device_type not in _DEVICE_TYPES:
        raise RuntimeError(
            "Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, xla, lazy, "
            f"vulkan, mps, meta, hpu, mtia, privateuseone device type at start of device string: {device_type}"
        )


def is_autocast_available(device_type):
    """Whether torch has autocast for `device_type` (cpu, cuda, xpu, mps, hpu, xla, mtia, maia, ipu)."""
    _check_device_type(device_type)
    return device_type in _AVAILABLE


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for `device_type` (for CUDA when not given): always False here."""
    if device_type is not None:
        _check_device_type(device_type)
    return _enabled.get("cuda" if device_type is None else device_type, False)


def set_autocast_enabled(device_type, enabled=None):
    """Switch autocast for `device_type` (one argument: for CUDA); switching it on for a device other than the CPU
    is refused (not implemented)."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    _check_device_type(device_type)
    if enabled and device_type != "cpu":
        raise NotImplementedError(_NOT_IMPLEMENTED.format(device=device_type, dtype=get_autocast_dtype(device_type)))
    _enabled[device_type] = bool(enabled)
    _sync_cpu_region()


def _sync_cpu_region():
    REGION.dtype = _dtype["cpu"] if _enabled.get("cpu", False) else None
    ENABLED.ever = ENABLED.ever or REGION.dtype is not None


def get_autocast_dtype(device_type):
    """The dtype autocast would use on `device_type`: bfloat16 for CPU, float16 for the others, unless set."""
    _check_device_type(device_type)
    return _dtype.get(device_type, float16)


def set_autocast_dtype(device_type, dtype):
    """Set the dtype autocast would use on `device_type`."""
    _check_device_type(device_type)
    _dtype[device_type] = dtype
    _sync_cpu_region()


def is_autocast_cache_enabled():
    """Whether autocast keeps the casts of leaf tensors (torch's cache; here each call casts anew)."""
    return _state["cache_enabled"]


def set_autocast_cache_enabled(enabled):
    """Switch the autocast cache on or off (it holds nothing here: each call casts anew)."""
    _state["cache_enabled"] = bool(enabled)


def autocast_increment_nesting():
    """Count an entered autocast region; returns the depth."""
    _state["nesting"] += 1
    return _state["nesting"]


def autocast_decrement_nesting():
    """Count a left autocast region; returns the depth."""
    _state["nesting"] -= 1
    return _state["nesting"]


def clear_autocast_cache():
    """Nothing is cached: each call casts anew."""


def autocast_decorator(autocast_instance, func):
    """`func` run inside `autocast_instance` at each call."""

    @functools.wraps(func)
    def decorate_autocast(*args, **kwargs):
        with autocast_instance:
            return func(*args, **kwargs)

    return decorate_autocast


class autocast:  # noqa: N801  (torch's name)
    """Context manager and decorator: torch's autocast region. Enabled, it casts on the CPU and is refused on the
    other devices (see the module's docstring); disabled (enabled=False, or disabled by torch's rules with its
    warning), it runs the region unchanged."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        _check_device_type(device_type)
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if enabled:
            if device_type == "cuda":
                if not bool(jax_devices("cuda")):
                    warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", stacklevel=2)
                    enabled = False
            elif self.fast_dtype not in (bfloat16, float16):
                name = device_type.upper()
                warnings.warn(
                    f"In {name} autocast, but the target dtype is not supported. Disabling autocast.\n"
                    f"{name} Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                    stacklevel=2,
                )
                enabled = False
        if enabled and device_type != "cpu":
            raise NotImplementedError(_NOT_IMPLEMENTED.format(device=device_type, dtype=self.fast_dtype))
        self._enabled = enabled

    def __enter__(self):
        self.prev_cache_enabled = is_autocast_cache_enabled()
        self.prev = is_autocast_enabled(self.device)
        self.prev_fastdtype = get_autocast_dtype(self.device)
        set_autocast_enabled(self.device, self._enabled)
        set_autocast_dtype(self.device, self.fast_dtype)
        autocast_increment_nesting()
        set_autocast_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if autocast_decrement_nesting() == 0:
            clear_autocast_cache()
        set_autocast_enabled(self.device, self.prev)
        set_autocast_dtype(self.device, self.prev_fastdtype)
        set_autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. Did you mean to use autocast "
                "as a context manager? For example:\n    with torch.autocast(device_type=...):\n        output = "
                "model(input)"
            )
        return autocast_decorator(self, func)


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator of a custom Function's forward: it records the autocast state for custom_bwd; with `cast_inputs`
    in an enabled region, the forward runs outside autocast with its floating arguments cast to `cast_inputs`."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        args[0]._fwd_used_autocast = is_autocast_enabled(device_type) if cast_inputs is None else False
        if cast_inputs is None or not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*cast_tree(args, cast_inputs), **cast_tree(kwargs, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator of a custom Function's backward: it runs in the autocast state its forward ran in."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast, dtype=args[0]._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd


def get_autocast_cpu_dtype():
    """Deprecated form of get_autocast_dtype("cpu")."""
    return get_autocast_dtype("cpu")


def get_autocast_gpu_dtype():
    """Deprecated form of get_autocast_dtype("cuda")."""
    return get_autocast_dtype("cuda")


def is_autocast_cpu_enabled():
    """Deprecated form of is_autocast_enabled("cpu")."""
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled):
    """Deprecated form of set_autocast_enabled("cpu", enabled)."""
    set_autocast_enabled("cpu", enabled)


def set_autocast_cpu_dtype(dtype):
    """Deprecated form of set_autocast_dtype("cpu", dtype)."""
    set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype):
    """Deprecated form of set_autocast_dtype("cuda", dtype)."""
    set_autocast_dtype("cuda", dtype)
