"""The vmap.vmap calls whose functions are running in this thread (levels, innermost last): what random draws and
`.data` ask of them. The transform itself is batched_grad/func/_vmap.py."""

import contextlib
import functools
import threading
from typing import NamedTuple

from jax._src import core as _jax_core
from jax._src.interpreters.batching import BatchTracer

from . import _nesting
from ._lazy import MAPPED, Pending, materialize


class Level(NamedTuple):
    """A vmap.vmap call whose function is running: its randomness; the jax trace of its rows when it runs traced,
    else None; for randomness="different", its batch size and a Tensor of the row's index; `arguments`: the caller's
    tensor that each mapped argument's row Tensor stands for, by the row's id, and `in_dims` the dim of its rows
    there; `draws`: a list of (generator, its state before this call's first draw from it), where the call may run
    its function again."""

    randomness: str
    trace: object = None
    size: int = 0
    row: object = None
    arguments: object = None
    draws: object = None
    in_dims: object = None


class _Running(threading.local):
    """This thread's running vmap calls (Level), innermost last."""

    def __init__(self):
        self.calls = []
        self.prototype = []  # the positions in `calls` of the calls made by prototype_vmap
        self.vmapped_backwards = []  # the randomness of each running transform_backward, innermost last


_running = _Running()

VMAP_ITEM = (
    "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling .item() on a "
    "Tensor, please try to rewrite what you're doing with other operations. If error is occurring somewhere inside "
    "PyTorch internals, please file a bug report."
)
VMAP_CONTROL_FLOW = (
    "vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow. We don't support "
    "that yet, please file an issue at https://github.com/pytorch/pytorch/issues ."
)
RANDOMNESS_ERROR = (
    "vmap: called random operation while in randomness error mode. Please either use the 'same' or "
    "'different' randomness flags on vmap or perform the randomness operation out of vmap"
)

DYNAMIC_SHAPE = (
    "vmap: We do not support batching operators that can output dynamic shape. Attempted to vmap over aten::{}. "
    "Please file an issue at https://github.com/pytorch/pytorch/issues if you need this feature."
)
BOOLEAN_MASK = (
    "vmap: We do not support batching operators that can support dynamic shape. Attempting to batch over indexing "
    "with a boolean mask."
)
NO_RULE = "Batching rule not implemented for aten::{}. We could not generate a fallback."
MASKED_SELECT_MASK = (
    "vmap: Attempted to vmap over `mask` in torch.masked_select(self, mask) We cannot support this because for each "
    "batch this would return a differently shaped Tensor. Please file an issue at "
    "https://github.com/pytorch/pytorch/issues if you need this feature."
)

PROTOTYPE_RANDOMNESS = (
    "vmap: We do not yet support calling random operations inside of vmap. Please perform random operations "
    "outside of vmap as a workaround"
)


@contextlib.contextmanager
def running(level):
    """Within it, `level` is the innermost running vmap call."""
    _running.calls.append(level)
    try:
        with _nesting.pushed(level):
            yield
    finally:
        _running.calls.pop()


def randomness_mode(randomness):
    """Random draws within it follow `randomness` as in a vmap.vmap's function (for a transform that runs a function
    once for many rows: jacfwd)."""
    return running(Level(randomness))


def in_vmap_randomness():
    """The randomness mode of the innermost vmap being traced, or None outside vmap."""
    calls = _running.calls
    return calls[-1].randomness if calls else None


def note_draw(generator):
    """Before a draw from `generator`: remember its state in each running call that may run its function again."""
    for level in _running.calls:
        if level.draws is not None and all(g is not generator for g, _ in level.draws):
            level.draws.append((generator, generator.get_state()))


def rewind_draws(draws):
    """Put the generators of `draws` (note_draw's list) back where they were, so that a call running its function
    again draws what its first run drew."""
    for generator, state in reversed(draws):
        generator.set_state(state)
    draws.clear()


def random_rows():
    """For a random draw: the running vmap calls whose rows each draw their own values (randomness="different"),
    outermost first; torch's error if one of the running calls refuses random draws."""
    calls = _running.calls
    if any(level.randomness == "error" for level in calls):
        raise RuntimeError(PROTOTYPE_RANDOMNESS if in_prototype_vmap() else RANDOMNESS_ERROR)
    return [level for level in calls if level.randomness == "different"]


def prototype_vmap(func, in_dims=0, out_dims=0):
    """torch._vmap_internals._vmap, the prototype vmap that gradcheck batches forward-mode derivatives with: vmap.vmap
    of `func` (inputs batched along `in_dims`, outputs along `out_dims`), where a custom Function needs neither
    setup_context nor a vmap rule (its forward and jvp run on the batched values) and random draws are refused with
    its message."""
    from .func import vmap

    vectorized = vmap(func, in_dims, out_dims)

    @functools.wraps(func)
    def batched(*args):
        _running.prototype.append(len(_running.calls))  # the position its call will take
        try:
            return vectorized(*args)
        finally:
            _running.prototype.pop()

    return batched


def in_prototype_vmap():
    """Whether the innermost running vmap call is one of prototype_vmap's."""
    prototype = _running.prototype
    return bool(prototype) and prototype[-1] == len(_running.calls) - 1


