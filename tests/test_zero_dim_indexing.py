"""gather, scatter and the index_* ops with 0-dim operands and empty indices, against torch 2.13: torch sees a 0-dim
input, index or source as a 1-element vector (the result keeping the 0-dim shape), skips the shape checks of an empty
index, and checks an index_add / index_copy source against the input's shape with its own messages."""

import pytest
import torch

import batched_grad as bg
from oracle import check_op, raises_like_torch, rand


def _i(m, values):
    return m.tensor(values, dtype=m.int64)


# (id, fn(m, x, s) for a 0-dim or 1-d input x and source s as given by the shapes)
CASES = [
    ("gather_vector_scalar_index", (3,), (), lambda m, x, s: m.gather(x, 0, _i(m, 1)) * s),
    ("gather_scalar_vector_index", (), (), lambda m, x, s: m.gather(x, -1, _i(m, [0, 0])) * s),
    ("gather_scalar_scalar_index", (), (), lambda m, x, s: x.gather(0, _i(m, 0)) + s),
    ("gather_empty_index", (2, 3), (), lambda m, x, s: m.gather(x, 1, _i(m, [])) + s),
    ("take_along_dim_scalar_flat", (), (), lambda m, x, s: m.take_along_dim(x, _i(m, [0, 0])) * s),
    ("index_select_scalar", (), (), lambda m, x, s: m.index_select(x, 0, _i(m, 0)) * s),
    ("scatter_vector_scalar_index", (3,), (), lambda m, x, s: m.scatter(x, 0, _i(m, 1), s)),
    ("scatter_duplicates_vector", (3,), (2,), lambda m, x, s: m.scatter(x, 0, _i(m, [1, 1]), s)),
    ("scatter_scalar_vector_index", (), (2,), lambda m, x, s: m.scatter(x, 0, _i(m, [0, 0]), s)),
    ("scatter_value_scalar_index", (3,), (), lambda m, x, s: x.scatter(-1, _i(m, 2), 7.0) * s),
    ("scatter_empty_index", (2, 3), (1,), lambda m, x, s: m.scatter(x, 0, _i(m, []), s)),
    ("scatter_add_scalar_index", (3,), (), lambda m, x, s: m.scatter_add(x, 0, _i(m, 0), s)),
    ("scatter_reduce_prod_scalar", (), (2,), lambda m, x, s: m.scatter_reduce(x, 0, _i(m, [0, 0]), s, "prod")),
    ("scatter_reduce_amax_vector", (3,), (), lambda m, x, s: m.scatter_reduce(x, 0, _i(m, 1), s, "amax")),
    ("index_add_scalar", (), (), lambda m, x, s: m.index_add(x, 0, _i(m, 0), s, alpha=2)),
    ("index_copy_scalar_vector_source", (), (1,), lambda m, x, s: m.index_copy(x, 0, _i(m, [0]), s)),
    ("index_fill_scalar", (), (), lambda m, x, s: m.index_fill(x, 0, _i(m, [0, 0]), -1.0) * s),
]


