"""A Tensor's views and in-place updates: the checks torch makes before an in-place op, the rebasing of a tensor onto
the result of one (its base and its other views follow), and the registry of a base's views. Tensor inherits these
methods from InPlace."""

import contextlib
import math
import weakref

import jax
import jax.numpy as jnp
import numpy as np

from . import _dtypes, _dual, _graph, _nesting, _transform_levels
from ._budget import Jitted
from ._grad_mode import enable_grad, is_recording
from ._host import computed_on_host, is_shared
from ._saved import SavedValue
from ._view_meta import check_view_creation, made_by_custom_node
from ._vmap_levels import batch_size, is_batched, levels_across
from ._write_watch import before_write
from ._x64 import scoped

LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_OF_LEAF_INPLACE = "a view of a leaf Variable that requires grad is being used in an in-place operation."
# torch.func.vmap's error for an in-place op whose result varies across the rows of a running vmap while the tensor
# written into does not (an argument with in_dim None, or a tensor made outside the vmapped function). torch names the
# op by the batching rule it reaches: the binary in-place rule (and an out= argument) "inplace arithmetic", a few
# dedicated rules their op, the boxed fallback "aten::<op>"; add_, atan2_ and copysign_ reach no such check and fail
# on the broadcast of the written tensor's shape with the rows'.
BINARY_INPLACE_RULE = frozenset({None, "sub_", "mul_", "div_", "copy_", "masked_fill_"})
DEDICATED_RULE = frozenset({"fill_", "index_add_", "scatter_add_", "index_put_"})
BROADCAST_FAILURE = frozenset({"add_", "atan2_", "copysign_"})
BATCHED_INTO_UNBATCHED = (
    "vmap: {name}(self, *extra_args) is not possible because there exists a Tensor `other` in extra_args that has "
    "more elements than `self`. This happened due to `other` being vmapped over but `self` not being vmapped over "
    "{where}. Please try to use out-of-place operators instead of {name}. If said operator is being called inside the "
    "PyTorch framework, please file a bug report instead."
)
# A step in a view chain that shares values but not the graph (detach(), .data): writes through it are
# value-only for the base, and the base's in-place updates reach it as values only.
DETACH = (None, (), 0)


def _batched_into_unbatched(self, result, op, args, kwargs):
    """torch's error for writing `result`, which varies across the rows of a running vmap, into `self` by `op`
    (called with `args` and `kwargs`)."""
    across = levels_across(result._v)
    if op in BROADCAST_FAILURE:
        rows = [batch_size(level) for level in across]
        return RuntimeError(
            f"output with shape {list(self.shape)} doesn't match the broadcast shape {rows + list(result.shape)}"
        )
    fill_value = args[1] if len(args) > 1 else (kwargs or {}).get("value")
    tensor_fill = op == "masked_fill_" and isinstance(fill_value, InPlace)  # masked_fill_.Tensor reaches the fallback
    if op in BINARY_INPLACE_RULE and not tensor_fill:
        return RuntimeError(BATCHED_INTO_UNBATCHED.format(name="inplace arithmetic", where="in a vmap"))
    if op in DEDICATED_RULE:
        return RuntimeError(BATCHED_INTO_UNBATCHED.format(name=op, where="in a vmap"))
    where = f"at level {_nesting.depth(across[-1])}"
    return RuntimeError(BATCHED_INTO_UNBATCHED.format(name=f"aten::{op}", where=where))


def _ops_of(chain):
    return tuple(step for step in chain if step is not DETACH)


def _view_value(base, chain):
    """The view `chain` applied to `base`; on a NumPy array (positions, an arange) each step by its host form where it
    has one (no kernel to compile for a new shape)."""
    for op, static, k in chain:
        out = computed_on_host(op, [base], dict(static)) if type(base) is np.ndarray else None
        if out is None:
            out = op.fn(base, **dict(static))
        base = out[k] if op.multi else out
    return base


def written_through(src, chain):
    """The values that writing `src` into the view `chain` stores in its base: through each step that changes
    the elements (conj, a negative view), whose function is its own inverse."""
    for op, _, _ in chain:
        if op.involution:
            src = op.fn(src)
    return src


def _reinterprets(chain):
    """Whether a step of the view `chain` reinterprets complex elements as (real, imaginary) pairs, or back."""
    return any(op.replayed and not op.involution for op, _, _ in chain)


