"""torch.func.functionalize: run a function so that its in-place writes and views reach nothing outside it while it
runs, and only its results and its inputs' final values leave it.

Values here are immutable JAX arrays, so an in-place op inside the function already computes a new value and rebinds
the tensor to it; what functionalize adds is the boundary torch draws. The function runs on stand-ins for its input
tensors (each of its own storage, linked in the graph to the caller's tensor where that requires grad): its writes
into an input change the stand-in only, and at the end each input it changed takes the stand-in's final value with
one copy_ (after taking its new shape, where the function changed that in place), as torch copies mutations back.
Its results are unwrapped as torch's are: an input returned unchanged is the caller's tensor itself, a view of one is
regenerated as that view of the caller's tensor, and with remove="mutations_and_views" no result is a view of
anything: each view is computed by the copying form of its view ops (TBackward0_copy ...)."""

import copy
import functools

from vmap._pytree import flatten

from .._grad_mode import is_recording
from .._host import unshared
from .._inplace import DETACH
from .._ops import clone
from .._ops._core import apply
from .._ops.inplace_views import reshape_in_place
from .._tensor import Tensor
from .._transform_levels import functional_level
from .._view_meta import made_by_custom_node, renew_creation

_INVALID_REMOVE = (
    "functionalize(f, remove='mutations'): received invalid argument for remove={}. Valid options are:\n"
    "     remove='mutations': all inplace and out= operators will be removed from the program, and replaced with "
    "their out-of-place equivalents.\n"
    "     remove='mutations_and_views': In addition to the above, all aliasing operators {{view}} will be replaced "
    "with their non-aliasing counterparts, {{view}}_copy.\n"
)


def functionalize(func, *, remove="mutations"):
    """`func` with its mutations (and with remove="mutations_and_views" its aliasing) kept inside it: the values it
    computes are func's; an input it wrote into takes its final value when it returns, and its results alias no
    tensor it wrote into (with "mutations_and_views", no tensor at all)."""
    if remove == "mutations":
        reapply_views = True
    elif remove == "mutations_and_views":
        reapply_views = False
    else:
        raise RuntimeError(_INVALID_REMOVE.format(remove))

    @functools.wraps(func)
    def functionalized(*args, **kwargs):
        flat, spec = flatten((args, kwargs))
        with functional_level() as level:
            inputs = [_stand_in(x) if isinstance(x, Tensor) else x for x in flat]
            level.stands_for.update((id(s), x) for s, x in zip(inputs, flat) if isinstance(x, Tensor))
            call_args, call_kwargs = spec.unflatten(inputs)
            outputs = func(*call_args, **call_kwargs)
        callers = {id(s): x for s, x in zip(inputs, flat) if isinstance(x, Tensor)}
        leaves, out_spec = flatten(outputs)
        results = [_unwrapped(o, callers, reapply_views) for o in leaves]
        for x, s in zip(flat, inputs):
            if isinstance(x, Tensor) and _written(s):
                _write_back(x, s)
        return out_spec.unflatten(results)

    return functionalized


def _stand_in(x):
    """A tensor of `x`'s values with a storage of its own: recorded as a copy of `x` where `x` requires grad (so
    gradients reach it), else holding its value (immutable: nothing is copied; memory shared with NumPy is)."""
    if x.requires_grad and is_recording():
        return clone(x)
    return Tensor._wrap(unshared(x._v))


def _written(stand_in):
    """Whether the function changed a stand-in in place (through itself or one of its views)."""
    return stand_in._counter.value > 0


def _write_back(x, stand_in):
    """`x` takes the stand-in's final shape (where the function changed it in place) and values, as torch's
    functionalize propagates an input's mutations."""
    shape = tuple(stand_in.shape)
    if shape != tuple(x.shape):
        if stand_in.numel() == x.numel():
            reshape_in_place(x, shape)
        else:
            x.resize_(shape)
    x.copy_(stand_in)


def _unwrapped(output, callers, reapply_views):
    """A result of the function as functionalize returns it."""
    if not isinstance(output, Tensor):
        return output
    if id(output) in callers:  # a stand-in returned as it is
        return output if _written(output) else callers[id(output)]
    if output._view is None:
        return output
    root, chain = output._view
    caller = callers.get(id(root))
    if caller is not None and not _written(root):  # a view of an input that the function left unchanged
        return _replayed(caller, chain, copying=not reapply_views)
    if not reapply_views:
        return _replayed(root, chain, copying=True)
    if made_by_custom_node(output):
        renew_creation(output)  # torch's functionalized result is a view made again, whole whatever was written
    return output


def _replayed(base, chain, copying):
    """The view `chain` of `base` made again; with `copying`, computed by each view op's copying form, so that the
    result is a tensor of its own."""
    out = base
    for step in chain:
        if step is DETACH:
            out = Tensor._wrap(out._v) if copying else out.detach()
            continue
        op, static, k = step
        result = apply(_copying(op) if copying else op, [out], **dict(static))
        out = result[k] if op.multi else result
    return out


_COPYING = {}


def _copying(op):
    """The copying form of the view op `op` (torch's {view}_copy): the same function, whose result is no view; its
    node is named as torch names a view_copy's (TBackward0_copy)."""
    copying = _COPYING.get(op)
    if copying is None:
        copying = copy.copy(op)
        copying.view, copying.view_step = False, None
        copying.backward_name = op.backward_name + "_copy"
        copying = _COPYING.setdefault(op, copying)
    return copying
