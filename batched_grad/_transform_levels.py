"""The grad-type function transforms (batched_grad.func's grad, vjp, jacrev, jvp, jacfwd) and the functionalize
calls whose functions are running in this thread, innermost last, and what torch refuses inside a function transform
(these, or vmap.vmap): an in-place write into a tensor that the function captured rather than received or made (for
functionalize, one whose new value comes from the function's own tensors), requires_grad_(), retain_grad()."""

import contextlib
import threading
from typing import NamedTuple

from vmap._pytree import flatten

from . import _grad_mode, _graph, _nesting
from ._vmap_levels import _running as _running_vmaps

CAPTURED_MUTATION = (
    "During a grad (vjp, jvp, grad, etc) transform, the function provided attempted to call in-place operation "
    "({}) that would mutate a captured Tensor. This is not supported; please rewrite the function being transformed "
    "to explicitly accept the mutated Tensor(s) as inputs."
)
REQUIRES_GRAD_INSIDE = (
    "You are attempting to call Tensor.requires_grad_() (or perhaps using torch.autograd.functional.* APIs) inside "
    "of a function being transformed by a functorch transform. This is unsupported, please attempt to use the "
    "functorch transforms (e.g. grad, vjp, jacrev, jacfwd, hessian) or call requires_grad_() outside of a function "
    "being transformed instead."
)
RETAIN_GRAD_INSIDE = (
    "You are attempting to call Tensor.retain_grad() inside of a function being transformed by a functorch "
    "transform. This is unsupported, please attempt to use the functorch transforms (e.g. grad, vjp, jacrev, jacfwd, "
    "hessian) or call retain_grad() outside of a function being transformed instead."
)
NO_SETUP_CONTEXT = (
    "In order to use an autograd.Function with functorch transforms (vmap, grad, jvp, jacrev, ...), it must "
    "override the setup_context staticmethod. For more details, please see "
    "https://pytorch.org/docs/main/notes/extending.func.html"
)
FUNCTIONAL_INTO_CAPTURED = (
    "functionalize: the function called the in-place operation ({}) on a Tensor it captured, with operands made "
    "inside it: mutating a non-functional tensor with a functional tensor is not allowed. Please ensure that all of "
    "your inputs are wrapped inside of a functionalize() call (pass the mutated Tensor as an input)."
)


class GradLevel(NamedTuple):
    """A running grad-type transform: storages made from `mark` on were made inside it; `received` holds the version
    counters (storages) of the tensors passed to it, by id, which its function may write into too; `forward`: a
    forward-mode one (jvp, jacfwd), which holds torch's one forward AD level while it runs; `stands_for`: the
    caller's tensor that each of its fresh inputs stands for, by the input's id."""

    mark: int
    received: dict
    forward: bool = False
    stands_for: dict = None


class FunctionalLevel(NamedTuple):
    """A running functionalize call: storages made from `mark` on are its function's own (torch's FunctionalTensors);
    `stands_for`: the caller's tensor that each of its inputs stands for, by the input's id."""

    mark: int
    stands_for: dict


class _Running(threading.local):
    def __init__(self):
        self.levels = []
        self.functional = []


_running = _Running()


class _Guarding:
    """How many grad-type transforms and functionalize calls run now, in every thread: while none does, no in-place
    write needs check_not_captured, which an in-place op tells by this one read rather than by two of _running's
    thread-local lists (each read of a thread-local costs as much as a small op's NumPy call)."""

    def __init__(self):
        self.count, self._lock = 0, threading.Lock()

    @contextlib.contextmanager
    def running(self, levels, level):
        """Within it, `level` is the innermost of this thread's `levels` (_running.levels or .functional)."""
        with self._lock:
            self.count += 1
        levels.append(level)
        try:
            yield
        finally:
            levels.pop()
            with self._lock:
                self.count -= 1


GUARDING = _Guarding()


@contextlib.contextmanager
def grad_level(*received, forward=False):
    """Within it, a grad-type transform runs, called with the pytrees `received` (its arguments); `forward`: a
    forward-mode one. As torch's, it runs with inference mode off (grad mode left as it is)."""
    leaves, _ = flatten(received)
    counters = {id(c): c for c in (getattr(x, "_counter", None) for x in leaves) if c is not None}
    level = GradLevel(_graph.new_birth_mark(), counters, forward, {})
    modes = (_grad_mode.is_grad_enabled(), _grad_mode.is_inference_mode_enabled())
    _grad_mode._set(modes[0], False)
    try:
        with GUARDING.running(_running.levels, level), _nesting.pushed(level):
            yield level
    finally:
        _grad_mode._set(*modes)


