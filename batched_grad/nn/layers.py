"""Layers that rearrange, resize or combine features: PixelShuffle, PixelUnshuffle, ChannelShuffle, Unfold, Fold,
Unflatten, Upsample (and its nearest and bilinear forms), Bilinear; and the channel-wise and alpha dropouts."""

import math

from .. import _factories
from .._ops.shape import unflatten
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class PixelShuffle(Module):
    """pixel_shuffle as a module."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """pixel_unshuffle as a module."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """channel_shuffle as a module."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class Unfold(Module):
    """unfold (im2col) as a module."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, stride={self.stride}"


class Fold(Module):
    """fold (col2im) as a module."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return f"output_size={self.output_size}, " + Unfold.extra_repr(self)


class Unflatten(Module):
    """Splits dimension `dim` into `unflattened_size`."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)) or not all(isinstance(s, int) for s in unflattened_size):
            raise TypeError(f"unflattened_size must be tuple of ints, but found type {type(unflattened_size).__name__}")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input):
        return unflatten(input, self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Upsample(Module):
    """interpolate as a module, by `size` or `scale_factor`."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.name, self.size, self.mode = type(self).__name__, size, mode
        self.scale_factor = (
            tuple(float(f) for f in scale_factor)
            if isinstance(scale_factor, tuple)
            else float(scale_factor)
            if scale_factor
            else None
        )
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return F.interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )

    def extra_repr(self):
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour 2-D upsampling."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear 2-D upsampling with align_corners=True."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class Bilinear(Module):
    """y = x1^T A x2 + b with A of shape (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(_factories.empty(out_features, in1_features, in2_features, dtype=dtype))
        self.register_parameter("bias", Parameter(_factories.empty(out_features, dtype=dtype)) if bias else None)
        self.reset_parameters()
        self._made_on(device)

    def reset_parameters(self):
        """U(-1/sqrt(in1_features), 1/sqrt(in1_features)) for weight and bias, as torch."""
        if self.in1_features <= 0:
            raise ValueError(f"in1_features must be > 0, but got (in1_features={self.in1_features})")
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class _DropoutNd(Module):
    fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return type(self).fn(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """dropout1d (whole channels) while training."""

    fn = F.dropout1d


class Dropout2d(_DropoutNd):
    """dropout2d (whole channels) while training."""

    fn = F.dropout2d


class Dropout3d(_DropoutNd):
    """dropout3d (whole channels) while training."""

    fn = F.dropout3d


class AlphaDropout(_DropoutNd):
    """alpha_dropout while training."""

    fn = F.alpha_dropout


class FeatureAlphaDropout(_DropoutNd):
    """feature_alpha_dropout while training."""

    fn = F.feature_alpha_dropout
