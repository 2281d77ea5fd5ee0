"""Values saved for backward, kept as torch's SavedVariable keeps them.

A node saves each tensor its backward reads with the version it had. An input (or a leaf) is saved as the tensor
itself, so reading it back gives the same object; an output of the saving node is saved as its value and version
counter only: holding the tensor, whose grad_fn is the node, would make a reference cycle. Under saved_tensors_hooks,
or after `register_hooks`, what the pack hook returned is kept instead and the unpack hook's result is read.

The engine reads a saved value with `array()` / `unpack(graph_mode)`; the user reads one as torch's nodes show it
(`grad_fn._saved_<name>`, ctx.saved_tensors) with `unpack_for(node)`, and `grad_fn._raw_saved_<name>` is a
SavedTensor, which can register hooks on it."""

import re
import weakref

import jax.numpy as jnp
import numpy as np

from . import _dual, _saved_hooks
from ._anomaly import mode as _anomaly
from ._graph import UNCHANGING, edge_of
from ._host import unshared
from ._inference import SAVED as SAVED_INFERENCE
from ._inference import InferenceCounter
from ._lazy import Pending, materialize

BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call .backward() "
    "or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time "
    "or if you need to access saved tensors after calling backward."
)
DETACHED_IN_PLACE = (
    "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not supported, "
    "please use out-of-place `.detach()` instead"
)
PACK_HOOK_IN_PLACE = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack hook cannot be "
    "modified by in-place operations as this can lead to unexpected side-effects. Please open an issue if you need "
    "to perform in-place operations on the input to a pack hook."
)
HOOKS_SET_TWICE = (
    "Calling register_hooks on a saved tensor whose hooks have already been set. Hint: only one pair of hooks is "
    "allowed at a time."
)
HOOKS_AFTER_FREE = (
    "Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values of the graph are "
    "freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through "
    "the graph a second time or if you need to access saved variables after calling backward."
)
HOOKS_ON_NONE = "Calling register_hooks on a saved tensor with value None is forbidden"
MADE_FROM_PYTHON = "Trying to create a SavedTensor object from Python is forbidden."