@contextlib.contextmanager
def functional_level():
    """Within it, a functionalize call runs its function (the FunctionalLevel is yielded)."""
    level = FunctionalLevel(_graph.new_birth_mark(), {})
    with GUARDING.running(_running.functional, level), _nesting.pushed(level):
        yield level


def note_stand_ins(callers, inputs):
    """The innermost running grad-type transform made `inputs` to stand for the caller's tensors `callers`."""
    _running.levels[-1].stands_for.update((id(x), c) for x, c in zip(inputs, callers))


def levels():
    """The running grad-type transforms of this thread, innermost last."""
    return _running.levels


def in_forward_transform():
    """Whether the function of a forward-mode transform (jvp, jacfwd) is running in this thread."""
    return any(level.forward for level in _running.levels)


def in_functionalize():
    """Whether the function of a functionalize call is running in this thread."""
    return bool(_running.functional)


def in_transform():
    """Whether the function of a function transform (grad-type, vmap.vmap or functionalize) is running in this
    thread."""
    return bool(_running.levels) or bool(_running_vmaps.calls) or bool(_running.functional)


def guards_captures():
    """Whether a running transform refuses some in-place writes into captured tensors (check_not_captured)."""
    return GUARDING.count != 0 and (bool(_running.levels) or bool(_running.functional))


def check_not_captured(tensor, op, args=(), kwargs=None):
    """torch's refusal of an in-place op `op` (a method name) with operands `args`/`kwargs` into `tensor` when it is
    a capture of a running grad-type transform: its storage was made before the transform began and not passed to
    it. Every running level checks, as each of torch's grad interpreters does on the way down. A functionalize call
    refuses the write where an operand is its function's own, so the captured tensor would take a value it made."""
    counter = tensor._counter
    for level in _running.levels:
        if counter.born < level.mark and id(counter) not in level.received:
            raise RuntimeError(CAPTURED_MUTATION.format(aten_name(op, args, kwargs or {})))
    for level in _running.functional:
        if counter.born < level.mark:
            operands = list(args) + list((kwargs or {}).values())
            if any(getattr(getattr(x, "_counter", None), "born", -1) >= level.mark for x in operands):
                raise RuntimeError(FUNCTIONAL_INTO_CAPTURED.format(aten_name(op, args, kwargs or {})))


_NUMBERS_AS_TENSORS = (".Tensor", ".Tensor")
# the overload torch names for an in-place method: (the operand that decides it, as (position after self, keyword),
# or None for any operand; the overload when it is a Tensor; when it is a number). Other methods have none.
_OVERLOADS = {
    "add_": (None, *_NUMBERS_AS_TENSORS),
    "sub_": (None, *_NUMBERS_AS_TENSORS),
    "mul_": (None, *_NUMBERS_AS_TENSORS),
    "div_": (None, *_NUMBERS_AS_TENSORS),
    "clamp_": (None, ".Tensor", ""),
    "clamp_min_": (None, ".Tensor", ""),
    "clamp_max_": (None, ".Tensor", ""),
    "pow_": ((0, "exponent"), ".Tensor", ".Scalar"),
    "fill_": ((0, "value"), ".Tensor", ".Scalar"),
    "fmod_": ((0, "other"), ".Tensor", ".Scalar"),
    "remainder_": ((0, "other"), ".Tensor", ".Scalar"),
    "lerp_": ((1, "weight"), ".Tensor", ".Scalar"),
    "masked_fill_": ((1, "value"), ".Tensor", ".Scalar"),
    "scatter_": ((2, "src"), ".src", ".value"),
    **{f"{c}_": ((0, "other"), ".Tensor", ".Scalar") for c in ("eq", "ne", "lt", "le", "gt", "ge")},
}


def aten_name(op, args, kwargs):
    """torch's name of the in-place method `op` called with `args`/`kwargs`, e.g. aten::pow_.Scalar."""
    if op not in _OVERLOADS:
        return f"aten::{op}"
    decides, tensor_overload, number_overload = _OVERLOADS[op]
    if decides is None:
        operands = list(args) + list(kwargs.values())
    else:
        position, keyword = decides
        operands = [args[position] if position < len(args) else kwargs.get(keyword)]
    overload = tensor_overload if any(hasattr(x, "_counter") for x in operands) else number_overload
    if op == "div_" and kwargs.get("rounding_mode") is not None:
        overload = ".Tensor_mode"
    return f"aten::{op}{overload}"
