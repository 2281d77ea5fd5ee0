"""vmap.vmap's randomness modes against torch.func.vmap's: "error" refuses random draws (at any level of nested
vmaps), "same" draws once for every row, "different" draws for each row its own values, vectorized or traced, in
chunks, nested, through in-place fills, and seen again by a backward through the results."""

import numpy as np
import pytest

import batched_grad as bg
import vmap

pytest.importorskip("torch")
import torch
import torch.func
from torch.utils._pytree import tree_leaves, tree_structure

from oracle import assert_same

LIBRARIES = {"bg": (bg, vmap.vmap), "torch": (torch, torch.func.vmap)}


def rows_distinct(out):
    flat = out.reshape(out.shape[0], -1)
    return len({tuple(r) for r in flat.tolist()}) == out.shape[0]


def read_values(m, t):
    """An op that reads a row's values (a batched_grad vmap then runs the function traced, not deferred)."""
    return m.normal(t, t.abs() + 1.0)


DRAWS = {
    "rand": lambda m, t: t + m.rand(16),
    "randn of a row's shape": lambda m, t: t + m.randn(t.shape),
    "randn_like": lambda m, t: m.randn_like(t),
    "randint": lambda m, t: m.randint(0, 1000, (16,)) + t.long(),
    "normal(mean=row)": lambda m, t: m.normal(t, 1.0),
    "bernoulli(row)": lambda m, t: m.bernoulli(t * 0 + 0.5),
    "dropout": lambda m, t: m.nn.functional.dropout(t + 1, 0.5),
    "rrelu (torch cannot vmap it)": lambda m, t: m.nn.functional.rrelu(t - 1, training=True),
    "normal_ of a row": lambda m, t: t.clone().normal_(),
    "uniform_ of a row": lambda m, t: (t * 1).uniform_(),
    "traced": lambda m, t: read_values(m, t),
    "randperm": lambda m, t: m.randperm(5),
    "multinomial": lambda m, t: m.multinomial(m.ones(6), 3),
}


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("case", DRAWS)
def test_different_draws_each_rows_own_values_and_same_one_draw(lib, case):
    m, vmap_ = LIBRARIES[lib]
    if lib == "torch" and "torch cannot" in case:
        pytest.skip("torch.func.vmap has no batching rule for it")
    m.manual_seed(3)
    x = m.zeros(6, 16)
    different = vmap_(lambda t: DRAWS[case](m, t), randomness="different")(x).numpy()
    assert different.shape[0] == 6 and rows_distinct(different)
    if case in ("bernoulli(row)", "normal(mean=row)", "traced"):  # torch: no "same" draws from a batched input
        return
    same = vmap_(lambda t: DRAWS[case](m, t), randomness="same")(x).numpy()
    np.testing.assert_array_equal(same, np.broadcast_to(same[0], same.shape))


def test_draws_follow_their_distribution_and_the_seed():
    x = bg.zeros(2000)

    def draw():
        return vmap.vmap(lambda t: (bg.rand(()), bg.randn(()) + t, bg.randperm(4)), randomness="different")(x)

    bg.manual_seed(7)
    uniform, normal, perms = draw()
    assert 0 <= uniform.min().item() and uniform.max().item() < 1 and abs(uniform.mean().item() - 0.5) < 0.03
    assert abs(normal.mean().item()) < 0.1 and abs(normal.std().item() - 1) < 0.1
    assert (perms.sort(1).values == bg.arange(4)).all().item()
    bg.manual_seed(7)
    again = draw()
    for a, b in zip((uniform, normal, perms), again):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("chunk_size", [None, 1, 2, 4])
def test_chunks_traced_and_deferred_rows_all_differ(chunk_size):
    x = bg.zeros(5, 3)
    for f in (lambda t: t + bg.rand(3), lambda t: read_values(bg, t)):
        out = vmap.vmap(f, randomness="different", chunk_size=chunk_size)(x).numpy()
        assert rows_distinct(out)


@pytest.mark.parametrize("lib", LIBRARIES)
def test_nested_levels_differ_only_where_different(lib):
    m, vmap_ = LIBRARIES[lib]
    x = m.zeros(3, 4)

    def nested(outer, inner):
        return vmap_(vmap_(lambda t: t + m.rand(()), randomness=inner), randomness=outer)(x).numpy()

    both = nested("different", "different")
    assert len(np.unique(both)) == both.size
    outer_only = nested("different", "same")
    assert (outer_only == outer_only[:, :1]).all() and len(np.unique(outer_only[:, 0])) == 3
    inner_only = nested("same", "different")
    assert (inner_only == inner_only[:1]).all() and len(np.unique(inner_only[0])) == 4


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("outer, inner", [("error", "different"), ("different", "error"), ("same", "error")])
def test_error_at_any_level_refuses_a_draw(lib, outer, inner):
    m, vmap_ = LIBRARIES[lib]
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        vmap_(vmap_(lambda t: t + m.rand(()), randomness=inner), randomness=outer)(m.zeros(2, 3))


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("fill", ["normal_", "uniform_", "bernoulli_", "exponential_"])
def test_filling_an_unbatched_tensor_with_different_draws_raises_torchs_error(lib, fill):
    m, vmap_ = LIBRARIES[lib]
    with pytest.raises(RuntimeError, match="Cannot ask for different inplace randomness on an unbatched tensor"):
        vmap_(lambda t: getattr(m.zeros(3), fill)(), randomness="different")(m.zeros(4, 3))


