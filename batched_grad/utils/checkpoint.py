"""torch.utils.checkpoint: activation checkpointing, as torch 2.13 runs it on a CPU build.

A checkpointed function keeps none of its intermediate tensors for backward; backward runs it again to get them.
Two variants, as torch's:

- reentrant (`use_reentrant=True`, the default when the argument is not given, with torch's warning): a Function
  runs the function under no_grad; its backward runs it again with grad on, the random state of the forward restored,
  and calls backward() on the recomputed outputs (a backward inside backward). autograd.grad and backward(inputs=...)
  are refused, as torch's.
- non-reentrant (`use_reentrant=False`): the function runs with grad on under saved-tensor hooks that keep a holder
  in place of each tensor saved for backward; reading the first of them back in a backward runs the function again
  (random state restored) under hooks that collect the recomputed tensors, each given back once. Works with
  autograd.grad, keyword arguments, nested checkpoints and parameters the function closes over. With `debug=True`
  a mismatch between the tensors saved in the forward and in the recomputation is reported with the logs of the
  ops each ran (_checkpoint_debug.py).

There are no dispatch modes here: selective checkpointing is not provided."""

import contextlib
import uuid
import warnings
import weakref

from .. import _graph_task
from .._generator import get_rng_state, set_rng_state
from .._grad_mode import enable_grad, is_recording, no_grad
from .._saved import SavedValue
from .._tensor import Tensor
from ..amp import autocast_mode
from ..autograd import backward as _backward
from ..autograd.function import Function
from ..autograd.graph import saved_tensors_hooks
from ..random import fork_rng
from ._checkpoint_debug import OperatorLog, debug_message

__all__ = [
    "CheckpointError",
    "CheckpointFunction",
    "DefaultDeviceType",
    "GraphExecGroup",
    "check_backward_validity",
    "checkpoint",
    "checkpoint_sequential",
    "detach_variable",
    "get_device_states",
    "noop_context_fn",
    "set_checkpoint_debug_enabled",
    "set_checkpoint_early_stop",
    "set_device_states",
]

_DEBUG_TIP = """
Tip: To see a more detailed error message, either pass `debug=True` to
`torch.utils.checkpoint.checkpoint(...)` or wrap the code block
with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to
enable checkpoint\u2011debug mode globally.
"""
_early_stop = None  # set_checkpoint_early_stop's override of the early_stop argument
_debug_enabled = None  # set_checkpoint_debug_enabled's override of the debug argument


class CheckpointError(RuntimeError):
    """The tensors saved while recomputing differ from those saved in the forward."""


def noop_context_fn():
    """The default context_fn: no context around the forward nor the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


@contextlib.contextmanager
def set_checkpoint_early_stop(enable):
    """Within it, non-reentrant checkpoints stop recomputing once they have every tensor they need (`enable`), or
    recompute the whole function, whatever their early_stop argument says."""
    global _early_stop
    previous, _early_stop = _early_stop, enable
    try:
        yield
    finally:
        _early_stop = previous


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled):
    """Within it, checkpoints take `enabled` (True, False or None: their own argument) as their debug argument."""
    global _debug_enabled
    previous, _debug_enabled = _debug_enabled, enabled
    try:
        yield
    finally:
        _debug_enabled = previous


def detach_variable(inputs):
    """The tuple `inputs` with each tensor detached, keeping its requires_grad."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}")
    out = []
    for inp in inputs:
        if isinstance(inp, Tensor):
            detached = inp.detach()
            detached.requires_grad = inp.requires_grad
            inp = detached
        out.append(inp)
    return tuple(out)


def check_backward_validity(inputs):
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)


class DefaultDeviceType:
    """The device type whose random state checkpoints keep when no argument is on another device: "cpu" on this
    build (torch's accelerator when it has one), or what set_device_type chose."""

    _default_device_type = None

    @staticmethod
    def set_device_type(device="cuda"):
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type():
        if not DefaultDeviceType._default_device_type:
            DefaultDeviceType._default_device_type = "cpu"
        return DefaultDeviceType._default_device_type


