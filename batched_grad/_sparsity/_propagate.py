"""Index sets through a jaxpr: each variable gets the sets of the input elements each of its elements depends on,
equation by equation, by the primitives' rules (_rules.py, _rules_blocks.py); calls (jit, custom_jvp, custom_vjp,
checkpoint) are followed into their jaxprs, a cond takes the union of its branches, while and scan loops iterate
their body until the sets of the carried values stop growing.

Integer and boolean values are computed alongside where they are known (NumPy's rows of the JAX primitives), so
that a slice's start or a gather's indices move sets exactly; each known value remembers the `origin` it was
computed from (the operands of the recorded ops, the constants of a traced function), and the rules that read one
mark it used: the pattern then holds only for those values, and is cached with them."""

import warnings

import numpy as np
from jax.extend.core import ClosedJaxpr, Jaxpr, Literal

from .._numpy_rows import MULTIPLE, ROWS
from . import _rules, _rules_blocks, _sets
from ._maps import group_map, size_of

RULES = {**_rules.RULES, **_rules_blocks.RULES}
MAX_VALUE_ELEMENTS = 10_000_000  # integer values computed alongside at most this large
MAX_LOOP_ROUNDS = 64
NO_ORIGIN = frozenset()
_warned = set()  # primitives already named in a warning


class Var:
    """What propagation knows of a variable: its index sets (None: depends on no input), its value where it is a
    known integer or boolean array (else None), that value's origin, its shape."""

    __slots__ = ("sets", "value", "origin", "shape")

    def __init__(self, sets, shape, value=None, origin=NO_ORIGIN):
        self.sets, self.shape, self.value, self.origin = sets, tuple(shape), value, origin


class Propagation:
    """One detection's state: `width` input elements in all; with `hessian`, the pairs of input elements that
    interact through a nonlinearity (a list of (i, j) arrays); the origins of the values some rule used; the
    primitives that got the dense fallback."""

    def __init__(self, width, hessian=False):
        self.width, self.hessian = width, hessian
        self.pairs, self.pair_count = [], 0
        self.used = set()
        self.in_custom = False
        self.dense = set()
        self.exact = True  # no rule took a superset (the sweep test checks equality then)

    def approximate(self):
        """A rule took a superset of what the derivative's nonzeros can be at every point (a max, a where, a
        dense fallback)."""
        self.exact = False

    def interact(self, a, b):
        i, j = _sets.cross(a, b)
        self.pairs.append((i, j))
        self.pair_count += len(i)
        if self.pair_count > 4 * max(len(p[0]) for p in self.pairs) and self.pair_count > 1_000_000:
            self.pairs = [self.pair_arrays()]  # drop repeats as they pile up
            self.pair_count = len(self.pairs[0][0])

    def pair_arrays(self):
        """The interacting pairs, both ways round, without repeats."""
        if not self.pairs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        i = np.concatenate([p[0] for p in self.pairs] + [p[1] for p in self.pairs])
        j = np.concatenate([p[1] for p in self.pairs] + [p[0] for p in self.pairs])
        pairs = _sets.from_pairs(i, j, self.width, self.width)
        return _sets.row_ids(pairs), pairs.indices

    def use(self, origin):
        self.used |= origin

    def warn_dense(self, name, node=False):
        """`name` (a primitive, or with `node` a recorded node that is not a table op) got the dense fallback."""
        self.dense.add((name, node))

    def warn(self):
        new = sorted(self.dense - _warned)
        _warned.update(new)
        for name, node in new:
            what = (
                f"cannot see inside the recorded node {name!r} (not a table op)"
                if node
                else (f"has no rule for the JAX primitive {name!r}")
            )
            warnings.warn(
                f"sparsity detection {what}: each of its outputs is taken to depend on every input element its "
                "operands depend on",
                stacklevel=4,
            )


def run(ctx, jaxpr, args):
    """The Vars of the outputs of `jaxpr` (a ClosedJaxpr, whose constants are known, or a Jaxpr) given Vars
    for its inputs."""
    consts = []
    if isinstance(jaxpr, ClosedJaxpr):
        consts = [_constant(c) for c in jaxpr.consts]
        jaxpr = jaxpr.jaxpr
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))

    def read(v):
        if isinstance(v, Literal):
            return _constant(v.val)
        return env[v]

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        for v, var in zip(eqn.outvars, equation(ctx, eqn, ins)):
            env[v] = var
    return [read(v) for v in jaxpr.outvars]


def _constant(value):
    """A literal or a constant of the jaxpr: part of the op's structure, so its value may shape the pattern."""
    value = np.asarray(value) if not isinstance(value, np.ndarray) else value
    return Var(None, np.shape(value), value if value.size <= MAX_VALUE_ELEMENTS else None)


