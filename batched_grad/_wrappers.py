"""How a tensor looks from inside the running function transforms, as torch.func shows it: the levels that wrap it
(torch's GradTrackingTensor for a grad-type transform, BatchedTensor for a vmap.vmap whose rows it varies across,
FunctionalTensor for functionalize), its repr with them, and the tensor one level down (debug_unwrap).

A grad-type or functionalize level wraps the tensors its function received or made: their storage was born after
the level began (a grad-type level's arguments that it does not differentiate, too). A vmap level wraps the tensors
whose values are rows of its trace: while the function runs on placeholders, reading a value that varies across the
rows runs it traced, so a repr sees the rows."""

import textwrap
from typing import NamedTuple

from jax._src.interpreters.batching import BatchTracer

from . import _graph, _nesting
from ._format import autograd_suffixes, format_value
from ._tensor import Tensor
from ._transform_levels import FunctionalLevel, GradLevel
from ._vmap_levels import Level


class Layer(NamedTuple):
    """A level that wraps a tensor: the level, its number (depth) and, for a vmap level, the batch axis."""

    level: object
    depth: int
    bdim: int = None


def _made_or_received(tensor, level):
    born = tensor._counter.born
    if type(level) is FunctionalLevel:
        return born >= level.mark
    if born >= level.mark:
        return True
    # an argument it received as it is, not one it made a fresh input for (that tensor is the level below's)
    return id(tensor._counter) in level.received and all(c is not tensor for c in level.stands_for.values())


def _rows_of(value, level):
    return isinstance(value, BatchTracer) and value._trace is level.trace and value.batch_dim is not None


def layers(tensor):
    """(the Layers that wrap `tensor`, innermost first; its value under them: for vmap levels, the array of all
    their rows, batch axes where the Layers say)."""
    running = _nesting.levels()
    value = tensor._value
    found = []
    for depth in range(len(running), 0, -1):
        level = running[depth - 1]
        if type(level) is Level:
            if _rows_of(value, level):
                found.append(Layer(level, depth, value.batch_dim))
                value = value.val
        elif _made_or_received(tensor, level):
            found.append(Layer(level, depth))
    return found, value


def wrapped_repr(tensor):
    """repr(tensor) with the wrappers torch prints for the levels that wrap it, or None if none does."""
    found, value = layers(tensor)
    if not found:
        return None
    text = format_value(value, tensor.dtype, _autograd_below(tensor, found))
    for layer in reversed(found):  # outermost first: each wraps the text of those below it
        kind = type(layer.level)
        if kind is Level:
            text = f"BatchedTensor(lvl={layer.depth}, bdim={layer.bdim}, value=\n{textwrap.indent(text, ' ' * 4)}\n)"
        elif kind is GradLevel:
            text = f"GradTrackingTensor(lvl={layer.depth}, value=\n{textwrap.indent(text, ' ' * 4)}\n)"
        else:
            text = f"FunctionalTensor(lvl={layer.depth}, value=\\\n{text})"
    return text


def _autograd_below(tensor, found):
    """The autograd suffixes of the tensor under all its wrappers: torch's grad-type levels have graphs of their
    own, so under one the tensor shows only what the autograd outside all of them records: for an input of theirs,
    the caller's tensor's; for a tensor made inside, its node if it depends on a tensor from outside that requires
    grad."""
    grads = [layer.level for layer in found if type(layer.level) is GradLevel]
    if not grads:
        return autograd_suffixes(tensor)
    for level in grads:  # innermost first: an input stands for a tensor one level down
        tensor = level.stands_for.get(id(tensor), tensor)
    mark = grads[-1].mark
    if tensor._counter.born < mark or _depends_on_outside(tensor, mark):
        return autograd_suffixes(tensor)
    return []


def _depends_on_outside(tensor, mark):
    """Whether `tensor`'s graph reaches a leaf that requires grad whose storage was born before `mark`."""
    stack, seen = [tensor.grad_fn] if tensor.grad_fn is not None else [], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) is _graph.AccumulateGrad:
            if node.variable.requires_grad and node.variable._counter.born < mark:
                return True
            continue
        stack.extend(edge.node for edge in node.edges if edge is not None)
    return False


def debug_unwrap(tensor, *, recurse=True):
    """The tensor under the innermost level that wraps `tensor` (with `recurse`, under all of them), as
    torch.func.debug_unwrap: for an argument of that level, the caller's tensor itself; for a tensor made inside, a
    tensor of the level below of the same values (for a vmap level, all rows, the batch where it was). `tensor` itself
    where no running level wraps it. For debugging: using the result inside the transform is undefined in torch."""
    if not isinstance(tensor, Tensor):
        return tensor
    down = _one_level_down(tensor)
    if down is None:
        return tensor
    return debug_unwrap(down) if recurse else down


def _one_level_down(tensor):
    running = _nesting.levels()
    for depth in range(len(running), 0, -1):
        level = running[depth - 1]
        if type(level) is Level:
            if level.arguments and id(tensor) in level.arguments:
                return level.arguments[id(tensor)]
            value = tensor._value
            if _rows_of(value, level):
                return _born_below(Tensor._wrap(value.val), depth + 1)
        elif _made_or_received(tensor, level):
            caller = level.stands_for.get(id(tensor))
            return caller if caller is not None else _born_below(Tensor._wrap(tensor._v), depth)
    return None


def _born_below(tensor, depth):
    """`tensor`, new, as a tensor of the level above number `depth`: its storage counts as born before every
    grad-type or functionalize level from that depth in, and inside those outside it."""
    marks = [level.mark for level in _nesting.levels()[depth - 1 :] if type(level) is not Level]
    if marks:
        tensor._counter.born = min(marks) - 1
    return tensor
