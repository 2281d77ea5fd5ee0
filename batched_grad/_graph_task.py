"""The backward call running in this thread, as torch's GraphTask: its id, the nodes it will run, and the callbacks
queued for its end (`Variable._execution_engine.queue_callback`). A reentrant backward (one started while a node's
backward runs) is a task of its own, stacked on the task that started it."""

import itertools
import threading

from ._graph import AccumulateGrad

_ids = itertools.count()


class _Running(threading.local):
    def __init__(self):
        self.tasks = []  # the backward calls running in this thread, innermost last


_running = _Running()


class GraphTask:
    """One backward call: `order` is its walk's nodes (outputs first), `captures` the GradientEdges grad() returns
    the gradients of (or backward's `inputs`), `accumulate` whether it is backward(). The callbacks queued while it
    runs run once its nodes have run, in the order they were queued."""

    __slots__ = ("id", "order", "captures", "accumulate", "callbacks", "_will_run")

    def __init__(self, captures, accumulate):
        self.id = next(_ids)
        self.order, self.captures, self.accumulate = (), captures, accumulate
        self.callbacks = []
        self._will_run = None

    def will_run(self, node):
        """Whether this backward runs `node` (torch's _will_engine_execute_node): every node it reaches, or, where
        it runs to some inputs, the nodes that lead to one. grad() captures a leaf's gradient without running its
        node, which torch does not answer for."""
        if self._will_run is None:
            from ._engine import _needed  # the engine imports this module

            order = self.order[::-1]  # topological: a node before those it leads to
            self._will_run = set(order)
            if self.captures:  # the nodes that lead to a capture, among those it reaches
                self._will_run &= _needed(order, {e.node for e in self.captures})
        if node not in self._will_run:
            return False
        if not self.accumulate and isinstance(node, AccumulateGrad) and any(e.node is node for e in self.captures):
            raise RuntimeError(
                "A leaf node was passed to _will_engine_execute_node but we are currently running autograd.grad(). "
                "This is currently not supported."
            )
        return True

    def run_callbacks(self):
        """The queued callbacks in order, including those a callback queues."""
        while self.callbacks:
            self.callbacks.pop(0)()


class running:
    """Context manager: `task` is this thread's current backward while the block runs."""

    def __init__(self, task):
        self.task = task

    def __enter__(self):
        _running.tasks.append(self.task)
        return self.task

    def __exit__(self, *exc):
        _running.tasks.pop()


def current():
    """The innermost backward running in this thread, or None."""
    tasks = _running.tasks
    return tasks[-1] if tasks else None


def current_id():
    """torch._C._current_graph_task_id: the id of the backward running in this thread, -1 outside one."""
    task = current()
    return -1 if task is None else task.id


def will_engine_execute_node(node):
    """Whether the backward running in this thread runs `node`."""
    task = current()
    if task is None:
        raise RuntimeError("_will_engine_execute_node should only be called during the backward pass")
    return task.will_run(node)


def queue_callback(callback):
    """Run `callback()` (no arguments) once the backward running in this thread has run its nodes."""
    task = current()
    if task is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    if not callable(callback):
        raise TypeError(f"queue_callback expects a callable, but got {type(callback).__name__}")
    task.callbacks.append(callback)


class ExecutionEngine:
    """`Variable._execution_engine`: torch's engine object, here the calls user code makes on it."""

    def queue_callback(self, callback):
        """Run `callback()` at the end of the backward now running (see batched_grad._graph_task)."""
        queue_callback(callback)
