"""A seeded program draws torch's numbers: the default generator and Generator reproduce torch's CPU stream (its
Mersenne Twister, state layout and per-draw transformations), element for element."""

import numpy as np
import pytest
import torch

import batched_grad as bg

SEEDS = (0, 7, 2**40 + 3)
SIZES = (1, 7, 15, 16, 17, 33, 1000)
DTYPES = ("float32", "float64")


def _values(x):
    if isinstance(x, (list, tuple)):
        return [_values(v) for v in x]
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _same_draws(program, seed=0):
    """`program(lib)` run after lib.manual_seed(seed) with torch and with batched_grad: equal values, bit for bit."""
    results = []
    for lib in (torch, bg):
        lib.manual_seed(seed)
        results.append(_values(program(lib)))
    expected, got = results
    for e, g in zip(expected if isinstance(expected, list) else [expected], got if isinstance(got, list) else [got]):
        assert e.shape == g.shape and e.dtype == g.dtype
        np.testing.assert_array_equal(g, e)


FILLS = {
    "rand": lambda m, n, d: m.rand(n, dtype=d),
    "randn": lambda m, n, d: m.randn(n, dtype=d),
    "normal_(mean, std)": lambda m, n, d: m.empty(n, dtype=d).normal_(0.3, 1.7),
    "uniform_(a, b)": lambda m, n, d: m.empty(n, dtype=d).uniform_(-0.123, 0.456),
    "bernoulli_(p)": lambda m, n, d: m.empty(n, dtype=d).bernoulli_(0.3),
    "exponential_": lambda m, n, d: m.empty(n, dtype=d).exponential_(2.5),
    "cauchy_": lambda m, n, d: m.empty(n, dtype=d).cauchy_(0.3, 2.0),
    "log_normal_": lambda m, n, d: m.empty(n, dtype=d).log_normal_(0.3, 0.5),
    "geometric_": lambda m, n, d: m.empty(n, dtype=d).geometric_(0.3),
    "dropout": lambda m, n, d: m.nn.functional.dropout(m.ones(n, dtype=d) * 1.3, 0.3),
    "rand_like": lambda m, n, d: m.rand_like(m.zeros(n, dtype=d)),
    "randn_like": lambda m, n, d: m.randn_like(m.zeros(n, dtype=d)),
    "bernoulli(tensor)": lambda m, n, d: m.bernoulli(m.linspace(0, 1, n, dtype=d)),
    "normal(tensors)": lambda m, n, d: m.normal(m.zeros(n, dtype=d), m.ones(n, dtype=d) * 2),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fill", FILLS)
def test_floating_draws_are_torchs(fill, dtype, n, seed):
    _same_draws(lambda m: FILLS[fill](m, n, getattr(m, dtype)), seed)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ("complex64", "complex128"))
@pytest.mark.parametrize("fill", ("rand", "randn"))
def test_complex_draws_interleave_real_and_imaginary_parts_as_torchs(fill, dtype, n):
    _same_draws(lambda m: getattr(m, fill)(n, dtype=getattr(m, dtype)), seed=4)


