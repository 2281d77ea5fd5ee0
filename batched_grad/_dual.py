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
from ._tracing import is_tracer


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


class _NoTangents(_Tangents):
    """The tangents seen while forward gradients are switched off: none, and none kept."""

    def get(self, t):
        return None

    def set(self, t, tangent):
        pass

    def pop(self, t):
        pass


NO_TANGENTS = _NoTangents()

ON, SUSPENDED, OFF = "on", "suspended", "off"  # the modes of forward gradients


class _Levels:
    """The open dual level (torch has at most one: `open`, its tangents, None when none is open), the mode of
    forward gradients, and `tangents`, what ops consult: `open` in mode ON; None while SUSPENDED (a custom
    Function's forward and jvp: the one attribute test of the fast path); NO_TANGENTS while OFF
    (forward_ad._set_fwd_grad_enabled(False)), where ops also cut the tangents of traced results (apply_dual)."""

    def __init__(self):
        self.level, self.open, self.mode, self.tangents = -1, None, ON, None

    def sync(self):
        self.tangents = self.open if self.mode is ON else NO_TANGENTS if self.mode is OFF else None


LEVELS = _Levels()


def tangent_of(t):
    tangents = LEVELS.tangents
    return None if tangents is None else tangents.get(t)


def saved_tangent(t):
    """What a saved tensor keeps of `t`'s tangent: (the open level's table, the tangent), or None."""
    tangents = LEVELS.open
    if tangents is None:
        return None
    tangent = tangents.get(t)
    return None if tangent is None else (tangents, tangent)


def restore_tangent(t, saved):
    """`t`, a saved tensor read back, with the tangent `saved` kept while that level is still open."""
    if saved is not None and saved[0] is LEVELS.tangents:
        saved[0].set(t, saved[1])
    return t


def set_tangent(t, tangent):
    if tangent is None:
        LEVELS.tangents.pop(t)
    else:
        LEVELS.tangents.set(t, tangent)


def take_written_tangent(tensor, old, new):
    """Under an open level, after an in-place op wrote into `tensor` (whose tangent was `old`) a value whose tangent
    is `new` (None: zero), as torch's: an existing tangent is written in place, so that the tangents that are views
    of it, or that it is a view of, see the write; else `tensor` takes `new`, and where it is a forward view of a
    base (a chain of view ops, none of them detach() nor make_dual's), its tangent is a view of its base's, which
    is made (zeros) if the base had none: the base's other views see theirs through it."""
    if old is not None:
        old._assign(new if new is not None else old.new_zeros(old.shape))
        return
    if new is None:
        return
    view = forward_view(tensor)
    if view is None:
        LEVELS.tangents.set(tensor, new)
        if tensor._views:
            _give_views_tangents(tensor, new)
        return
    from ._ops.rows_like import rows_like
    from ._ops.shape import replay_view

    root, chain = view
    base_tangent = LEVELS.tangents.get(root)
    if base_tangent is None:  # zeros, per row where the written tangent varies across a vmap's rows (torch's)
        base_tangent = rows_like(root.new_zeros(root.shape), new)
        LEVELS.tangents.set(root, base_tangent)
    view_tangent = replay_view(base_tangent, chain)
    LEVELS.tangents.set(tensor, view_tangent)
    _give_views_tangents(root, base_tangent)
    view_tangent._assign(new)


def forward_view(tensor):
    """(base, chain of view ops) where `tensor` is a view of `base` for forward mode too (no step of its chain is
    detach(), .data, nor make_dual's or unpack_dual's primal view), else None."""
    from ._inplace import DETACH
    from ._ops.shape import PRIMAL_VIEW

    if tensor._view is None:
        return None
    root, chain = tensor._view
    if any([step is DETACH or step[0] is PRIMAL_VIEW for step in chain]):
        return None
    return root, chain


def _give_views_tangents(root, base_tangent):
    """The forward views of `root` without a tangent take the views of its new tangent `base_tangent`, as torch's
    views find theirs in their base's when they have none."""
    from ._ops.shape import replay_view

    for ref in list(root._views or ()):
        view = ref()
        if view is not None and LEVELS.tangents.get(view) is None and forward_view(view) is not None:
            LEVELS.tangents.set(view, replay_view(base_tangent, view._view[1]))