class SavedValue:
    """A tensor saved for backward: its value, where it joins the graph, and the version it had."""

    __slots__ = (
        "value",  # the array (possibly Pending: saving computes nothing); None once packed or freed
        "edge_node",  # the grad_fn of a saved input (torch's saved metadata); None for an output or a leaf
        "output_nr",
        "leaf",  # the leaf tensor, when a leaf that requires grad is saved
        "counter",
        "version",
        "requires_grad",
        "freed",
        "packed",  # (what the pack hook returned, the unpack hook), else None
        "original",  # the tensor itself, where torch saves it as it is (an input, a leaf): read back as itself
        "owner",  # for an output: a weak reference to the node that saved it (the output's grad_fn)
        "output",  # for an output: a weak reference to the tensor, whose later in-place writes its reads see
        "tangent",  # its forward-mode tangent when saved (_dual.saved_tangent), restored on reading, as torch's
        "regenerated",  # a view torch makes for its node (linear's weight.t()): changed, its grad_fn is regenerated
    )

    def __init__(self, tensor, owner=None, hooks=True):
        """Save `tensor`; `owner`: the node it is an output of (torch's is_output). `hooks`: whether the
        saved-tensor hooks in force pack it."""
        if hooks and type(tensor._counter) is InferenceCounter:  # torch's node saves it
            raise RuntimeError(SAVED_INFERENCE)
        node = tensor._node
        self.edge_node = node if owner is None else None
        self.output_nr = tensor._output_nr
        self.requires_grad = requires_grad = node is not None or tensor._requires_grad
        self.leaf = tensor if node is None and requires_grad else None
        self.counter = counter = tensor._counter
        self.version = counter.value
        self.freed = False
        self.owner = self.output = self.original = None
        self.regenerated = False
        self.tangent = None if _dual.LEVELS.open is None else _dual.saved_tangent(tensor)
        if owner is not None:
            self.owner = weakref.ref(owner)
        pair = _saved_hooks.innermost() if hooks else None
        if pair is None:
            self.value, self.packed = unshared(tensor._v), None  # possibly Pending: saving does not compute it
            if owner is None or node is None:
                self.original = tensor
            else:
                self.output = weakref.ref(tensor)
        else:
            self.value, self.packed = None, _pack(tensor, pair)

    @classmethod
    def of_operand(cls, value):
        """An operand given as a number or sequence (a list of indices, a Python scalar), which torch turns into a
        tensor and saves as any other: freed with the graph, never changed in place, never given to pack hooks."""
        saved = cls.__new__(cls)
        saved.value, saved.edge_node, saved.output_nr, saved.leaf = value, None, 0, None
        saved.counter, saved.version, saved.requires_grad, saved.freed = UNCHANGING, 0, False, False
        saved.packed = saved.original = saved.owner = saved.output = saved.tangent = None
        saved.regenerated = False
        return saved

    def check(self):
        """The engine's checks before it reads the value: freed, detached in place, changed in place."""
        if self.freed:
            raise RuntimeError(BACKWARD_TWICE)
        original = self.original
        if original is not None and self.edge_node is not None and original.grad_fn is None:
            raise RuntimeError(DETACHED_IN_PLACE)  # a non-leaf input that detach_() took out of the graph
        self._check_version()

    def stale(self):
        """Whether `check` would raise (the engine's fused tier then leaves the node to the per-node tier, which
        raises torch's error)."""
        if self.freed:
            return True
        original = self.original
        if original is not None and self.edge_node is not None and original.grad_fn is None:
            return True
        return self.packed is None and self.counter.value != self.version

    def _check_version(self):
        if self.packed is None and self.counter.value != self.version:  # torch checks no version of a packed one
            original = self.original
            if original is not None:  # torch names the tensor's grad_fn as it is now
                node = original.grad_fn
            elif self.owner is not None:
                node = self.owner()
            else:  # the recorded in-place op, else the creator (none for a detached alias, which shares the
                # version counter but not the graph)
                node = (self.counter.modified_by or self.edge_node) if self.edge_node is not None else None
                node = REGENERATED_VIEW if self.regenerated and node is not None else node
            shape, reshaped = self.value.shape, self.counter.reshaped
            if reshaped is not None and tuple(shape) == reshaped[0]:  # torch names the tensor as it is now
                shape = reshaped[1]
            output_nr = self.output_nr if self.owner is not None else 0
            raise modified_error(shape, self.value.dtype, node, self.counter.value, self.version, output_nr)

    def array(self):
        """The saved value (an array or a Pending one), after the engine's checks. A Pending one whose call has been
        computed is replaced by its array: an op reading it then runs now rather than deferred behind it."""
        value, packed = self.value, self.packed  # read before the check: another thread's free() marks it freed
        self.check()  # before dropping them
        if packed is not None:
            return unshared(_unpacked(packed)._v)
        if type(value) is Pending and value.call.result is not None:
            value = value.call.result[value.k]
            if self.value is not None:  # not freed meanwhile
                self.value = value
        return value

    def unpack(self, graph_mode):
        """The saved value as a Tensor for the engine; with `graph_mode` it is still connected to the graph."""
        from ._tensor import Tensor

        if self.packed is not None:
            return self._unpack_hooked(graph_mode)
        value = self.array()
        if not graph_mode or not self.requires_grad:
            return _dual.restore_tangent(Tensor._wrap(value), self.tangent)
        if self.leaf is not None:
            return self.leaf
        return _dual.restore_tangent(
            Tensor._wrap(value, grad_fn=self._grad_fn(), output_nr=self.output_nr), self.tangent
        )

    def _grad_fn(self):
        owner = self.owner
        return self.edge_node if owner is None else owner()

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
            return Tensor._wrap(value, grad_fn=self._grad_fn(), output_nr=self.output_nr)
        return _leaf_standin(value, self.leaf)

    def unpack_for(self, node):
        """The saved tensor as torch shows it to the user (grad_fn._saved_<name>, ctx.saved_tensors) for `node`, the
        node that saved it: the tensor itself where that was saved, else a new tensor in its place in the graph
        that shares its version counter."""
        from ._tensor import Tensor

        packed = self.packed
        if self.freed:
            raise RuntimeError(BACKWARD_TWICE)
        if packed is None:
            self._check_version()
            if self.original is not None:
                return self.original
            data = self._tensor_data()
        else:
            data = _unpacked(packed)
        grad_fn = self.edge_node if self.owner is None else node
        if grad_fn is None and not self.requires_grad and not data.requires_grad:
            return data
        if grad_fn is None:
            result = _leaf_standin(unshared(data._v), self.leaf) if self.leaf is not None else None
            if result is None:
                result = Tensor._wrap(unshared(data._v), requires_grad=self.requires_grad)
        elif packed is None:  # a fresh alias of the output: it takes its place in the graph
            data._node, data._output_nr = grad_fn, self.output_nr
            return _dual.restore_tangent(data, self.tangent)
        else:
            result = Tensor._wrap(unshared(data._v), grad_fn=grad_fn, output_nr=self.output_nr)
        result._counter = data._counter
        return result

    def _tensor_data(self):
        """The saved values as a tensor outside the graph that shares the saved tensor's version counter (and,
        while the output it was saved from lives, that output's later in-place writes), as torch's tensor_data()."""
        from ._tensor import Tensor

        ref = self.output
        output = ref() if ref is not None else None
        if output is not None:
            data = output._alias(traced_derivative=True)
            data._counter = output._counter
            return data
        data = Tensor._wrap(self.value)
        if self.counter is not UNCHANGING:
            data._counter = self.counter
        return data

    def register_hooks(self, pack_hook, unpack_hook):
        """Pack the saved tensor with `pack_hook` now, and read it with `unpack_hook` from now on."""
        _check_hook_arguments((pack_hook, unpack_hook))
        if self.packed is not None:
            raise RuntimeError(HOOKS_SET_TWICE)
        if self.freed:
            raise RuntimeError(HOOKS_AFTER_FREE)
        data = self.original.detach() if self.original is not None else self._tensor_data()
        self.packed = _pack(data, (pack_hook, unpack_hook))
        self.value = self.original = self.output = None

    def transposed(self, node):
        """This saved matrix as its transpose, the output of `node` (a transpose made after it was saved), at the
        version it was saved at: read back, its value is transposed (a packed one, as its unpack hook gives it)."""
        t = SavedValue.__new__(SavedValue)
        t.edge_node, t.output_nr, t.leaf, t.requires_grad = node, 0, None, self.requires_grad
        t.counter, t.version, t.freed = self.counter, self.version, self.freed
        t.owner = t.output = t.original = None
        t.regenerated = True
        t.tangent = None if self.tangent is None else (self.tangent[0], self.tangent[1].mT)
        t.value = None if self.value is None else _transpose(materialize(self.value))
        t.packed = None if self.packed is None else (self.packed[0], _transposing(self.packed[1]))
        return t

    def free(self):
        self.freed = True  # first: a reader that still sees the value then sees it freed (array())
        self.value = self.packed = self.original = self.output = self.tangent = None


