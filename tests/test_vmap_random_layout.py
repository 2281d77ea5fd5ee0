"""Draws that fill a tensor's storage follow torch's storage order: an in-place fill or a *_like factory of a
permuted or strided view, and under vmap.vmap(randomness="different") a mapped argument whose rows are not its
first dim (torch's batching rule fills the caller's tensor as it lies in memory)."""

import numpy as np
import pytest

pytest.importorskip("torch")

from oracle import drawn_by_both

FILLS = {
    "uniform_": lambda m, t: t.uniform_(),
    "normal_": lambda m, t: t.normal_(),
    "log_normal_": lambda m, t: t.log_normal_(),
    "random_": lambda m, t: t.random_(-5, 100),
    "bernoulli_(0.3)": lambda m, t: t.bernoulli_(0.3),
    "bernoulli_(tensor)": lambda m, t: t.bernoulli_(m.full(t.shape, 0.4)),
    "exponential_": lambda m, t: t.exponential_(),
    "cauchy_": lambda m, t: t.cauchy_(),
    "geometric_": lambda m, t: t.geometric_(0.3),
}
LIKES = {
    "rand_like": lambda m, t: m.rand_like(t),
    "randn_like": lambda m, t: m.randn_like(t),
    "randint_like": lambda m, t: m.randint_like(t, 3, 50),
    "randn_like(complex64)": lambda m, t: m.randn_like(t, dtype=m.complex64),
    "rand_like(contiguous_format)": lambda m, t: m.rand_like(t, memory_format=m.contiguous_format),
}


@pytest.mark.parametrize("in_dim", [-1, 1])
@pytest.mark.parametrize("case", {**FILLS, **LIKES})
def test_different_draws_follow_the_mapped_arguments_storage(case, in_dim):
    op = {**FILLS, **LIKES}[case]
    ours, theirs = drawn_by_both(
        lambda m, vmap_: vmap_(lambda t: op(m, t), in_dims=in_dim, randomness="different")(m.ones(3, 4, 6))
    )
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("case", FILLS)
@pytest.mark.parametrize("view", ["row", "transposed row"])
def test_same_draws_fill_a_row_major_row(case, view):
    def row(t):
        return t if view == "row" else t.t()

    ours, theirs = drawn_by_both(
        lambda m, vmap_: vmap_(lambda t: FILLS[case](m, row(t)), in_dims=-1, randomness="same")(m.ones(3, 6, 4))
    )
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


VIEWS = {
    "transposed": lambda m: m.ones(6, 8).t(),
    "permuted, small": lambda m: m.ones(3, 4).t(),
    "every other column": lambda m: m.ones(6, 8)[:, ::2],
    "every other column, transposed": lambda m: m.ones(6, 8)[:, ::2].t(),
}


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("case", {**FILLS, **LIKES})
def test_draws_for_a_view_run_through_torchs_storage(case, view):
    """normal_ of a view that is not contiguous is torch's element-by-element algorithm; a *_like of a permuted
    view keeps its layout, of a strided one is row-major."""
    op = {**FILLS, **LIKES}[case]
    ours, theirs = drawn_by_both(lambda m, vmap_: op(m, VIEWS[view](m)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


ROW_VIEWS = {"transposed": lambda t: t.t(), "first row": lambda t: t[0], "every other column": lambda t: t[:, ::2]}


@pytest.mark.parametrize("in_dim", [0, 1, -1])
@pytest.mark.parametrize("view", ROW_VIEWS)
@pytest.mark.parametrize("case", ["uniform_", "normal_", "rand_like", "randn_like"])
def test_different_draws_for_a_view_of_a_mapped_argument_follow_its_storage(case, view, in_dim):
    op = {**FILLS, **LIKES}[case]
    ours, theirs = drawn_by_both(
        lambda m, vmap_: vmap_(lambda t: op(m, ROW_VIEWS[view](t)), in_dims=in_dim, randomness="different")(
            m.ones(3, 4, 6)
        )
    )
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


BROADCAST = {
    "rows repeated": lambda m: m.ones(1, 8).expand(6, 8),
    "columns repeated": lambda m: m.ones(6, 1).expand(6, 8),
}


@pytest.mark.parametrize("view", BROADCAST)
@pytest.mark.parametrize("case", LIKES)
def test_likes_of_a_broadcast_view_are_row_major(case, view):
    """A broadcast dim has no place in the storage order (torch's TensorIterator leaves it where it is)."""
    ours, theirs = drawn_by_both(lambda m, vmap_: LIKES[case](m, BROADCAST[view](m)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("case", [*LIKES, "multinomial"])
def test_different_draws_like_an_unmapped_tensor(case):
    """torch's rule expands a tensor that is the same in every row to the batch: its draws are row-major."""
    op = LIKES.get(case, lambda m, t: m.multinomial(t.flatten(), 3))
    ours, theirs = drawn_by_both(
        lambda m, vmap_: vmap_(lambda t, row: op(m, t), in_dims=(None, 0), randomness="different")(
            m.ones(4, 6), m.ones(3)
        )
    )
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
