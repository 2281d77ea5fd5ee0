"""batched_grad.fft: torch.fft's names."""

from ._ops import fft as _fft

globals().update(_fft.FUNCTIONS)

__all__ = sorted(_fft.FUNCTIONS)
