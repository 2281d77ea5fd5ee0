"""torch.einsum and torch.tensordot: the equation's forms and checks, torch's broadcasting of size-1 subscripts, and
its pairwise contraction's rule for operands of different dtypes."""

import string

import jax.numpy as jnp

from .. import _dtypes
from .._autocast import autocast_policy
from .._tensor import Tensor, _wrap_dim, python_type_name
from ._core import Op, apply


def _type(t):
    return t.dtype.type_name


_LETTERS = string.ascii_lowercase + string.ascii_uppercase


def _einsum_fn(*ops, equation, shapes, dtype):
    return jnp.einsum(equation, *[jnp.broadcast_to(o.astype(dtype), s) for o, s in zip(ops, shapes)])


_EINSUM = Op("einsum", _einsum_fn, multilinear=True)


def _sublist_equation(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [out]): the equation string and the operands."""

    def letters(sub):
        for s in sub:
            if s is not Ellipsis and not 0 <= s < 52:
                raise RuntimeError("einsum(): subscript in subscript list is not within the valid range [0, 52)")
        return "".join("..." if s is Ellipsis else _LETTERS[s] for s in sub)

    out = "->" + letters(args[-1]) if len(args) % 2 else ""
    pairs = args[: len(args) - len(args) % 2]
    return ",".join(letters(s) for s in pairs[1::2]) + out, list(pairs[0::2])


def _equation_and_operands(args):
    """einsum's arguments in any of its three forms as (equation, operands)."""
    if isinstance(args[0], Tensor):
        return _sublist_equation(args)
    equation, operands = args[0], args[1:]
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return equation, operands


def _checked_equation(equation, operands):
    """(the equation without spaces, its input terms): checked for its characters, its output subscripts and its
    number of operands."""
    for k, c in enumerate(equation):
        if not (c in _LETTERS or c in " ,.->"):
            raise RuntimeError(
                f"einsum(): invalid subscript given at index {k} in the equation string, subscripts must be in [a-zA-Z]"
            )
    equation = equation.replace(" ", "")
    terms = equation.split("->")[0].split(",")
    output = equation.split("->")[1] if "->" in equation else ""
    for c in output.replace("...", ""):
        if c not in equation.split("->")[0]:
            raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input operand")
        if output.count(c) > 1:
            raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
    if len(terms) != len(operands):
        raise RuntimeError(
            f"einsum(): {'fewer' if len(operands) < len(terms) else 'more'} operands were provided than "
            "specified in the equation"
        )
    return equation, terms


def _broadcast_operand_shapes(terms, operands):
    """Each operand's shape with its size-1 dims broadcast to the size of their subscript in the other operands,
    after checking the operands' ranks and sizes against the terms."""
    sizes, labelled = {}, []
    for k, (term, op) in enumerate(zip(terms, operands)):
        head, ellipsis, tail = term.partition("...")
        middle = op.ndim - len(head) - len(tail)
        if middle < 0 or (middle and not ellipsis):
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({len(head + tail)}) does not "
                f"match the number of dimensions ({op.ndim}) for operand {k}"
                f"{'' if ellipsis else ' and no ellipsis was given'}"
            )
        labels = list(head) + [None] * middle + list(tail)
        labelled.append((labels, op.shape))
        for label, n in zip(labels, op.shape):
            seen = sizes.setdefault(label, n) if label else n
            if n != seen and 1 not in (n, seen):
                raise RuntimeError(
                    f"einsum(): subscript {label} has size {n} for operand {k} which does not broadcast "
                    f"with previously seen size {seen}"
                )
            if label and seen == 1:
                sizes[label] = n
    # torch broadcasts size-1 dims of a subscript against the others; jnp.einsum does not
    return tuple(tuple(sizes[c] if c else n for c, n in zip(labels, shape)) for labels, shape in labelled)


def _contraction_dtype(equation, terms, operands):
    """The dtype of the result. torch contracts the operands pairwise from the left: a pair that sums a subscript
    both hold (one neither the output nor a later operand holds) is a batched matrix product, which refuses two
    dtypes; a pair that sums none is an elementwise product, which promotes."""
    inputs, arrow, output = equation.partition("->")
    if not arrow:
        output = "".join(c for c in inputs if c in _LETTERS and inputs.count(c) == 1)
    dtype, held = operands[0].dtype, set(terms[0])
    for k in range(1, len(terms)):
        kept = set(output + ".").union(*terms[k + 1 :])
        if (held & set(terms[k])) - kept and operands[k].dtype is not dtype:
            raise RuntimeError(f"expected scalar type {dtype.type_name} but found {_type(operands[k])}")
        dtype = _dtypes.promote_types(dtype, operands[k].dtype)
        held = (held | set(terms[k])) & kept
    return dtype


@autocast_policy("lower")
def einsum(*args):
    """Einstein summation: einsum("ij,jk->ik", a, b), einsum(eq, [a, b]) or the sublist form."""
    equation, operands = _equation_and_operands(args)
    equation, terms = _checked_equation(equation, operands)
    shapes = _broadcast_operand_shapes(terms, operands)
    dtype = _contraction_dtype(equation, terms, operands)
    return apply(_EINSUM, list(operands), equation=equation, shapes=shapes, dtype=dtype.np)


_TENSORDOT = Op(
    "tensordot", lambda a, b, *, axes: jnp.tensordot(a, b, axes), multilinear=True, backward_name="TensordotBackward0"
)


@autocast_policy("lower")
def tensordot(a, b, dims=2):
    """Contract a's dims_a with b's dims_b (or a's last `dims` with b's first `dims`)."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))
    else:
        dims_a, dims_b = dims
        if isinstance(dims_a, int) or isinstance(dims_b, int):
            raise TypeError(
                f"tensordot(): argument 'dims_self' (position 3) must be tuple of ints, not {python_type_name(dims_a)}"
            )
        dims_a, dims_b = list(dims_a), list(dims_b)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    for da, db in zip(dims_a, dims_b):
        na, nb = a.shape[_wrap_dim(da, a.ndim)], b.shape[_wrap_dim(db, b.ndim)]
        if na != nb:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {na} in dim {da} and second "
                f"has size {nb} in dim {db}"
            )
    axes = (tuple(_wrap_dim(d, a.ndim) for d in dims_a), tuple(_wrap_dim(d, b.ndim) for d in dims_b))
    return apply(_TENSORDOT, [a, b], axes=axes)
