"""einops on batched_grad tensors. einops picks a backend by the tensor's type, among the subclasses of its
AbstractBackend whose `framework_name` module is imported; defining this subclass (batched_grad imports this module
when einops is installed) is the registration. Every operation is einops' own torch backend with batched_grad in
torch's place, so rearrange, reduce, repeat, einsum, pack/unpack and parse_shape record the same ops as on torch."""

from einops._backends import TorchBackend


class BatchedGradBackend(TorchBackend):
    framework_name = "batched_grad"

    def __init__(self):  # TorchBackend's would import torch
        import batched_grad

        self.torch = batched_grad

    def layers(self):
        from . import einops_layers

        return einops_layers
