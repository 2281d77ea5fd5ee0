"""torch's CopySlices: an in-place op through a view, recorded as one node of the base. Its edges are the base's
(where the view's gradient went before) and the in-place op's other operands'; the op's own node is kept inside
it. Its backward, as torch's, takes the base's gradient, gives the view's slice of it to the op's backward, and
writes what comes back for the view into that slice (recorded: a view of the gradient, the op's derivative node,
and a CopySlices write, as torch's graph of a double backward has them). Over a batch of cotangents, and in a
fused program, it differentiates its function as any node: base -> base with view(base) replaced by the op of it.

An op that does not read the view (or is not a table op: a custom Function) is recorded as before: the view's
new values written into the base (scatter_into_view) after the op."""

import functools

from .. import _graph
from .._grad_mode import no_grad
from .._lazy import signature
from .._saved import SavedValue
from .._tensor import Tensor
from ._core import Op, OpNode, _layout
from .shape import _SCATTER_INTO_VIEW, _scatter_fn, _view_fn, apply, check_multi_view, regenerated_view


@functools.cache
def _copy_slices_op(inner):
    """The op `base -> base with its view written over by inner(view, *others)`, linear or multilinear where
    `inner` is (a view and a scatter are linear), with torch's name for the node."""

    def fn(base, *others, chain, static, k):
        out = inner.fn(_view_fn(chain)(base), *others, **dict(static))
        return _scatter_fn(base, out[k] if inner.multi else out, chain=chain)

    fn.__qualname__ = f"copy_slices_of_{inner.name}"
    return Op(
        "copy_slices_of",
        fn,
        backward_name="torch::autograd::CopySlices",
        linear=inner.linear,
        multilinear=inner.multilinear,
        inputs=inner.inputs,
    )


def _absorbs(node, view):
    """Whether the in-place op recorded as `node` on `view` can become part of a CopySlices node of its base: a table
    op (not a recorded backward) that read the view as its first operand."""
    if not isinstance(node, OpNode) or isinstance(node, CopySlices):
        return False
    op = node.sig.op
    if op.reads is not None or op.whole_backward:
        return False
    return bool(node.edges) and node.edges[0] == (view.grad_fn, view._output_nr)


class CopySlices(OpNode):
    """The base's node after an in-place op through its view (see the module's docstring); `inner` is the op's own
    node, whose derivative it applies to the view's slice of the gradient."""

    __slots__ = ("inner", "chain", "k")
    torch_name = "torch::autograd::CopySlices"

    def backward_needed(self, cotangents, create_graph, batch, needed):
        (grad,) = cotangents
        inner = self.inner
        if batch is not None or grad is None:  # rows of cotangents: the composed function's own VJP
            return super().backward_needed(cotangents, create_graph, batch, needed)
        inner_cts = [None] * len(inner.out_meta)
        inner_cts[self.k] = regenerated_view(grad, self.chain)
        inner_needed = None if needed is None else (True,) + tuple(needed[1:])
        grads = list(inner.backward_needed(inner_cts, create_graph, None, inner_needed))
        written = grads[0] if grads[0] is not None else inner_cts[self.k].new_zeros(inner_cts[self.k].shape)
        grads[0] = apply(_SCATTER_INTO_VIEW, [grad, written], chain=self.chain)
        return grads

    def release(self):
        super().release()
        self.inner.release()


def copy_slices(base, view, result, chain):
    """The new value of `base` after its view `view` (`chain`) was overwritten by `result`, the output of an in-place
    op recorded as `result.grad_fn`, as one CopySlices node of the base; None where that op cannot be part of one."""
    inner = result.grad_fn
    if not _absorbs(inner, view):
        return None
    sig, k = inner.sig, result._output_nr
    avals = ((tuple(base.shape), base.dtype.np),) + sig.avals[1:]
    static = (("chain", tuple(chain)), ("k", k), ("static", sig.static))
    composed = signature(_copy_slices_op(sig.op), static, avals)
    edges = (_graph.edge_of(base),) + tuple(inner.edges[1:])
    present = tuple([e is not None for e in edges]) + (False,) * (len(avals) - len(edges))  # trailing numbers
    want, saved_mask = _layout(composed, present)
    if any(m and s is None for m, s in zip(saved_mask[1:], inner.saved[1:])):
        return None  # it would need an operand the op's node did not keep
    check_multi_view(base, chain, result.requires_grad)
    with no_grad():
        written = apply(_SCATTER_INTO_VIEW, [base, result], chain=chain)
    node = CopySlices.__new__(CopySlices)
    _graph.Node.__init__(node, edges, ((tuple(base.shape), base.dtype.np),))
    node.sig, node.call, node.saved_results, node.want, node.saved_mask = (
        composed,
        None,
        inner.saved_results,
        want,
        saved_mask,
    )
    node.saved = (_snapshot(base) if saved_mask[0] else None,) + tuple(inner.saved[1:])
    node.inner, node.chain, node.k = inner, tuple(chain), k
    return Tensor._wrap(written._v, node, 0)


def _snapshot(base):
    """The base's values before the in-place op, as its CopySlices node saves them: not given to saved-tensor hooks
    (torch's node saves no such value) and not version-checked (the op changes them, and they stay what they were)."""
    saved = SavedValue(base, hooks=False)
    saved.counter, saved.version, saved.original = _graph.VersionCounter(), 0, None
    return saved
