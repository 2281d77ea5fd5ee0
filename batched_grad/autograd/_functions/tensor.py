"""Two legacy custom Functions torch still ships in torch.autograd._functions: a differentiable resize that keeps the
number of elements, and a deprecated dtype conversion whose gradient returns to the input's tensor type."""

import math
import warnings

from ..function import Function

_TYPE_DEPRECATED = (
    "`torch.autograd._functions.Type` is deprecated as of PyTorch 2.1, please use `torch.tensor.to(dtype=dtype)` "
    "instead."
)


def _sizes_text(sizes):
    return "x".join(str(s) for s in sizes)


class Resize(Function):
    """`Resize.apply(tensor, sizes)`: `tensor` seen with the shape `sizes` (the same number of elements); its
    gradient is the output's gradient seen with the input's shape."""

    @staticmethod
    def forward(ctx, tensor, sizes):
        numel = math.prod(sizes)
        if tensor.numel() != numel:
            raise RuntimeError(
                f"requested resize to {_sizes_text(sizes)} ({numel} elements in total), but the given tensor has a "
                f"size of {_sizes_text(tensor.size())} ({tensor.numel()} elements). autograd's resize can only "
                "change the shape of a given tensor, while preserving the number of elements. "
            )
        ctx.sizes, ctx.numel, ctx.input_sizes = sizes, numel, tensor.size()
        # a contiguous input is aliased (as torch's tensor.new(tensor)), another is copied into contiguous memory
        source = tensor.new(tensor) if tensor.is_contiguous() else tensor.contiguous()
        return source.view(*sizes)

    @staticmethod
    def backward(ctx, grad_output):
        if grad_output.numel() != ctx.numel:
            raise AssertionError(f"Expected grad_output to have {ctx.numel} elements, but got {grad_output.numel()}")
        return grad_output.contiguous().view(ctx.input_sizes), None


class Type(Function):
    """`Type.apply(tensor, dest_type)`: `tensor.type(dest_type)`; its gradient is converted back to the input's
    tensor type. Deprecated in torch (a FutureWarning at each use)."""

    @staticmethod
    def forward(ctx, tensor, dest_type):
        warnings.warn(_TYPE_DEPRECATED, FutureWarning, stacklevel=4)
        ctx.input_type, ctx.input_device = type(tensor), tensor.device
        return tensor.type(dest_type)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.type(ctx.input_type).to(ctx.input_device), None