@pytest.mark.parametrize("x_shape, s_shape, fn", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_zero_dim_operands_like_torch(x_shape, s_shape, fn):
    check_op(lambda x, s: fn(bg, x, s), lambda x, s: fn(torch, x, s), [rand(*x_shape), rand(*s_shape)], batched=False)


def test_scalar_index_into_a_longer_source_reads_its_first_element():
    # torch's own backward fails here (its src gradient comes back 0-dim), so the values alone are compared
    x, s = [1.0, 2.0, 3.0], [5.0, 6.0]
    got = bg.scatter(bg.tensor(x), 0, _i(bg, 2), bg.tensor(s))
    assert got.tolist() == torch.scatter(torch.tensor(x), 0, _i(torch, 2), torch.tensor(s)).tolist() == [1, 2, 5]


def test_zero_dim_gather_and_scatter_batched_grads():
    def fn(m, x, s):
        return m.gather(x, 0, _i(m, 1)) * m.scatter(x, 0, _i(m, 0), s).sum() + m.index_add(s, 0, _i(m, 0), s)

    check_op(lambda x, s: fn(bg, x, s), lambda x, s: fn(torch, x, s), [rand(3), rand()], gradgrad=False)


def T(m, *values):
    return m.tensor(values[0] if len(values) == 1 else list(values))


ERRORS = [
    ("index_select_scalar_two_indices", lambda m: m.index_select(T(m, 5.0), 0, _i(m, [0, 0]))),
    ("take_along_dim_scalar_dim", lambda m: m.take_along_dim(T(m, 5.0), _i(m, 0), -1)),
    ("scatter_scalar_src_two_indices", lambda m: m.scatter(T(m, 1.0, 2.0, 3.0), 0, _i(m, [0, 1]), T(m, 7.0))),
    ("scatter_src_fewer_dims", lambda m: m.scatter(m.zeros(2, 3), 0, m.zeros(1, 3, dtype=m.int64), m.ones(2))),
    ("scatter_src_more_dims", lambda m: m.scatter(m.zeros(2, 3), 0, m.zeros(1, 1, dtype=m.int64), m.ones(1, 1, 1))),
    (
        "scatter_reduce_src_too_small",
        lambda m: m.scatter_reduce(m.zeros(2, 3), 0, _i(m, [[0, 1]]), m.ones(1, 1), "sum"),
    ),
    ("scatter_reduce_scalar_src", lambda m: m.scatter_reduce(T(m, 1.0, 2.0), 0, _i(m, [0, 1]), T(m, 7.0), "sum")),
    ("index_add_vector_scalar_source", lambda m: m.index_add(T(m, 1.0, 2.0, 3.0), 0, _i(m, 1), T(m, 7.0))),
    ("index_add_scalar_source_two_indices", lambda m: m.index_add(T(m, 1.0, 2.0), 0, _i(m, [0, 1]), T(m, 7.0))),
    ("index_add_count", lambda m: m.index_add(T(m, 1.0, 2.0, 3.0), 0, _i(m, [1]), T(m, 7.0, 8.0))),
    ("index_add_scalar_vector_source", lambda m: m.index_add(T(m, 5.0), 0, _i(m, [0]), T(m, [7.0]))),
    ("index_add_slice_shape", lambda m: m.index_add(m.zeros(2, 3), 0, _i(m, [1]), m.ones(1, 2))),
    ("index_add_dim_of_scalar_source", lambda m: m.index_add(m.zeros(2, 3), 1, _i(m, [1]), T(m, 7.0))),
    ("index_copy_scalar_source_two_indices", lambda m: m.index_copy(T(m, 1.0, 2.0), 0, _i(m, [0, 1]), T(m, 7.0))),
    ("index_copy_count", lambda m: m.index_copy(T(m, 1.0, 2.0, 3.0), 0, _i(m, [1, 2]), T(m, [7.0]))),
    ("index_copy_dimensionality", lambda m: m.index_copy(m.zeros(2, 3), 0, _i(m, [1]), m.ones(3))),
    ("index_copy_slice_shape", lambda m: m.index_copy(m.zeros(2, 3, 4), 1, _i(m, [0]), m.zeros(1, 2, 2))),
    ("index_copy_scalar_source_of_matrix", lambda m: m.index_copy(m.zeros(2, 3), 1, _i(m, [1]), T(m, 7.0))),
]


@pytest.mark.parametrize("fn", [e[1] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_zero_dim_errors_like_torch(fn):
    raises_like_torch(fn)


@pytest.mark.parametrize("x_shape, index", [((4, 3), [[1, 0, 3], [2, 2, 0]]), ((), 0), ((3,), 2)])
def test_sparse_grad_gives_the_dense_gradient_values(x_shape, index):
    x = rand(*x_shape)
    t = torch.tensor(x.detach().numpy(), requires_grad=True)
    (bg.gather(x, 0, _i(bg, index), sparse_grad=True) ** 2).sum().backward()
    (torch.gather(t, 0, _i(torch, index), sparse_grad=True) ** 2).sum().backward()
    assert x.grad.to_dense() is x.grad
    assert x.grad.tolist() == t.grad.to_dense().tolist()


def test_to_dense_of_a_dense_tensor():
    x, t = bg.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    assert x.to_dense() is x and t.to_dense() is t and x.to_dense(masked_grad=True) is x
    y, u = x.to_dense(bg.float64), t.to_dense(torch.float64)
    assert y.dtype is bg.float64 and y.grad_fn.name() == u.grad_fn.name() == "ToCopyBackward0"
    raises_like_torch(lambda m: m.ones(2).to_dense(masked_grad=1))
    raises_like_torch(lambda m: m.gather(m.ones(2), 0, _i(m, [0]), sparse_grad=1))
