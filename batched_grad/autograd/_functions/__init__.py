"""torch.autograd._functions: the legacy Functions torch keeps there (Resize, Type) and the helpers of its utils."""

from .tensor import Resize, Type

__all__ = ["Resize", "Type"]
