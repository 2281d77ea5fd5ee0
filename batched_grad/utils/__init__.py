"""torch.utils for batched_grad: the data-loading package (batched_grad.utils.data) and hook handles
(batched_grad.utils.hooks)."""

from . import data, hooks

__all__ = ["data", "hooks"]
