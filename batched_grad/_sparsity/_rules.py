"""Sparsity rules of JAX primitives: given the index sets of a primitive's operands (and the values of its integer
operands, where known), the index sets of its outputs; with `ctx.hessian`, the input pairs its nonlinearity makes
interact (`ctx.interact`), for Hessian patterns.

The rules follow what JAX differentiates: an integer or boolean array has no derivative (its sets are None), a
primitive whose derivative is zero everywhere it exists (floor, sign) passes nothing on, a move of elements
(slicing, reshaping, gathering) moves their sets exactly. Moves are computed by running the primitive itself on
arrays of element numbers (_numpy_rows.ROWS, or JAX's gather), so every parameter of it is honoured. A primitive
without a rule makes each of its outputs depend on everything its operands depend on (and, for Hessians, every
pair of those), with one warning naming it."""

import jax
import numpy as np
from jax import lax

from .._numpy_rows import ROWS
from . import _sets
from ._maps import group_map, line_map, prefix_pairs, size_of

# second derivatives of elementwise primitives: LINEAR have none (or none almost everywhere: piecewise linear ones),
# BILINEAR only between distinct operands (mul), DIVISION in the divisor; every other elementwise primitive is taken
# as nonlinear in all its operands together
LINEAR = frozenset(
    {
        "add", "add_any", "sub", "neg", "convert_element_type", "copy", "copy_p", "real", "imag", "conj", "complex",
        "reduce_precision", "select_n", "clamp", "max", "min", "abs", "rem", "stop_gradient", "optimization_barrier",
    }
)  # fmt: skip
BILINEAR = frozenset({"mul"})
DIVISION = frozenset({"div"})
# elementwise primitives whose derivative is zero wherever it exists (JAX's is zero)
ZERO_DERIVATIVE = frozenset({"sign", "floor", "ceil", "round", "stop_gradient", "is_finite", "nextafter"})
ELEMENTWISE = frozenset(
    {
        "abs", "acos", "acosh", "add", "add_any", "and", "asin", "asinh", "atan", "atan2", "atanh", "bessel_i0e",
        "bessel_i1e", "cbrt", "ceil", "clamp", "complex", "conj", "convert_element_type", "copy", "copy_p", "cos",
        "cosh", "digamma", "div", "eq", "erf", "erf_inv", "erfc", "exp", "exp2", "expm1", "floor", "ge", "gt",
        "igamma", "igamma_grad_a", "igammac", "imag", "integer_pow", "is_finite", "le", "lgamma", "log", "log1p",
        "logistic", "lt", "max", "min", "mul", "ne", "neg", "nextafter", "not", "or", "polygamma", "pow",
        "random_gamma_grad", "real", "reduce_precision", "regularized_incomplete_beta", "rem", "round", "rsqrt",
        "select_n", "sign", "sin", "sinh", "sqrt", "square", "stop_gradient", "sub", "tan", "tanh", "xor", "zeta",
    }
)  # fmt: skip
# primitives that only move elements: their rows in _numpy_rows run on arrays of element numbers
MOVES = frozenset(
    {
        "broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "rev", "slice", "pad", "concatenate",
        "dynamic_slice", "dynamic_update_slice", "split", "copy", "copy_p",
    }
)  # fmt: skip
IDENTITIES = frozenset({"optimization_barrier", "device_put", "sharding_constraint"})


def inexact(dtype):
    return jax.dtypes.issubdtype(dtype, np.inexact)


def spread(sets, size):
    """`sets` of one element (a scalar operand) repeated `size` times; others as they are."""
    if sets is None or sets.size == size:
        return sets
    return _sets.take(sets, np.zeros(size, np.int64))


# ---- elementwise -----------------------------------------------------------------------------------------------
def elementwise(ctx, eqn, ins):
    name = eqn.primitive.name
    size = size_of(eqn.outvars[0].aval.shape)
    operands = [spread(x.sets, size) for x in ins]
    if name == "select_n":  # the predicate selects; it has no derivative
        operands[0] = None
    if name in ZERO_DERIVATIVE and not ctx.in_custom:  # inside a custom_jvp, a straight-through rule may differ
        return [None]
    if name == "integer_pow" and eqn.params["y"] == 0:
        return [None]
    out = _sets.union(operands, ctx.width)
    if ctx.hessian and out is not None:
        _elementwise_pairs(ctx, name, eqn, operands, out)
    return [out]


def _elementwise_pairs(ctx, name, eqn, operands, out):
    if name in LINEAR or name in ZERO_DERIVATIVE or (name == "integer_pow" and eqn.params["y"] == 1):
        return
    if name in BILINEAR:
        if operands[0] is not None and operands[1] is not None:
            ctx.interact(operands[0], operands[1])
    elif name in DIVISION:
        if operands[1] is not None:
            ctx.interact(out, operands[1])
    else:
        ctx.interact(out, out)


