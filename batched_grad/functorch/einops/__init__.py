"""functorch.einops, as torch 2.13 ships it: `rearrange` (einops' pattern language over one tensor or a stack)."""

from .rearrange import rearrange

__all__ = ["rearrange"]
