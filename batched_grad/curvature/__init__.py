"""Curvature and per-sample quantities on batched_grad's engine."""

from ._diag_ggn import diag_ggn
from ._dp_sgd import DPStep, GhostClipping, dp_sgd_step
from ._persample import per_sample_grad_norms, per_sample_grads

__all__ = [
    "DPStep",
    "GhostClipping",
    "diag_ggn",
    "dp_sgd_step",
    "per_sample_grad_norms",
    "per_sample_grads",
]