def equation(ctx, eqn, ins):
    """The Vars of one equation's outputs."""
    name = eqn.primitive.name
    if all(x.sets is None for x in ins) and name not in CALLS:
        sets = [None] * len(eqn.outvars)
    else:
        rule = CALLS.get(name) or RULES.get(name)
        sets = rule(ctx, eqn, ins) if rule is not None else _rules.fallback(ctx, eqn, ins)
        if isinstance(sets[0], Var):
            return sets
    values = _values(eqn, ins)
    return [
        Var(s if _rules.inexact(v.aval.dtype) else None, v.aval.shape, *known)
        for v, s, known in zip(eqn.outvars, sets, values)
    ]


def _values(eqn, ins):
    """(value, origin) of each output where it is computable now (its operands' values known, none depending on
    an input), else (None,)."""
    unknown = [(None,)] * len(eqn.outvars)
    name = eqn.primitive.name
    if name not in ROWS or any(x.sets is not None for x in ins):
        return unknown
    if any(x.value is None for x in ins) or sum(size_of(v.aval.shape) for v in eqn.outvars) > MAX_VALUE_ELEMENTS:
        return unknown
    try:
        result = ROWS[name](*[x.value for x in ins], **eqn.params)
    except Exception:  # a parameter the row does not take: the value stays unknown, the rule conservative
        return unknown
    results = result if name in MULTIPLE else (result,)
    origin = frozenset().union(*[x.origin for x in ins])
    return [(np.asarray(r), origin) for r in results]


# ---- calls and control flow ------------------------------------------------------------------------------------
def _inner(eqn):
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        value = eqn.params.get(key)
        if isinstance(value, (Jaxpr, ClosedJaxpr)):
            return value
    return None


def call(ctx, eqn, ins):
    inner = _inner(eqn)
    if inner is None:
        return _rules.fallback(ctx, eqn, ins)
    custom = eqn.primitive.name.startswith("custom_")
    outer, ctx.in_custom = ctx.in_custom, ctx.in_custom or custom
    try:
        return run(ctx, inner, ins)
    finally:
        ctx.in_custom = outer


def cond(ctx, eqn, ins):
    ctx.approximate()
    branches = [run(ctx, b, ins[1:]) for b in eqn.params["branches"]]
    return [Var(_sets.union([b[k].sets for b in branches], ctx.width), v.aval.shape) for k, v in enumerate(eqn.outvars)]


def _unknown(x):
    return Var(x.sets, x.shape)


def _fixpoint(ctx, body, fixed, carries, extra=()):
    """Run `body` on fixed + carries + extra until the carries' sets stop growing; returns the last outputs."""
    for _ in range(MAX_LOOP_ROUNDS):
        outs = run(ctx, body, fixed + carries + list(extra))
        grown = [Var(_sets.union([c.sets, o.sets], ctx.width), c.shape) for c, o in zip(carries, outs[: len(carries)])]
        if all(_same(g.sets, c.sets) for g, c in zip(grown, carries)):
            return outs
        carries = grown
    raise _LoopTooLong


class _LoopTooLong(Exception):
    pass


def _same(a, b):
    if a is None or b is None:
        return a is b
    return len(a.indices) == len(b.indices) and np.array_equal(a.indptr, b.indptr)


def while_loop(ctx, eqn, ins):
    ctx.approximate()
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    fixed = [_unknown(x) for x in ins[nc : nc + nb]]
    try:
        outs = _fixpoint(ctx, p["body_jaxpr"], fixed, [_unknown(x) for x in ins[nc + nb :]])
    except _LoopTooLong:
        return _rules.fallback(ctx, eqn, ins)
    return [Var(_sets.union([x.sets, o.sets], ctx.width), x.shape) for x, o in zip(ins[nc + nb :], outs)]


def scan(ctx, eqn, ins):
    """Each step sees the union over steps of its slice of the scanned arrays; its outputs, stacked, each hold
    what the step's do."""
    ctx.approximate()
    p = eqn.params
    n_consts, n_carry = p["num_consts"], p["num_carry"]
    fixed = [_unknown(x) for x in ins[:n_consts]]
    xs = []
    for x in ins[n_consts + n_carry :]:
        step_shape = x.shape[1:]
        kept = list(range(1, len(x.shape)))
        xs.append(Var(_sets.group(x.sets, group_map(x.shape, kept), size_of(step_shape), ctx.width), step_shape))
    try:
        outs = _fixpoint(ctx, p["jaxpr"], fixed, [_unknown(x) for x in ins[n_consts : n_consts + n_carry]], xs)
    except _LoopTooLong:
        return _rules.fallback(ctx, eqn, ins)
    carries = [Var(_sets.union([x.sets, o.sets], ctx.width), x.shape) for x, o in zip(ins[n_consts:], outs[:n_carry])]
    ys = []
    for v, o in zip(eqn.outvars[n_carry:], outs[n_carry:]):
        shape = v.aval.shape
        ys.append(Var(_sets.take(o.sets, group_map(shape, list(range(1, len(shape))))), shape))
    return carries + ys


CALLS = {
    **{name: call for name in ("jit", "pjit", "closed_call", "core_call", "remat2", "checkpoint", "custom_jvp_call")},
    **{name: call for name in ("custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin")},
    "cond": cond,
    "while": while_loop,
    "scan": scan,
}
