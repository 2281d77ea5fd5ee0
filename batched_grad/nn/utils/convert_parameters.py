"""A model's parameters as one flat vector and back (torch.nn.utils.convert_parameters)."""

from ..._ops import cat
from ..._tensor import Tensor
from ..module import _typename


def _check_same_device(param, first):
    """The device of the first parameter; torch's TypeError when a later one lives elsewhere."""
    if first is not None and param.device != first:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return param.device if first is None else first


def parameters_to_vector(parameters):
    """The parameters, flattened and concatenated in order, as one vector (in the graph: it has their grads)."""
    device, flat = None, []
    for param in parameters:
        device = _check_same_device(param, device)
        flat.append(param.view(-1))
    return cat(flat)


def vector_to_parameters(vec, parameters):
    """Give each parameter, in order, the next `numel()` values of `vec` (as `param.data`: outside the graph)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {_typename(vec)}")
    device, start = None, 0
    for param in parameters:
        device = _check_same_device(param, device)
        n = param.numel()
        param.data = vec[start : start + n].view_as(param).data
        start += n
