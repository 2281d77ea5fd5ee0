"""torch.amp: autocast (refused where it would be enabled: batched_grad does not run torch's reduced-precision op
lists; see autocast_mode) and GradScaler (loss scaling), as torch 2.13 on a CPU build."""

from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]
