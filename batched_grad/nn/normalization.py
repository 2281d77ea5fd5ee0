"""The normalization layers beyond LayerNorm and BatchNorm: GroupNorm, InstanceNorm1d/2d/3d, RMSNorm and
LocalResponseNorm, with torch's parameters, buffers and reprs."""

import warnings

from .. import _factories
from .._int_args import int_or_ints
from . import functional as F
from . import init
from .batchnorm import _NormBase
from .module import Module
from .parameter import Parameter


class GroupNorm(Module):
    """group_norm over num_groups groups of num_channels channels, with a learned per-channel scale and shift."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        ones = Parameter(_factories.ones(num_channels, dtype=dtype)) if affine else None
        self.register_parameter("weight", ones)
        self.register_parameter(
            "bias", Parameter(_factories.zeros(num_channels, dtype=dtype)) if affine and bias else None
        )
        self._made_on(device)

    def reset_parameters(self):
        """Scale ones, shift zeros."""
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


RUNNING_STATS_UNEXPECTED = (
    "Unexpected running stats buffer(s) {names} for {klass} with track_running_stats=False. If state_dict is a "
    "checkpoint saved before 0.4.0, this may be expected because {klass} does not track running stats by default "
    "since 0.4.0. Please remove these keys from state_dict. If the running stats are actually needed, instead set "
    "track_running_stats=True in {klass} to enable them. See the documentation of {klass} for details."
)


class _InstanceNorm(_NormBase):
    """instance_norm with torch's _InstanceNorm options: no affine parameters and no running statistics by default."""

    no_batch_dim = 2

    def __init__(
        self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None, dtype=None
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        # a checkpoint without version (before torch 0.4) may hold running stats this module does not track
        if local_metadata.get("version", None) is None and not self.track_running_stats:
            stale = [prefix + name for name in ("running_mean", "running_var") if prefix + name in state_dict]
            if stale:
                error_msgs.append(
                    RUNNING_STATS_UNEXPECTED.format(
                        names=" and ".join(f'"{k}"' for k in stale), klass=type(self).__name__
                    )
                )
                for key in stale:
                    state_dict.pop(key)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def _check_input_dim(self, input):
        n = type(self).no_batch_dim
        if input.dim() not in (n, n + 1):
            raise ValueError(f"expected {n}D or {n + 1}D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.dim() - type(self).no_batch_dim
        if input.size(feature_dim) != self.num_features:
            if self.affine:
                raise ValueError(
                    f"expected input's size at dim={feature_dim} to match num_features "
                    f"({self.num_features}), but got: {input.size(feature_dim)}."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                "warning by not passing in num_features, which is not used because affine=False",
                stacklevel=2,
            )
        if input.dim() == type(self).no_batch_dim:
            return self._normalize(input.unsqueeze(0)).squeeze(0)
        return self._normalize(input)

    def _normalize(self, input):
        return F.instance_norm(
            input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or (C, L) inputs."""

    no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or (C, H, W) inputs."""

    no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or (C, D, H, W) inputs."""

    no_batch_dim = 4


class RMSNorm(Module):
    """rms_norm over the trailing normalized_shape dims, with a learned scale (ones)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        shape = int_or_ints(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        self.register_parameter(
            "weight", Parameter(_factories.ones(*shape, dtype=dtype)) if elementwise_affine else None
        )
        self._made_on(device)

    def reset_parameters(self):
        """Scale ones."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """local_response_norm across `size` neighbouring channels."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
