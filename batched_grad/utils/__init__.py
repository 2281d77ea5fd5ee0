"""torch.utils for batched_grad: the data-loading package (batched_grad.utils.data), hook handles
(batched_grad.utils.hooks) and activation checkpointing (batched_grad.utils.checkpoint)."""

from . import _pytree, checkpoint, data, hooks  # noqa: F401  (_pytree: torch.utils._pytree, private in torch)

__all__ = ["checkpoint", "data", "hooks"]