# ---- moves of elements -----------------------------------------------------------------------------------------
def _numbered(ins, keep):
    """Arrays of element numbers for the operands in `keep` (others: their known values), numbering the
    operands' elements one after the other; with the stacked sets of those operands (None where none has any)."""
    arrays, stacked, offset = [], [], 0
    for i, x in enumerate(ins):
        if i in keep:
            n = size_of(x.shape)
            arrays.append(np.arange(offset, offset + n, dtype=np.int64).reshape(x.shape))
            stacked.append(x.sets if x.sets is not None else _empty(n))
            offset += n
        else:
            arrays.append(x.value)
    if all(x.sets is None for i, x in enumerate(ins) if i in keep):
        return arrays, None
    return arrays, _stack(stacked)


def _empty(n):
    return _sets.Sets(np.zeros(n + 1, np.int64), np.zeros(0, np.int64))


def _stack(all_sets):
    """One Sets holding the elements of each of `all_sets` one after the other."""
    if len(all_sets) == 1:
        return all_sets[0]
    indptr = [all_sets[0].indptr]
    for s in all_sets[1:]:
        indptr.append(s.indptr[1:] + indptr[-1][-1])
    return _sets.Sets(np.concatenate(indptr), np.concatenate([s.indices for s in all_sets]))


def _data_operands(name, ins):
    """The operands whose elements a move carries (the others are indices)."""
    if name in ("dynamic_slice",):
        return {0}
    if name == "dynamic_update_slice":
        return {0, 1}
    if name == "pad":
        return {0, 1}
    return set(range(len(ins)))


def move(ctx, eqn, ins):
    name = eqn.primitive.name
    keep = _data_operands(name, ins)
    if all(x.sets is None for i, x in enumerate(ins) if i in keep):
        return [None] * len(eqn.outvars)
    index_operands = [x for i, x in enumerate(ins) if i not in keep]
    if any(x.value is None for x in index_operands):
        return fallback(ctx, eqn, ins, warn=False)  # start indices not known here: anywhere along the array
    for x in index_operands:
        ctx.use(x.origin)
    arrays, stacked = _numbered(ins, keep)
    if name == "pad" and ins[1].sets is None:
        arrays[1] = np.array(-1, np.int64)
    result = ROWS[name](*arrays, **eqn.params)
    results = result if isinstance(result, tuple) else (result,)
    return [_sets.take(stacked, np.asarray(r).ravel()) for r in results]


# ---- reductions and contractions ------------------------------------------------------------------------------
def reduction(ctx, eqn, ins):
    (x,) = ins[:1]
    axes = eqn.params["axes"]
    shape = x.shape
    kept = [d for d in range(len(shape)) if d not in axes]
    out = _sets.group(x.sets, group_map(shape, kept), size_of([shape[d] for d in kept]), ctx.width)
    if ctx.hessian and out is not None and eqn.primitive.name == "reduce_prod":
        ctx.interact(out, out)
    return [out]


def dot_general(ctx, eqn, ins):
    lhs, rhs = ins
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lf = [d for d in range(len(lhs.shape)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rhs.shape)) if d not in rc and d not in rb]
    out_shape = eqn.outvars[0].aval.shape
    nb, nl = len(lb), len(lf)
    out_dims = list(range(len(out_shape)))
    # per operand: union over the contracted dims, then spread over the other operand's free dims
    left = _sets.group(
        lhs.sets, group_map(lhs.shape, [*lb, *lf]), size_of([lhs.shape[d] for d in [*lb, *lf]]), ctx.width
    )
    right = _sets.group(
        rhs.sets, group_map(rhs.shape, [*rb, *rf]), size_of([rhs.shape[d] for d in [*rb, *rf]]), ctx.width
    )
    left_out = _sets.take(left, group_map(out_shape, out_dims[: nb + nl]))
    right_out = _sets.take(right, group_map(out_shape, out_dims[:nb] + out_dims[nb + nl :]))
    if ctx.hessian and lhs.sets is not None and rhs.sets is not None:
        # bilinear: each lhs element interacts with the rhs elements it meets, per (batch, contracted) position
        lk = _sets.group(
            lhs.sets, group_map(lhs.shape, [*lb, *lc]), size_of([lhs.shape[d] for d in [*lb, *lc]]), ctx.width
        )
        rk = _sets.group(
            rhs.sets, group_map(rhs.shape, [*rb, *rc]), size_of([rhs.shape[d] for d in [*rb, *rc]]), ctx.width
        )
        ctx.interact(lk, rk)
    return [_sets.union([left_out, right_out], ctx.width)]


def cumulative(ctx, eqn, ins):
    (x,) = ins
    outs, sources = prefix_pairs(x.shape, eqn.params["axis"], eqn.params["reverse"])
    out = _sets.gather_union(x.sets, outs, sources, size_of(x.shape), ctx.width)
    if ctx.hessian and out is not None and eqn.primitive.name in ("cumprod", "cumlogsumexp"):
        ctx.interact(out, out)
    return [out]