def fwd_grad_enabled():
    return LEVELS.mode is ON


class _mode:
    """Forward gradients in `mode` within it (on entering it, or where `now`, at once), the previous mode after."""

    __slots__ = ("mode", "previous")

    def __init__(self, mode, now=False):
        self.mode, self.previous = mode, None
        if now:
            self.__enter__()

    def __enter__(self):
        if self.previous is None:
            self.previous = LEVELS.mode
            LEVELS.mode = self.mode
            LEVELS.sync()

    def __exit__(self, *exc):
        LEVELS.mode = self.previous
        LEVELS.sync()
        return False


def suspended():
    """Within it, forward-mode AD is off, as torch runs a custom Function's forward and jvp: ops compute no tangents
    and tensors show none. The open level's tangents are kept for after."""
    return _mode(SUSPENDED)


def switched_on():
    """Within it, forward gradients are on, as torch.func's forward-mode transforms run the function they
    transform."""
    return _mode(ON)


def set_fwd_grad_enabled(mode):
    """Forward gradients on or off from now (as torch's, at construction) until the returned context exits."""
    return _mode(ON if mode else OFF, now=True)


def enter():
    if LEVELS.open is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    LEVELS.level, LEVELS.open = 0, _Tangents()
    LEVELS.sync()
    return LEVELS.level


def exit(level=None):  # noqa: A001  (torch's exit_dual_level calls it so)
    if LEVELS.open is None:
        raise RuntimeError("Dual level must be a positive number.")
    if level is not None and level != LEVELS.level:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that was created. This is not supported."
        )
    LEVELS.level, LEVELS.open = -1, None
    LEVELS.sync()


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

    return Op(f"{op.name}_jvp", fn, backward_name=_jvp_name(op, n), multi=op.multi)


def _jvp_name(op, n):
    """The node name of `op`'s tangent op (with `n` tangent operands after the op's own): the op's name with Jvp
    before its Backward suffix; where the op's name is a function of its Signature, it is given the op's own
    Signature (the avals less the tangents')."""
    from ._lazy import Signature

    if isinstance(op.backward_name, str):
        return f"{op.backward_name[:-9]}JvpBackward0"

    def name(sig):
        own = Signature(op, sig.static, sig.avals[: len(sig.avals) - n], sig.out_avals)
        return f"{op.backward_name(own)[:-9]}JvpBackward0"

    return name


def apply_dual(run, op, operands, static):
    """`run(op, operands, static)` (the op's ordinary application), with the tangents of its differentiable
    results recorded where an operand has a tangent."""
    from ._tensor import Tensor

    tangents = LEVELS.tangents
    if tangents is NO_TANGENTS:
        return _without_tangents(run(op, operands, static))
    duals = [i for i, x in enumerate(operands) if isinstance(x, Tensor) and tangents.get(x) is not None]
    result = run(op, operands, static)
    if not duals:
        return result
    if op.view and duals == [0]:
        # a view's tangent is the same view of the viewed tensor's tangent, and a view of it (as torch's)
        out_tangents = run(op, [tangents.get(operands[0])] + list(operands[1:]), static)
    else:
        jvp_operands = list(operands) + [tangents.get(operands[i]) for i in duals]
        out_tangents = run(_jvp_op(op, tuple(duals)), jvp_operands, static)
    results = result if op.multi else (result,)
    out_tangents = out_tangents if op.multi else (out_tangents,)
    for r, t in zip(results, out_tangents):
        if isinstance(r, Tensor) and differentiable(r._v.dtype):
            tangents.set(r, t)
    return result


def _without_tangents(result):
    """An op's result computed with forward gradients off: where traced by a forward-mode transform (jvp, jacfwd),
    its values carry no tangent. (JAX takes reverse mode from forward mode, so a reverse-mode derivative through the
    traced function does not reach past them either; torch's reverse mode would.)"""
    from ._lazy import Pending
    from ._tensor import Tensor

    for r in result if isinstance(result, (tuple, list)) else (result,):
        if not isinstance(r, Tensor):
            continue
        v = r._v
        if type(v) is Pending and not v.call.mapped:  # recorded (a transform's trace records under enable_grad)
            v = r._value
        if is_tracer(v):
            r._v = jax.lax.stop_gradient(v)
    return result
