"""torch.utils for batched_grad: the data-loading package (batched_grad.utils.data), hook handles
(batched_grad.utils.hooks), activation checkpointing (batched_grad.utils.checkpoint) and DLPack exchange
(batched_grad.utils.dlpack); batched_grad.utils.benchmark is imported on demand, as torch's is."""

from . import _pytree, checkpoint, data, dlpack, hooks  # noqa: F401  (_pytree: torch.utils._pytree, private in torch)

__all__ = ["checkpoint", "data", "dlpack", "hooks"]