def along_lines(ctx, eqn, ins, axis):
    """Every output element depends on the whole line (along `axis`) of every operand it is in (sort, top_k)."""
    shape = ins[0].shape
    lines = line_map(shape, axis)
    n_lines = size_of(shape) // max(shape[axis], 1)
    per_line = _sets.union([_sets.group(x.sets, lines, n_lines, ctx.width) for x in ins], ctx.width)
    return [
        _sets.take(per_line, line_map(v.aval.shape, len(v.aval.shape) - 1 if axis < 0 else axis))
        if inexact(v.aval.dtype)
        else None
        for v in eqn.outvars
    ]


def sort(ctx, eqn, ins):
    return along_lines(ctx, eqn, ins, eqn.params["dimension"])


def top_k(ctx, eqn, ins):
    return along_lines(ctx, eqn, ins, len(ins[0].shape) - 1)


# ---- gather and scatter ----------------------------------------------------------------------------------------
def gather(ctx, eqn, ins):
    operand, indices = ins
    if operand.sets is None:
        return [None]
    if indices.value is None:
        return fallback(ctx, eqn, ins, warn=False)
    ctx.use(indices.origin)
    params = dict(eqn.params, fill_value=0)
    numbers = np.arange(1, size_of(operand.shape) + 1, dtype=np.int64).reshape(operand.shape)
    with jax.default_device(jax.devices("cpu")[0]):
        source = np.asarray(lax.gather_p.bind(numbers, np.asarray(indices.value), **params)) - 1
    return [_sets.take(operand.sets, source.ravel())]


def scatter(ctx, eqn, ins):
    """Each output element depends on its operand element and on the updates scattered into it (a replaced
    element keeps its operand's set too: a superset)."""
    operand, indices, updates = ins
    if operand.sets is None and updates.sets is None:
        return [None]
    if indices.value is None:
        return fallback(ctx, eqn, ins, warn=False)
    ctx.use(indices.origin)
    size = size_of(operand.shape)
    out = operand.sets
    if updates.sets is not None:
        target = _scatter_targets(eqn, operand.shape, updates.shape, indices.value)
        scattered = _sets.group(updates.sets, target, size, ctx.width)
        out = _sets.union([out, scattered], ctx.width)
    if ctx.hessian and out is not None and eqn.primitive.name == "scatter-mul":
        ctx.interact(out, out)
    return [out]


def _scatter_targets(eqn, operand_shape, updates_shape, indices):
    """The output element each update element lands in (-1 where dropped): the gather that is a scatter's
    transpose, run on element numbers."""
    dn = eqn.params["dimension_numbers"]
    gather_dnums = lax.GatherDimensionNumbers(
        offset_dims=dn.update_window_dims,
        collapsed_slice_dims=dn.inserted_window_dims,
        start_index_map=dn.scatter_dims_to_operand_dims,
        operand_batching_dims=dn.operand_batching_dims,
        start_indices_batching_dims=dn.scatter_indices_batching_dims,
    )
    slice_sizes, pos = [], 0
    for i in range(len(operand_shape)):
        if i in dn.inserted_window_dims or i in dn.operand_batching_dims:
            slice_sizes.append(1)
        else:
            slice_sizes.append(updates_shape[dn.update_window_dims[pos]])
            pos += 1
    numbers = np.arange(1, size_of(operand_shape) + 1, dtype=np.int64).reshape(operand_shape)
    with jax.default_device(jax.devices("cpu")[0]):
        target = lax.gather(
            numbers,
            np.asarray(indices),
            gather_dnums,
            tuple(slice_sizes),
            mode=eqn.params["mode"],
            fill_value=0,
        )
    return np.asarray(target).ravel() - 1


# ---- the dense fallback ----------------------------------------------------------------------------------------
def fallback(ctx, eqn, ins, warn=True):
    """Each output depends on everything the operands depend on; every pair of those interacts."""
    if warn:
        ctx.warn_dense(eqn.primitive.name)
    present = [x.sets for x in ins if x.sets is not None]
    if not present:
        return [None] * len(eqn.outvars)
    everything = _sets.everything(present, 1, ctx.width)
    if ctx.hessian:
        ctx.interact(everything, everything)
    return [
        _sets.take(everything, np.zeros(size_of(v.aval.shape), np.int64)) if inexact(v.aval.dtype) else None
        for v in eqn.outvars
    ]


def identities(ctx, eqn, ins):
    return [x.sets for x in ins]


RULES = {
    **{name: elementwise for name in ELEMENTWISE},
    **{name: move for name in MOVES},
    **{name: reduction for name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod")},
    **{name: cumulative for name in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp")},
    **{
        name: scatter for name in ("scatter", "scatter-add", "scatter-sub", "scatter-mul", "scatter-min", "scatter-max")
    },
    **{name: identities for name in IDENTITIES},
    "dot_general": dot_general,
    "sort": sort,
    "top_k": top_k,
    "gather": gather,
}
