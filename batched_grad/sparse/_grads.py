"""Sparse gradients of dense parameters (torch's Embedding(sparse=True)): the node that gives a looked-up weight a
sparse COO gradient (the looked-up rows and their gradients, uncoalesced), and the accumulation of such gradients
into `.grad` by torch's rules."""

import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._factories import tensor, zeros, zeros_like
from .._graph import AccumulateGrad, Node, edge_of
from .._host import host_array
from .._ops.rounding import fused_multiply_add, fused_multiply_add_host
from .._saved import BACKWARD_TWICE
from .._tensor import Tensor
from ._construct import linear_index, to_dense
from ._coo import SparseCOO


class EmbeddingSparseBackward(Node):
    """The node of a lookup `weight[indices]` whose weight gets a sparse gradient: for each looked-up row (in lookup
    order, duplicates kept) its index and the output's gradient there; rows at `padding_idx` are left out."""

    __slots__ = ("indices", "padding_idx", "weight_meta")

    def __init__(self, weight, indices, padding_idx, out_shape):
        super().__init__((edge_of(weight),), ((out_shape, weight.dtype),))
        self.indices = indices.detach().reshape(-1).to(_dtypes.int64)
        self.padding_idx = padding_idx
        self.weight_meta = (weight.shape, type(self.edges[0].node) is AccumulateGrad)

    def name(self):
        return "EmbeddingBackward0"

    def backward(self, cotangents, create_graph, batch=None):
        if batch is not None:
            raise RuntimeError(
                "embedding with sparse=True gives the weight a sparse gradient, which is not provided for batched "
                "gradients (is_grads_batched=True or vmap over the backward); pass sparse=False"
            )
        if self.indices is None:
            raise RuntimeError(BACKWARD_TWICE)
        (grad,) = cotangents
        shape, to_leaf = self.weight_meta
        rows, values = self.indices, grad.reshape(-1, shape[1])
        if self.padding_idx is not None:
            kept = rows != self.padding_idx
            rows, values = rows[kept], values[kept]
        sparse = SparseCOO._of(rows.reshape(1, -1), values, shape)
        # a weight computed from other tensors gets its gradient densely (the nodes it flows through are dense)
        return (sparse if to_leaf else to_dense(sparse),)

    def release(self):
        """Free the saved indices after a backward that does not retain the graph, as torch frees its node's."""
        self.indices = None


def embedding_with_sparse_grad(weight, indices, padding_idx, dense_lookup):
    """dense_lookup(weight) with `weight`'s gradient sparse: the lookup runs outside the graph and its result is
    recorded by an EmbeddingSparseBackward node."""
    out = dense_lookup(weight.detach())
    node = EmbeddingSparseBackward(weight, indices, padding_idx, out.shape)
    result = Tensor._wrap(out._v)
    result._node, result._output_nr = node, 0
    return result


def empty_like_sparse(grad, values=None):
    """A sparse tensor of grad's size with no specified element (torch's zero_() of a sparse tensor): of its dtype,
    or with the given empty `values`."""
    if values is None:
        values = zeros((0, *grad.shape[grad.sparse_dim() :]), dtype=grad.dtype)
    return SparseCOO._of(zeros((grad.sparse_dim(), 0), dtype=_dtypes.int64), values, grad.shape, coalesced=True)


def zeroed_grad(grad):
    """The `.grad` zero_grad(set_to_none=False) leaves: zeros of a dense gradient, an empty sparse gradient."""
    return empty_like_sparse(grad) if isinstance(grad, SparseCOO) else zeros_like(grad)


def added_into(dense, sparse, alpha=1):
    """The values of `dense` plus alpha times `sparse`'s elements, added one element at a time in the sparse tensor's
    order, each with one rounding (torch's in-place dense += sparse: an axpy per element). On the host where both
    values are there (no kernel to compile per number of elements), else with JAX."""
    flat = dense._value.reshape(-1, *dense.shape[sparse.sparse_dim() :])
    values = sparse._coo_values._value.astype(flat.dtype)
    keys = np.asarray(linear_index(sparse)._value)
    # the k-th occurrence of each position adds in round k: a round's positions are distinct
    order = np.argsort(keys, kind="stable")
    starts = np.searchsorted(keys[order], keys[order], side="left")
    rank = np.empty_like(keys)
    rank[order] = np.arange(len(keys)) - starts
    host_flat, host_values = host_array(flat), host_array(values)
    on_host = host_flat is not None and host_values is not None
    if on_host:
        flat, values = host_flat.copy(), host_values
    scale = (np.asarray if on_host else jnp.asarray)(alpha, flat.dtype)
    for k in range(int(rank.max(initial=-1)) + 1):
        chosen = np.nonzero(rank == k)[0]
        rows, chosen = keys[chosen], values[chosen]
        if on_host:
            flat[rows] = fused_multiply_add_host(scale, chosen, flat[rows])
        else:
            flat = flat.at[rows].set(fused_multiply_add(scale, chosen, flat[rows]))
    return flat.reshape(dense.shape)


