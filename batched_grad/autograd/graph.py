"""Public graph types: GradientEdge and get_gradient_edge."""
from .._graph import GradientEdge, Node, get_gradient_edge

__all__ = ["GradientEdge", "Node", "get_gradient_edge"]
