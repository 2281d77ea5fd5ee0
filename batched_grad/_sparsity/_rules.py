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

# second derivatives of elementwise primitives: LINEAR have none (or none almost everywhere: piecewise linear ones;
# abs only of a real number: a complex one's is the root of a sum of squares),
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
# moves of elements without a row there
EXTRA_MOVES = {
    "stack": lambda *arrays, axis: np.stack(arrays, axis),
    "unstack": lambda a, axis: tuple(np.moveaxis(a, axis, 0)),
    "tile": lambda a, reps: np.tile(a, reps),
}


def inexact(dtype):
    return jax.dtypes.issubdtype(dtype, np.inexact)


def spread(sets, shape, out_shape):
    """The sets of an operand of `shape` broadcast to `out_shape` (elementwise primitives broadcast scalars and
    dims of size 1)."""
    if sets is None or tuple(shape) == tuple(out_shape):
        return sets
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    numbers = np.arange(sets.size, dtype=np.int64).reshape(shape)
    return _sets.take(sets, np.broadcast_to(numbers, out_shape).ravel())


# ---- elementwise -----------------------------------------------------------------------------------------------
# elementwise primitives whose derivative in an operand may vanish on a region (a max's unselected operand), or
# everywhere (the imaginary part of a real number: a complex number's parts share one set)
PIECEWISE = frozenset({"max", "min", "clamp", "select_n", "real", "imag"})


def elementwise(ctx, eqn, ins):
    name = eqn.primitive.name
    out_shape = eqn.outvars[0].aval.shape
    operands = [spread(x.sets, x.shape, out_shape) for x in ins]
    if name in ZERO_DERIVATIVE:
        if not ctx.in_custom:
            return [None]
        ctx.approximate()  # inside a custom_jvp, a straight-through rule may pass the derivative on
    if name == "integer_pow" and eqn.params["y"] == 0:
        return [None]
    if name == "select_n":
        operands = _selected(ctx, ins[0], operands[1:], out_shape)
    elif name == "mul":
        operands = _masked(ctx, ins, operands, out_shape)
    elif name in PIECEWISE or (name == "rem" and operands[1] is not None):
        ctx.approximate()
    out = _sets.union(operands, ctx.width)
    if ctx.hessian and out is not None:
        _elementwise_pairs(ctx, name, eqn, operands, out)
    return [out]


def _broadcast_value(var, out_shape):
    value = np.asarray(var.value).reshape((1,) * (len(out_shape) - len(var.shape)) + tuple(var.shape))
    return np.broadcast_to(value, out_shape).ravel()


def _selected(ctx, predicate, cases, shape):
    """select_n's cases, each kept where the predicate picks it when the predicate is known (a constant of the
    op, or integer operands whose values the pattern then depends on); all of them where it varies."""
    if predicate.value is None:
        ctx.approximate()
        return cases
    ctx.use(predicate.origin)
    which = _broadcast_value(predicate, shape).astype(np.int64)
    everywhere = np.arange(size_of(shape), dtype=np.int64)
    return [None if s is None else _sets.take(s, np.where(which == k, everywhere, -1)) for k, s in enumerate(cases)]


def _masked(ctx, ins, operands, shape):
    """A product's operands, each kept only where the other is not a known zero (a mask of the op)."""
    masked = list(operands)
    for k, other in ((0, ins[1]), (1, ins[0])):
        if operands[k] is not None and other.sets is None and other.value is None:
            ctx.approximate()  # a constant that may hold zeros (a dropout's mask)
        if operands[k] is not None and other.value is not None and other.sets is None:
            nonzero = _broadcast_value(other, shape) != 0
            if not nonzero.all():  # only a pruning makes the pattern hold for this value alone
                ctx.use(other.origin)
                masked[k] = _sets.take(operands[k], np.where(nonzero, np.arange(size_of(shape), dtype=np.int64), -1))
    return masked


def _elementwise_pairs(ctx, name, eqn, operands, out):
    complex_abs = name == "abs" and jax.dtypes.issubdtype(eqn.invars[0].aval.dtype, np.complexfloating)
    if (
        (name in LINEAR and not complex_abs)
        or name in ZERO_DERIVATIVE
        or (name == "integer_pow" and eqn.params["y"] == 1)
    ):
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
    result = (ROWS.get(name) or EXTRA_MOVES[name])(*arrays, **eqn.params)
    results = result if isinstance(result, tuple) else (result,)
    return [_sets.take(stacked, np.asarray(r).ravel()) for r in results]