def get_device_states(*args):
    """The ids of the non-CPU devices the tensors of `args` are on, and each one's random state. batched_grad has
    one generator for every device, so each state is the default generator's."""
    ids = [a.get_device() for a in args if isinstance(a, Tensor) and a.device.type not in ("cpu", "meta")]
    return ids, [get_rng_state() for _ in ids]


def set_device_states(devices, states, *, device_type=None):
    """Set the random state of each device of `devices` to the matching one of `states`."""
    if (device_type or DefaultDeviceType.get_device_type()) == "meta":
        return
    for _, state in zip(devices, states):
        set_rng_state(state)


class GraphExecGroup:
    """Within it, the non-reentrant checkpoints that several backward calls reach are recomputed once for all of
    them (the calls must use disjoint saved tensors, even with retain_graph=True)."""

    _current = None

    def __enter__(self):
        if GraphExecGroup._current is not None:
            raise RuntimeError(
                f"GraphExecGroup contexts cannot be nested. Already inside group {GraphExecGroup._current}"
            )
        GraphExecGroup._current = self
        return self

    def __exit__(self, *exc):
        GraphExecGroup._current = None

    @classmethod
    def _get_current_group(cls):
        return cls._current


# ---- reentrant -----------------------------------------------------------------------------------------------------
_REENTRANT_IN_GRAD = (
    "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing an `inputs` parameter "
    "to .backward(). To resolve this error, you can either set use_reentrant=False, or call .backward() without "
    "passing the `inputs` argument."
)


def _cpu_autocast_state():
    """The CPU autocast region the forward ran in, as autocast's arguments: the recomputation runs in it again, as
    torch's (backward may run outside the region)."""
    return {
        "enabled": autocast_mode.is_autocast_enabled("cpu"),
        "dtype": autocast_mode.get_autocast_dtype("cpu"),
        "cache_enabled": autocast_mode.is_autocast_cache_enabled(),
    }


class CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.fwd_cpu_state = get_rng_state()
        ctx.cpu_autocast_kwargs = _cpu_autocast_state()
        ctx.inputs, ctx.tensor_indices, tensor_inputs = [], [], []
        for i, arg in enumerate(args):
            if isinstance(arg, Tensor):
                tensor_inputs.append(arg)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(arg)
        ctx.save_for_backward(*tensor_inputs)
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grad_outputs):
        task = _graph_task.current()
        if task is not None and task.captures:  # torch's _is_checkpoint_valid: a grad() or backward(inputs=...)
            raise RuntimeError(_REENTRANT_IN_GRAD)
        inputs = list(ctx.inputs)
        for i, tensor in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = tensor
        with fork_rng(enabled=ctx.preserve_rng_state):
            if ctx.preserve_rng_state:
                set_rng_state(ctx.fwd_cpu_state)
            detached = detach_variable(tuple(inputs))
            with enable_grad(), autocast_mode.autocast("cpu", **ctx.cpu_autocast_kwargs):
                outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        with_grad = [(out, g) for out, g in zip(outputs, grad_outputs) if isinstance(out, Tensor) and out.requires_grad]
        if not with_grad:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        _backward([out for out, _ in with_grad], [g for _, g in with_grad])
        return (None, None) + tuple(inp.grad if isinstance(inp, Tensor) else None for inp in detached)


# ---- non-reentrant -------------------------------------------------------------------------------------------------
class _StopRecomputation(Exception):
    """Raised inside the recomputation once every tensor needed is recomputed (early stop)."""


class _Holder:
    """What the forward's pack hook keeps in place of a saved tensor: per backward, the key of its recomputed
    value (None once given back)."""

    __slots__ = ("handles", "__weakref__")

    def __init__(self):
        self.handles = {}


def _metadata(tensor):
    return {"shape": tensor.shape, "dtype": tensor.dtype, "device": tensor.device}


