"""once_differentiable: a Function's backward run without recording, whose results, where they would require grad,
lead to a node that refuses to be differentiated (torch's DelayedError)."""

import functools

from .. import _graph
from .._grad_mode import is_recording, no_grad
from .._tensor import Tensor

TWICE = "trying to differentiate twice a function that was marked with @once_differentiable"


class DelayedError(_graph.Node):
    """Passes its inputs through as its outputs; differentiating through it raises `message`. Each edge leads to a
    fresh leaf, as torch's: nothing reaches the graph the backward's results were computed from."""

    __slots__ = ("message",)

    def __init__(self, message, edges, out_meta):
        super().__init__(edges, out_meta)
        self.message = message

    def name(self):
        return "torch::autograd::Error"

    def backward(self, cotangents, create_graph, batch=None):
        raise RuntimeError(self.message)


DelayedError.__name__ = DelayedError.__qualname__ = "Error"  # torch's node class, as graph printers show it


def once_differentiable(backward):
    """Run `backward` under no_grad; where a gradient it was given requires grad (a backward with create_graph=True),
    its results are joined to a node that raises if they are differentiated again."""

    @functools.wraps(backward)
    def wrapper(ctx, *grad_outputs):
        with no_grad():
            grads = backward(ctx, *grad_outputs)
        if not is_recording():
            return grads
        if not any(isinstance(g, Tensor) and g.requires_grad for g in grad_outputs):
            return grads
        single = not isinstance(grads, tuple)
        out = refusing_differentiation(TWICE, (grads,) if single else grads)
        return out[0] if single else tuple(out)

    return wrapper


def refusing_differentiation(message, grads, keep_graph=False):
    """`grads` (Tensors, or anything else, left as it is) with the same values, joined to one node that raises
    `message` when differentiated through. Its edges lead to the graph of `grads` with `keep_graph` (a backward
    reaching an input through it raises), else to fresh leaves."""
    sources = [
        (g if keep_graph else Tensor._wrap(g._value, requires_grad=True)) if isinstance(g, Tensor) else None
        for g in grads
    ]
    node = DelayedError(
        message,
        tuple(None if s is None else _graph.edge_of(s) for s in sources),
        tuple(None if s is None else (s._v.shape, s._v.dtype) for s in sources),
    )
    return [
        g if s is None else Tensor._wrap(s._v, grad_fn=node, output_nr=k)
        for k, (g, s) in enumerate(zip(grads, sources))
    ]
