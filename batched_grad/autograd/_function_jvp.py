"""A custom Function's `jvp(ctx, *tangents)` staticmethod as its forward-mode derivative, as torch's.

Forward mode reaches a Function.apply in two ways:

- dual tensors (autograd.forward_ad): once forward and setup_context have run, an input with a tangent makes apply
  call the user's jvp with the inputs' tangents, and the outputs take the tangents it returns, after torch's checks
  (`set_dual_tangents`);
- JAX traces (func.jvp, jacfwd, hessian, linearize, autograd.functional's forward-mode Jacobian): the function
  is traced into a jaxpr whose jax.jvp is taken later, inside an op's kernel. There the outputs pass through a
  jax.custom_jvp "tie" of (inputs, outputs) whose value is the outputs and whose JVP rule gives the user's jvp at
  the values it is called with (`tied_outputs`).

A Function without a jvp raises torch's NotImplementedError when a tangent reaches it, and only then. In both ways
the jvp reads through `ctx.saved_tensors` what `ctx.save_for_forward` saved. The JVP rule of a tie runs on traced
values of its own, which no dual tensor's tangent reaches, and perhaps in another thread (a program compiled in the
background): it leaves the dual level, which all threads share, alone."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from vmap._pytree import flatten

from .. import _dual
from .._grad_mode import no_grad
from .._tensor import Tensor, python_type_name
from .._tracing import TRACING, is_tracer

NO_JVP = "You must implement the jvp function for custom autograd.Function to use it with forward mode AD."
WRONG_COUNT = "Function's jvp returned an invalid number of forward gradients (expected {} but got {})"
NOT_A_TENSOR = "expected Variable or None (got {}) for grad output {}."
NOT_DIFFERENTIABLE = (
    "Function's jvp returned a gradient at position {}, but  the corresponding forward output is not a "
    "differentiable Tensor.You should return None at that position instead."
)
MISSING = (
    "Function's jvp returned None at position {}, but the corresponding forward output is a differentiable Tensor: "
    "return its tangent there (zeros where it does not change)."
)
WRONG_SIZE = (
    "Trying to set a forward gradient that has a different size than that of the original Tensor, this is not "
    "supported. Tensor is of size {} while the given forward gradient is of size {}."
)
DIRTY_NOT_INPUT = (
    "Only input Tensors should be given to ctx.mark_dirty(). If a Tensor is not an input, there is no need to pass it "
    "to mark_dirty()."
)
DIRTY_NOT_MODIFIED = (
    "An inplace custom Function is not modifying the forward mode gradients inplace. If the forward is modifying an "
    "input inplace, then the jvp function must modify the corresponding gradient inplace."
)
DIRTY_NOT_RETURNED = (
    "An inplace custom Function is not returning the forward mode gradients as-is. If the forward is modifying an "
    "input inplace, then the jvp function must modify the gradient inplace and return it as-is."
)
VIEW_NOT_VIEW = (
    "A custom Function's forward is returning a view (or an input as-is) but the jvp is not returning a view."
)
VIEW_OF_OTHER_BASE = (
    "A custom Function is returning a view but the jvp is not returning a view of the same base as the given grad "
    "input."
)
VIEW_OF_OTHER = "A custom Function is returning a view but the jvp is not returning a view of the given grad input."


def _is_differentiable_dtype(t):
    return t.dtype.is_floating_point or t.dtype.is_complex


def differentiable_outputs(outs, ctx):
    """Per output of forward: whether it can have a tangent (a float or complex Tensor not marked
    non-differentiable)."""
    return [isinstance(o, Tensor) and id(o) not in ctx.non_differentiable and _is_differentiable_dtype(o) for o in outs]


def _jvp_argument(arg, tangent, materialize):
    """What the user's jvp receives for `arg`: its tangent; zeros for a float Tensor without one (None when ctx does
    not materialize gradients); None for a Tensor of another dtype or a non-Tensor, as torch."""
    if not isinstance(arg, Tensor):
        return None
    if tangent is not None:
        return tangent
    if materialize and _is_differentiable_dtype(arg):
        from .. import zeros

        return zeros(tuple(arg.shape), dtype=arg.dtype)
    return None


def _call_user_jvp(cls, ctx, tangents):
    """cls.jvp(ctx, *tangents) with ctx.saved_tensors giving what save_for_forward saved; its result as a tuple,
    each element checked to be a Tensor or None."""
    ctx._saved_for_jvp = tuple(getattr(ctx, "saved_for_forward", ()))
    try:
        result = cls.jvp(ctx, *tangents)
    finally:
        ctx._saved_for_jvp = None
    result = result if isinstance(result, tuple) else (result,)
    for i, g in enumerate(result):
        if g is not None and not isinstance(g, Tensor):
            raise RuntimeError(NOT_A_TENSOR.format(python_type_name(g), i))
    return result


def _check_tangents(result, differentiable, shapes):
    """torch's checks of the jvp's result against the outputs (`shapes`: each output's shape, None for a
    non-Tensor, whose tangent is ignored)."""
    if len(result) != len(differentiable):
        raise RuntimeError(WRONG_COUNT.format(len(differentiable), len(result)))
    for i, (g, ok, shape) in enumerate(zip(result, differentiable, shapes)):
        if shape is None:
            continue
        if not ok:
            if g is not None:
                raise RuntimeError(NOT_DIFFERENTIABLE.format(i))
        elif g is None:
            raise RuntimeError(MISSING.format(i))
        elif tuple(g.shape) != tuple(shape):
            raise RuntimeError(WRONG_SIZE.format(list(shape), list(g.shape)))


# ---- dual tensors ----------------------------------------------------------------------------------------------


def _base_of(t):
    return t._base if t._base is not None else t


def set_dual_tangents(cls, ctx, args, outs, received, dirty):
    """Under an open dual level, after apply: when an input has a tangent, the tangents of the `received` outputs
    (forward returned `outs`) from the user's jvp, with torch's rules for outputs that are inputs written in place
    (`dirty`: their ids) or views of inputs."""
    input_tangents = [_dual.tangent_of(a) if isinstance(a, Tensor) else None for a in args]
    if all(t is None for t in input_tangents):
        return
    versions = [t._counter.value if t is not None else None for t in input_tangents]
    with _dual.suspended():  # as torch's, the jvp runs with forward mode off
        result = _call_user_jvp(
            cls, ctx, [_jvp_argument(a, t, ctx.materialize_grads) for a, t in zip(args, input_tangents)]
        )
    differentiable = differentiable_outputs(outs, ctx)
    _check_tangents(result, differentiable, [o.shape if isinstance(o, Tensor) else None for o in outs])
    bases = {id(_base_of(a)): k for k, a in enumerate(args) if isinstance(a, Tensor)}
    for raw, out, g, ok in zip(outs, received, result, differentiable):
        if ok and _takes_tangent(raw, g, args, bases, input_tangents, versions, id(raw) in dirty):
            _dual.set_tangent(out, g)


def _takes_tangent(raw, g, args, bases, input_tangents, versions, dirty):
    """Whether an output (`raw`, as forward returned it) takes the jvp's tangent `g`, after torch's checks: an input
    written in place keeps its own tangent, changed in place by the jvp; an input or a view of one gets a view."""
    k = next((k for k, a in enumerate(args) if a is raw), None)
    if dirty:
        if k is None:
            raise RuntimeError(DIRTY_NOT_INPUT)
        if input_tangents[k] is not None:  # its tangent, changed in place, stays the input's
            if g._counter.value == versions[k]:
                raise RuntimeError(DIRTY_NOT_MODIFIED)
            if g is not input_tangents[k]:
                raise RuntimeError(DIRTY_NOT_RETURNED)
            return False
    elif k is not None or raw._base is not None:
        k = k if k is not None else bases.get(id(raw._base))
        if k is not None and input_tangents[k] is not None:
            _check_view_tangent(g, input_tangents[k])
    return True


def _check_view_tangent(g, input_tangent):
    """An output that is an input, or a view of one, must get a view of that input's tangent (torch's rule)."""
    if g._base is None:
        raise RuntimeError(VIEW_NOT_VIEW)
    if g._base is not _base_of(input_tangent):
        raise RuntimeError(VIEW_OF_OTHER_BASE if input_tangent._base is not None else VIEW_OF_OTHER)


# ---- JAX traces ------------------------------------------------------------------------------------------------


def traced_input_values(args):
    """Inside a forward-mode trace, the values of apply's Tensor arguments before forward runs (it may write into
    them) when any is traced; None elsewhere."""
    if TRACING.depth == 0:
        return None
    values = [a._value for a in args if isinstance(a, Tensor)]
    return values if any(is_tracer(v) for v in values) else None


_TENSOR = object()  # in a _Call's arguments and outputs: the place of a Tensor


class _Call:
    """What a tie's JVP rule needs of one kind of apply call, none of it traced: the Function, its non-Tensor
    arguments and which arguments are Tensors (and require grad), the non-Tensor outputs and which outputs are
    differentiable Tensors. Equal calls share one tie (and the kernels compiled for it)."""

    def __init__(self, cls, args, kwargs, ctx, outs, is_tuple):
        self.cls, self.kwargs, self.is_tuple = cls, kwargs, is_tuple
        self.args = tuple(_TENSOR if isinstance(a, Tensor) else a for a in args)
        self.requires_grad = tuple(a.requires_grad for a in args if isinstance(a, Tensor))
        self.needs_input_grad = tuple(ctx.needs_input_grad)
        self.outputs = tuple(_TENSOR if isinstance(o, Tensor) else o for o in outs)
        self.differentiable = tuple(differentiable_outputs(outs, ctx))
        self.n_inputs, self.n_outputs = len(self.requires_grad), sum(o is _TENSOR for o in self.outputs)

    def key(self):
        """A hashable key of everything the rule reads; None when a non-Tensor argument cannot be hashed."""
        if any(isinstance(x, Tensor) for x in flatten((self.args, self.outputs, self.kwargs))[0]):
            return None  # a Tensor inside a container: keyed by identity, which no later call repeats
        try:
            static = tuple((type(v), v) for v in self.args + self.outputs + tuple(sorted(self.kwargs.items())))
            key = (self.cls, static, self.requires_grad, self.needs_input_grad, self.differentiable, self.is_tuple)
            hash(key)
        except TypeError:
            return None
        return key

    def context(self, inputs, outputs):
        """A ctx filled as apply fills one, at these values of the Tensor inputs and outputs (setup_context, or
        forward for a Function that has none), and the arguments as the jvp sees them."""
        from .function import FunctionCtx

        tensors = iter([Tensor._wrap(v, requires_grad=rg) for v, rg in zip(inputs, self.requires_grad)])
        args = [next(tensors) if a is _TENSOR else a for a in self.args]
        ctx = FunctionCtx()
        ctx.needs_input_grad = self.needs_input_grad
        if self.cls.setup_context is not None:
            tensors = iter([Tensor._wrap(v) for v in outputs])
            outs = [next(tensors) if o is _TENSOR else o for o in self.outputs]
            self.cls.setup_context(ctx, tuple(args), tuple(outs) if self.is_tuple else outs[0])
        else:
            self.cls.forward(ctx, *args, **self.kwargs)
        return ctx, args


def _zero_tangent(x):
    """The zero tangent of array `x` (float0 for an integer or bool array, as JAX's)."""
    if jnp.issubdtype(jnp.result_type(x), jnp.inexact):
        return jnp.zeros_like(x)
    return np.zeros(jnp.shape(x), jax.dtypes.float0)


def _moving(t):
    """A tangent the rule received, as a Tensor; None for a symbolic zero or an integer input's float0."""
    return None if type(t) is SymbolicZero or t.dtype == jax.dtypes.float0 else Tensor._wrap(t)


def _tie_rule(call, primals, tangents):
    """The tie's JVP: the outputs, and the user's jvp at these inputs and outputs (zeros where no input moves)."""
    n = call.n_inputs
    inputs, outputs, input_tangents = primals[1 : 1 + n], tuple(primals[1 + n :]), tangents[1 : 1 + n]
    if all(type(t) is SymbolicZero for t in input_tangents):
        return outputs, tuple(_zero_tangent(o) for o in outputs)
    with no_grad():
        ctx, args = call.context(inputs, outputs)
        moving = iter([_moving(t) for t in input_tangents])
        tangents_in = [next(moving) if a is _TENSOR else None for a in call.args]
        result = _call_user_jvp(
            call.cls, ctx, [_jvp_argument(a, t, ctx.materialize_grads) for a, t in zip(args, tangents_in)]
        )
    values = iter(outputs)
    shapes = [jnp.shape(next(values)) if o is _TENSOR else None for o in call.outputs]
    _check_tangents(result, call.differentiable, shapes)
    tensor_results = [g for o, g in zip(call.outputs, result) if o is _TENSOR]
    return outputs, tuple(
        _zero_tangent(v) if g is None else g._value.astype(jnp.result_type(v)) for v, g in zip(outputs, tensor_results)
    )


_TOKENS = itertools.count(1)
_TIES = {}  # _Call key -> (token, tie)
_MAX_TIES = 4096


def _tie(call):
    """The (token, custom_jvp) for `call`; the token, an operand of the tie, sets apart in a jaxpr's text (the key of
    its compiled kernels) ties whose rules differ, which the text of a custom_jvp_call does not show."""
    key = call.key()
    found = _TIES.get(key) if key is not None else None
    if found is not None:
        return found

    def primal(token, *arrays):
        return tuple(arrays[call.n_inputs :])

    tie = jax.custom_jvp(primal)
    tie.defjvp(functools.partial(_tie_rule, call), symbolic_zeros=True)
    found = (np.int32(next(_TOKENS)), tie)
    if key is not None:
        if len(_TIES) >= _MAX_TIES:
            _TIES.clear()  # tokens are never reused: a tie made again gets a new one
        _TIES[key] = found
    return found


def tied_outputs(cls, ctx, args, kwargs, input_values, outs, is_tuple, received, dirty):
    """Inside a forward-mode trace: the `received` outputs of apply (forward returned `outs`, a tuple when
    `is_tuple`) with their values passed through the tie, so that their JVP is the user's jvp; an input written in
    place (`dirty`: the ids) takes its tied value itself."""
    if not any(isinstance(o, Tensor) for o in received):
        return received
    call = _Call(cls, args, kwargs, ctx, outs, is_tuple)
    token, tie = _tie(call)
    TRACING.ties += 1
    tied = iter(tie(token, *input_values, *[o._value for o in received if isinstance(o, Tensor)]))
    result, made = [], {}
    for o in received:
        if isinstance(o, Tensor):
            value = next(tied)
            if id(o) in dirty:
                o._v = value
            elif id(o) not in made:
                made[id(o)] = Tensor._wrap(value, o.grad_fn, o._output_nr, o._requires_grad)
            o = o if id(o) in dirty else made[id(o)]
        result.append(o)
    return result
