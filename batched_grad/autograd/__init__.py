"""batched_grad.autograd: grad, backward, Function, graph edges, anomaly mode, the functional API, gradcheck."""

import batched_grad as torch  # noqa: F401  (torch.autograd imports torch, so torch.autograd.torch is torch)

from .._grad_mode import (
    _force_original_view_tracking,  # noqa: F401  (torch's, private)
    enable_grad,
    inference_mode,
    is_view_replay_enabled,  # noqa: F401  (torch's, not in its __all__)
    no_grad,
    set_grad_enabled,
)
from .._saved import SavedTensor  # noqa: F401  (torch's, not in its __all__: made by the nodes only)
from . import forward_ad, functional, grad_mode, graph, profiler
from ._api import backward, grad
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import _unsafe_preserve_version_counter, is_multithreading_enabled, set_multithreading_enabled  # noqa: F401
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .profiler import _profiler_enabled  # noqa: F401  (torch's, private)
from .variable import Variable

__all__ = [
    "backward",
    "grad",
    "functional",
    "graph",
    "grad_mode",
    "Function",
    "FunctionCtx",
    "once_differentiable",
    "detect_anomaly",
    "set_detect_anomaly",
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
    "Variable",
    "enable_grad",
    "inference_mode",
    "no_grad",
    "set_grad_enabled",
    "set_multithreading_enabled",
]
