"""Public graph types and helpers: GradientEdge, get_gradient_edge, Node, increment_version,
register_multi_grad_hook, and the hooks on the tensors saved for backward (saved_tensors_hooks, save_on_cpu,
disable_saved_tensors_hooks, allow_mutation_on_saved_tensors)."""

import abc
import contextlib

from .. import _graph, _saved_hooks
from .._factories import empty
from .._graph import GradientEdge, get_gradient_edge
from .._inference import is_inference
from .._tensor import Tensor
from ._multi_grad import register_multi_grad_hook
from ._mutation_on_saved import allow_mutation_on_saved_tensors


class Node(abc.ABC):
    """The type of the graph's nodes (a tensor's grad_fn, the nodes of next_functions), as torch's: a virtual base
    class, which every node is an instance of while it is in no node class's mro."""

    @abc.abstractmethod
    def name(self):
        """The node's name (MulBackward0, torch::autograd::AccumulateGrad, ...)."""

    @property
    @abc.abstractmethod
    def next_functions(self):
        """(node, output_nr) for each input edge, (None, 0) where there is none."""

    @property
    @abc.abstractmethod
    def metadata(self):
        """A dict for user annotations, kept with the node."""

    @abc.abstractmethod
    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) runs after the node's backward; a handle removes it."""

    @abc.abstractmethod
    def register_prehook(self, fn):
        """fn(grad_outputs) runs before the node's backward; a handle removes it."""

    @classmethod
    def __subclasshook__(cls, candidate):
        if cls is Node and issubclass(candidate, _graph.Node):
            return True
        return NotImplemented


def increment_version(tensor):
    """Bump the version counter of a tensor (or of each of an iterable of tensors), as an in-place change the
    engine cannot see would: a backward through values saved before it then raises. An inference tensor, which
    tracks no version, is left as it is (as torch's, in any mode)."""
    for t in (tensor,) if isinstance(tensor, Tensor) else tensor:
        if not is_inference(t):
            t._counter.value += 1


class saved_tensors_hooks:
    """Context manager under which every tensor saved for backward (by a recorded op, or by a Function's
    save_for_backward) is given to `pack_hook(tensor)`, run under no_grad, and the graph keeps what it returns
    instead; backward (and ctx.saved_tensors) reads `unpack_hook(packed)`, which must return a Tensor with the same
    values. Only the innermost pair applies. A value saved this way is not checked against later in-place changes
    (the hooks decide what is kept), as in torch. Which tensors an op saves follows batched_grad's backward
    formulas: an op whose torch formula saves its result may save its input here."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _saved_hooks.push(self.pack_hook, self.unpack_hook)

    def __exit__(self, *exc):
        _saved_hooks.pop()


class save_on_cpu(saved_tensors_hooks):
    """saved_tensors_hooks that keep each saved tensor on the CPU and move it back to its device for backward.
    `pin_memory` copies it into a fresh host tensor (JAX has no page-locked host memory to ask for; the copy and
    the move back are as torch's on a machine without CUDA). `device_type` is accepted as torch's."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack_to_cpu(tensor):
            if not pin_memory:
                return tensor.device, tensor.cpu()
            packed = empty(tensor.size(), dtype=tensor.dtype)
            packed.copy_(tensor)
            return tensor.device, packed

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Context manager where saved-tensor hooks are refused: entering it while some are in force, or entering
    saved_tensors_hooks inside it, raises RuntimeError(error_message)."""
    with _saved_hooks.disabled(error_message):
        yield


__all__ = [
    "GradientEdge",
    "Node",
    "allow_mutation_on_saved_tensors",
    "disable_saved_tensors_hooks",
    "get_gradient_edge",
    "increment_version",
    "register_multi_grad_hook",
    "save_on_cpu",
    "saved_tensors_hooks",
]
