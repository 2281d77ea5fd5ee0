"""The engine's view of sparse tensors: a sparse tensor is differentiated through its values tensor, and a gradient
for it comes back as a sparse tensor with its indices."""

from .._tensor import Tensor
from ._construct import every_element_specified, linear_index, to_dense
from ._coo import SparseCOO, sparse_gradient


def any_sparse(tensors):
    """Whether a sparse tensor is among `tensors` (tensors, GradientEdges, None)."""
    return any(getattr(x, "_sparse_forms", None) is not None for x in tensors)


def engine_tensors(tensors):
    """`tensors` with each sparse one replaced by its values tensor."""
    return tuple(x._coo_values if isinstance(x, SparseCOO) else x for x in tensors)


def values_gradient(out, grad):
    """The gradient of a sparse output's values: `grad` (dense or sparse, of the output's size) read at its
    indices."""
    if not isinstance(grad, Tensor) or grad.shape != out.shape:
        got = list(grad.shape) if isinstance(grad, Tensor) else type(grad).__name__
        raise RuntimeError(
            f"Mismatch in shape: grad_output has a shape of {got} and output[0] has a shape of {list(out.shape)}."
        )
    dense = to_dense(grad).reshape(-1, *out.shape[out.sparse_dim() :])
    return dense.index_select(0, linear_index(out))


def _engine_gradient(out, grad):
    if isinstance(out, SparseCOO) and grad is not None:
        return values_gradient(out, grad)
    if isinstance(grad, SparseCOO) and not (out.requires_grad and out.grad_fn is None):
        return to_dense(grad)
    return grad


def engine_gradients(outputs, grads):
    """grad_outputs for the outputs' engine tensors: a sparse output's gradient read at its indices, a sparse
    gradient of a dense output made dense, except where that output is a leaf: its AccumulateGrad takes the sparse
    gradient, as torch's."""
    return tuple(_engine_gradient(out, g) for out, g in zip(outputs, grads))


def sparse_gradients(grads, inputs):
    """The engine's gradients of `inputs`: a sparse input's (its values') as a sparse tensor with its indices."""
    return tuple(
        sparse_gradient(x, g) if isinstance(x, SparseCOO) and g is not None else g for g, x in zip(grads, inputs)
    )


def on_values(func, inputs, masked, name):
    """(func of the sparse inputs' values, those values): a gradient check of a function of sparse tensors compares
    the derivatives with respect to their specified elements (torch's masked=True). Without masked=True (torch's
    default, masked=None, is False) every element's derivative is checked: the same check where every element of
    each sparse input is specified; elsewhere refused, since a gradient here has the input's indices only."""
    if not masked and not all(every_element_specified(x) for x in inputs if isinstance(x, SparseCOO)):
        raise RuntimeError(
            f"{name}: the gradient of a sparse COO input is checked on its specified elements only (this input "
            "leaves elements unspecified): pass masked=True"
        )

    def of_values(*args):
        rebuilt = [
            SparseCOO._of(x._coo_indices, a, x.shape, x._coalesced) if isinstance(x, SparseCOO) else a
            for a, x in zip(args, inputs)
        ]
        return func(*rebuilt, *args[len(inputs) :])

    values = tuple(
        x._coo_values.detach().requires_grad_(x.requires_grad) if isinstance(x, SparseCOO) else x for x in inputs
    )
    return of_values, values