def test_a_backward_through_the_results_sees_the_forwards_draws():
    w = bg.tensor([[0.3, -0.2, 0.5], [0.1, 0.4, -0.6]], requires_grad=True)
    x = bg.linspace(-1, 1, 12).reshape(4, 3)
    out, noise = vmap.vmap(lambda r: (bg.tanh(w @ r) * (noise := bg.rand(2)), noise), randomness="different")(x)
    assert rows_distinct(noise.numpy())
    (g,) = bg.autograd.grad(out.sum(), w)
    pre = x @ w.detach().T
    expected = ((1 - bg.tanh(pre) ** 2) * noise).T @ x
    np.testing.assert_allclose(g.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)  # a sum that nearly cancels


def test_per_sample_gradients_with_dropout_use_each_samples_mask():
    w = bg.linspace(-1, 2, 16)
    xs = bg.linspace(0.5, 2, 128).reshape(8, 16)

    def grad_and_mask(x):
        mask = bg.nn.functional.dropout(bg.ones(16), 0.5)
        g = bg.func.grad(lambda w_: ((w_ * mask) @ x) ** 2)(w)
        return g, mask

    grads, masks = vmap.vmap(grad_and_mask, randomness="different")(xs)
    assert rows_distinct(masks.numpy())
    expected = 2 * ((w * masks * xs).sum(1, keepdim=True)) * masks * xs
    np.testing.assert_allclose(grads.numpy(), expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize("lib", LIBRARIES)
def test_jacfwd_different_draws_per_column_and_same_once(lib):
    m = LIBRARIES[lib][0]
    x = m.ones(6, dtype=m.float64)

    def jac(randomness):
        return m.func.jacfwd(lambda v: v.sum() * m.rand((), dtype=m.float64), randomness=randomness)(x).numpy()

    assert len(np.unique(jac("different"))) == 6
    assert len(np.unique(jac("same"))) == 1


@pytest.mark.parametrize("has_aux", [False, True])
def test_jacfwd_different_structures_the_jacobian_and_aux_as_torch(has_aux):
    def run(m):
        x, y = m.linspace(-1, 1, 3, dtype=m.float64), m.linspace(0, 1, 4, dtype=m.float64).reshape(2, 2)

        def f(a, b):
            out = {"p": (a[:2] * b).sin(), "s": (a**3).sum() + b.sum()}
            return (out, [a * 2, b.exp()]) if has_aux else out

        return m.func.jacfwd(f, argnums=(0, 1), has_aux=has_aux, randomness="different")(x, y)

    ours, theirs = run(bg), run(torch)
    assert str(tree_structure(ours)) == str(tree_structure(theirs))
    assert_same(tuple(tree_leaves(ours)), tuple(tree_leaves(theirs)), rtol=1e-12, atol=1e-14)


FILLS = {
    "bernoulli_": lambda t: t.bernoulli_(0.5),
    "bernoulli_(row)": lambda t: t.bernoulli_(t * 0 + 0.3),
    "uniform_": lambda t: t.uniform_(),
    "normal_": lambda t: t.normal_(),
    "random_": lambda t: t.random_(0, 10),
    "exponential_": lambda t: t.exponential_(),
}


@pytest.mark.parametrize("case", FILLS)
def test_in_place_fills_of_the_mapped_rows_draw_torchs_values(case):
    """An in-place fill of the mapped argument (a function batched_grad runs again, traced) draws what one fill of
    the whole batch draws, as torch's vmap does: the first run's draws are not drawn twice."""

    def drawn(m, vmap_):
        m.manual_seed(11)
        return vmap_(FILLS[case], randomness="different")(m.ones(4, 5)).numpy()

    np.testing.assert_array_equal(drawn(bg, vmap.vmap), drawn(torch, torch.func.vmap))


PARAMETRIZED = {
    "normal(mean=row)": lambda m, t: m.normal(t, 1.0),
    "normal(std=row)": lambda m, t: m.normal(0.0, t + 1),
    "bernoulli(row)": lambda m, t: m.bernoulli(t),
    "bernoulli_(p=row)": lambda m, t: m.zeros(3).bernoulli_(t),
    "poisson(row)": lambda m, t: m.poisson(t),
    "multinomial(row)": lambda m, t: m.multinomial(t, 2),
    "binomial(rows)": lambda m, t: m.binomial(t * 5, t),
}


@pytest.mark.parametrize("case", PARAMETRIZED)
def test_same_randomness_refuses_parameters_that_vary_across_the_rows_as_torch(case):
    from oracle import raises_like_torch

    def same(m):
        vmap_ = vmap.vmap if m is bg else torch.func.vmap
        return vmap_(lambda t: PARAMETRIZED[case](m, t), randomness="same")(m.rand(4, 3))

    raises_like_torch(same)


@pytest.mark.parametrize("randomness", ["same", "different"])
@pytest.mark.parametrize("chunk_size", [1, 3, 7])
def test_chunks_that_leave_a_remainder_draw_what_one_pass_draws(randomness, chunk_size):
    """Nested vmaps whose outer one runs 4 rows in chunks of 3 (the last chunk traced on its own): every row draws
    what it draws without chunks, as torch's."""

    def f(t):
        return t.sin() + bg.rand_like(t)

    bg.manual_seed(2)
    x = bg.randn(4, 5, 6)
    state = bg.get_rng_state()
    whole = vmap.vmap(vmap.vmap(f, randomness=randomness), randomness=randomness)(x)
    bg.set_rng_state(state)
    inner = vmap.vmap(f, randomness=randomness)
    chunked = vmap.vmap(inner, randomness=randomness, chunk_size=chunk_size)(x)
    np.testing.assert_array_equal(chunked.numpy(), whole.numpy())
