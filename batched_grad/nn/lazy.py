"""Lazy modules (torch.nn.LazyLinear, LazyConv*d, LazyConvTranspose*d, LazyBatchNorm*d, LazyInstanceNorm*d): their
input sizes are read from the first input. Until then their parameters and buffers are UninitializedParameter /
UninitializedBuffer placeholders (meta tensors without a shape to read), which the first forward, or a
load_state_dict of an initialized state, materializes in place: the same objects, so an optimizer built before
holds them. After the first forward the module becomes its eager class (LazyLinear -> Linear)."""

import itertools

from .. import _factories
from .._grad_mode import no_grad
from .basic import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, Linear
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .parameter import UninitializedBuffer, UninitializedParameter, is_lazy


class LazyModuleMixin:
    """The first forward's pre-hook calls initialize_parameters(*args, **kwargs), which materializes the
    placeholders from the input; then the hooks go and the module becomes cls_to_become. A state_dict loaded before
    materializes the placeholders it has values for."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._register_lazy_hooks()

    def _register_lazy_hooks(self):
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """As Module's, with the placeholders saved as they are (a detached one would lose what it is)."""
        super()._save_to_state_dict(destination, prefix, keep_vars)
        for name, value in itertools.chain(self._parameters.items(), self._buffers.items()):
            if is_lazy(value) and prefix + name in destination:
                destination[prefix + name] = value

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        for name, value in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key not in state_dict or value is None:
                continue
            if is_lazy(value) and not is_lazy(state_dict[key]):
                with no_grad():
                    value.materialize(state_dict[key].shape)

    def initialize_parameters(self, *args, **kwargs):
        """Materialize the placeholders from the first forward's arguments."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def has_uninitialized_params(self):
        """Whether a parameter or buffer is still a placeholder."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        del module._initialize_hook, module._load_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """Linear whose in_features is the last size of its first input."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        Linear.__init__(self, 0, 0, False)
        self.out_features = out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        self._register_lazy_hooks()

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


class _LazyConvMixin(LazyModuleMixin):
    """A convolution whose in_channels is the channel size of its first input (batched or not)."""

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _lazy_init(self, out_channels, bias, device, dtype):
        self.out_channels = out_channels
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def _in_channels(self, input):
        unbatched = type(self).n + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise RuntimeError(
                f"Expected {unbatched}D (unbatched) or {unbatched + 1}D (batched) input to {type(self).__name__}, but "
                f"got input of size: {input.shape}"
            )
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._in_channels(input)
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        outer = (self.in_channels, self.out_channels // self.groups)
        if not self.transposed:
            outer = (self.out_channels, self.in_channels // self.groups)
        with no_grad():
            self.weight.materialize((*outer, *self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


def _lazy_conv(eager):
    def __init__(
        self,
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
        eager.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)
        self._register_lazy_hooks()

    return _lazy_class(eager, _LazyConvMixin, __init__)


def _lazy_conv_transpose(eager):
    def __init__(
        self,
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
        eager.__init__(self, 0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)
        self._register_lazy_hooks()

    return _lazy_class(eager, _LazyConvMixin, __init__)


class _LazyNormMixin(LazyModuleMixin):
    """A normalization whose num_features is the channel size of its first input."""

    def _lazy_init(self, affine, track_running_stats, bias, device, dtype):
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = _factories.tensor(0, device=device)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        with no_grad():
            for t in (self.weight, self.bias, self.running_mean, self.running_var):
                if is_lazy(t):
                    t.materialize((self.num_features,))
            self.reset_parameters()


def _lazy_norm(eager):
    # unlike the eager InstanceNorm's, the lazy ones default to affine parameters and running statistics, as torch's
    def __init__(
        self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *, bias=True
    ):
        eager.__init__(self, 0, eps, momentum, False, False)
        self._lazy_init(affine, track_running_stats, bias, device, dtype)
        self._register_lazy_hooks()

    # as torch's: a subclass of the private base (_BatchNorm, _InstanceNorm) with the eager class's own checks,
    # not of the eager class itself
    own = {k: v for k, v in vars(eager).items() if k not in ("__dict__", "__weakref__", "__doc__", "__module__")}
    return _lazy_class(eager, _LazyNormMixin, __init__, base=eager.__bases__[0], extra=own)


def _lazy_class(eager, mixin, init, base=None, extra=None):
    """Lazy<eager>: the mixin's lazy behaviour over `eager`, built by `init` (`eager` set up with zero sizes, then
    the placeholders, then the hooks), becoming `eager` at its first forward."""
    attributes = {**(extra or {}), "cls_to_become": eager, "__init__": init, "__module__": __name__}
    attributes["__doc__"] = f"{eager.__name__} whose input size is read from its first input."
    return type(f"Lazy{eager.__name__}", (mixin, base or eager), attributes)


LazyConv1d, LazyConv2d, LazyConv3d = (_lazy_conv(c) for c in (Conv1d, Conv2d, Conv3d))
LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d = (
    _lazy_conv_transpose(c) for c in (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)
)
LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d = (_lazy_norm(b) for b in (BatchNorm1d, BatchNorm2d, BatchNorm3d))
LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d = (
    _lazy_norm(n) for n in (InstanceNorm1d, InstanceNorm2d, InstanceNorm3d)
)
