"""The layers: Linear, Conv2d, activations, Flatten, Dropout, LayerNorm, Embedding and the losses, with
torch's constructor arguments and default initialization (pooling is in pooling.py)."""

import math

from .. import _factories
from .._grad_mode import no_grad
from .._int_args import int_or_ints
from .._ops.shape import flatten
from .._tensor import Size
from . import functional as F
from . import init
from .layers import _DropoutNd
from .loss import _Loss, _WeightedLoss
from .module import Module
from .parameter import Parameter


def _empty(*shape, dtype=None):
    return Parameter(_factories.empty(*shape, dtype=dtype))


def _uniform_fan_in_init(weight, bias):
    """torch's default for Linear and Conv: kaiming_uniform(a=sqrt(5)) weights, U(+-1/sqrt(fan_in)) bias."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in = init._calculate_fan_in_and_fan_out(weight)[0]
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


class Linear(Module):
    """y = x @ weight.T + bias, weight of shape (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = _empty(out_features, in_features, dtype=dtype)
        self.register_parameter("bias", _empty(out_features, dtype=dtype) if bias else None)
        self.reset_parameters()
        self._made_on(device)

    def reset_parameters(self):
        """Re-draw weight and bias with torch's default initialization."""
        _uniform_fan_in_init(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


_PADDING_MODES = {"zeros": None, "reflect": "reflect", "replicate": "replicate", "circular": "circular"}


def _ntuple(value, n):
    return int_or_ints(value, n)


def _reversed_padding(padding, kernel_size, dilation):
    """F.pad's (last dim first, left then right) form of a convolution's padding; 'same' splits each dim's
    dilation * (kernel - 1) with the smaller half on the left, 'valid' pads nothing."""
    if padding == "valid":
        return [0, 0] * len(kernel_size)
    if padding == "same":
        totals = [d * (k - 1) for k, d in zip(reversed(kernel_size), reversed(dilation))]
        return [p for total in totals for p in (total // 2, total - total // 2)]
    return tuple(p for size in reversed(padding) for p in (size, size))


class _ConvNd(Module):
    """An n-dim convolution layer with torch's arguments, weight shape, initialization and repr."""

    n, transposed = 2, False

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
        output_padding=0,
    ):
        super().__init__()
        n, name = type(self).n, type(self).__name__
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        for what, channels in (("in_channels", in_channels), ("out_channels", out_channels)):
            if channels % groups:
                raise ValueError(f"{what} must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                f"padding_mode must be one of {list(_PADDING_MODES)}, but got padding_mode='{padding_mode}'"
            )
        if self.transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _ntuple(kernel_size, n), _ntuple(stride, n)
        self.dilation, self.output_padding = _ntuple(dilation, n), _ntuple(output_padding, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = _reversed_padding(self.padding, self.kernel_size, self.dilation)
        shape = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
        self.weight = _empty(*shape, *self.kernel_size, dtype=dtype)
        self.register_parameter("bias", _empty(out_channels, dtype=dtype) if bias else None)
        self.reset_parameters()
        self._made_on(device)

    def reset_parameters(self):
        """Re-draw weight and bias with torch's default initialization."""
        _uniform_fan_in_init(self.weight, self.bias)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def _conv_forward(self, input, weight, bias):
        """The convolution of `input` with the given weight and bias under this layer's geometry (subclasses that
        transform the weight call it, as with torch's layers); a padding mode other than zeros pads first."""
        conv = (F.conv1d, F.conv2d, F.conv3d)[type(self).n - 1]
        mode = _PADDING_MODES[self.padding_mode]
        if mode is None:
            return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)
        padded = F.pad(input, self._reversed_padding_repeated_twice, mode=mode)
        return conv(padded, weight, bias, self.stride, 0, self.dilation, self.groups)

    def extra_repr(self):
        n = type(self).n
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


def _conv(n, doc):
    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        _ConvNd.__init__(
            self,
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
        )

    return type(f"Conv{n}d", (_ConvNd,), {"n": n, "__init__": __init__, "__doc__": doc, "__module__": __name__})


Conv1d = _conv(1, "1-D cross-correlation with weight of shape (out_channels, in_channels / groups, k).")
Conv2d = _conv(2, "2-D cross-correlation with weight of shape (out_channels, in_channels / groups, kh, kw).")
Conv3d = _conv(3, "3-D cross-correlation with weight of shape (out_channels, in_channels / groups, kd, kh, kw).")


class _ConvTransposeNd(_ConvNd):
    transposed = True

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
            output_padding,
        )

    def _output_padding(self, input, output_size):
        """The output_padding giving `output_size` (its last n entries), within what the geometry allows."""
        if output_size is None:
            return self.output_padding
        n = type(self).n
        size = list(output_size)[-n:]
        given = output_size if isinstance(output_size, tuple) else list(output_size)
        smallest = [
            (input.shape[d - n] - 1) * self.stride[d]
            - 2 * self.padding[d]
            + self.dilation[d] * (self.kernel_size[d] - 1)
            + 1
            for d in range(n)
        ]
        largest = [low + s - 1 for low, s in zip(smallest, self.stride)]
        if not all(low <= want <= high for low, want, high in zip(smallest, size, largest)):
            raise ValueError(
                f"requested an output size of {given}, but valid sizes range from {smallest} to "
                f"{largest} (for an input of {Size(input.shape[-n:])!r})"
            )
        return tuple(want - low for want, low in zip(size, smallest))

    def forward(self, input, output_size=None):
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[type(self).n - 1]
        return conv(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution with weight of shape (in_channels, out_channels / groups, k)."""

    n = 1


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution with weight of shape (in_channels, out_channels / groups, kh, kw)."""

    n = 2


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution with weight of shape (in_channels, out_channels / groups, kd, kh, kw)."""

    n = 3


class _Stateless(Module):
    """A module whose forward is a functional op with fixed keyword arguments."""

    fn = None
    options = ()

    def __init__(self, **kwargs):
        super().__init__()
        for name, value in kwargs.items():
            setattr(self, name, value)

    def forward(self, input):
        return type(self).fn(input, **{name: getattr(self, name) for name in self.options})

    def extra_repr(self):
        return ", ".join(f"{name}={getattr(self, name)!r}" for name in self.options)


class ReLU(_Stateless):
    """max(0, x), elementwise."""

    fn, options = F.relu, ("inplace",)

    def __init__(self, inplace=False):
        super().__init__(inplace=inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(_Stateless):
    """tanh(x), elementwise."""

    fn = F.tanh


class Sigmoid(_Stateless):
    """1 / (1 + exp(-x)), elementwise."""

    fn = F.sigmoid


class Softplus(_Stateless):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold, elementwise."""

    fn, options = F.softplus, ("beta", "threshold")

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__(beta=beta, threshold=threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class GELU(_Stateless):
    """x * Phi(x) with Phi the standard normal CDF, elementwise; approximate="tanh" uses the tanh approximation."""

    fn, options = F.gelu, ("approximate",)

    def __init__(self, approximate="none"):
        super().__init__(approximate=approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Flatten(_Stateless):
    """Flattens dimensions start_dim..end_dim (1..-1 by default, keeping the batch dimension)."""

    fn, options = flatten, ("start_dim", "end_dim")

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__(start_dim=start_dim, end_dim=end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Dropout(_DropoutNd):
    """Zeroes elements with probability p while training; the identity in eval mode."""

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)


class LayerNorm(Module):
    """Normalizes over the trailing `normalized_shape` dims, with a learned scale (ones) and shift (zeros)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        shape = int_or_ints(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        self.register_parameter(
            "weight", Parameter(_factories.ones(*shape, dtype=dtype)) if elementwise_affine else None
        )
        self.register_parameter(
            "bias", Parameter(_factories.zeros(*shape, dtype=dtype)) if elementwise_affine and bias else None
        )
        self._made_on(device)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
            f"bias={self.bias is not None}"
        )


class Embedding(Module):
    """A lookup table of `num_embeddings` rows of size `embedding_dim`, initialized N(0, 1)."""

    def __init__(
        self,
        num_embeddings,
        embedding_dim,
        padding_idx=None,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        sparse=False,
        _weight=None,
        _freeze=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = _empty(num_embeddings, embedding_dim, dtype=dtype)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        self._made_on(device)

    def reset_parameters(self):
        """Re-draw the weight from N(0, 1), with the padding_idx row zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input):
        return F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse
        )

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")

    @classmethod
    def from_pretrained(
        cls,
        embeddings,
        freeze=True,
        padding_idx=None,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        sparse=False,
    ):
        """An Embedding whose table is the 2-D `embeddings` (not trained when `freeze`)."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(
            num_embeddings=rows,
            embedding_dim=cols,
            _weight=embeddings,
            _freeze=freeze,
            padding_idx=padding_idx,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            sparse=sparse,
        )


class MSELoss(_Loss):
    """mse_loss as a module."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """cross_entropy as a module; `weight` is a buffer."""

    def __init__(
        self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0
    ):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(
            input,
            target,
            self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )
