"""Inference tensors, as torch's: a tensor made while inference mode is on, other than a view of a normal tensor.

The mark is the tensor's version counter: an InferenceCounter, which a view shares with its base as any counter, so
a view of an inference tensor is one (made in any mode) and a view of a normal tensor is not. Tensor._wrap takes its
counter from `_graph.new_counter`, which is VersionCounter itself while no thread is in inference mode (nothing is
added to making a tensor) and `counter_in_mode` while one is. An inference tensor's version is not tracked: reading
it raises, and bumping it (every in-place write does) outside inference mode raises torch's error, after the write as
in torch. Outside inference mode an op whose tensor operands are all inference tensors is not recorded (torch skips
autograd for them), and an inference tensor saved for backward is refused."""

from . import _graph
from ._grad_mode import _state

NO_VERSION = "Inference tensors do not track version counter."
INPLACE_OUTSIDE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a normal "
    "tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details."
)
REQUIRES_GRAD_OUTSIDE = "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed."
SAVED = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in "
    "computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and use it in "
    "autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`."
)


class InferenceCounter(_graph.VersionCounter):
    """The counter of an inference tensor (and of its views): counts writes made in inference mode, refuses others."""

    __slots__ = ("_count",)

    def __init__(self):
        self._count, self._modified_by, self.reshaped, self.born = 0, None, None, _graph.birth_mark

    @property
    def value(self):
        return self._count

    @value.setter
    def value(self, count):
        if not _state.inference:
            raise RuntimeError(INPLACE_OUTSIDE)
        self._count = count


def is_inference(tensor):
    """Whether `tensor` is an inference tensor."""
    return type(tensor._counter) is InferenceCounter


def counter_like(tensor):
    """A new counter of the kind of `tensor`'s, for an alias of it with a counter of its own (.data, a Parameter
    made of it): torch's alias of an inference tensor is one, of a normal tensor (in any mode) is not."""
    return InferenceCounter() if type(tensor._counter) is InferenceCounter else _graph.VersionCounter()


def counter_in_mode():
    """The counter of a tensor made now, while some thread is in inference mode."""
    return InferenceCounter() if _state.inference else _graph.VersionCounter()


_threads_in_mode = 0


def mode_switched(on):
    """A thread entered (`on`) or left inference mode: tensors are made with `counter_in_mode` while any is in it."""
    global _threads_in_mode
    with _graph._lock:
        _threads_in_mode += 1 if on else -1
        _graph.new_counter = counter_in_mode if _threads_in_mode else _graph.VersionCounter


def check_requires_grad(tensor):
    """torch's refusal to make an inference tensor require grad outside inference mode."""
    if type(tensor._counter) is InferenceCounter and not _state.inference:
        raise RuntimeError(REQUIRES_GRAD_OUTSIDE)