def is_batched(value):
    """Whether `value` (a Tensor's array) varies across the rows of a vmap.vmap whose function is running."""
    calls = _running.calls
    if not calls:
        return False
    if type(value) is Pending:
        if value.call.mapped:
            return True
        value = materialize(value)  # a recorded op on traced rows is deferred without being marked mapped
    trace = getattr(value, "_trace", None)
    return trace is not None and any(trace is level.trace for level in calls)


def varies_across_rows(value, trace, placeholders):
    """Whether `value` (a Tensor's array) varies across the rows of one running vmap.vmap call, not only across an
    enclosing call's: rows of its jax trace `trace` when it runs traced, else a value computed from its deferred
    rows (`placeholders`: the calls of its mapped inputs; a value computed from rows is taken to depend on them)."""
    if trace is not None:
        value = materialize(value) if type(value) is Pending else value
        return isinstance(value, BatchTracer) and value._trace is trace and value.batch_dim is not None
    if type(value) is not Pending or not value.call.mapped:
        return False
    return value.call.op is not MAPPED or value.call in placeholders


def levels_across(value):
    """The running vmap.vmap calls that `value` (a Tensor's array) varies across, outermost first."""
    if type(value) is Pending:
        value = materialize(value)
    across = []
    while isinstance(value, BatchTracer):
        level = next((level for level in _running.calls if level.trace is value._trace), None)
        if level is not None and value.batch_dim is not None:
            across.insert(0, level)
        value = value.val
    return across


@contextlib.contextmanager
def transform_backward(randomness="error"):
    """Within it, the user code of a batched backward (a Function's backward, a hook) that runs vectorized runs as
    under torch.func.vmap, whose vjp_fn torch.func.jacrev batches: its batched values are rows of a running vmap
    call, so that an op refuses them as torch's vmap does (a result whose size depends on the values, .item(), a
    branch on a value, a random draw with randomness="error"). A plain batched backward (is_grads_batched) has no
    such level: those steps run per row (SPEC's deliberate difference)."""
    _running.vmapped_backwards.append(randomness)
    try:
        yield
    finally:
        _running.vmapped_backwards.pop()


def as_transform_rows(fn):
    """fn(row values) as a running transform_backward runs it: under a vmap level of the batch's JAX trace when its
    values are traced rows (the vectorized attempt), else fn itself."""
    modes = _running.vmapped_backwards
    if not modes:
        return fn
    randomness = modes[-1]

    def in_level(values):
        trace = next((v._trace for v in values if isinstance(v, BatchTracer)), None)
        if trace is None:
            return fn(values)
        with running(Level(randomness, trace)):
            return fn(values)

    return in_level


def refuse_dynamic_shape(tensor, name, message=DYNAMIC_SHAPE):
    """torch's error for an op whose result's size depends on the values of `tensor` (`name`: its aten operator),
    where those vary across the rows of a running vmap.vmap: each row would give a result of another size. (A
    batched backward, is_grads_batched, instead runs such a step per row: SPEC's deliberate difference.)"""
    if is_batched(tensor._v):
        raise RuntimeError(message.format(name))


# A Function's vmap staticmethod runs on a level's batched values themselves, as torch.func's does: the row values
# its function sees are JAX BatchTracers of the level's trace, each holding the batched array and the axis its rows
# are on; the rule's results are wrapped back the same way. (JAX has no public API for this: custom_vmap would
# trace the Function's forward for the results' shapes and move every batch axis to 0.)


def batching_level(values):
    """The innermost running vmap.vmap call that some of `values` (arrays) vary across, when it runs traced; None
    if there is none."""
    for level in reversed(_running.calls):
        if level.trace is not None and any(_is_row_of(v, level) for v in values):
            return level
    return None


def _is_row_of(value, level):
    return isinstance(value, BatchTracer) and value._trace is level.trace and value.batch_dim is not None


def unbatched(value, level):
    """A row value of `level` as its batched array and the axis of its rows; (value, None) for a value that does
    not vary across the level's rows."""
    if _is_row_of(value, level):
        return value.val, value.batch_dim
    return value, None


def batched(array, dim, level):
    """The row value of `level` whose rows are `array`'s axis `dim` (made non-negative, of the level's size)."""
    size = level.trace.axis_data.size
    if array.shape[dim] != size:
        raise RuntimeError(
            f"vmap: an autograd.Function's vmap staticmethod returned an output of shape {list(array.shape)} with "
            f"out_dim {dim}, which has {array.shape[dim]} rows; the batch has {size}"
        )
    return BatchTracer(level.trace, array, dim)


def batch_size(level):
    """The number of rows `level`'s trace maps at once (a chunk's with chunk_size)."""
    return level.trace.axis_data.size


@contextlib.contextmanager
def below(level):
    """Within it, `level` and the calls inside it are not running, and JAX traces into what encloses its trace:
    code sees the level's batched arrays as they are."""
    calls = _running.calls
    k = next(i for i, call in enumerate(calls) if call is level)
    inner = calls[k:]
    del calls[k:]
    try:
        with _nesting.hidden_from(level), _jax_core.set_current_trace(level.trace.parent_trace):
            yield
    finally:
        calls.extend(inner)
