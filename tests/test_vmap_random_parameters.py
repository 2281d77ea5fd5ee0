"""Samplers whose draws depend on their parameters' values (poisson, binomial, multinomial, _standard_gamma,
_sample_dirichlet) inside vmap.vmap: torch's numbers, drawn for all rows at once as torch's batching rules draw
them, where the parameters vary across the rows, are the same in every row, or sit in nested calls."""

import numpy as np
import pytest

import batched_grad as bg
import vmap

pytest.importorskip("torch")
import torch
import torch.func

from oracle import drawn_by_both, raises_like_torch

SAMPLERS = {
    "poisson": lambda m, t: m.poisson(t * 3),
    "binomial": lambda m, t: m.binomial(t * 0 + 20, t * 0.1 + 0.2),
    "binomial(broadcast count)": lambda m, t: m.binomial(m.full((5,), 12.0), t * 0.5),
    "multinomial": lambda m, t: m.multinomial(t + 0.5, 3),
    "multinomial(one sample)": lambda m, t: m.multinomial(t + 0.5, 1),
    "multinomial(replacement)": lambda m, t: m.multinomial(t + 0.5, 4, replacement=True),
    "_standard_gamma": lambda m, t: m._standard_gamma(t + 0.5),
    "_sample_dirichlet": lambda m, t: m._sample_dirichlet(t + 0.5),
}
# (shape of the mapped argument, its in_dims): one-row and matrix rows, the batch first, in the middle, last
MAPPED = {
    "vector rows": ((4, 5), 0),
    "rows on dim 1": ((5, 4), 1),
    "matrix rows": ((4, 3, 5), 0),
    "last": ((3, 5, 4), -1),
}


@pytest.mark.parametrize("mapped", MAPPED)
@pytest.mark.parametrize("case", SAMPLERS)
def test_different_randomness_draws_torchs_values_for_parameters_of_each_row(case, mapped):
    shape, in_dim = MAPPED[mapped]
    op = SAMPLERS[case]
    ours, theirs = drawn_by_both(
        lambda m, vmap_: vmap_(lambda t: op(m, t), in_dims=in_dim, randomness="different")(m.rand(*shape))
    )
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("randomness", ["same", "different"])
@pytest.mark.parametrize("case", SAMPLERS)
def test_parameters_the_same_in_every_row(case, randomness):
    op = SAMPLERS[case]
    ours, theirs = drawn_by_both(
        lambda m, vmap_: vmap_(lambda t, row: op(m, t), in_dims=(None, 0), randomness=randomness)(
            m.rand(3, 5), m.ones(4)
        )
    )
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("case", SAMPLERS)
def test_nested_different_calls_draw_for_both_levels_rows(case):
    op = SAMPLERS[case]

    def nested(m, vmap_):
        inner = vmap_(lambda t: op(m, t), randomness="different")
        return vmap_(inner, in_dims=1, randomness="different")(m.rand(3, 2, 5))

    ours, theirs = drawn_by_both(nested)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_a_compiled_function_still_refuses_to_read_a_rate():
    with pytest.raises(RuntimeError, match="reads a tensor's value while it is compiled"):
        bg.compile(lambda t: bg.poisson(t) + 1)(bg.ones(3))


def test_multinomial_checks_every_rows_distribution():
    with pytest.raises(RuntimeError, match="invalid multinomial distribution"):
        vmap.vmap(lambda t: bg.multinomial(t, 1), randomness="different")(bg.tensor([[1.0, 2.0], [0.0, 0.0]]))


OUT_VARIANTS = {
    "rand": lambda m, t, out: m.rand(3, out=out),
    "randn": lambda m, t, out: m.randn(3, out=out),
    "randint": lambda m, t, out: m.randint(5, (3,), out=out),
    "randperm": lambda m, t, out: m.randperm(3, out=out.long()),
    "normal(tensors)": lambda m, t, out: m.normal(t, out.abs(), out=out),
    "normal(size)": lambda m, t, out: m.normal(0.0, 1.0, (3,), out=out),
    "multinomial": lambda m, t, out: m.multinomial(out.abs() + 1, 2, out=m.empty(2, dtype=m.long)),
}


@pytest.mark.parametrize("randomness", ["error", "same", "different"])
@pytest.mark.parametrize("case", OUT_VARIANTS)
def test_out_variants_of_random_functions_are_refused_in_every_mode(case, randomness):
    def call(m):
        vmap_ = vmap.vmap if m is bg else torch.func.vmap
        out = m.ones(3)
        return vmap_(lambda t: OUT_VARIANTS[case](m, t, out), randomness=randomness)(m.ones(4, 3))

    raises_like_torch(call)


@pytest.mark.parametrize("randomness", ["error", "same", "different"])
@pytest.mark.parametrize("in_dims", [(None, 0), (None, -1)])
def test_bernoulli_in_place_of_an_unbatched_tensor_with_batched_probabilities(in_dims, randomness):
    """torch checks the randomness mode first, then refuses probabilities that vary where the filled tensor does
    not."""

    def call(m):
        vmap_ = vmap.vmap if m is bg else torch.func.vmap
        return vmap_(lambda t, p: t.bernoulli_(p), in_dims=in_dims, randomness=randomness)(m.ones(3), m.rand(3, 3))

    raises_like_torch(call)
