"""Public graph types and helpers: GradientEdge, get_gradient_edge, Node, increment_version,
register_multi_grad_hook."""

from .._graph import GradientEdge, Node, get_gradient_edge
from .._tensor import Tensor
from ._multi_grad import register_multi_grad_hook


def increment_version(tensor):
    """Bump the version counter of a tensor (or of each of an iterable of tensors), as an in-place change the
    engine cannot see would: a backward through values saved before it then raises."""
    for t in (tensor,) if isinstance(tensor, Tensor) else tensor:
        t._counter.value += 1


__all__ = ["GradientEdge", "Node", "get_gradient_edge", "increment_version", "register_multi_grad_hook"]
