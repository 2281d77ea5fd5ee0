"""torch.cpu: the deprecated torch.cpu.amp forms (torch.amp.autocast("cpu") and GradScaler("cpu"))."""

from . import amp

__all__ = ["amp"]
