"""Curvature and per-sample quantities on batched_grad's engine."""

from ._persample import per_sample_grad_norms, per_sample_grads

__all__ = [
    "per_sample_grad_norms",
    "per_sample_grads",
]
