"""The recorded graph: nodes, edges, saved values, hooks and anomaly bookkeeping."""

import itertools
import threading
import weakref
from collections import OrderedDict, namedtuple

from ._anomaly import mode as _anomaly
from ._anomaly import record as _forward_record
from ._grad_mode import is_recording

_lock = threading.Lock()  # guards the creation of per-tensor and per-node state that threads may share
_sequence = itertools.count()


def sequence_mark():
    """A number below the sequence_nr of every node made from now on."""
    return next(_sequence)


class GradientEdge(namedtuple("GradientEdge", ["node", "output_nr"])):
    """Where a gradient enters the graph: output `output_nr` of `node`."""

    __slots__ = ()


_edge = tuple.__new__  # GradientEdge from (node, output_nr) without namedtuple's Python-level __new__: one per edge


class RemovableHandle:
    """Returned by register_hook; `.remove()` unregisters the hook."""

    _ids = itertools.count()  # next() of a count is atomic: threads never get the same id

    def __init__(self, hooks):
        self._hooks = hooks
        self.id = next(RemovableHandle._ids)

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class NodeHooks:
    """A node's pre-hooks and hooks (OrderedDicts id -> fn); false while both are empty."""

    __slots__ = ("pre", "post")

    def __init__(self):
        self.pre, self.post = OrderedDict(), OrderedDict()

    def __bool__(self):
        return bool(self.pre or self.post)


def add_hook(hooks, fn):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


birth_mark = 0  # the mark that a version counter made now carries (func transforms tell captured tensors by it)


def new_birth_mark():
    """A mark above that of every version counter made so far, carried by those made from now on."""
    global birth_mark
    with _lock:
        birth_mark += 1
        return birth_mark


class VersionCounter:
    """Shared by a tensor and its views; in-place ops bump it, saved values remember it. `born`: the birth mark
    when it was made, i.e. when the storage it counts the changes of was made."""

    __slots__ = ("value", "_modified_by", "reshaped", "born")

    def __init__(self):
        self.value = 0
        self._modified_by = None
        self.reshaped = None  # (old shape, new shape) of the last in-place view op (squeeze_, t_), for that message
        self.born = birth_mark

    @property
    def modified_by(self):
        """The node of the last recorded in-place op, for the error message (held weakly: that node may save a
        value of this counter, and would otherwise never be freed without the garbage collector)."""
        ref = self._modified_by
        return None if ref is None else ref()

    @modified_by.setter
    def modified_by(self, node):
        self._modified_by = None if node is None else weakref.ref(node)


UNCHANGING = VersionCounter()  # the counter of a saved value whose in-place changes torch does not check
new_counter = VersionCounter  # the counter of a tensor made now (_inference.py swaps it while inference mode is on)