def _step_positions(positions, op, static, k):
    if op.involution:
        return positions
    if op.replayed:  # view_as_real: a complex view's pair of arrays becomes a last dimension; view_as_complex: back
        return np.stack(positions, -1) if type(positions) is tuple else (positions[..., 0], positions[..., 1])
    if type(positions) is tuple:
        return tuple(_step_positions(p, op, static, k) for p in positions)
    return np.asarray(_view_value(positions, ((op, static, k),)))


def component_positions(shape, is_complex, chain):
    """Where each element of the view `chain` of a root of `shape` lies among the root's scalar components (a
    complex element is two, real then imaginary): an int array, or for a complex view a pair of them (the real
    parts', the imaginary parts')."""
    positions = np.arange(math.prod(shape)).reshape(shape)
    if is_complex:
        positions = (2 * positions, 2 * positions + 1)
    for step in chain:
        positions = _step_positions(positions, *step)
    return positions


def element_positions(shape, is_complex, chain):
    """Where each element of the view `chain` of a root of `shape` lies in the root's storage, in units of the
    view's own elements (as torch's offset and strides count them)."""
    if not _reinterprets(chain):
        return _view_value(np.arange(math.prod(shape)).reshape(shape), chain)
    positions = component_positions(shape, is_complex, chain)
    return positions[0] // 2 if type(positions) is tuple else positions


def scatter_through(base, src, chain):
    """`base` with the elements that its view `chain` selects replaced by `src`, broadcast to the view (exact, any
    dtype; through a view that reinterprets complex elements, component by component)."""
    src = written_through(src, chain)
    if not _reinterprets(chain):
        positions = _view_value(jnp.arange(base.size).reshape(base.shape), chain)
        values = _dtypes.cast(jnp.broadcast_to(src, positions.shape), base.dtype)
        return base.reshape(-1).at[positions.reshape(-1)].set(values.reshape(-1)).reshape(base.shape)
    is_complex = jnp.iscomplexobj(base)
    positions = component_positions(base.shape, is_complex, chain)
    if type(positions) is tuple:
        src = jnp.broadcast_to(src, positions[0].shape)
        positions, src = jnp.stack(positions, -1), jnp.stack([jnp.real(src), jnp.imag(src)], -1)
    parts = jnp.stack([jnp.real(base), jnp.imag(base)], -1) if is_complex else base
    values = _dtypes.cast(jnp.broadcast_to(src, positions.shape), parts.dtype)
    parts = parts.reshape(-1).at[positions.reshape(-1)].set(values.reshape(-1)).reshape(parts.shape)
    return jax.lax.complex(parts[..., 0], parts[..., 1]) if is_complex else parts


_view_value_jit = Jitted(_view_value, static_argnums=1)
_scatter_value_jit = Jitted(scatter_through, static_argnums=2)