INTEGER_DRAWS = {
    "randint small range": lambda m, n: m.randint(0, 10, (n,)),
    "randint range of 2**28 or more": lambda m, n: m.randint(-5, 2**40, (n,)),
    "randint just below 2**28": lambda m, n: m.randint(0, 2**28 - 1, (n,)),
    "randint int32": lambda m, n: m.randint(3, 2**30, (n,), dtype=m.int32),
    "randint_like": lambda m, n: m.randint_like(m.zeros(n), 5, 9),
    "random_() int64": lambda m, n: m.empty(n, dtype=m.int64).random_(),
    "random_() int32": lambda m, n: m.empty(n, dtype=m.int32).random_(),
    "random_() float32": lambda m, n: m.empty(n).random_(),
    "random_(to)": lambda m, n: m.empty(n, dtype=m.int64).random_(100),
    "randperm": lambda m, n: m.randperm(n),
    "multinomial with replacement": lambda m, n: m.multinomial(m.tensor([[0.1, 0.2, 0.7], [3.0, 1.0, 2.0]]), n, True),
    "multinomial of one sample": lambda m, n: m.multinomial(m.linspace(0.1, 1, n), 1),
    "multinomial without replacement": lambda m, n: m.multinomial(m.linspace(0.1, 1, n, dtype=m.float64), (n + 1) // 2),
    "poisson": lambda m, n: m.poisson(m.linspace(0, 40, n, dtype=m.float64)),
    "WeightedRandomSampler": lambda m, n: m.tensor(list(m.utils.data.WeightedRandomSampler([0.1, 0.5, 0.4], n))),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("draw", INTEGER_DRAWS)
def test_integer_draws_are_torchs(draw, n, seed):
    _same_draws(lambda m: INTEGER_DRAWS[draw](m, n), seed)


def test_draws_of_different_kinds_interleave_as_torchs():
    # the cached second Box-Muller value of a scalar normal draw carries over to the next one
    def program(m):
        return [
            m.randn(5),
            m.rand(3),
            m.randn(1, dtype=m.float64),
            m.randn(20),
            m.randn(3, 4),
            m.randint(0, 100, (4,)),
            m.randperm(9),
            m.empty(2, 8).normal_(),
            m.empty(7).bernoulli_(0.5),
            m.randn(1),
        ]

    for seed in SEEDS:
        _same_draws(program, seed)


def test_generators_give_torchs_streams_and_states():
    for seed in SEEDS:
        g, t = bg.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        np.testing.assert_array_equal(bg.randn(40, generator=g).numpy(), torch.randn(40, generator=t).numpy())
        bg.randn(3, generator=g), torch.randn(3, generator=t)  # leaves a cached normal value
        np.testing.assert_array_equal(g.get_state().numpy(), t.get_state().numpy())
        assert g.initial_seed() == t.initial_seed() == seed
    np.testing.assert_array_equal(bg.Generator().get_state().numpy(), torch.Generator().get_state().numpy())


def test_states_round_trip_between_the_libraries():
    torch.manual_seed(3)
    torch.rand(700)
    torch.randn(1)  # a cached normal value travels in the state
    state = torch.get_rng_state()
    bg.set_rng_state(bg.tensor(state.numpy()))
    np.testing.assert_array_equal(bg.get_rng_state().numpy(), state.numpy())
    assert bg.initial_seed() == 3
    np.testing.assert_array_equal(bg.randn(5).numpy(), torch.randn(5).numpy())
    np.testing.assert_array_equal(bg.rand(30).numpy(), torch.rand(30).numpy())
    back = bg.get_rng_state()
    torch.set_rng_state(torch.from_numpy(back.numpy().copy()))
    np.testing.assert_array_equal(bg.randn(17).numpy(), torch.randn(17).numpy())


def test_a_state_restored_replays_the_same_draws():
    g = bg.Generator().manual_seed(5)
    bg.randn(3, generator=g)
    state = g.get_state()
    first = [bg.randn(3, generator=g).numpy(), bg.randperm(10, generator=g).numpy()]
    g.set_state(state)
    np.testing.assert_array_equal(bg.randn(3, generator=g).numpy(), first[0])
    np.testing.assert_array_equal(bg.randperm(10, generator=g).numpy(), first[1])


INITS = {
    "Linear": lambda m: list(m.nn.Linear(13, 7).parameters()),
    "Conv2d": lambda m: list(m.nn.Conv2d(3, 5, 3).parameters()),
    "kaiming_normal_": lambda m: m.nn.init.kaiming_normal_(m.empty(30, 20)),
    "xavier_uniform_": lambda m: m.nn.init.xavier_uniform_(m.empty(30, 20)),
    "xavier_normal_ float64": lambda m: m.nn.init.xavier_normal_(m.empty(9, 4, dtype=m.float64)),
    "normal_": lambda m: m.nn.init.normal_(m.empty(5, 3), 0.2, 0.1),
    "trunc_normal_": lambda m: m.nn.init.trunc_normal_(m.empty(40)),
    "trunc_normal_ narrow (rejection of uniforms)": lambda m: m.nn.init.trunc_normal_(m.empty(40), a=1.5, b=3.0),
}


@pytest.mark.parametrize("init", INITS)
def test_initializers_fill_torchs_values(init):
    _same_draws(INITS[init], seed=1)


def test_a_seeded_training_script_prints_torchs_losses():
    def script(m):
        m.manual_seed(0)
        x = m.randn(64, 5)
        y = (x @ m.randn(5, 1) + 0.1 * m.randn(64, 1)).squeeze(1)
        data = m.utils.data.DataLoader(m.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True)
        model = m.nn.Sequential(m.nn.Linear(5, 8), m.nn.ReLU(), m.nn.Dropout(0.2), m.nn.Linear(8, 1))
        opt = m.optim.SGD(model.parameters(), lr=0.05)
        losses = []
        for _ in range(3):
            for xb, yb in data:
                loss = m.nn.functional.mse_loss(model(xb).squeeze(1), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses

    expected, got = script(torch), script(bg)
    np.testing.assert_allclose(got, expected, rtol=1e-5)  # the arithmetic may round differently; the draws do not


def test_rrelu_draws_torchs_slopes_for_non_positive_inputs():
    results = []
    for m in (torch, bg):
        m.manual_seed(5)
        results.append(m.nn.functional.rrelu(-m.linspace(0.1, 3, 50), training=True).numpy())
    np.testing.assert_array_max_ulp(results[1], results[0], maxulp=2)  # torch multiplies by the double slope


def test_the_float32_fused_multiply_add_rounds_once():
    from batched_grad._simd_math import fma

    # (1 + 2**-12)**2 = 1 + 2**-11 + 2**-24 lies halfway between two float32s; a tiny addend decides the side,
    # which the float64 sum alone loses
    x = np.float32(1 + 2**-12)
    got = fma(np.full(3, x), x, np.array([2**-60, -(2**-60), 0.0], np.float32))
    np.testing.assert_array_equal(got - 1, np.array([2**-11 + 2**-23, 2**-11, 2**-11], np.float32))


@pytest.mark.parametrize(
    "view",
    [
        lambda lib, x: x.t(),  # a transpose: the mask runs through the storage, not the logical order
        lambda lib, x: x.reshape(2, 3, 4).permute(2, 0, 1),
        lambda lib, x: x[:, ::2],  # gaps: torch's empty_like makes a row-major mask
        lambda lib, x: x.reshape(2, 12).transpose(0, 1)[:, :1],  # a column of a transpose: one element apart
    ],
    ids=["transpose", "permute", "strided_slice", "column"],
)
def test_dropout_of_a_permuted_view_draws_its_mask_in_storage_order(view):
    """torch's dropout fills a mask made by empty_like, which keeps a dense permuted layout: the draws follow the
    storage (a batch_first attention output, a transpose, is one such input)."""
    _same_draws(lambda lib: lib.nn.functional.dropout(view(lib, lib.arange(24.0).reshape(6, 4)), 0.4))


@pytest.mark.parametrize(
    "fill",
    [
        lambda v: v.uniform_(-1, 1),
        lambda v: v.bernoulli_(0.3),
        lambda v: v.exponential_(2.0),
        lambda v: v.random_(0, 9),
    ],
    ids=["uniform_", "bernoulli_", "exponential_", "random_"],
)
def test_an_in_place_fill_of_a_transposed_view_runs_through_the_storage(fill):
    """torch fills a view in the order of its memory: the base holds the same draws as a fill of the base itself."""

    def program(lib):
        base = lib.zeros(3, 5)
        fill(base.t())
        return base

    _same_draws(program)
