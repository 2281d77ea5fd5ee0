"""Sparsity rules of the primitives that read a block of elements per output element: convolutions and pooling
windows (their stencils, exactly as their parameters place them), and matrix functions and FFTs (each matrix, or
each transformed block, dense; the batch dims independent)."""

import numpy as np

from . import _sets
from ._maps import group_map, size_of, window_pairs
from ._rules import fallback, inexact


def reduce_window(ctx, eqn, ins):
    """reduce_window_sum/max/min and the generic reduce_window (operands, then their init values)."""
    p = eqn.params
    if eqn.primitive.name != "reduce_window_sum":
        ctx.approximate()
    operands = ins if eqn.primitive.name != "reduce_window" else ins[: len(ins) // 2]
    shape, out_shape = operands[0].shape, eqn.outvars[0].aval.shape
    outs, sources, _ = window_pairs(
        shape, out_shape, p["window_dimensions"], p["window_strides"], p["padding"], p["base_dilation"],
        p["window_dilation"],
    )  # fmt: skip
    size = size_of(out_shape)
    windows = [_sets.gather_union(x.sets, outs, sources, size, ctx.width) for x in operands]
    inits = [_sets.take(x.sets, np.zeros(size, np.int64)) for x in ins[len(operands) :]]
    out = _sets.union(windows + inits, ctx.width)
    if ctx.hessian and out is not None and eqn.primitive.name == "reduce_window":
        ctx.interact(out, out)
    return [out if inexact(v.aval.dtype) else None for v in eqn.outvars]


def conv(ctx, eqn, ins):
    """conv_general_dilated: output (n, o, s) reads the input channels of o's group at the window around s, and
    the kernel of o at the window offsets that fall inside the input there."""
    p = eqn.params
    lhs, rhs = ins
    if lhs.sets is None and rhs.sets is None:
        return [None]
    if p["batch_group_count"] != 1:
        return fallback(ctx, eqn, ins)
    lspec, rspec, ospec = p["dimension_numbers"]
    out_shape = eqn.outvars[0].aval.shape
    groups = p["feature_group_count"]
    in_spatial = [lhs.shape[d] for d in lspec[2:]]
    out_spatial = [out_shape[d] for d in ospec[2:]]
    window = [rhs.shape[d] for d in rspec[2:]]
    n, c, o = lhs.shape[lspec[0]], lhs.shape[lspec[1]], out_shape[ospec[1]]
    outs, sources, offsets = window_pairs(
        in_spatial, out_spatial, window, p["window_strides"], p["padding"], p["lhs_dilation"], p["rhs_dilation"]
    )
    s_in, s_out, n_window = size_of(in_spatial), size_of(out_spatial), size_of(window)
    # output element (n, o, s) in the output's layout, as (n, o, flat s)
    out_coords = np.indices(out_shape, dtype=np.int64).reshape(len(out_shape), -1)
    out_n, out_o = out_coords[ospec[0]], out_coords[ospec[1]]
    out_s = _flat(out_coords, ospec[2:], out_spatial)
    left = right = None
    if lhs.sets is not None:  # union over the group's channels, then over the window
        keep = _kernel_offsets(ctx, rhs, rspec, n_window)
        if keep is not None:
            outs, sources = outs[keep[offsets]], sources[keep[offsets]]
        coords = np.indices(lhs.shape, dtype=np.int64).reshape(len(lhs.shape), -1)
        by_group = (coords[lspec[0]] * groups + coords[lspec[1]] // (c // groups)) * s_in + _flat(
            coords, lspec[2:], in_spatial
        )
        per_group = _sets.group(lhs.sets, by_group, n * groups * s_in, ctx.width)
        base = np.arange(n * groups, dtype=np.int64)[:, None]
        windowed = _sets.gather_union(
            per_group, (base * s_out + outs).ravel(), (base * s_in + sources).ravel(), n * groups * s_out, ctx.width
        )
        left = _sets.take(windowed, (out_n * groups + out_o // (o // groups)) * s_out + out_s)
    if rhs.sets is not None:  # union over the input channels, then over the offsets inside the input at s
        coords = np.indices(rhs.shape, dtype=np.int64).reshape(len(rhs.shape), -1)
        per_offset = _sets.group(
            rhs.sets, coords[rspec[0]] * n_window + _flat(coords, rspec[2:], window), o * n_window, ctx.width
        )
        base = np.arange(o, dtype=np.int64)[:, None]
        used = _sets.gather_union(
            per_offset, (base * s_out + outs).ravel(), (base * n_window + offsets).ravel(), o * s_out, ctx.width
        )
        right = _sets.take(used, out_o * s_out + out_s)
    if ctx.hessian and left is not None and right is not None:
        ctx.interact(left, right)
    return [_sets.union([left, right], ctx.width)]


def _kernel_offsets(ctx, rhs, rspec, n_window):
    """Which window offsets a constant kernel does not zero out for every channel pair (a 5-point stencil written
    as a 3x3 kernel), or None where all count; the pattern then holds for this kernel's zeros alone."""
    if rhs.sets is not None:
        return None
    if rhs.value is None:
        ctx.approximate()  # a kernel of unknown values may hold zeros
        return None
    nonzero = np.transpose(np.asarray(rhs.value) != 0, rspec).reshape(-1, n_window)
    keep = nonzero.any(axis=0)
    if keep.all():
        return None
    ctx.use(rhs.origin)
    if not (nonzero == keep).all():
        ctx.approximate()  # channels with zeros at other offsets read this union of them
    return keep


def _flat(coords, dims, sizes):
    """The flat index, over `sizes`, of the coordinates at `dims` of each element."""
    if not dims:
        return np.zeros(coords.shape[1], np.int64)
    return np.ravel_multi_index(tuple(coords[d] for d in dims), sizes).astype(np.int64)


def batch_dense(core):
    """A rule for a primitive acting on blocks of its trailing dims (`core(eqn)` of them in its first operand):
    each output block depends on the whole matching block of every operand, all pairs interacting unless
    the primitive is linear (an FFT)."""

    def rule(ctx, eqn, ins):
        ctx.approximate()
        rank, linear = core(eqn)
        nb = len(ins[0].shape) - rank
        batch = tuple(ins[0].shape[:nb])
        shapes = [x.shape for x in ins] + [v.aval.shape for v in eqn.outvars]
        if nb < 0 or any(tuple(s[:nb]) != batch for s in shapes):
            return fallback(ctx, eqn, ins)
        n_batch = size_of(batch)
        kept = list(range(nb))
        per_batch = _sets.union(
            [_sets.group(x.sets, group_map(x.shape, kept), n_batch, ctx.width) for x in ins], ctx.width
        )
        if per_batch is None:
            return [None] * len(eqn.outvars)
        if ctx.hessian and not linear:
            ctx.interact(per_batch, per_batch)
        return [
            _sets.take(per_batch, group_map(v.aval.shape, kept)) if inexact(v.aval.dtype) else None for v in eqn.outvars
        ]

    return rule


_MATRIX = batch_dense(lambda eqn: (2, False))
LINALG = (
    "cholesky", "lu", "triangular_solve", "eigh", "eig", "svd", "qr", "householder_product", "geqrf", "geqp3",
    "schur", "hessenberg", "tridiagonal", "tridiagonal_solve", "cholesky_update", "lu_pivots_to_permutation",
)  # fmt: skip

RULES = {
    **{
        name: reduce_window for name in ("reduce_window_sum", "reduce_window_max", "reduce_window_min", "reduce_window")
    },
    **{name: _MATRIX for name in LINALG},
    "conv_general_dilated": conv,
    "fft": batch_dense(lambda eqn: (len(eqn.params["fft_lengths"]), True)),
}