class Node:
    """A recorded operation. Subclasses define `name()` and `backward(cotangents, create_graph)`, which maps
    output cotangents (Tensors, None = zero) to one cotangent per edge (Tensors or None).

    `edges[i]` is the GradientEdge that operand i's cotangent flows into (None when it needs none);
    `out_meta[j]` is (shape, dtype) of output j.
    """

    __slots__ = (
        "edges",
        "out_meta",
        "tensor_pre_hooks",
        "retained",
        "node_hooks",
        "forward",
        "_metadata",
        "sequence_nr",
        "__weakref__",
    )
    backward_without_gradients = False  # whether backward() runs when no output has a gradient (a Function's does)
    sig = None  # a recorded op's Signature (OpNode's slot)

    def __init__(self, edges, out_meta):
        self.edges = edges
        self.out_meta = out_meta
        self.tensor_pre_hooks = None  # {output_nr: OrderedDict(id -> fn)}
        self.retained = None  # {output_nr: weakref to the tensor that retains its grad}
        self.node_hooks = None  # NodeHooks, made by register_hook or register_prehook
        self.forward = _forward_record() if _anomaly["enabled"] else None  # anomaly mode's _anomaly.ForwardRecord
        self._metadata = None
        self.sequence_nr = next(_sequence)

    def __repr__(self):
        return f"<{self.name().split('::')[-1]} object at {hex(id(self))}>"

    def __getattr__(self, name):
        """torch's `_saved_<name>` and `_raw_saved_<name>` of the values this node saved (_saved.exposed)."""
        if name.startswith("_saved_") or name.startswith("_raw_saved_"):
            from ._saved import exposed

            return exposed(self, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def torch_saved(self):
        """{name: SavedValue, None or a number} of what torch's node of the same kind saves, by torch's names."""
        return {}

    def _sequence_nr(self):
        """The order in which nodes were made, as torch's: a node made later has a larger number."""
        return self.sequence_nr

    @property
    def next_functions(self):
        """(node, output_nr) for each input edge, (None, 0) where there is none, like torch."""
        return tuple((e.node, e.output_nr) if e is not None else (None, 0) for e in self.edges)

    @property
    def metadata(self):
        """A dict for user annotations, kept with the node, like torch's Node.metadata."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def _hooks(self):
        if self.node_hooks is None:
            with _lock:
                if self.node_hooks is None:
                    self.node_hooks = NodeHooks()
        return self.node_hooks

    def register_prehook(self, fn):
        """fn(grad_outputs) runs before this node's backward and may return new grad_outputs (a tuple)."""
        return add_hook(self._hooks().pre, fn)

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) runs after this node's backward and may return new grad_inputs (a
        tuple)."""
        return add_hook(self._hooks().post, fn)

    def __call__(self, *grad_outputs):
        """This node's backward applied to `grad_outputs` (one per output of torch_outputs(); None for none): the
        gradients for its inputs, a tuple (one Tensor or None per edge) or the one Tensor of a single-edge node.
        Recorded when grad mode is on, as torch's. Hooks do not run."""
        from ._tensor import Tensor

        outputs = self.torch_outputs()
        if len(grad_outputs) != len(outputs):
            raise TypeError(f"expected {len(outputs)} arguments, got {len(grad_outputs)} instead")
        for i, g in enumerate(grad_outputs):
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(f"argument {i} is not a Variable")
        if all(g is None for g in grad_outputs) and not self.backward_without_gradients:
            grads = [None] * len(self.edges)
        else:
            cotangents = [None] * len(self.out_meta)
            for k, g in zip(outputs, grad_outputs):
                cotangents[k] = g
            grads = self.backward(cotangents, is_recording())
        return grads[0] if len(grads) == 1 else tuple(grads)

    def torch_outputs(self):
        """The outputs whose gradients torch's node takes (its arguments, what its hooks see): a recorded op's
        differentiable outputs (not max's indices), every output of another node."""
        sig = self.sig
        return tuple(range(len(self.out_meta))) if sig is None else sig.diff_outs

    def pre_hooks_for(self, output_nr):
        """The ordered dict of tensor pre-hooks for output `output_nr`."""
        with _lock:
            if self.tensor_pre_hooks is None:
                self.tensor_pre_hooks = {}
            return self.tensor_pre_hooks.setdefault(output_nr, OrderedDict())

    def retain_grad_of(self, tensor):
        """Make `tensor` (output `tensor._output_nr` of this node) receive its gradient in `.grad`."""
        with _lock:
            if self.retained is None:
                self.retained = {}
            self.retained[tensor._output_nr] = weakref.ref(tensor)

    def backward_needed(self, cotangents, create_graph, batch, needed):
        """backward, where only the edges marked in `needed` (a bool per edge) lead to a node that runs: a node may
        give None for the others, as torch's nodes do for the inputs they need not compute."""
        return self.backward(cotangents, create_graph, batch)

    def saved_values(self):
        """The values saved for backward."""
        return ()

    def release(self):
        """Free saved values after a backward that does not retain the graph."""
        for s in self.saved_values():
            s.free()

    def keep_saved_versions(self, counter):
        """This node's own in-place op saved the pre-update value (an immutable array): it stays valid."""
        counter.modified_by, counter.reshaped = self, None
        for s in self.saved_values():
            if s.counter is counter:
                s.version = counter.value


class AccumulateGrad(Node):
    """The sink of a leaf tensor that requires grad; backward() adds into `variable.grad`."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        super().__init__((), ((variable.shape, variable.dtype),))
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"

    def backward(self, cotangents, create_graph, batch=None):
        """Called directly (node(grad)), the node accumulates into the leaf's `.grad`, as torch's; the engine does
        that itself."""
        if cotangents[0] is not None:
            from ._engine import _accumulate

            _accumulate(self.variable, cotangents[0], create_graph)
        return ()


def edge_of(tensor):
    """The GradientEdge a tensor's cotangent flows into, or None if it does not require grad."""
    if tensor._creation is not None:
        _check_rebuildable(tensor)
    node = tensor._node
    if node is not None:
        return _edge(GradientEdge, (node, tensor._output_nr))
    if tensor._requires_grad:
        # the leaf's AccumulateGrad node, held weakly as torch does: the graph's edges keep it alive, and a leaf is
        # not in a cycle with it
        ref = tensor._accumulator
        node = ref() if ref is not None else None
        return _edge(GradientEdge, (node if node is not None else _new_accumulator(tensor), 0))
    return None


def _check_rebuildable(view):
    """torch's error where an op records on a view of a special kind changed unrecorded since it was made (torch
    rebuilds the view's grad_fn there, and cannot)."""
    from ._view_meta import check_view_creation, grad_fn_unavailable  # _view_meta's imports lead back here

    if grad_fn_unavailable(view):
        check_view_creation(view, indirect=True)


def _new_accumulator(leaf):
    """Make the AccumulateGrad node of a leaf: one, also when threads record on the leaf at once."""
    _lock.acquire()  # rather than `with`, which costs twice as much, on a path that records ops
    try:
        ref = leaf._accumulator
        node = ref() if ref is not None else None
        if node is None:
            node = AccumulateGrad(leaf)
            leaf._accumulator = weakref.ref(node)
        return node
    finally:
        _lock.release()


def get_gradient_edge(tensor):
    """The GradientEdge of `tensor`, usable as an output or input of grad()/backward()."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require gradients")
    return edge_of(tensor)
