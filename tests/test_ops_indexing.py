"""Indexing ops against torch: __getitem__/__setitem__, gather/scatter, masks, sort/topk, and error messages."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, check_op, raises_like_torch, rand

FAST = {"batched": False}  # is_grads_batched is checked on the BATCHED subset below (each vmapped kernel compiles)
FIRST_ORDER = {"batched": False, "gradgrad": False}  # for variants of sort/topk, whose second order is checked once


def _idx(m, i):
    return m.tensor(i)


# (id, index(m) for an x of shape (3, 4, 5); m is bg or torch)
INDICES = [
    ("int", lambda m: 1),
    ("negative_int", lambda m: -1),
    ("ints", lambda m: (1, -2)),
    ("slice", lambda m: slice(1, None)),
    ("slice_step", lambda m: (slice(None), slice(None, None, 2))),
    ("slice_clamped", lambda m: (slice(-100, 2), slice(1, 100))),
    ("full_slice", lambda m: (slice(None), slice(None), 1)),
    ("none", lambda m: (None, 1)),
    ("ellipsis", lambda m: (Ellipsis, 2)),
    ("ellipsis_none", lambda m: (1, Ellipsis, None)),
    ("empty_tuple", lambda m: ()),
    ("python_true", lambda m: True),
    ("python_false_int", lambda m: (False, 1)),
    ("zero_dim_int_tensor", lambda m: _idx(m, 2)),
    ("int_tensor_repeated", lambda m: _idx(m, [0, 2, 2])),
    ("int_tensor_negative", lambda m: (slice(None), _idx(m, [-1, 0]))),
    ("int_tensor_2d", lambda m: _idx(m, [[0, 1], [2, 0]])),
    ("int32_tensor", lambda m: _idx(m, [1, 2]).int()),
    ("list", lambda m: [0, 2]),
    ("list_as_tuple", lambda m: [[0, 1], [1, 2]]),
    ("list_with_slice", lambda m: [0, slice(1, 3)]),
    ("tuple_inside_tuple", lambda m: ((0, 2), (1, 1))),
    ("empty_list", lambda m: []),
    ("bool_mask", lambda m: _idx(m, [True, False, True])),
    ("bool_mask_middle", lambda m: (slice(None), _idx(m, [False, True, True, False]))),
    ("bool_mask_2d", lambda m: _idx(m, [[True, False, True, False], [False] * 4, [True] * 4])),
    ("uint8_mask", lambda m: _idx(m, [1, 0, 1]).to(m.uint8)),
    ("zero_dim_bool_tensor", lambda m: _idx(m, True)),
    ("advanced_separated", lambda m: ([0, 2], slice(None), [1, 4])),
    ("advanced_adjacent", lambda m: (slice(None), [0, 3], [1, 4])),
    ("advanced_broadcast", lambda m: ([[0], [2]], [1, 3])),
    ("advanced_with_int", lambda m: (1, slice(None), [0, 4])),
    ("advanced_none_slice", lambda m: (None, [0, 2], None, slice(1, None))),
    ("advanced_ellipsis", lambda m: (Ellipsis, _idx(m, [0, 2]))),
    ("mask_and_slice", lambda m: (_idx(m, [True, False, True]), slice(1, 3))),
    ("mask_and_int_tensor", lambda m: (_idx(m, [True, False, True]), _idx(m, [0, 3]))),
]


@pytest.mark.parametrize("index", [i[1] for i in INDICES], ids=[i[0] for i in INDICES])
def test_getitem(index):
    check_op(lambda x: x[index(bg)], lambda x: x[index(torch)], [rand(3, 4, 5)], **FAST)


def test_getitem_of_views():
    check_op(lambda x: x.t()[1:, [0, 2]][::2], lambda x: x.t()[1:, [0, 2]][::2], [rand(3, 4)], **FAST)


def test_getitem_grad_fn_names_like_torch():
    x = rand(3, 4)
    t = torch.tensor(x.detach().numpy(), requires_grad=True)
    for index in (
        1,
        slice(None),
        (slice(None), slice(None, None, 1)),
        (1, slice(1, None)),
        (slice(1, None), 1),
        (1, None),
        (None, 1),
        (Ellipsis, None),
        (),
        [0],
        True,
    ):
        assert x[index].grad_fn.name() == t[index].grad_fn.name(), index


# (id, index(m), value(m) or None for a random value tensor of the indexed shape that requires grad)
WRITES = [
    ("int_number", lambda m: 1, lambda m: 2.5),
    ("slice_tensor", lambda m: (slice(None), slice(1, 3)), None),
    ("broadcast_row", lambda m: slice(0, 2), "row"),
    ("leading_ones_dropped", lambda m: 0, "leading_one"),
    ("ellipsis_none", lambda m: (Ellipsis, None, 1), None),
    ("negative_step_free_slice", lambda m: (slice(None, None, 2), -1), None),
    ("int_tensor", lambda m: _idx(m, [2, 0]), None),
    ("int_tensor_broadcast_value", lambda m: (slice(None), _idx(m, [0, 3])), "row"),
    ("advanced_pairs_number", lambda m: ([0, 2], [1, 3]), lambda m: -1.0),
    ("advanced_pairs", lambda m: ([0, 2], [1, 3]), None),
    ("bool_mask", lambda m: _idx(m, [True, False, True]), None),
    ("bool_mask_number", lambda m: _idx(m, [[True, False] * 2, [False] * 4, [True] * 4]), lambda m: 0.0),
]


def _write(index, value):
    def f(x, *v):
        y = x * 1
        y[index(bg if isinstance(x, bg.Tensor) else torch)] = (
            v[0] if v else value(bg if isinstance(x, bg.Tensor) else torch)
        )
        return y

    return f


def _value_for(x, index, kind):
    shape = tuple(x[index(bg)].shape)
    return {None: shape, "row": shape[-1:], "leading_one": (1, 1) + shape}[kind]


@pytest.mark.parametrize("index, value", [w[1:] for w in WRITES], ids=[w[0] for w in WRITES])
def test_setitem_grads_reach_value_and_base(index, value):
    x = rand(3, 4)
    inputs = [x] if callable(value) else [x, rand(*_value_for(x, index, value))]
    f = _write(index, value)
    check_op(f, f, inputs, **FAST)


# a value with more (non-leading-1) dims than the slice it fills: torch expands it into the slice and raises
# expand's error (a wavenet queue stores a [C, 1] column into data[:, pos]); advanced indices keep their own message
SETITEM_TOO_MANY_DIMS = [
    ((slice(None), 1), (3, 1)),
    ((0, 0), (2,)),
    ((0,), (1, 4, 1)),
    ((Ellipsis, 0), (3, 1, 1)),
    ((slice(0, 2),), (3, 4)),
    (("rows",), (2, 4, 1)),
    (("mask",), (2, 4, 1)),
]


@pytest.mark.parametrize("index, value_shape", SETITEM_TOO_MANY_DIMS)
def test_setitem_of_a_value_with_too_many_dims_raises_like_torch(index, value_shape):
    def assign(m):
        special = {"rows": m.tensor([0, 1]), "mask": m.tensor([True, False, True])}
        m.zeros(3, 4, dtype=m.float64)[tuple(special.get(i, i) if isinstance(i, str) else i for i in index)] = m.ones(
            value_shape, dtype=m.float64
        )

    raises_like_torch(assign)


@pytest.mark.parametrize("dtype", ["float64", "int8", "bool", "complex64", "bfloat16"])
def test_expand_names_the_tensor_type_as_torchs_cpp_message(dtype):
    raises_like_torch(lambda m: m.zeros(6, 1, dtype=getattr(m, dtype)).expand(6))


def test_setitem_on_a_view_updates_the_base():
    def f(x, v):
        y = x * 1
        y.t()[1][::2] = v
        return y

    check_op(f, f, [rand(3, 4), rand(2)], **FAST)


def test_setitem_grad_fn_names_like_torch():
    for index, _name in ((1, "CopySlices"), ([1], "IndexPutBackward0")):
        y = rand(3, 4) * 1
        y[index] = 0.0
        t = torch.ones(3, 4, requires_grad=True) * 1
        t[index] = 0.0
        assert y.grad_fn.name() == t.grad_fn.name()


OPS = [
    ("index_select", lambda m, x: m.index_select(x, 0, _idx(m, [2, 0, 2]))),
    ("index_select_method_int32", lambda m, x: x.index_select(-1, _idx(m, [3, 1]).int())),
    ("index_select_0d_index", lambda m, x: x.index_select(1, _idx(m, 2))),
    ("gather", lambda m, x: m.gather(x, 1, _idx(m, [[0, 0, 3], [1, 2, 0], [3, 3, 3]]))),
    ("gather_smaller_index", lambda m, x: x.gather(0, _idx(m, [[2, 0], [1, 1]]))),
    ("gather_view", lambda m, x: x.t().gather(1, _idx(m, [[0, 2], [1, 1], [2, 0], [0, 0]]))),
    ("scatter", lambda m, x: m.scatter(x, 1, _idx(m, [[2, 0], [3, 1]]), x[1:, :2] * 2)),
    ("scatter_value", lambda m, x: x.scatter(0, _idx(m, [[2, 0, 1, 2]]), 5.0)),
    ("scatter_add_duplicates", lambda m, x: m.scatter_add(x, 0, _idx(m, [[0, 0, 2, 0], [0, 1, 2, 0]]), x.flip(0)[:2])),
    ("scatter_add_method", lambda m, x: x.scatter_add(1, _idx(m, [[3], [3], [0]]), x[:, :1] ** 2)),
    ("take_along_dim", lambda m, x: m.take_along_dim(x, _idx(m, [[0, 3], [1, 1], [2, 0]]), 1)),
    ("take_along_dim_broadcast", lambda m, x: x.take_along_dim(_idx(m, [[2], [0], [1]]), dim=0)),
    ("take_along_dim_flat", lambda m, x: m.take_along_dim(x, _idx(m, [11, 0, 5]))),
    ("masked_fill", lambda m, x: m.masked_fill(x, x > 0, 0.5)),
    ("masked_fill_broadcast_mask", lambda m, x: x.masked_fill(_idx(m, [True, False, False, True]), -1.0)),
    ("masked_fill_tensor_value", lambda m, x: x.masked_fill(x < 0, x[0, 0] * 3)),
    ("masked_fill_mask_broadcasts_input", lambda m, x: m.masked_fill(x[0], _idx(m, [[True], [False]]), 2.0)),
    ("masked_select", lambda m, x: m.masked_select(x, x > 0)),
    ("masked_select_broadcast", lambda m, x: x.masked_select(_idx(m, [[True], [False], [True]]))),
    ("sort", lambda m, x: m.sort(x)),
    ("sort_dim_descending", lambda m, x: x.sort(0, descending=True), FIRST_ORDER),
    ("sort_stable_view", lambda m, x: m.sort(x.t(), dim=-1, stable=True), FIRST_ORDER),
    ("argsort", lambda m, x: m.argsort(x, 0, descending=True)),
    ("topk", lambda m, x: m.topk(x, 2)),
    ("topk_smallest_dim0", lambda m, x: x.topk(2, dim=0, largest=False), FIRST_ORDER),
    ("topk_scalar", lambda m, x: m.topk(x[1, 1], 1), FIRST_ORDER),
    ("topk_unsorted", lambda m, x: m.topk(x, 3, sorted=False), FIRST_ORDER),
    ("topk_unsorted_smallest_dim0", lambda m, x: x.topk(2, dim=0, largest=False, sorted=False), FIRST_ORDER),
    ("sort_scalar", lambda m, x: x[0, 0].sort(), FIRST_ORDER),
]


@pytest.mark.parametrize("fn, options", [(o[1], o[2] if len(o) > 2 else FAST) for o in OPS], ids=[o[0] for o in OPS])
def test_ops_against_torch(fn, options):
    check_op(lambda x: fn(bg, x), lambda x: fn(torch, x), [rand(3, 4)], **options)


BATCHED = [
    ("getitem_mixed", lambda m, x: x[_idx(m, [True, False, True]), 1:][:, [2, 0]]),
    ("setitem", lambda m, x: _write(lambda m: (slice(None), [0, 2]), lambda m: 1.0)(x)),
] + [o for o in OPS if o[0] in ("topk",)]


@pytest.mark.parametrize("fn", [o[1] for o in BATCHED], ids=[o[0] for o in BATCHED])
def test_batched_grads(fn):
    check_op(lambda x: fn(bg, x), lambda x: fn(torch, x), [rand(3, 4)], gradgrad=False)


def test_ties_and_nans_sort_like_torch():
    data = [3.0, 1.0, float("nan"), 3.0, 1.0, 2.0]
    for descending in (False, True):
        got, want = (
            bg.sort(bg.tensor(data), descending=descending, stable=True),
            torch.sort(torch.tensor(data), descending=descending, stable=True),
        )
        assert_same(got.indices, want.indices)
        assert type(got).__name__ == type(want).__name__ and got._fields == type(want).__match_args__
    got, want = bg.topk(bg.tensor(data[:2]), 1), torch.topk(torch.tensor(data[:2]), 1)
    assert type(got).__name__ == type(want).__name__ and got._fields == type(want).__match_args__


def test_unsorted_topk_leaves_the_order_of_torchs_cpu_kernel():
    """sorted=False: the order torch's selection leaves (introselect below 64 k elements, a heap above), ties and
    nan included, in rows that take every path (a pipe-organ row drives introselect to its heap fallback)."""
    rng = np.random.default_rng(4)
    rows = [rng.standard_normal(40), rng.integers(0, 3, 40).astype(float), np.sort(rng.standard_normal(40))]
    with_nans = rng.standard_normal(40)
    with_nans[::7] = np.nan
    pipe_organ = np.concatenate([np.arange(300), np.arange(300)[::-1]]).astype(float)
    cases = [(r, k) for r in rows + [with_nans] for k in (1, 3, 17, 40)] + [(pipe_organ, 9), (pipe_organ, 200)]
    for row, k in cases:
        for largest in (True, False):
            got = bg.tensor(row).topk(k, largest=largest, sorted=False)
            want = torch.tensor(row).topk(k, largest=largest, sorted=False)
            assert_same(got.indices, want.indices)
            assert_same(got.values, want.values)
    ints = rng.integers(-5, 5, (3, 30))
    got, want = bg.tensor(ints).topk(6, dim=1, sorted=False), torch.tensor(ints).topk(6, dim=1, sorted=False)
    assert_same(got.indices, want.indices)


def test_sorted_topk_places_equal_elements_as_torchs_cpu_kernel():
    """sorted=True (the default): equal values come in the order torch's nth_element then std::sort of the first
    k - 1 leave them, not first index first (a gate of zeros picks experts 3, 5, 4, 0 of six), for the function and
    the method, either direction, ints and nan, any dim, out= and the gradient routed to those positions."""
    rng = np.random.default_rng(6)
    tied = rng.integers(0, 3, (4, 40)).astype(float)
    tied[1, ::6] = np.nan
    for lib_rows, k in ((np.zeros((2, 6)), 4), (tied, 5), (tied, 1), (tied, 39), (tied.astype(np.int64)[2:], 7)):
        for largest in (True, False):
            got = bg.topk(bg.tensor(lib_rows), k, largest=largest)
            want = torch.topk(torch.tensor(lib_rows), k, largest=largest)
            assert_same(got.indices, want.indices)
            assert_same(got.values, want.values)
            assert_same(
                bg.tensor(lib_rows).T.topk(k, 0, largest).indices, torch.tensor(lib_rows).T.topk(k, 0, largest).indices
            )
    outs = [(lib.empty(0, dtype=lib.float64), lib.empty(0, dtype=lib.int64)) for lib in (bg, torch)]
    bg.topk(bg.tensor(tied), 6, out=outs[0])
    torch.topk(torch.tensor(tied), 6, out=outs[1])
    assert_same(outs[0][1], outs[1][1])
    grads = []
    for lib in (bg, torch):
        gate = lib.zeros(3, 6, requires_grad=True)
        (gate.topk(4, dim=1).values * lib.arange(4.0)).sum().backward()
        grads.append(gate.grad)
    assert_same(grads[0], grads[1])


def test_a_list_read_as_a_tuple_warns_as_torch_at_the_callers_line():
    """x[[t, t]] and x[[slice, i]] index as tuples with torch's deprecation warning, attributed to the line that
    indexes (as is torch.qr's); a plain list of ints is one index and does not warn."""
    for lib in (bg, torch):
        x = lib.arange(12.0).reshape(3, 4)
        with pytest.warns(UserWarning, match="non-tuple sequence for multidimensional indexing") as caught:
            got = x[[lib.tensor([0, 1]), lib.tensor([2, 3])]]
            x[[slice(0, 2), 1]] = 5.0
        assert {w.filename for w in caught} == {__file__} and len(caught) == 2
        assert got.tolist() == [2.0, 7.0] and x[:, 1].tolist() == [5.0, 5.0, 9.0]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            x[[0, 1]]
        with pytest.warns(UserWarning, match="torch.qr is deprecated") as caught:
            lib.qr(lib.eye(2))
        assert caught[0].filename == __file__


def test_unstable_sort_orders_ties_as_torchs_cpu_sort():
    """stable=False (the default): equal elements, nan included, in the order torch's std::sort leaves them (beyond
    16 elements not their original order), for floats and ints, either direction, along any dim, with gradients."""
    rng = np.random.default_rng(5)
    ties = rng.integers(0, 4, (3, 50)).astype(float)
    ties[0, ::9] = np.nan
    for data in (ties, ties[1:].astype(np.int64), ties[:, :12]):
        for descending in (False, True):
            got = bg.sort(bg.tensor(data), dim=1, descending=descending)
            want = torch.sort(torch.tensor(data), dim=1, descending=descending)
            assert_same(got.indices, want.indices)
            assert_same(got.values, want.values)
            assert_same(bg.tensor(data).T.argsort(0), torch.tensor(data).T.argsort(0))
    check_op(lambda x: bg.sort(x.round(), 0).values * 2, lambda x: torch.sort(x.round(), 0).values * 2, [rand(40, 2)])


@pytest.mark.parametrize(
    "data",
    [[[0, 1.5], [0, -2]], [True, False, True], 3, 0, np.zeros((0, 3))],
    ids=["2d", "bool", "scalar", "zero_scalar", "empty"],
)
def test_nonzero_like_torch(data):
    assert_same(bg.nonzero(bg.tensor(data)), torch.nonzero(torch.tensor(data)))
    assert_same(bg.tensor(data).nonzero(as_tuple=True), torch.tensor(data).nonzero(as_tuple=True))


def X(m, *shape):
    return m.arange(float(np.prod(shape)), dtype=m.float64).reshape(shape)


def _set(x, index, value):
    x[index] = value


ERRORS = [
    ("negative_step", lambda m: X(m, 5)[::-1]),
    ("zero_step", lambda m: X(m, 5)[::0]),
    ("int_out_of_range", lambda m: X(m, 3, 4)[:, 4]),
    ("negative_int_out_of_range", lambda m: X(m, 3, 4)[-4]),
    ("too_many_indices", lambda m: X(m, 3)[0, 0]),
    ("tensor_out_of_range_counts_advanced_dims", lambda m: X(m, 3, 4, 5)[[0, 1], 1:, [0, 5]]),
    ("list_out_of_range", lambda m: X(m, 3, 4)[[0, -4]]),
    ("float_tensor_index", lambda m: X(m, 3, 4)[m.tensor([0.0, 1.0])]),
    ("float_index", lambda m: X(m, 3, 4)[1.0]),
    ("mask_shape", lambda m: X(m, 3, 4)[:, m.tensor([True, False, True])]),
    ("setitem_negative_step", lambda m: _set(X(m, 3), slice(None, None, -1), 1.0)),
    ("setitem_out_of_range", lambda m: _set(X(m, 3), 3, 1.0)),
    ("setitem_shape", lambda m: _set(X(m, 3, 4), 0, m.ones(3, dtype=m.float64))),
    ("setitem_advanced_shape", lambda m: _set(X(m, 3, 4), [0, 1], m.ones(3, dtype=m.float64))),
    ("setitem_advanced_dtype", lambda m: _set(X(m, 3, 4), ([0, 2], [1, 3]), m.tensor([5.0, 6.0]))),
    ("setitem_list", lambda m: _set(X(m, 3, 4), 0, [1.0, 2.0, 3.0, 4.0])),
    ("setitem_leaf_requires_grad", lambda m: _set(X(m, 3).requires_grad_(), 0, 1.0)),
    ("index_select_out_of_range", lambda m: m.index_select(X(m, 3, 4), 0, m.tensor([0, 3]))),
    ("index_select_negative", lambda m: m.index_select(X(m, 3, 4), 0, m.tensor([-1]))),
    ("index_select_matrix_index", lambda m: m.index_select(X(m, 3, 4), 0, m.tensor([[0, 1]]))),
    ("index_select_float_index", lambda m: m.index_select(X(m, 3, 4), 0, m.tensor([0.0]))),
    ("gather_out_of_range", lambda m: m.gather(X(m, 3, 4), 0, m.tensor([[0, 3]]))),
    ("gather_negative", lambda m: m.gather(X(m, 3, 4), 1, m.tensor([[0, -1]]))),
    ("gather_ndim", lambda m: m.gather(X(m, 3, 4), 0, m.tensor([0, 1]))),
    ("gather_index_too_large", lambda m: m.gather(X(m, 3, 4), 0, m.tensor([[0, 1, 0, 1, 0]]))),
    ("gather_float_index", lambda m: m.gather(X(m, 3, 4), 1, m.tensor([[1.0]]))),
    ("scatter_out_of_range", lambda m: m.scatter(X(m, 3, 4), 0, m.tensor([[0, 3]]), X(m, 3, 4))),
    ("scatter_dtype", lambda m: m.scatter(X(m, 3, 4), 0, m.tensor([[0, 1]]), m.ones(3, 4))),
    ("scatter_src_too_small", lambda m: m.scatter(X(m, 3, 4), 0, m.tensor([[0, 1]]), X(m, 1, 1))),
    ("scatter_ndim", lambda m: m.scatter(X(m, 3, 4), 1, m.tensor([1]), 1.0)),
    ("scatter_reduce", lambda m: m.scatter(X(m, 3, 4), 1, m.tensor([[1]]), X(m, 3, 4), reduce="max")),
    ("take_along_dim_ndim", lambda m: m.take_along_dim(X(m, 3, 4), m.tensor([1]), 1)),
    ("take_along_dim_int32", lambda m: m.take_along_dim(X(m, 3, 4), m.tensor([[1]]).int(), 1)),
    ("take_along_dim_broadcast", lambda m: m.take_along_dim(X(m, 3, 4), m.tensor([[0, 2]]), 0)),
    ("masked_fill_long_mask", lambda m: m.masked_fill(X(m, 3), m.tensor([1, 0, 1]), 0.0)),
    ("masked_fill_vector_value", lambda m: m.masked_fill(X(m, 3), m.tensor([True, False, True]), X(m, 1))),
    ("masked_fill_broadcast", lambda m: m.masked_fill(X(m, 3), m.tensor([True, False]), 1.0)),
    ("masked_select_long_mask", lambda m: m.masked_select(X(m, 3), m.tensor([1, 0, 1]))),
    ("topk_k", lambda m: m.topk(X(m, 3), 4)),
    ("topk_negative_k", lambda m: m.topk(X(m, 3), -1)),
    ("sort_dim", lambda m: m.sort(X(m, 3), 1)),
    ("scalar_int_index", lambda m: m.tensor(1.5)[0]),
    ("scalar_numpy_int_index", lambda m: m.tensor(1.5)[np.int64(0)]),
    ("scalar_slice_index", lambda m: m.tensor(1.5)[:]),
    ("scalar_tuple_index", lambda m: m.tensor(1.5)[0,]),
    ("scalar_int_setitem", lambda m: m.tensor(1.5).__setitem__(0, 2.0)),
]


@pytest.mark.parametrize("fn", [e[1] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_like_torch(fn):
    raises_like_torch(fn)


def test_scatter_of_something_that_is_no_tensor_or_number_names_it():
    with pytest.raises(
        TypeError, match="scatter\\(\\): expected `src` to be a Tensor or `value` a number, but got str"
    ):
        bg.scatter(bg.zeros(2, 3), 1, bg.tensor([[0], [1]]), "x")


def test_view_as_another_dtype_says_it_is_not_supported():
    with pytest.raises(NotImplementedError, match="view\\(dtype\\)"):
        bg.zeros(4).view(bg.int32)
    with pytest.raises(TypeError, match="size must be a tuple of ints"):
        bg.zeros(4).view("a")