def _check_hook_arguments(hooks):
    """torch's TypeError unless `hooks` is a pair of callables."""
    if len(hooks) != 2 or not all(callable(h) for h in hooks):
        raise TypeError(
            "register_hooks(): incompatible function arguments. The following argument types are supported:\n"
            "    1. (self: torch._C._autograd.SavedTensor, arg0: collections.abc.Callable, "
            "arg1: collections.abc.Callable) -> None\n\n"
            f"Invoked with: {', '.join(type(h).__name__ for h in hooks)}"
        )


def _leaf_standin(value, leaf):
    """A tensor holding `value` whose gradient accumulates into `leaf`'s .grad, as torch's unpacked saved leaf."""
    from ._tensor import Tensor

    standin = Tensor._wrap(value, requires_grad=True)
    standin._accumulator = weakref.ref(edge_of(leaf).node)  # the leaf's AccumulateGrad node
    return standin


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


def _transpose(array):
    return array.T if type(array) is np.ndarray else jnp.swapaxes(array, -1, -2)


def _transposing(unpack_hook):
    def unpack_transposed(packed):
        tensor = unpack_hook(packed)
        return tensor.mT if hasattr(tensor, "mT") else tensor  # not a Tensor: _unpacked raises torch's error

    return unpack_transposed


def _unpacked(packed):
    from ._tensor import Tensor

    value, unpack_hook = packed
    tensor = unpack_hook(value)
    if not isinstance(tensor, Tensor):
        raise TypeError(
            f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type {type(tensor).__name__}"
        )
    return tensor


