"""torch.backends.cuda: the cuBLAS matmul precision switches (`matmul.allow_tf32`, reduced-precision reductions) and
the scaled-dot-product-attention kernel choices, settable as torch's. XLA chooses its own matmul kernels, so the
precision switches are recorded and change nothing; the attention switches choose between torch's CPU nodes of
scaled_dot_product_attention (the fused flash-attention node or the composite of differentiable ops), as torch's."""

import contextlib
import warnings

from .. import cuda as _cuda


class _Switches:
    """A fixed set of named boolean switches: setting or reading any other name is torch's AttributeError."""

    def __init__(self, **defaults):
        object.__setattr__(self, "_values", dict(defaults))

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name not in values:
            raise AttributeError(f"Unknown attribute {name}")
        return values[name]

    def __setattr__(self, name, value):
        if name not in self._values:
            raise AttributeError(f"Unknown attribute {name}")
        self._values[name] = value


matmul = _Switches(
    allow_tf32=False,
    allow_fp16_reduced_precision_reduction=True,
    allow_bf16_reduced_precision_reduction=True,
    allow_fp16_accumulation=False,
)
# which kernels scaled_dot_product_attention may use: on the CPU, "flash" is torch's fused node, "math" its composite
SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True, "overrideable": True}


def is_built():
    """Whether this process has a GPU backend (torch: whether it was built with CUDA)."""
    return _cuda.is_available()


def _sdp_switch(kind):
    def enable(enabled):
        SDP[kind] = bool(enabled)

    def query():
        return SDP[kind]

    enable.__name__, query.__name__ = f"enable_{kind}_sdp", f"{kind}_sdp_enabled"
    return enable, query


enable_flash_sdp, flash_sdp_enabled = _sdp_switch("flash")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _sdp_switch("mem_efficient")
enable_math_sdp, math_sdp_enabled = _sdp_switch("math")
enable_cudnn_sdp, cudnn_sdp_enabled = _sdp_switch("cudnn")


@contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """The older form of torch.nn.attention.sdpa_kernel (deprecated in torch): the backends enabled by flag."""
    warnings.warn(
        "`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will be removed. "
        "Please see `torch.nn.attention.sdpa_kernel()` for the new context manager, with updated signature.",
        FutureWarning,
        stacklevel=3,
    )
    from ..nn.attention import SDPBackend, sdpa_kernel

    flags = [
        (enable_flash, SDPBackend.FLASH_ATTENTION),
        (enable_mem_efficient, SDPBackend.EFFICIENT_ATTENTION),
        (enable_math, SDPBackend.MATH),
        (enable_cudnn, SDPBackend.CUDNN_ATTENTION),
    ]
    with sdpa_kernel([backend for enabled, backend in flags if enabled]) as context:
        yield context
