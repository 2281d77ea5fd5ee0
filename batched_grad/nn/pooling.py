"""The pooling modules: max, average, adaptive, power-average (lp) pooling over 1, 2 or 3 dims and max unpooling,
with torch's options and reprs."""

from . import functional as F
from .module import Module


def _single(value, n):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _MaxPoolNd(Module):
    fn = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return type(self).fn(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self):
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    """max_pool1d as a module; the stride defaults to the kernel size."""

    fn = F.max_pool1d


class MaxPool2d(_MaxPoolNd):
    """max_pool2d as a module; the stride defaults to the kernel size."""

    fn = F.max_pool2d


class MaxPool3d(_MaxPoolNd):
    """max_pool3d as a module; the stride defaults to the kernel size."""

    fn = F.max_pool3d


class _AvgPoolNd(Module):
    fn = None

    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
    ):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return type(self).fn(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """avg_pool1d as a module; the stride defaults to the kernel size."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        Module.__init__(self)
        self.kernel_size = _single(kernel_size, 1)
        self.stride = _single(stride if stride is not None else kernel_size, 1)
        self.padding, self.ceil_mode, self.count_include_pad = _single(padding, 1), ceil_mode, count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """avg_pool2d as a module; the stride defaults to the kernel size."""

    fn = F.avg_pool2d


class AvgPool3d(_AvgPoolNd):
    """avg_pool3d as a module; the stride defaults to the kernel size."""

    fn = F.avg_pool3d


class _AdaptivePool(Module):
    fn = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):
        fn = type(self).fn
        return fn(input, self.output_size, self.return_indices) if "max" in fn.__name__ else fn(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _AdaptiveAvgPoolNd(_AdaptivePool):
    def __init__(self, output_size):
        super().__init__(output_size)


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """adaptive_avg_pool1d as a module."""

    fn = F.adaptive_avg_pool1d


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """adaptive_avg_pool2d as a module."""

    fn = F.adaptive_avg_pool2d


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """adaptive_avg_pool3d as a module."""

    fn = F.adaptive_avg_pool3d


class AdaptiveMaxPool1d(_AdaptivePool):
    """adaptive_max_pool1d as a module."""

    fn = F.adaptive_max_pool1d


class AdaptiveMaxPool2d(_AdaptivePool):
    """adaptive_max_pool2d as a module."""

    fn = F.adaptive_max_pool2d


class AdaptiveMaxPool3d(_AdaptivePool):
    """adaptive_max_pool3d as a module."""

    fn = F.adaptive_max_pool3d


class _LPPool(Module):
    fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):
        return type(self).fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool1d(_LPPool):
    """lp_pool1d as a module."""

    fn = F.lp_pool1d


class LPPool2d(_LPPool):
    """lp_pool2d as a module."""

    fn = F.lp_pool2d


class LPPool3d(_LPPool):
    """lp_pool3d as a module."""

    fn = F.lp_pool3d


class _MaxUnpool(Module):
    fn, n = None, 0

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = type(self).n
        self.kernel_size = _single(kernel_size, n)
        self.stride = _single(stride if stride is not None else kernel_size, n)
        self.padding = _single(padding, n)

    def forward(self, input, indices, output_size=None):
        return type(self).fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """max_unpool1d as a module."""

    fn, n = F.max_unpool1d, 1


class MaxUnpool2d(_MaxUnpool):
    """max_unpool2d as a module."""

    fn, n = F.max_unpool2d, 2


class MaxUnpool3d(_MaxUnpool):
    """max_unpool3d as a module."""

    fn, n = F.max_unpool3d, 3
