"""einops' layers as batched_grad modules: `from batched_grad.einops_layers import Rearrange, Reduce, EinMix` in
place of `from einops.layers.torch import ...`. The pattern handling is einops' own (its layer mixins); the forward
pass goes through einops' backend for batched_grad tensors. einops.layers.torch's Rearrange and Reduce (torch
modules holding a pattern) and EinMix (with its weights' values) put in a batched_grad module become these layers."""

from einops.layers import RearrangeMixin, ReduceMixin
from einops.layers._einmix import _EinmixMixin

from . import einsum, nn, tensor, zeros

__all__ = ["EinMix", "Rearrange", "Reduce"]


class Rearrange(RearrangeMixin, nn.Module):
    def forward(self, input):
        return self._apply_recipe(input)


class Reduce(ReduceMixin, nn.Module):
    def forward(self, input):
        return self._apply_recipe(input)


def from_torch_layer(layer):
    """The batched_grad layer of einops.layers.torch's Rearrange, Reduce or EinMix `layer`: its pattern (reduction,
    weight and bias shapes, axis lengths) and, for EinMix, the values of its weight and bias (in batched_grad's default
    dtype, as the layer batched_grad makes)."""
    if type(layer).__name__ == "EinMix":
        converted = EinMix(layer.pattern, layer.weight_shape, layer.bias_shape, **layer.axes_lengths)
        for name in ("weight", "bias"):
            value, ours = getattr(layer, name), getattr(converted, name)
            if value is not None:  # its values, in the dtype batched_grad made the layer in (its default dtype)
                ours.data.copy_(tensor(value.detach().cpu().numpy()))
                ours.requires_grad_(value.requires_grad)
        return converted
    kind = {"Rearrange": Rearrange, "Reduce": Reduce}[type(layer).__name__]
    converted = kind.__new__(kind)
    converted.__setstate__(layer.__getstate__())
    return converted


def _uniform_parameter(shape, bound):
    return nn.Parameter(zeros(shape).uniform_(-bound, bound), requires_grad=True)


class EinMix(_EinmixMixin, nn.Module):
    """A linear layer written as an einsum pattern; weight and bias drawn uniform in +-bound, as einops' torch layer."""

    def _create_parameters(self, weight_shape, weight_bound, bias_shape, bias_bound):
        self.weight = _uniform_parameter(weight_shape, weight_bound)
        self.bias = None if bias_shape is None else _uniform_parameter(bias_shape, bias_bound)

    def _create_rearrange_layers(
        self,
        pre_reshape_pattern: str | None,
        pre_reshape_lengths: dict | None,
        post_reshape_pattern: str | None,
        post_reshape_lengths: dict | None,
    ):
        self.pre_rearrange = (
            None if pre_reshape_pattern is None else Rearrange(pre_reshape_pattern, **pre_reshape_lengths)
        )
        self.post_rearrange = (
            None if post_reshape_pattern is None else Rearrange(post_reshape_pattern, **post_reshape_lengths)
        )

    def forward(self, input):
        if self.pre_rearrange is not None:
            input = self.pre_rearrange(input)
        result = einsum(self.einsum_pattern, input, self.weight)
        if self.bias is not None:
            result += self.bias
        if self.post_rearrange is not None:
            result = self.post_rearrange(result)
        return result
