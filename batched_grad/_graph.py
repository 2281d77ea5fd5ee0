"""The recorded graph: nodes, edges, saved values, hooks and anomaly bookkeeping."""

import itertools
import re
import threading
import weakref
from collections import OrderedDict, namedtuple

from . import _saved_hooks
from ._anomaly import mode as _anomaly
from ._anomaly import record as _forward_record
from ._grad_mode import is_grad_enabled
from ._host import unshared

_lock = threading.Lock()  # guards the creation of per-tensor and per-node state that threads may share
_sequence = itertools.count()


def sequence_mark():
    """A number below the sequence_nr of every node made from now on."""
    return next(_sequence)


BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call .backward() "
    "or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time "
    "or if you need to access saved tensors after calling backward."
)


class GradientEdge(namedtuple("GradientEdge", ["node", "output_nr"])):
    """Where a gradient enters the graph: output `output_nr` of `node`."""


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

    __slots__ = ("value", "modified_by", "reshaped", "born")

    def __init__(self):
        self.value = 0
        self.modified_by = None  # the node of the last recorded in-place op, for the error message
        self.reshaped = None  # (old shape, new shape) of the last in-place view op (squeeze_, t_), for that message
        self.born = birth_mark


UNCHANGING = VersionCounter()  # the counter of a saved value whose in-place changes torch does not check


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
            grads = self.backward(cotangents, is_grad_enabled())
        return grads[0] if len(grads) == 1 else tuple(grads)

    def torch_outputs(self):
        """The outputs whose gradients torch's node takes (its arguments, what its hooks see): a recorded op's
        differentiable outputs (not max's indices), every output of another node."""
        sig = getattr(self, "sig", None)
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


class SavedValue:
    """A tensor value saved for backward: its array, how to rejoin the graph, and its version."""

    __slots__ = (
        "value",
        "edge_node",
        "output_nr",
        "leaf",
        "counter",
        "version",
        "requires_grad",
        "freed",
        "packed",  # (what the pack hook returned, the unpack hook) when saved under saved_tensors_hooks, else None
    )

    def __init__(self, tensor):
        self.edge_node, self.output_nr = tensor.grad_fn, tensor._output_nr
        self.requires_grad = self.edge_node is not None or tensor._requires_grad
        self.leaf = tensor if self.edge_node is None and self.requires_grad else None
        self.counter = tensor._counter
        self.version = self.counter.value
        self.freed = False
        hooks = _saved_hooks.innermost()
        if hooks is None:
            self.value, self.packed = unshared(tensor._v), None  # possibly Pending: saving does not compute it
        else:
            self.value, self.packed = None, _pack(tensor, hooks)

    @classmethod
    def of_operand(cls, value):
        """An operand given as a number or sequence (a list of indices, a Python scalar), which torch turns into a
        tensor and saves as any other: freed with the graph, never changed in place."""
        saved = cls.__new__(cls)
        saved.value, saved.edge_node, saved.output_nr, saved.leaf = value, None, 0, None
        saved.counter, saved.version, saved.requires_grad, saved.freed = UNCHANGING, 0, False, False
        saved.packed = None
        return saved

    def check(self):
        if self.freed:
            raise RuntimeError(BACKWARD_TWICE)
        if self.packed is None and self.counter.value != self.version:  # torch checks no version of a packed one
            # torch names the saved variable's current grad_fn: the recorded in-place op, else its creator (none
            # for a detached alias, which shares the version counter but not the graph)
            node = (self.counter.modified_by or self.edge_node) if self.edge_node is not None else None
            shape, reshaped = self.value.shape, self.counter.reshaped
            if reshaped is not None and tuple(shape) == reshaped[0]:  # torch names the tensor as it is now
                shape = reshaped[1]
            raise modified_error(shape, self.value.dtype, node, self.counter.value, self.version)

    def array(self):
        """The saved value (an array or a Pending one), after the freed/version checks."""
        value, packed = self.value, self.packed  # read before the check: another thread's free() marks it freed
        self.check()  # before dropping them
        return value if packed is None else unshared(_unpacked(packed)._v)

    def unpack(self, graph_mode):
        """The saved value as a Tensor; with `graph_mode` it is still connected to the graph."""
        from ._tensor import Tensor

        if self.packed is not None:
            return self._unpack_hooked(graph_mode)
        value = self.array()
        if not graph_mode or not self.requires_grad:
            return Tensor._wrap(value)
        if self.leaf is not None:
            return self.leaf
        return Tensor._wrap(value, grad_fn=self.edge_node, output_nr=self.output_nr)

    def _unpack_hooked(self, graph_mode):
        """What the unpack hook returns, as the saved tensor: in `graph_mode` its values take the saved tensor's
        place in the graph (a saved leaf's gradient still reaches the leaf), as torch's."""
        from ._tensor import Tensor

        packed = self.packed
        self.check()
        value = unshared(_unpacked(packed)._v)
        if not graph_mode or not self.requires_grad:
            return Tensor._wrap(value)
        if self.leaf is None:
            return Tensor._wrap(value, grad_fn=self.edge_node, output_nr=self.output_nr)
        standin = Tensor._wrap(value, requires_grad=True)
        standin._accumulator = weakref.ref(edge_of(self.leaf).node)  # the leaf's AccumulateGrad node
        return standin

    def free(self):
        self.freed = True  # first: a reader that still sees the value then sees it freed (array())
        self.value = self.packed = None


