"""torch.cuda.amp: deprecated aliases of torch.amp.autocast("cuda", ...) and torch.amp.GradScaler("cuda", ...),
with torch's FutureWarnings; without a GPU both are disabled with torch's warning."""

import functools
import warnings

from .. import _dtypes
from ..amp import autocast_mode, grad_scaler

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


def _deprecated(old, new):
    warnings.warn(f"`{old}` is deprecated. Please use `{new}` instead.", FutureWarning, stacklevel=3)


class autocast(autocast_mode.autocast):  # noqa: N801  (torch's name)
    def __init__(self, enabled=True, dtype=_dtypes.float16, cache_enabled=True):
        _deprecated("torch.cuda.amp.autocast(args...)", "torch.amp.autocast('cuda', args...)")
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
        _deprecated("torch.cuda.amp.GradScaler(args...)", "torch.amp.GradScaler('cuda', args...)")
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    _deprecated("torch.cuda.amp.custom_fwd(args...)", "torch.amp.custom_fwd(args..., device_type='cuda')")
    return functools.partial(autocast_mode.custom_fwd, device_type="cuda")(fwd=fwd, cast_inputs=cast_inputs)


def custom_bwd(bwd):
    _deprecated("torch.cuda.amp.custom_bwd(args...)", "torch.amp.custom_bwd(args..., device_type='cuda')")
    return functools.partial(autocast_mode.custom_bwd, device_type="cuda")(bwd)
