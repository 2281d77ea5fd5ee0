"""einops on batched_grad tensors. einops picks a backend by the tensor's type, among the subclasses of its
AbstractBackend whose `framework_name` module is imported; defining this subclass (batched_grad imports this module
when einops is installed) is the registration. Every operation is einops' own torch backend with batched_grad in
torch's place, so rearrange, reduce, repeat, einsum, pack/unpack and parse_shape record the same ops as on torch.
Where torch is not installed, einops' torch layers cannot load: `from einops.layers.torch import Rearrange` then
gives batched_grad's (batched_grad.einops_layers)."""

import importlib.util
import sys

from einops._backends import TorchBackend


class BatchedGradBackend(TorchBackend):
    framework_name = "batched_grad"

    def __init__(self):  # TorchBackend's would import torch
        import batched_grad

        self.torch = batched_grad

    def layers(self):
        from . import einops_layers

        return einops_layers


def _torch_installed():
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a finder that refuses it, or a torch entry without a spec
        return False


if not _torch_installed():
    from . import einops_layers

    sys.modules.setdefault("einops.layers.torch", einops_layers)