PACK_HOOK_IN_PLACE = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack hook cannot be "
    "modified by in-place operations as this can lead to unexpected side-effects. Please open an issue if you need "
    "to perform in-place operations on the input to a pack hook."
)


def _pack(tensor, hooks):
    """(pack(tensor), unpack): the pack hook runs under no_grad and may not change the tensor in place, as torch's."""
    from ._grad_mode import no_grad

    pack_hook, unpack_hook = hooks
    version = tensor._counter.value
    with no_grad():
        packed = pack_hook(tensor)
    if tensor._counter.value != version:
        raise RuntimeError(PACK_HOOK_IN_PLACE)
    return packed, unpack_hook


def _unpacked(packed):
    from ._tensor import Tensor

    value, unpack_hook = packed
    tensor = unpack_hook(value)
    if not isinstance(tensor, Tensor):
        raise TypeError(
            f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type {type(tensor).__name__}"
        )
    return tensor


def modified_error(shape, dtype, node, version, expected, output_nr=0):
    """torch's error for a backward that needs a value (of `shape` and `dtype`, output `output_nr` of `node`, or of
    no node) which an in-place op has changed since it was saved."""
    from ._tensor import type_name

    where = f", which is output {output_nr} of {_short_name(node)}," if node is not None else ""
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{type_name(dtype)} {list(shape)}]{where} is at version {version}; expected version {expected} instead. "
        f"{_ANOMALY_HINTS[_anomaly['enabled']]}"
    )


# the hint closing the in-place modification error: anomaly mode's warnings show where the failing node was made
_ANOMALY_HINTS = {
    False: "Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
    "torch.autograd.set_detect_anomaly(True, check_nan=False).",
    True: "Hint: the backtrace further above shows the operation that failed to compute its gradient. The variable "
    "in question was changed in there or anywhere later. Good luck!",
}


def _short_name(node):
    """torch's short name of a node in this message: AddBackward0 -> Add, MaxBackward1 -> Max1; namespaced names
    stay whole."""
    name = node.name()
    return re.sub(r"Backward0?(\d*)$", r"\1", name) if "::" not in name else name


def edge_of(tensor):
    """The GradientEdge a tensor's cotangent flows into, or None if it does not require grad."""
    if tensor.grad_fn is not None:
        return GradientEdge(tensor.grad_fn, tensor._output_nr)
    if tensor._requires_grad:
        # the leaf's AccumulateGrad node, held weakly as torch does: the graph's edges keep it alive, and a leaf is
        # not in a cycle with it
        ref = tensor._accumulator
        node = ref() if ref is not None else None
        return GradientEdge(node if node is not None else _new_accumulator(tensor), 0)
    return None


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
