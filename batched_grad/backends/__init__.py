"""torch.backends: the switches programs set for torch's kernels (cuDNN's determinism and autotuning, TF32 matmuls)
and the accelerator queries. XLA chooses the kernels here, so the switches are recorded, settable and readable as
torch's, and change nothing; the queries answer for this process (no MPS ever)."""

from . import cpu, cuda, cudnn, mps

__all__ = ["cpu", "cuda", "cudnn", "mps"]
