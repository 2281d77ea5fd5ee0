"""register_multi_grad_hook: one hook over the gradients of several tensors, per backward call."""

import functools
import threading

from .. import _graph_task
from .._graph import RemovableHandle, edge_of

MODES = ("all", "any")


class MultiHandle(RemovableHandle):
    """The handle of a multi-grad hook: `.remove()` removes the tensor hooks it is made of."""

    def __init__(self, handles):
        self.handles = tuple(handles)

    def remove(self):
        for handle in self.handles:
            handle.remove()

    def __getstate__(self):
        return self.handles

    def __setstate__(self, state):
        self.handles = state


def _running_task_id():
    task_id = _graph_task.current_id()
    if task_id == -1:
        raise AssertionError("expected this hook to be called inside a backward call")
    return task_id


def _node_of(tensor):
    """The node a tensor's gradient flows into: its grad_fn, or a leaf's AccumulateGrad."""
    edge = edge_of(tensor)
    if edge is None:
        raise AssertionError("Expected gradient function to be set")
    return edge.node


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """Register `fn` over the gradients of `tensors`, returning a handle whose `.remove()` unregisters it.

    mode "all": within each backward call, once the gradient of every tensor whose node that call runs has been
    computed, `fn(grads)` is called with one entry per tensor (None for a tensor it computed no gradient of).
    mode "any": within each backward call, `fn(grad)` is called once, with the first of these gradients computed.
    """
    if mode not in MODES:
        raise ValueError(f"Expects mode to be one of {MODES} but got {mode}")
    lock = threading.Lock()
    if mode == "any":
        ran = set()

        @functools.wraps(fn)
        def first_only(grad):
            task_id = _running_task_id()
            with lock:
                if task_id in ran:
                    return
                ran.add(task_id)
            fn(grad)

        return MultiHandle([t.register_hook(first_only) for t in tensors if t.requires_grad])

    tensors = tuple(tensors)
    nodes = [_node_of(t) for t in tensors]
    counts, buffers, expected = {}, {}, {}

    def collecting(index):
        def collect(grad):
            task_id = _running_task_id()
            with lock:
                seen = counts.get(task_id, 0)
                counts[task_id] = seen + 1
                if seen == 0:  # the first gradient of this backward: how many this backward computes
                    expected[task_id] = sum(map(_graph_task.will_engine_execute_node, nodes))
                    buffers[task_id] = [None] * len(tensors)
                buffers[task_id][index] = grad
                done = seen == expected[task_id] - 1
                if done:
                    grads = buffers.pop(task_id)
                    del counts[task_id], expected[task_id]
            if done:
                fn(grads)

        return collect

    return MultiHandle([t.register_hook(collecting(i)) for i, t in enumerate(tensors)])
