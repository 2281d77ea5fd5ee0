"""Which arguments each output of a JAX function reads, found by walking its jaxpr once. A recorded backward
(create_graph=True) links each gradient only to the values it reads, so that, as in torch, a gradient that does
not depend on an input is None for it rather than a zero.

Where `differentiable_only`, a value of an integer or bool dtype (a comparison's mask, an index) or behind a
stop_gradient reads nothing: no gradient flows through it, and torch computes such masks outside the graph
(clamp's, maximum's and the margin losses' derivatives select the cotangent by a mask of the input, yet do not
depend on the input)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import ClosedJaxpr, Jaxpr, Literal

from . import _store
from ._x64 import scoped

# primitives that apply their body once to exactly their inputs, and the parameter that holds the body (some names
# differ across JAX versions: pjit is jit, checkpoint is remat2); a loop such as scan also has a "jaxpr", but its
# outputs read what any iteration reads, so it counts as any other primitive
_CALLS = {
    "jit": "jaxpr",
    "pjit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "remat2": "jaxpr",
    "checkpoint": "jaxpr",
}


@scoped
def output_reads(fn, avals, differentiable_only=False):
    """Per output of `fn` applied to arrays of `avals` ((shape, dtype) pairs), a bitmask of the arguments it
    depends on (bit i: argument i). Kept in the store across processes where `fn` has a stable name."""

    def walk():
        return tuple(_jaxpr_reads(traced(fn, avals)[0].jaxpr, differentiable_only))

    return _store.remembered("reads", (fn, avals, differentiable_only), walk)


@scoped
def output_copies(fn, avals):
    """Per output of `fn` applied to arrays of `avals`, the position of the argument it is exactly (the same array:
    no op between them), or -1. Kept in the store across processes where `fn` has a stable name."""

    def walk():
        jaxpr = traced(fn, avals)[0].jaxpr
        position = {v: i for i, v in enumerate(jaxpr.invars)}
        return tuple([-1 if isinstance(v, Literal) else position.get(v, -1) for v in jaxpr.outvars])

    return _store.remembered("copies", (fn, avals), walk)


class _Same:
    """A function known by what it is: a functools.partial by its function and arguments (a node's VJP is a new
    partial of one function and spec each time it is asked about), any other function by its identity."""

    __slots__ = ("fn", "key")

    def __init__(self, fn):
        self.fn = fn
        self.key = fn
        if isinstance(fn, functools.partial):
            key = (fn.func, fn.args, tuple(sorted(fn.keywords.items())))
            try:
                hash(key)
                self.key = key
            except TypeError:  # an argument that cannot be hashed: the partial by its identity
                pass

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return self.key == other.key


def traced(fn, avals):
    """(closed jaxpr, output ShapeDtypeStructs) of `fn` on arrays of `avals`, as jax.make_jaxpr(return_shape=True)
    gives them: traced once for every use of one function on concrete avals (what a recorded backward's VJP reads,
    which of its arguments it passes through, and the derived host form of that VJP, _numpy_eval.py)."""
    return _traced(_Same(fn), tuple([(tuple(shape), np.dtype(dtype)) for shape, dtype in avals]))


@functools.lru_cache(maxsize=64)
def _traced(same, avals):
    structs = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in avals]
    return jax.make_jaxpr(same.fn, return_shape=True)(*structs)


def _jaxpr_reads(jaxpr, differentiable_only):
    reads = {v: 1 << i for i, v in enumerate(jaxpr.invars)}

    def read(v):
        return 0 if isinstance(v, Literal) else reads.get(v, 0)  # constants read no argument

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        body = _body(eqn)
        if body is not None:  # a call: each output reads what its body's output reads
            outs = [_combine(ins, mask) for mask in _jaxpr_reads(body, differentiable_only)]
        else:  # any other primitive: every output reads every input
            outs = [_combine(ins, -1)] * len(eqn.outvars)
        if differentiable_only:
            outs = [
                m if _inexact(v) and eqn.primitive.name != "stop_gradient" else 0 for v, m in zip(eqn.outvars, outs)
            ]
        reads.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def _inexact(var):
    dtype = getattr(var.aval, "dtype", None)  # a token has none
    return dtype is not None and jnp.issubdtype(dtype, jnp.inexact)


def _body(eqn):
    """The jaxpr a call equation runs once on exactly its inputs, giving exactly its outputs; else None."""
    body = eqn.params.get(_CALLS.get(eqn.primitive.name))
    if isinstance(body, ClosedJaxpr):
        body = body.jaxpr
    if isinstance(body, Jaxpr) and len(body.invars) == len(eqn.invars) and len(body.outvars) == len(eqn.outvars):
        return body
    return None


def _combine(masks, which):
    """The union of the `masks` selected by the bits of `which`."""
    return functools.reduce(int.__or__, [m for i, m in enumerate(masks) if which >> i & 1], 0)
