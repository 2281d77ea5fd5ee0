"""Shape and indexing functions beyond the basics against torch 2.13: atleast_nd, the stacks and splits, flips,
rot90, meshgrid, cartesian_prod, combinations, block_diag, kron, repeat_interleave, vander, cross, Tensor.unfold,
the index_* ops, take/put, the view scatters, masked_scatter, index_put, scatter_reduce, and the searching and
counting functions (values, dtypes, first and second derivatives, node names, errors)."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import FLOAT_TIERS, FLOATS, assert_same, check_both, raises_like_torch, to_torch


def leaf(dtype, *shape, seed=0):
    return bg.tensor(np.random.default_rng(seed).uniform(-1, 1, shape), dtype=FLOATS[dtype][0], requires_grad=True)


def first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


CALLS = {  # name: (call of (m, x, y), x shape, y shape)
    "atleast_1d": (lambda m, x, y: m.atleast_1d(x[0, 0]) * 2, (3, 4), (1,)),
    "atleast_2d": (lambda m, x, y: m.atleast_2d(x[0], y)[0] * 2, (3, 4), (4,)),
    "atleast_3d": (lambda m, x, y: m.cat([t.reshape(-1) for t in m.atleast_3d(x, y, x[0, 0])]), (3, 4), (4,)),
    "column_stack": (lambda m, x, y: m.column_stack([y, x.T]), (3, 4), (4,)),
    "dstack": (lambda m, x, y: m.dstack([x, x * 2]), (3, 4), (1,)),
    "row_stack": (lambda m, x, y: m.row_stack([y, x]), (3, 4), (4,)),
    "tensor_split": (
        lambda m, x, y: m.cat([t.reshape(-1) * i for i, t in enumerate(m.tensor_split(x, 3, 1), 1)]),
        (3, 4),
        (1,),
    ),
    "tensor_split-indices": (lambda m, x, y: x.tensor_split([1, 3], dim=1)[1], (3, 4), (1,)),
    "hsplit": (lambda m, x, y: m.hsplit(x, 2)[1], (3, 4), (1,)),
    "vsplit": (lambda m, x, y: m.vsplit(x, [1])[1], (3, 4), (1,)),
    "dsplit": (lambda m, x, y: x.dsplit(2)[0], (2, 3, 4), (1,)),
    "split_with_sizes": (lambda m, x, y: m.split_with_sizes(x, [1, 3], 1)[1], (3, 4), (1,)),
    "fliplr": (lambda m, x, y: m.fliplr(x), (3, 4), (1,)),
    "flipud": (lambda m, x, y: x.flipud(), (3, 4), (1,)),
    "rot90": (lambda m, x, y: m.rot90(x), (3, 4), (1,)),
    "rot90-k": (lambda m, x, y: x.rot90(-3, [2, 0]), (2, 3, 4), (1,)),
    "meshgrid": (lambda m, x, y: m.cat([g.reshape(-1) for g in m.meshgrid(x[0], y, indexing="ij")]), (3, 4), (2,)),
    "meshgrid-xy": (
        lambda m, x, y: m.cat([g.reshape(-1) for g in m.meshgrid(x[0], y, x[1, :2], indexing="xy")]),
        (3, 4),
        (2,),
    ),
    "cartesian_prod": (lambda m, x, y: m.cartesian_prod(x[0], y), (3, 4), (2,)),
    "combinations": (lambda m, x, y: m.combinations(x[0], 3), (3, 4), (1,)),
    "combinations-replacement": (lambda m, x, y: m.combinations(y, with_replacement=True), (1,), (3,)),
    "block_diag": (lambda m, x, y: m.block_diag(x, y, x[0, 0]), (3, 4), (2,)),
    "kron": (lambda m, x, y: m.kron(x, y), (3, 4), (2, 1)),
    "repeat_interleave": (lambda m, x, y: m.repeat_interleave(x, 2), (3, 4), (1,)),
    "repeat_interleave-dim": (lambda m, x, y: x.repeat_interleave(3, dim=1), (3, 4), (1,)),
    "repeat_interleave-tensor": (lambda m, x, y: m.repeat_interleave(x, m.tensor([1, 0, 2]), 0), (3, 4), (1,)),
    "ravel": (lambda m, x, y: m.ravel(x.T) * 2, (3, 4), (1,)),
    "cross": (lambda m, x, y: m.cross(x, y, dim=1), (4, 3), (4, 3)),
    "linalg.cross": (lambda m, x, y: m.linalg.cross(x, y[:1]), (4, 3), (2, 3)),
    "unfold": (lambda m, x, y: x.unfold(1, 2, 1), (3, 5), (1,)),
    "unfold-step": (lambda m, x, y: x.unfold(0, 2, 2), (5, 2), (1,)),
    "index_add": (lambda m, x, y: m.index_add(x, 0, m.tensor([0, 2, 0]), y, alpha=2), (3, 4), (3, 4)),
    "index_copy": (lambda m, x, y: m.index_copy(x, 1, m.tensor([3, 1]), y), (3, 4), (3, 2)),
    "index_fill": (lambda m, x, y: m.index_fill(x, 1, m.tensor([0, 2]), 1.5), (3, 4), (1,)),
    "index_fill-tensor": (lambda m, x, y: x.index_fill(0, m.tensor([1]), y[0]), (3, 4), (1,)),
    "take": (lambda m, x, y: m.take(x, m.tensor([[0, 5], [11, -1]])), (3, 4), (1,)),
    "put": (lambda m, x, y: m.put(x, m.tensor([0, 5]), y), (3, 4), (2,)),
    "put-accumulate": (lambda m, x, y: x.put(m.tensor([1, 1, 4]), y, accumulate=True), (3, 4), (3,)),
    "diagonal_scatter": (lambda m, x, y: m.diagonal_scatter(x, y, 1), (3, 4), (3,)),
    "diagonal_scatter-dims": (lambda m, x, y: m.diagonal_scatter(x, y, -1, 0, 2), (3, 2, 4), (2, 2)),
    "select_scatter": (lambda m, x, y: m.select_scatter(x, y, 1, -1), (3, 4), (3,)),
    "slice_scatter": (lambda m, x, y: m.slice_scatter(x, y, 1, 1, None, 2), (3, 4), (3, 2)),
    "masked_scatter": (lambda m, x, y: m.masked_scatter(x, x > 0, y), (3, 4), (12,)),
    "index_put": (lambda m, x, y: m.index_put(x, (m.tensor([0, 2]), m.tensor([1, 3])), y), (3, 4), (2,)),
    "index_put-accumulate": (lambda m, x, y: x.index_put((m.tensor([0, 0]),), y, accumulate=True), (3, 4), (4,)),
    "scatter_reduce-sum": (lambda m, x, y: m.scatter_reduce(x, 1, m.tensor([[0, 2, 0]] * 3), y, "sum"), (3, 4), (3, 3)),
    "scatter_reduce-mean": (
        lambda m, x, y: m.scatter_reduce(x, 1, m.tensor([[0, 2, 0]] * 3), y, "mean", include_self=False),
        (3, 4),
        (3, 3),
    ),
    "scatter_reduce-prod": (
        lambda m, x, y: m.scatter_reduce(x, 0, m.tensor([[0, 2], [0, 0]]), y, "prod"),
        (3, 4),
        (2, 2),
    ),
    "scatter_reduce-amax": (
        lambda m, x, y: m.scatter_reduce(x, 1, m.tensor([[0, 2, 0]] * 3), y, "amax"),
        (3, 4),
        (3, 3),
    ),
    "scatter_reduce-amin": (
        lambda m, x, y: x.scatter_reduce(0, m.tensor([[1, 1, 0, 1]]), y, "amin", include_self=False),
        (3, 4),
        (1, 4),
    ),
}


@pytest.mark.parametrize(("dtype", "batched"), FLOAT_TIERS)
@pytest.mark.parametrize("name", CALLS)
def test_values_and_derivatives(name, dtype, batched):
    call, xs, ys = CALLS[name]
    check_both(
        lambda m, x, y: first(call(m, x, y)),
        [leaf(dtype, *xs), leaf(dtype, *ys, seed=1)],
        batched=batched,
        **FLOATS[dtype][1],
    )


def test_vander():
    # torch 2.13's vander writes the powers into a slice of a ones tensor in place, and its backward then raises (a
    # defect): values are checked against torch.vander, derivatives against torch's powers
    y = leaf("float64", 3, seed=2)
    for n, increasing in ((4, False), (None, True), (2, False)):
        got = bg.vander(y, n, increasing)
        assert_same(got, torch.vander(to_torch(y).detach(), n, increasing))
        powers = torch.arange((n or 3) - 1, -1, -1.0, dtype=torch.float64)
        powers = powers.flip(0) if increasing else powers
        check_both(lambda m, y: m.vander(y, n, increasing) if m is bg else y[:, None] ** powers, [y])
    assert bg.vander(y).grad_fn.name() == "FlipBackward0"
    assert not bg.vander(y, 1).requires_grad
    assert_same(bg.vander(bg.tensor([1, 2, 3])), torch.vander(torch.tensor([1, 2, 3])))


@pytest.mark.parametrize("name", CALLS)
def test_node_names(name):
    call, xs, ys = CALLS[name]
    x, y = leaf("float64", *xs), leaf("float64", *ys, seed=1)
    got, want = first(call(bg, x, y)), first(call(torch, *to_torch([x, y])))
    assert got.grad_fn.name() == want.grad_fn.name()


def test_ties_and_duplicates_send_gradients_as_torch():
    x = bg.tensor([[1.0, 2.0, 2.0], [0.5, 0.5, 0.5]], requires_grad=True)
    src = bg.tensor([[2.0, 1.0, 2.0], [0.5, 3.0, 0.5]], requires_grad=True)
    for reduce in ("amax", "amin", "prod"):
        for include_self in (True, False):
            check_both(
                lambda m, x, s: m.scatter_reduce(
                    x, 1, m.tensor([[1, 1, 2], [0, 0, 0]]), s, reduce, include_self=include_self
                ),
                [x, src],
                gradgrad=False,
            )
    check_both(lambda m, x, s: m.index_copy(x, 1, m.tensor([0, 0]), s[:, :2]), [x, src], gradgrad=False)
    check_both(lambda m, x, s: m.put(x, m.tensor([1, 1]), s[0, :2]), [x, src], gradgrad=False)


def test_aliases_and_returned_objects():
    x = bg.ones(2, 3)
    assert bg.atleast_2d(x) is x and bg.atleast_1d(x) is x
    assert bg.broadcast_shapes((2, 1), (3,), 1) == torch.broadcast_shapes((2, 1), (3,), 1)
    a, b = bg.broadcast_tensors(x, bg.ones(3))
    assert a is x and b.shape == (2, 3) and b.grad_fn is None
    assert bg.cartesian_prod(x[0]) is x[0] or bg.cartesian_prod(x[0]).shape == (3,)
    with pytest.warns(UserWarning, match="Using torch.cross without specifying the dim arg is deprecated"):
        assert_same(bg.cross(bg.eye(3), bg.ones(3, 3)), torch.cross(torch.eye(3), torch.ones(3, 3), dim=0))
    assert bg.unsafe_split(x, 2, 1)[1].shape == (2, 1)


SEARCHES = {
    "searchsorted": lambda m: m.searchsorted(m.tensor([1, 3, 5, 7]), m.tensor([[2, 7], [0, 9]])),
    "searchsorted-right": lambda m: m.searchsorted(
        m.tensor([[1.0, 3, 5], [2, 2, 4]]), m.tensor([[3.0, 0], [2, 5]]), right=True
    ),
    "searchsorted-side": lambda m: m.searchsorted(m.tensor([1, 3, 3, 7]), m.tensor([3]), side="right", out_int32=True),
    "searchsorted-sorter": lambda m: m.searchsorted(m.tensor([5, 1, 3]), m.tensor([2, 4]), sorter=m.tensor([1, 2, 0])),
    "bucketize": lambda m: m.bucketize(m.tensor([[2, 7], [3, 9]]), m.tensor([1, 3, 5, 7])),
    "bucketize-right": lambda m: m.bucketize(m.tensor([2, 3, 7]), m.tensor([1, 3, 5, 7]), right=True),
    "isin": lambda m: m.isin(m.tensor([[1, 2], [3, 4]]), m.tensor([2, 3])),
    "isin-invert": lambda m: m.isin(m.tensor([1.0, 2.0, 5.0]), m.tensor([2.0, 5.0]), invert=True),
    "argwhere": lambda m: m.argwhere(m.tensor([[0, 1], [2, 0]])),
    "nonzero_static": lambda m: m.nonzero_static(m.tensor([[0, 1], [2, 3]]), size=4),
    "nonzero_static-fill": lambda m: m.tensor([0, 1, 0, 2]).nonzero_static(size=3, fill_value=-5),
    "unravel_index": lambda m: m.unravel_index(m.tensor([5, 7, 0, 12, -13]), (3, 4)),
    "unique_consecutive": lambda m: m.unique_consecutive(
        m.tensor([1, 1, 2, 2, 3, 1, 1]), return_inverse=True, return_counts=True
    ),
    "unique_consecutive-dim": lambda m: m.unique_consecutive(
        m.tensor([[1, 1], [1, 1], [2, 0]]), dim=0, return_counts=True
    ),
    "bincount": lambda m: m.bincount(m.tensor([1, 1, 3, 0]), minlength=6),
    "bincount-weights": lambda m: m.bincount(m.tensor([1, 1, 3]), m.tensor([0.5, 1.0, 2.0])),
    "histc": lambda m: m.histc(m.tensor([0.5, 1.5, 1.5, 3.0, 9.0]), 4, 0, 4),
    "histc-range": lambda m: m.tensor([0.5, 1.5, 1.5, 3.0, 9.0]).histc(3),
    "histogram": lambda m: tuple(m.histogram(m.tensor([0.5, 1.5, 1.5, 3.0]), 3)),
    "histogram-edges": lambda m: tuple(
        m.histogram(
            m.tensor([0.5, 1.5, 1.5, 3.0]),
            m.tensor([0.0, 1.0, 4.0]),
            weight=m.tensor([1.0, 2.0, 3.0, 4.0]),
            density=True,
        )
    ),
}


@pytest.mark.parametrize("name", SEARCHES)
def test_searching_and_counting(name):
    assert_same(SEARCHES[name](bg), SEARCHES[name](torch))


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.hsplit(m.ones(3, 4), 3),
        lambda m: m.vsplit(m.ones(3), 1),
        lambda m: m.rot90(m.ones(2, 2), 1, [0, 0]),
        lambda m: m.fliplr(m.ones(3)),
        lambda m: m.combinations(m.ones(2, 2)),
        lambda m: m.block_diag(m.ones(1, 1, 1)),
        lambda m: m.repeat_interleave(m.ones(3), m.tensor([1, 2])),
        lambda m: m.linalg.cross(m.ones(2, 4), m.ones(2, 4)),
        lambda m: m.ones(3).unfold(0, 4, 1),
        lambda m: m.index_add(m.ones(3), 0, m.tensor([5]), m.ones(1)),
        lambda m: m.index_copy(m.ones(3), 0, m.tensor([0]), m.ones(1, dtype=m.float64)),
        lambda m: m.index_fill(m.ones(3), 0, m.tensor([0]), m.ones(2)),
        lambda m: m.take(m.ones(3), m.tensor([3])),
        lambda m: m.put(m.ones(3), m.tensor([0, 1]), m.ones(3)),
        lambda m: m.select_scatter(m.ones(2, 3), m.ones(2), 0, 0),
        lambda m: m.slice_scatter(m.ones(2, 3), m.ones(2, 1), 1, 0, 2),
        lambda m: m.masked_scatter(m.ones(3), m.tensor([True, True, False]), m.ones(1)),
        lambda m: m.scatter_reduce(m.ones(3), 0, m.tensor([0]), m.ones(1), "median"),
        lambda m: m.index_fill(m.ones(3), 0, m.tensor([0.0]), 1.0),
        lambda m: m.index_add(m.ones(3), 0, m.tensor([[0]]), m.ones(1)),
        lambda m: m.index_copy(m.ones(3), 0, m.tensor([5]), m.ones(1)),
        lambda m: m.searchsorted(m.tensor([[1, 2]]), m.tensor([[1], [2]])),
        lambda m: m.bincount(m.tensor([-1, 2])),
        lambda m: m.histc(m.tensor([1, 2]), 2),
    ],
    ids=[
        "hsplit-divisible",
        "vsplit-dims",
        "rot90-dims",
        "fliplr-dims",
        "combinations-dims",
        "block-diag-dims",
        "repeat-size",
        "cross-length",
        "unfold-size",
        "index-add-range",
        "index-copy-dtype",
        "index-fill-value",
        "take-range",
        "put-size",
        "select-scatter-shape",
        "slice-scatter-shape",
        "masked-scatter-size",
        "scatter-reduce-name",
        "index-fill-dtype",
        "index-add-vector",
        "index-copy-range",
        "searchsorted-shapes",
        "bincount-negative",
        "histc-int",
    ],
)
def test_errors(call):
    raises_like_torch(call)