# ---- reductions and contractions ------------------------------------------------------------------------------
def reduction(ctx, eqn, ins):
    (x,) = ins[:1]
    if eqn.primitive.name in ("reduce_max", "reduce_min"):
        ctx.approximate()
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
    left = _contracted(ctx, lhs, (lb, lf, lc), rhs, (rb, rf, rc), out_shape, first=True)
    right = _contracted(ctx, rhs, (rb, rf, rc), lhs, (lb, lf, lc), out_shape, first=False)
    if ctx.hessian and lhs.sets is not None and rhs.sets is not None:
        # bilinear: each lhs element interacts with the rhs elements it meets, per (batch, contracted) position
        lk = _sets.group(
            lhs.sets, group_map(lhs.shape, [*lb, *lc]), size_of([lhs.shape[d] for d in [*lb, *lc]]), ctx.width
        )
        rk = _sets.group(
            rhs.sets, group_map(rhs.shape, [*rb, *rc]), size_of([rhs.shape[d] for d in [*rb, *rc]]), ctx.width
        )
        ctx.interact(lk, rk)
    return [_sets.union([left, right], ctx.width)]


MAX_MASKED_PAIRS = 20_000_000


def _contracted(ctx, x, dims, other, other_dims, out_shape, first):
    """The sets a dot_general's output gets from operand `x` (dims: its batch, free and contracted dims): output
    (b, i, j) reads x's elements along the contracted dims, all of them, or where `other` is a known constant,
    those its nonzeros meet."""
    if x.sets is None:
        return None
    batch, free, contract = dims
    o_batch, o_free, o_contract = other_dims
    sizes = [[x.shape[d] for d in ds] for ds in dims]
    n_batch, n_free, n_contract = (size_of(s) for s in sizes)
    n_other = size_of([other.shape[d] for d in o_free])
    zeros = other.sets is None and other.value is not None and not np.all(other.value)
    if zeros:  # a constant with zeros: only the products it does not zero out (a mask, a selection matrix)
        weights = np.transpose(np.asarray(other.value), [*o_batch, *o_contract, *o_free])
        weights = weights.reshape(n_batch, n_contract, n_other)
        b, k, g = np.nonzero(weights)
        if len(b) * n_free <= MAX_MASKED_PAIRS:
            ctx.use(other.origin)
            numbers = np.arange(size_of(x.shape), dtype=np.int64).reshape(x.shape)
            numbers = np.transpose(numbers, [*batch, *free, *contract]).reshape(n_batch, n_free, n_contract)
            f = np.arange(n_free, dtype=np.int64)[:, None]
            sources = numbers[b, :, k].T  # (n_free, nnz)
            outs = (b * n_free + f) * n_other + g if first else (b * n_other + g) * n_free + f
            return _sets.gather_union(x.sets, outs.ravel(), sources.ravel(), size_of(out_shape), ctx.width)
    if (
        (other.sets is None and other.value is None)
        or zeros
        or (other.sets is not None and not other.sets.lengths().all())
    ):
        ctx.approximate()  # the other operand may hold zeros that this union does not see
    reduced = _sets.group(x.sets, group_map(x.shape, [*batch, *free]), n_batch * n_free, ctx.width)
    out_dims = list(range(len(out_shape)))
    nb, nf = len(batch), len(free)
    spread_dims = out_dims[: nb + nf] if first else out_dims[:nb] + out_dims[len(out_shape) - nf :]
    return _sets.take(reduced, group_map(out_shape, spread_dims))


def cumulative(ctx, eqn, ins):
    (x,) = ins
    if eqn.primitive.name in ("cummax", "cummin"):
        ctx.approximate()
    outs, sources = prefix_pairs(x.shape, eqn.params["axis"], eqn.params["reverse"])
    out = _sets.gather_union(x.sets, outs, sources, size_of(x.shape), ctx.width)
    if ctx.hessian and out is not None and eqn.primitive.name in ("cumprod", "cumlogsumexp"):
        ctx.interact(out, out)
    return [out]


def along_lines(ctx, eqn, ins, axis):
    """Every output element depends on the whole line (along `axis`) of every operand it is in (sort, top_k)."""
    ctx.approximate()
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
    if eqn.primitive.name in ("scatter", "scatter-min", "scatter-max"):
        ctx.approximate()
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
    ctx.approximate()
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
    **{name: move for name in MOVES | EXTRA_MOVES.keys()},
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