class _Frame:
    """One non-reentrant checkpoint call: its inputs (saved as a node saves tensors, so an enclosing checkpoint
    recomputes them), a weak reference per tensor its forward saved, and what each backward recomputed."""

    def __init__(self, recompute, early_stop, check_metadata, error_cb=None):
        self.recompute, self.early_stop, self.check_metadata = recompute, early_stop, check_metadata
        self.error_cb = error_cb  # debug mode: raises its own CheckpointError in place of one found unpacking
        self.saved_args = []
        self.weak_holders, self.metadatas = [], []
        self.recomputed, self.counters, self.done = {}, {}, set()
        self.forward_completed = self.ignore_mismatch = False

    def save_inputs(self, args):
        self.saved_args = [SavedValue(a) if isinstance(a, Tensor) else a for a in args]

    def inputs(self):
        """The inputs for a recomputation: each tensor itself, as torch's saved inputs are read back (a new tensor
        in its place in the graph where an enclosing checkpoint's hooks packed it)."""
        return [a.unpack_for(None) if isinstance(a, SavedValue) else a for a in self.saved_args]

    def pack(self, tensor):
        holder = _Holder()
        self.weak_holders.append(weakref.ref(holder))
        if self.check_metadata:
            self.metadatas.append(_metadata(tensor))
        return holder

    def unpack(self, holder):
        if self.error_cb is None:
            return self._unpack(holder)
        try:
            return self._unpack(holder)
        except CheckpointError as error:
            self.error_cb(error)

    def _unpack(self, holder):
        gid = GraphExecGroup._current
        if gid is None:
            gid = _graph_task.current_id()
        if gid == -1:  # read outside a backward: a recomputation of its own
            gid = uuid.uuid4().int
        if gid not in self.done:
            self.recomputed[gid], self.counters[gid] = {}, 0
            try:
                with _RecomputeHooks(self, gid), enable_grad():
                    self.recompute(*self.inputs())
            except _StopRecomputation:
                pass
            self.done.add(gid)
            self.check_recomputed(gid)
        key = holder.handles.get(gid)
        if key is None:
            extra = ""
            if GraphExecGroup._current is not None:
                extra = (
                    "Performing two backward calls that overlap (i.e. require the same saved activation in order to "
                    "compute gradients) is not allowed while under the torch.utils.checkpoint.GraphExecGroup context. "
                )
            raise CheckpointError(
                "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. "
                f"{extra}If you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise "
                "please open an issue with details on your use case."
            )
        holder.handles[gid] = None
        return self.recomputed[gid].pop(key)[1]

    def record_recomputed(self, gid, tensor):
        if tensor.requires_grad:
            tensor = _unlinked_detach(tensor)
        index = self.counters[gid]
        self.counters[gid] = index + 1
        if index >= len(self.weak_holders):
            if not self.forward_completed:  # a backward inside the checkpointed function
                self.ignore_mismatch = True
                return tensor
            raise CheckpointError(
                "torch.utils.checkpoint: trying to save more tensors during recomputation than during the original "
                f"forward pass.\n{_DEBUG_TIP}"
            )
        holder = self.weak_holders[index]()
        if holder is not None:  # else freed already (a backward within the forward)
            key = object()
            holder.handles[gid] = key
            self.recomputed[gid][key] = (index, tensor)
        if self.early_stop and self.counters[gid] == len(self.weak_holders):
            raise _StopRecomputation
        return tensor

    def check_recomputed(self, gid):
        if self.ignore_mismatch:
            return
        if len(self.weak_holders) != self.counters[gid]:
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
                f"recomputation.\nNumber of tensors saved during forward: {len(self.weak_holders)}\nNumber of "
                f"tensors saved during recomputation: {self.counters[gid]}.\n{_DEBUG_TIP}"
            )
        if not self.check_metadata:
            return
        different = ""
        for index, tensor in self.recomputed[gid].values():
            saved, now = self.metadatas[index], _metadata(tensor)
            if saved != now:
                different += f"tensor at position {index}:\nsaved metadata: {saved}\nrecomputed metadata: {now}\n"
        if different:
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have different metadata than "
                f"during the forward pass.\n{different}.\n{_DEBUG_TIP}"
            )