class SavedTensor:
    """A saved tensor of a node as torch shows it (grad_fn._raw_saved_<name>): what is kept (`data`), the unpack
    hook, and `register_hooks`. Made by the nodes only, as torch's."""

    __slots__ = ("_saved", "_node")

    def __init__(self, *args, **kwargs):
        raise RuntimeError(MADE_FROM_PYTHON)

    @classmethod
    def _of(cls, saved, node):
        """The SavedTensor of `saved` (a SavedValue, or None for a tensor that was not saved) of `node`."""
        made = object.__new__(cls)
        made._saved, made._node = saved, node
        return made

    @property
    def data(self):
        """What is kept: the pack hook's result, or the saved tensor (outside the graph where it is an output)."""
        saved = self._saved
        if saved is None or saved.freed:
            return None
        if saved.packed is not None:
            return saved.packed[0]
        return saved.original if saved.original is not None else saved._tensor_data()

    @property
    def unpack_hook(self):
        """The unpack hook that reads it, or None."""
        saved = self._saved
        return None if saved is None or saved.packed is None else saved.packed[1]

    def register_hooks(self, *hooks):
        """register_hooks(pack_hook, unpack_hook): pack the saved tensor with `pack_hook` now; backward reads
        `unpack_hook(packed)` instead. Once only."""
        _check_hook_arguments(hooks)
        if self._saved is None:
            raise RuntimeError(HOOKS_ON_NONE)
        self._saved.register_hooks(*hooks)

    def unpack(self):
        """The saved tensor, as the node's _saved_<name> gives it."""
        return None if self._saved is None else self._saved.unpack_for(self._node)


def exposed(node, name):
    """`node._saved_<key>` (the saved tensor, or the saved number) or `node._raw_saved_<key>` (its SavedTensor), by
    the names torch's node of the same op has; AttributeError for another name."""
    raw = name.startswith("_raw_saved_")
    key = name[len("_raw_saved_") :] if raw else name[len("_saved_") :]
    entries = node.torch_saved()
    if key not in entries:
        raise AttributeError(f"'{type(node).__name__}' object has no attribute '{name}'")
    entry = entries[key]
    if raw:
        if entry is not None and type(entry) is not SavedValue:  # a number: torch has no SavedTensor for it
            raise AttributeError(f"'{type(node).__name__}' object has no attribute '{name}'")
        return SavedTensor._of(entry, node)
    return entry.unpack_for(node) if type(entry) is SavedValue else entry


class _RegeneratedView:
    """What torch's in-place error names for a view it made to save (linear's weight.t()) once its base changed:
    the view's grad_fn, regenerated as an as_strided of the base."""

    @staticmethod
    def name():
        return "AsStridedBackward0"


REGENERATED_VIEW = _RegeneratedView()


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
