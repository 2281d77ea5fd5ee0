"""A leaf's grad_dtype (torch 2.13): the dtype its `.grad` must have and its incoming gradients are cast to. It
defaults to the leaf's dtype; None lets a gradient keep whatever dtype it arrives with. Kept in the Tensor's
`_grad_dtype` slot, which holds AS_DTYPE while the default holds."""

from ._dtypes import dtype as _dtype_type
from ._graph import AccumulateGrad

AS_DTYPE = object()  # a leaf's grad_dtype is its dtype

ALREADY_A_GRADIENT = (
    "Cannot set grad_dtype to '{}' because there is already a gradient with dtype '{}'. Please clear the gradient "
    "(.grad = None) before changing grad_dtype, or ensure the new grad_dtype matches the existing gradient's dtype."
)


def grad_dtype_of(tensor):
    """The leaf's grad_dtype: a dtype, or None for any."""
    value = tensor._grad_dtype
    return tensor.dtype if value is AS_DTYPE else value


def get_grad_dtype(tensor):
    """Tensor.grad_dtype, torch's checks included."""
    if tensor.grad_fn is not None:
        raise RuntimeError("grad_dtype can only be accessed on leaf tensors.")
    return grad_dtype_of(tensor)


def set_grad_dtype(tensor, value):
    """Tensor.grad_dtype = value, torch's checks included."""
    if tensor.grad_fn is not None:
        raise RuntimeError("grad_dtype can only be set on leaf tensors.")
    if value is not None and not isinstance(value, _dtype_type):
        raise RuntimeError(f"grad_dtype must be a torch.dtype or None, but got {type(value).__name__}")
    grad = tensor._grad
    if value is not None and grad is not None and grad.dtype is not value:
        raise RuntimeError(ALREADY_A_GRADIENT.format(value.type_name, grad.dtype.cpp_name))
    tensor._grad_dtype = value


def for_leaf(variable, grad):
    """An incoming gradient of a leaf, cast to its grad_dtype (as it is where that is None)."""
    want = grad_dtype_of(variable)
    return grad if grad is None or want is None or grad.dtype is want else grad.to(want)


def for_edge(edge, dtype):
    """The dtype a gradient flowing along `edge` (whose input has `dtype`) is cast to, None for none: a leaf's
    grad_dtype where the edge leads to its AccumulateGrad node."""
    return grad_dtype_of(edge.node.variable) if type(edge.node) is AccumulateGrad else dtype