def _unlinked_detach(tensor):
    """torch's tensor.detach() as the recomputation keeps it: the values and the version counter outside the graph,
    not an alias of `tensor` (which holds its base here): the recomputed graph that saves a result would otherwise hold
    itself, living on until the garbage collector runs."""
    kept = Tensor._wrap(tensor._detached_value())
    kept._counter = tensor._counter
    return kept


class _RecomputeHooks(saved_tensors_hooks):
    def __init__(self, frame, gid):
        super().__init__(lambda tensor: frame.record_recomputed(gid, tensor), lambda tensor: tensor)


def _debug_context_and_cb():
    """debug mode's context_fn (logs of the ops of the forward and of the latest recomputation) and the callback
    that reports a mismatch with them."""
    forward_log, recompute_log = OperatorLog(), OperatorLog()

    def error_cb(error):
        raise CheckpointError(debug_message(forward_log, recompute_log)) from error

    return (lambda: (forward_log, recompute_log)), error_cb


def _checkpoint_without_reentrant(
    function, preserve_rng_state, context_fn, determinism_check, debug, early_stop, args, kwargs
):
    error_cb = None
    if _debug_enabled if _debug_enabled is not None else debug:
        if context_fn is not noop_context_fn:
            raise ValueError("debug=True is incompatible with non-default context_fn")
        context_fn, error_cb = _debug_context_and_cb()
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    forward_context, recompute_context = context_fn()
    fwd_state = get_rng_state() if preserve_rng_state else None
    cpu_autocast_kwargs = _cpu_autocast_state()

    def recompute(*inputs):
        with fork_rng(enabled=preserve_rng_state):
            if preserve_rng_state:
                set_rng_state(fwd_state)
            with autocast_mode.autocast("cpu", **cpu_autocast_kwargs), recompute_context:
                function(*inputs, **kwargs)

    if not is_recording():
        return function(*args, **kwargs)
    early_stop = _early_stop if _early_stop is not None else early_stop
    frame = _Frame(recompute, early_stop, determinism_check == "default", error_cb)
    frame.save_inputs(args)
    suppressed = True
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        result = function(*args, **kwargs)
        suppressed = False
    if suppressed:
        raise RuntimeError(
            "torch.utils.checkpoint: the forward context provided by context_fn suppressed an exception raised "
            "during the checkpointed forward. This is not supported because checkpoint cannot return a value for a "
            "failed forward."
        )
    frame.forward_completed = True
    return result


def checkpoint(
    function,
    *args,
    use_reentrant=None,
    context_fn=noop_context_fn,
    determinism_check="default",
    debug=False,
    early_stop=True,
    **kwargs,
):
    """Run `function(*args, **kwargs)` keeping none of its intermediate tensors; backward runs it again (see the
    module's docstring for the two variants). `preserve_rng_state` (a keyword, default True): restore the random
    state of the forward for the recomputation, so dropout draws the same mask."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in PyTorch "
            "2.9, calling checkpoint without use_reentrant will raise an exception. use_reentrant=False is "
            "recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. "
            "Refer to docs for more details on the differences between the two variants.",
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    return _checkpoint_without_reentrant(
        function, preserve, context_fn, determinism_check, debug, early_stop, args, kwargs
    )


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):  # noqa: A002  (torch's name)
    """Run the modules or functions `functions` (an nn.Sequential or a list) one after another on `input`, in
    `segments` chunks of which all but the last are checkpointed."""
    from ..nn import Sequential

    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed explicitly. "
            "In version 2.9 we will raise an exception if use_reentrant is not passed. use_reentrant=False is "
            "recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. "
            "Refer to docs for more details on the differences between the two variants.",
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    if isinstance(functions, Sequential):
        functions = list(functions.children())
    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
