"""The activation modules beyond ReLU, Tanh, Sigmoid, GELU and Softplus, and Identity: each calls its functional
op with the options it was built with, and prints them as torch's does."""

from .. import _factories
from . import functional as F
from .basic import _Stateless
from .module import Module
from .parameter import Parameter


def _inplace_repr(self):
    return "inplace=True" if self.inplace else ""


def _with_inplace(text, inplace):
    return f"{text}, inplace=True" if inplace else text


class Identity(Module):
    """Returns its input; arguments are accepted and unused, as torch's (a placeholder layer)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Hardtanh(_Stateless):
    """input clamped into [min_val, max_val], elementwise."""

    fn, options = F.hardtanh, ("min_val", "max_val", "inplace")

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        if min_val >= max_val:
            raise AssertionError
        super().__init__(min_val=min_val, max_val=max_val, inplace=inplace)

    def extra_repr(self):
        return _with_inplace(f"min_val={self.min_val}, max_val={self.max_val}", self.inplace)


class ReLU6(Hardtanh):
    """min(max(0, x), 6), elementwise."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    extra_repr = _inplace_repr


class _InplaceOption(_Stateless):
    """An elementwise activation whose only option is `inplace` (torch's classes of these share no base)."""

    options = ("inplace",)

    def __init__(self, inplace=False):
        super().__init__(inplace=inplace)

    extra_repr = _inplace_repr


def _no_repr(self):
    return ""


class Hardsigmoid(_InplaceOption):
    """relu6(x + 3) / 6, elementwise."""

    fn, extra_repr = F.hardsigmoid, _no_repr


class Hardswish(_InplaceOption):
    """x * relu6(x + 3) / 6, elementwise."""

    fn, extra_repr = F.hardswish, _no_repr


class Mish(_InplaceOption):
    """x * tanh(softplus(x)), elementwise."""

    fn = F.mish


class SiLU(_InplaceOption):
    """x * sigmoid(x), elementwise."""

    fn = F.silu


class SELU(_InplaceOption):
    """scale * elu(x, alpha) with the self-normalizing constants, elementwise."""

    fn = F.selu


class _Shrink(_Stateless):
    options = ("lambd",)

    def __init__(self, lambd=0.5):
        super().__init__(lambd=lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    """x where |x| > lambd, else 0, elementwise."""

    fn = F.hardshrink


class Softshrink(_Shrink):
    """x - lambd above lambd, x + lambd below -lambd, else 0, elementwise."""

    fn = F.softshrink


class Softsign(_Stateless):
    """x / (1 + |x|), elementwise."""

    fn = F.softsign


class Tanhshrink(_Stateless):
    """x - tanh(x), elementwise."""

    fn = F.tanhshrink


class LogSigmoid(_Stateless):
    """log(sigmoid(x)), elementwise."""

    fn = F.logsigmoid


class Threshold(_Stateless):
    """x where x > threshold, else value, elementwise."""

    fn, options = F.threshold, ("threshold", "value", "inplace")

    def __init__(self, threshold, value, inplace=False):
        super().__init__(threshold=threshold, value=value, inplace=inplace)

    def extra_repr(self):
        return _with_inplace(f"threshold={self.threshold}, value={self.value}", self.inplace)


class _ExponentialUnit(_Stateless):
    options = ("alpha", "inplace")

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(alpha=alpha, inplace=inplace)

    def extra_repr(self):
        return _with_inplace(f"alpha={self.alpha}", self.inplace)


class ELU(_ExponentialUnit):
    """x where x > 0, else alpha * (exp(x) - 1), elementwise."""

    fn = F.elu


class CELU(_ExponentialUnit):
    """x where x > 0, else alpha * (exp(x / alpha) - 1), elementwise."""

    fn = F.celu


class LeakyReLU(_Stateless):
    """x where x > 0, else negative_slope * x, elementwise."""

    fn, options = F.leaky_relu, ("negative_slope", "inplace")

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(negative_slope=negative_slope, inplace=inplace)

    def extra_repr(self):
        return _with_inplace(f"negative_slope={self.negative_slope}", self.inplace)


class RReLU(Module):
    """Leaky relu with random slopes in [lower, upper] while training, their mean in eval mode."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return _with_inplace(f"lower={self.lower}, upper={self.upper}", self.inplace)


class GLU(_Stateless):
    """a * sigmoid(b) for the two halves a, b of the input along `dim`."""

    fn, options = F.glu, ("dim",)

    def __init__(self, dim=-1):
        super().__init__(dim=dim)


class _AlongDim(_Stateless):
    options = ("dim",)

    def __init__(self, dim=None):
        super().__init__(dim=dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_AlongDim):
    """softmax along `dim`."""

    fn = F.softmax


class LogSoftmax(_AlongDim):
    """log_softmax along `dim`."""

    fn = F.log_softmax


class Softmin(_AlongDim):
    """softmin (softmax of -x) along `dim`."""

    fn = F.softmin


class Softmax2d(Module):
    """softmax over the channels (dim -3) of a (C, H, W) or (N, C, H, W) input."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)


class PReLU(Module):
    """x where x > 0, else a * x, with a learned slope `a` (one, or one per channel), initialized to `init`."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(_factories.full((num_parameters,), float(init), dtype=dtype))
        self._made_on(device)

    def reset_parameters(self):
        """Set every slope back to `init`."""
        self.weight.data = _factories.full((self.num_parameters,), float(self.init), dtype=self.weight.dtype)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