class InPlace:
    """Tensor's in-place machinery (a mixin: Tensor holds the state)."""

    __slots__ = ()

    def _check_inplace(self, result=None):
        """torch's check_inplace before an in-place write (whose out-of-place `result` may be given): a view whose
        kind forbids a recorded write (_view_meta.py), a view (that requires grad) of a leaf, then a leaf that
        requires grad."""
        if not is_recording():
            return
        view = self._view
        # a view requires grad with its base, also one taken before the base was made to require grad
        requires_grad = self.requires_grad or (view is not None and view[0].requires_grad)
        if view is not None and DETACH not in view[1]:
            if requires_grad or (result is not None and result.requires_grad):  # the write is recorded
                check_view_creation(self)
            if requires_grad and view[0]._node is None:
                raise RuntimeError(VIEW_OF_LEAF_INPLACE)
        if self.requires_grad and self._node is None:
            from ._layout import stood_for

            stands_for = stood_for(self)
            if stands_for is None:
                raise RuntimeError(LEAF_INPLACE)
            stands_for[0]._check_inplace()  # a vmap.vmap row (a leaf requiring grad) is written as its caller's tensor

    def _assign(self, result, op=None, args=(), kwargs=None):
        """Make `self` hold `result` (an out-of-place result of the in-place method `op`, called with `args` and
        `kwargs`; None for an out= argument, which torch's check of captures leaves alone); update views and
        version."""
        if op is not None and _transform_levels.guards_captures():
            _transform_levels.check_not_captured(self, op, args, kwargs)
        self._check_inplace(result)
        if is_batched(result._v) and not is_batched(self._v):
            raise _batched_into_unbatched(self, result, op, args, kwargs)
        if result._v.shape != self._v.shape:
            raise RuntimeError(
                f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(result.shape)}"
            )
        if result._v.dtype != self._v.dtype:
            if _dtypes.category(result.dtype) > _dtypes.category(self.dtype):
                raise RuntimeError(
                    f"result type {result.dtype.type_name} can't be cast to the desired output type "
                    f"{self.dtype.type_name}"
                )
            result = result.to(self.dtype)
        before_write(self, result._node)
        tangents = _dual.LEVELS.tangents
        old_tangent = None if tangents is None else tangents.get(self)
        self._rebase(result)
        if tangents is not None:
            _dual.take_written_tangent(self, old_tangent, tangents.get(result))
        self._counter.value += 1
        if result._node is not None:
            _saved_before_update(result._node, self, result)
        return self

    def _aliases(self):
        """The other tensors holding this one's elements as they are (its view base and the base's views, where each
        is a plain alias: detach(), .data, a .grad that took over a gradient), which a write into it gives its result
        as the general path does; None where one of them is another view (a slice, a transpose) or holds memory
        shared with NumPy."""
        root, chain = self._view if self._view is not None else (self, ())
        if chain.count(DETACH) != len(chain):
            return None
        aliases, dead = [] if root is self else [root], False
        for ref in root._views or ():
            view = ref()
            if view is None:
                dead = True
            elif view is not self:
                chain = view._view[1]
                if chain.count(DETACH) != len(chain):
                    return None
                aliases.append(view)
        if dead:
            forget_dead_views(root)
        for t in aliases:
            if type(t._v) is np.ndarray and is_shared(t._v):
                return None
        return aliases

    def _assign_view(self, result, undo):
        """torch's in-place view ops (squeeze_, t_, ...): `self` takes the place of `result`, a view of itself of
        another shape: its value, its node and its place among its base's views. Views of a tensor that is no view
        stay where they are: their chains start with `undo` now, the steps that undo the op (None where the op
        cannot be undone: they lose their link to it)."""
        before_write(self)
        if self._view is None:
            for ref in self._views or ():
                view = ref()
                if view is not None and view is not result:
                    root, chain = view._view
                    view._view = None if undo is None else (root, undo + chain)
            if undo is None:
                self._views = None
        else:
            self._view = result._view
        shape = tuple(self.shape)
        self._rebind(result)
        counter = self._counter
        counter.value += 1
        if self._node is not None and self._node is result._node:
            counter.modified_by, counter.reshaped = result._node, (shape, tuple(result.shape))
        return self

    def _rebase(self, result):
        """Make `self`, its base and the views sharing its values hold `result` (same shape and dtype); with grad
        mode on, `self` takes `result`'s place in the graph and its base and views are recorded around it."""
        if self._view is None:
            self._rebind(result)
            if self._views:
                self._refresh_views(skip=None, graph=True)
            return
        self._rebase_view(result)

    @scoped
    def _rebase_view(self, result):
        base, chain = self._view
        ops = _ops_of(chain)
        graph = len(ops) == len(chain)
        if graph:
            from ._ops.copy_slices import copy_slices
            from ._ops.shape import scatter_into_view

            written = copy_slices(base, self, result, chain) if is_recording() else None
            if written is None:
                self._bypass_node(result._node, base, chain)
                written = scatter_into_view(base, result, chain)
            base._rebind(written)
        else:
            base._value = _scatter_value_jit(base._value, result._value, ops) if ops else result._held
        if graph and is_recording() and base._node is not None:
            self._rejoin_base(result, base, chain)
        else:
            self._rebind(result)
        base._refresh_views(skip=self, graph=graph)

    def _bypass_node(self, node, base, chain):
        """As torch's CopySlices does, send the gradient that the in-place op `node` gives this view straight to its
        base (through a fresh view of it) rather than through this view's node: hooks registered on the view before
        the op then see only the gradients of its earlier uses."""
        if (
            node is not None
            and self._node is not None
            and node.edges
            and node.edges[0] == (self._node, self._output_nr)
        ):
            from ._ops.shape import replay_view

            node.edges = (_graph.edge_of(replay_view(base, chain)),) + tuple(node.edges[1:])

    def _rejoin_base(self, result, base, chain):
        """After an in-place op through this view, hold `result` as a view of the updated base, as torch does: the
        view's gradient is its own (retain_grad() and hooks registered from now on see it), and its base's includes
        it."""
        from ._ops.shape import regenerated_view

        view = regenerated_view(base, chain)
        self._value = result._held
        self._node, self._output_nr = view._node, view._output_nr
        if self._retains_grad:
            self._register_retain()

    def _rebind(self, src):
        """Take `src`'s value; with grad mode on also its place in the graph (off: the value changes silently)."""
        self._value = src._held
        if is_recording() and (src._node is not None or self._node is not None):
            self._node, self._output_nr = src._node, src._output_nr
            if self._retains_grad and self._node is not None:
                self._register_retain()

    @scoped
    def _refresh_views(self, skip, graph):
        """Bring this base's views up to date after it changed; graph views rejoin the graph if `graph`."""
        from ._ops.shape import regenerated_view

        for ref in self._views or ():
            view = ref()
            if view is None or view is skip:
                continue
            chain = view._view[1]
            ops = _ops_of(chain)
            if graph and len(ops) == len(chain) and _tracked(self, view) and not made_by_custom_node(view):
                # torch regenerates the grad_fn of a view whose base changed even where the change was not recorded
                # (an optimizer's step under no_grad): an AsStridedBackward0 of the base as it is now
                regrown = view._node is not None and self.requires_grad
                with enable_grad() if regrown else contextlib.nullcontext():
                    regenerated = regenerated_view(self, chain)
                    view._rebind(regenerated)
            else:
                view._value = _current_view_value(self, ops)


