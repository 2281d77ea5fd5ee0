"""torch.utils for batched_grad: the data-loading package (batched_grad.utils.data)."""

from . import data

__all__ = ["data"]