def _own_sparse(grad, create_graph):
    values = grad._coo_values if create_graph else grad._coo_values.detach()
    return SparseCOO._of(grad._coo_indices, values.clone(), grad.shape, grad._coalesced)


def accumulate_sparse(variable, old, grad, create_graph):
    """Add `grad` into `variable.grad` where either is sparse, as torch's AccumulateGrad: a first sparse gradient is
    kept; sparse + sparse concatenates into the sparse `.grad` (merges when both are coalesced); a sparse gradient
    adds into a dense `.grad` in place; a dense gradient into a sparse `.grad` makes a new dense `.grad`. Under
    create_graph every sum is out of place and recorded."""
    if old is None:
        variable._grad = _own_sparse(grad, create_graph)
    elif create_graph:
        dense_first = isinstance(old, SparseCOO) and not isinstance(grad, SparseCOO)
        variable._grad = grad + old if dense_first else old + grad
    elif not isinstance(old, SparseCOO):
        old._value = added_into(old, grad)
        old._counter.value += 1
    elif not isinstance(grad, SparseCOO):
        variable._grad = Tensor._wrap(added_into(grad, old))
    else:
        add_sparse_(old, grad)


def add_sparse_(old, grad, alpha=1):
    """old += alpha * grad for two sparse tensors, in place, as torch's add_ on the CPU: an empty side gives the
    other; else one walk along both index lists, which emits the smaller position first and sums positions met in
    both at once (a merge of sorted lists, applied to unsorted ones as they are). Two coalesced tensors give a
    coalesced one."""
    if grad._nnz() == 0:
        return
    if old._nnz() == 0:
        total = _own_sparse(grad if alpha == 1 else grad * alpha, False)
    else:
        total = _merged(old, grad.detach(), alpha)
    old._coo_indices, old._coo_values, old._coalesced = total._coo_indices, total._coo_values, total._coalesced
    old._counter.value += 1


def _merged(a, b, alpha):
    ka, kb = (np.asarray(linear_index(s)._value) for s in (a, b))
    take_a, take_b = [], []
    i = j = 0
    while i < len(ka) and j < len(kb):
        if ka[i] <= kb[j]:
            take_a.append(i)
            take_b.append(j if ka[i] == kb[j] else -1)
            j += ka[i] == kb[j]
            i += 1
        else:
            take_a.append(-1)
            take_b.append(j)
            j += 1
    take_a += list(range(i, len(ka))) + [-1] * (len(kb) - j)
    take_b += [-1] * (len(ka) - i) + list(range(j, len(kb)))
    ta, tb = np.array(take_a), np.array(take_b)
    va, vb = a._coo_values._value, b._coo_values._value.astype(a._coo_values._value.dtype)
    scale = jnp.asarray(alpha, vb.dtype)
    from_a, from_b = va[np.maximum(ta, 0)], vb[np.maximum(tb, 0)]
    mask = (slice(None),) + (None,) * (va.ndim - 1)
    both = fused_multiply_add(scale, from_b, from_a)  # an element in both: one axpy, as torch's
    values = jnp.where((ta >= 0)[mask], jnp.where((tb >= 0)[mask], both, from_a), from_b * scale)
    indices = np.where(ta >= 0, np.asarray(a._coo_indices._value)[:, np.maximum(ta, 0)], 0) + np.where(
        ta >= 0, 0, np.asarray(b._coo_indices._value)[:, np.maximum(tb, 0)]
    )
    coalesced = a._coalesced and b._coalesced
    return SparseCOO._of(tensor(indices.astype(np.int64)), Tensor._wrap(values), a.shape, coalesced)