def _current_view_value(base, ops):
    """The values of the view `ops` of `base` as it holds them now: on the host by NumPy where `base` is a host
    array (a copy: the view must not share memory that writes into the base change), else by a compiled kernel."""
    held = base._held
    if not ops:
        return held
    if type(held) is np.ndarray and not _reinterprets(ops):
        return np.array(_view_value(held, ops))
    return _view_value_jit(base._value, ops)


def _tracked(base, view):
    """Whether refreshing `view` after its base changed concerns autograd: its base requires grad, it has a node,
    or the base carries a forward-mode tangent. Otherwise only its values change."""
    return base.requires_grad or view._node is not None or _dual.tangent_of(base) is not None


def _saved_before_update(node, tensor, result):
    """After `node`'s in-place op wrote `result` into `tensor`: what the node saved of it is a snapshot of the old
    values (torch saves a clone), no longer `tensor` itself, which is now the node's output (holding it would make a
    cycle); other saved operands sharing its storage were saved before this update, so a backward through them must
    fail; and a result torch saves is `tensor` now."""
    counter = tensor._counter
    node.keep_saved_versions(counter)
    for i, s in enumerate(getattr(node, "saved", ())):
        if isinstance(s, SavedValue) and s.counter is counter:
            s.counter, s.version = (_graph.VersionCounter(), 0) if i == 0 else (s.counter, s.version - 1)
            s.original = None
    for s in getattr(node, "saved_results", ()):
        if s.counter is result._counter:
            s.counter, s.version = counter, counter.value
            if s.output is not None:
                s.output = weakref.ref(tensor)


def forget_dead_views(root):
    """Drop the references to views of `root` that died (a `.detach().numpy()` that read a parameter, say), so that
    in-place writes into it find no views to look at once none is alive. Under the lock of remember_view."""
    _graph._lock.acquire()
    try:
        root._views = [r for r in root._views or () if r() is not None] or None
    finally:
        _graph._lock.release()


def remember_view(root, view):
    """Add a weak reference to `view` to the views of `root`. Dead references are dropped each time the list reaches
    a power of two (from 16): constant time per view however many stay alive. Threads viewing one tensor take turns:
    a view added while another thread drops the dead ones would be lost."""
    _graph._lock.acquire()  # rather than `with`, which costs twice as much, on a path that records ops
    try:
        views = root._views
        if views is None:
            views = root._views = []
        elif len(views) >= 16 and len(views) & (len(views) - 1) == 0:
            views = root._views = [r for r in views if r() is not None]
        views.append(weakref.ref(view))
    finally:
        _graph._lock.release()
