"""Forward-mode AD on eager code (torch.autograd.forward_ad): dual tensors and the per-op propagation of tangents.

While a dual level is open, a tensor's tangent is kept in a table keyed by the tensor (weakly: it goes with the
tensor). An op of the table with a dual operand runs as usual for its primal results, and its tangents are one more
op of the table: jax.jvp of the op's function at the primals, in the direction of the operands' tangents. That op
is recorded like any other, so tangents are themselves differentiable by the reverse-mode engine. With no level
open, `apply` pays one attribute test; closing the level drops every tangent, as torch's."""

import functools
import weakref

import jax
import jax.numpy as jnp

from ._dtypes import differentiable


class _Tangents:
    """{tensor: its tangent}, keyed by identity and holding the tensor weakly (a Tensor's == is elementwise, so no
    WeakKeyDictionary): an entry goes when its tensor does."""

    def __init__(self):
        self.entries = {}

    def get(self, t):
        entry = self.entries.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def set(self, t, tangent):
        key, entries = id(t), self.entries

        def forget(ref):
            if key in entries and entries[key][0] is ref:
                del entries[key]

        entries[key] = (weakref.ref(t, forget), tangent)

    def pop(self, t):
        if self.get(t) is not None:
            del self.entries[id(t)]


class _Levels:
    """The open dual level (torch has at most one) and its tangents; None when none is open."""

    def __init__(self):
        self.level, self.tangents = -1, None


LEVELS = _Levels()


def tangent_of(t):
    tangents = LEVELS.tangents
    return None if tangents is None else tangents.get(t)


def set_tangent(t, tangent):
    if tangent is None:
        LEVELS.tangents.pop(t)
    else:
        LEVELS.tangents.set(t, tangent)


class suspended:
    """Within it, forward-mode AD is off, as torch runs a custom Function's forward and jvp: ops compute no tangents
    and tensors show none. The open level's tangents are kept for after."""

    __slots__ = ("tangents",)

    def __enter__(self):
        self.tangents = LEVELS.tangents
        if self.tangents is not None:  # else nothing to do (nor to undo: another thread may open a level meanwhile)
            LEVELS.tangents = None

    def __exit__(self, *exc):
        if self.tangents is not None:
            LEVELS.tangents = self.tangents
        return False


def enter():
    if LEVELS.tangents is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    LEVELS.level, LEVELS.tangents = 0, _Tangents()
    return LEVELS.level


def exit(level=None):  # noqa: A001  (torch's exit_dual_level calls it so)
    if LEVELS.tangents is None:
        raise RuntimeError("Dual level must be a positive number.")
    if level is not None and level != LEVELS.level:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that was created. This is not supported."
        )
    LEVELS.level, LEVELS.tangents = -1, None


@functools.lru_cache(maxsize=4096)
def _jvp_op(op, duals):
    """The op giving the tangents of `op`'s outputs from its operands, then the tangents of the operands at
    positions `duals` (Op.fn's arrays): a tuple for a multi-output op, zeros for outputs without tangents."""
    from ._ops._core import Op

    n = len(duals)

    def fn(*arrays, **static):
        operands, tangents = list(arrays[: len(arrays) - n]), arrays[len(arrays) - n :]

        def of_duals(*values):
            for i, v in zip(duals, values):
                operands[i] = v
            return op.fn(*operands, **static)

        primals = [operands[i] for i in duals]
        tangents = [t.astype(p.dtype) for t, p in zip(tangents, primals)]
        outs, out_tangents = jax.jvp(of_duals, primals, tangents)
        if not op.multi:
            outs, out_tangents = (outs,), (out_tangents,)
        out_tangents = tuple(
            jnp.zeros_like(o) if t.dtype == jax.dtypes.float0 else t for o, t in zip(outs, out_tangents)
        )
        return out_tangents if op.multi else out_tangents[0]

    return Op(f"{op.name}_jvp", fn, backward_name=f"{op.backward_name[:-9]}JvpBackward0", multi=op.multi)


def apply_dual(run, op, operands, static):
    """`run(op, operands, static)` (the op's ordinary application), with the tangents of its differentiable
    results recorded where an operand has a tangent."""
    from ._tensor import Tensor

    tangents = LEVELS.tangents
    duals = [i for i, x in enumerate(operands) if isinstance(x, Tensor) and tangents.get(x) is not None]
    result = run(op, operands, static)
    if not duals:
        return result
    jvp_operands = list(operands) + [tangents.get(operands[i]) for i in duals]
    out_tangents = run(_jvp_op(op, tuple(duals)), jvp_operands, static)
    results = result if op.multi else (result,)
    out_tangents = out_tangents if op.multi else (out_tangents,)
    for r, t in zip(results, out_tangents):
        if isinstance(r, Tensor) and differentiable(r._v.dtype):
            tangents.set(r, t)
    return result
