"""vmap.vmap results that are a mapped argument's row or a view of it: as torch's, such a result is that view of the
caller's tensor (its base is the caller's tensor, or its base; writes into it change the caller's tensor). The view
is made again on the caller's tensor, its batch axis moved to 0: each step of the row's chain of view ops applied to
every row at once (the step's op under jax.vmap), then the batch axis moved to the result's out_dim."""

import functools
import threading

import jax

from .._inplace import DETACH
from .._ops._core import Op, apply
from .._tensor import Tensor

_ROWS_OPS = {}
_ROWS_OPS_LOCK = threading.Lock()


def rows_op(op):
    """The view op `op` applied to each row along axis 0 of its operand: a view op of the same kind, named by
    torch's name for `op`'s node."""
    found = _ROWS_OPS.get(op)
    if found is not None:
        return found

    def each_row(a, **static):
        return jax.vmap(functools.partial(op.fn, **static))(a)

    with _ROWS_OPS_LOCK:
        return _ROWS_OPS.setdefault(
            op,
            Op(
                f"{op.name}_rows",
                each_row,
                backward_name=op.backward_name,
                linear=True,
                view=True,
                involution=op.involution,
                replayed=op.replayed,
                multi=op.multi,
                diagonal=op.diagonal,
                torch_saves=op.torch_saves,
            ),
        )


def row_views(leaves, rows):
    """(k, (i, chain)) for each leaf k of a vmapped function's result that is the row of mapped argument i (`rows`:
    the row Tensors' argument indices, by id), chain (), or a view of that row by `chain` (its view steps)."""
    for k, x in enumerate(leaves):
        i = rows.get(id(x))
        if i is not None:
            yield k, (i, ())
        elif isinstance(x, Tensor) and x._view is not None and id(x._view[0]) in rows:
            yield k, (rows[id(x._view[0])], x._view[1])


def view_of_argument(argument, in_dim, out_dim, chain):
    """The view `chain` of each row of `argument` (rows along `in_dim`) with the rows along `out_dim`, a view of
    `argument`; `argument` itself for an empty chain that leaves the rows where they are."""
    if not chain:
        return argument if in_dim == out_dim else argument.movedim(in_dim, out_dim)
    out = argument if in_dim == 0 else argument.movedim(in_dim, 0)
    for step in chain:
        if step is DETACH:
            out = out.detach()
            continue
        op, static, k = step
        result = apply(rows_op(op), [out], **dict(static))
        out = result[k] if op.multi else result
    return out if out_dim == 0 else out.movedim(0, out_dim)
