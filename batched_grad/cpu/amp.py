"""torch.cpu.amp: deprecated aliases of torch.amp.autocast("cpu", ...) and torch.amp.GradScaler("cpu", ...), with
torch's FutureWarnings."""

import warnings

from .. import _dtypes
from ..amp import autocast_mode, grad_scaler

__all__ = ["GradScaler", "autocast"]


class autocast(autocast_mode.autocast):  # noqa: N801  (torch's name)
    def __init__(self, enabled=True, dtype=_dtypes.bfloat16, cache_enabled=True):
        warnings.warn(
            "`torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
        warnings.warn(
            "`torch.cpu.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cpu', args...)` "
            "instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
