"""F.embedding_bag and nn.EmbeddingBag against torch: each input form and mode, padding, empty bags, per-sample
weights, max_norm's in-place renormalization, gradients to the table and the weights (first and second order,
is_grads_batched), vmap over bags of indices, the module's construction and torch's errors."""

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _host
from oracle import assert_same, check_both, raises_like_torch, rand, to_torch

F = lambda m: m.nn.functional  # noqa: E731
TOKENS = [4, 0, 2, 2, 7, 1, 0, 5, 3, 2]  # repeats within a bag: max mode's ties between copies of one row


def _bag(m, mode, offsets=(0, 3, 3, 6), **kw):
    return lambda w: F(m).embedding_bag(m.tensor(TOKENS), w, m.tensor(list(offsets)), mode=mode, **kw)


CASES = {  # name: (fn(module, *inputs), inputs)
    "mean_offsets_empty_bag": (lambda m, w: _bag(m, "mean")(w), [rand(8, 3)]),
    "sum_offsets": (lambda m, w: _bag(m, "sum")(w), [rand(8, 3)]),
    "max_offsets_ties": (lambda m, w: _bag(m, "max")(w), [rand(8, 3)]),
    "sum_last_offset_closes": (lambda m, w: _bag(m, "sum", (0, 2, 2, 10), include_last_offset=True)(w), [rand(8, 3)]),
    "mean_last_offset_at_end": (lambda m, w: _bag(m, "mean", (0, 4, 10), include_last_offset=True)(w), [rand(8, 3)]),
    "mean_padding": (lambda m, w: _bag(m, "mean", padding_idx=2)(w), [rand(8, 3)]),
    "sum_padding_negative": (lambda m, w: _bag(m, "sum", padding_idx=-1)(w), [rand(8, 3)]),
    "max_padding_only_bag": (lambda m, w: _bag(m, "max", (0, 2, 4), padding_idx=2)(w), [rand(8, 3)]),
    "sum_per_sample_weights": (
        lambda m, w, p: _bag(m, "sum", per_sample_weights=p)(w),
        [rand(8, 3), rand(len(TOKENS), seed=1)],
    ),
    "sum_per_sample_weights_padding": (
        lambda m, w, p: _bag(m, "sum", per_sample_weights=p, padding_idx=0)(w),
        [rand(8, 3), rand(len(TOKENS), seed=1)],
    ),
    "rows_2d_mean": (lambda m, w: F(m).embedding_bag(m.tensor([[1, 2, 2], [0, 7, 3]]), w), [rand(8, 3)]),
    "rows_2d_max": (
        lambda m, w: F(m).embedding_bag(m.tensor([[1, 2, 2], [0, 7, 3]]), w, mode="max"),
        [rand(8, 3)],
    ),
    "rows_2d_per_sample_weights": (
        lambda m, w, p: F(m).embedding_bag(m.tensor([[1, 2, 4], [0, 7, 3]]), w, mode="sum", per_sample_weights=p),
        [rand(8, 3), rand(2, 3, seed=2)],
    ),
    "int32_indices": (
        lambda m, w: F(m).embedding_bag(m.tensor([3, 1, 1], dtype=m.int32), w, m.tensor([0, 1], dtype=m.int32)),
        [rand(4, 2)],
    ),
    "empty_input": (
        lambda m, w: F(m).embedding_bag(m.tensor([], dtype=m.int64), w, m.tensor([0, 0]), mode="sum"),
        [rand(4, 2)],
    ),
}


@pytest.mark.parametrize("tier", ["host", pytest.param("kernel", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(CASES))
def test_embedding_bag_matches_torch_with_grad_and_double_backward(name, tier, monkeypatch):
    if tier == "kernel":  # the JAX form, which the NumPy host form stands in for on small CPU operands
        monkeypatch.setattr(_host, "HOST_ELEMENTS", 0)
    fn, inputs = CASES[name]
    # torch has no second derivative through the per-sample weights' gradient (ours is JAX's)
    check_both(fn, inputs, gradgrad=len(inputs) == 1, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["max_offsets_ties", "sum_per_sample_weights_padding", "mean_padding"])
def test_embedding_bag_batched_grads_equal_the_per_row_loop(name):
    fn, inputs = CASES[name]
    check_both(fn, inputs, batched=True, gradgrad=len(inputs) == 1, rtol=1e-9, atol=1e-12)


def test_float32_sums_and_means_agree_with_torch():
    w = np.random.default_rng(3).standard_normal((50, 16)).astype(np.float32)
    tokens = np.random.default_rng(4).integers(0, 50, 200)
    offsets = [0, 17, 17, 90, 150]
    for mode in ("sum", "mean", "max"):
        got = F(bg).embedding_bag(bg.tensor(tokens), bg.tensor(w), bg.tensor(offsets), mode=mode)
        want = F(torch).embedding_bag(torch.tensor(tokens), torch.tensor(w), torch.tensor(offsets), mode=mode)
        assert_same(got, want, rtol=1e-5, atol=1e-6)


def test_a_new_bag_layout_compiles_nothing_on_the_host():
    w = rand(6, 3, seed=8)
    rng = np.random.default_rng(9)
    F(bg).embedding_bag(bg.tensor([0, 1]), w, bg.tensor([0]), mode="max").sum().backward()
    before = bg.compile_count()
    for n in (5, 9, 13):
        tokens, offsets = rng.integers(0, 6, n), [0, n // 3, n // 2]
        for mode in ("sum", "mean", "max"):
            got = F(bg).embedding_bag(bg.tensor(tokens), w, bg.tensor(offsets), mode=mode)
            want = F(torch).embedding_bag(torch.tensor(tokens), to_torch(w), torch.tensor(offsets), mode=mode)
            assert_same(got, want, rtol=1e-12, atol=1e-12)
            got.sum().backward()
    if jax.default_backend() == "cpu":
        assert bg.compile_count() == before


def test_vmap_over_bags_of_indices_equals_the_loop():
    w = rand(8, 3, seed=5)
    batches = bg.tensor([[1, 2, 2, 5], [0, 0, 7, 3], [6, 1, 4, 4]])
    offsets = bg.tensor([0, 1, 1])

    def pooled(tokens):
        return F(bg).embedding_bag(tokens, w, offsets, mode="max").sum(1)

    mapped = bg.func.vmap(pooled)(batches)
    looped = bg.stack([pooled(row) for row in batches])
    assert_same(mapped, looped, rtol=0, atol=0)
    grads = bg.func.vmap(bg.func.grad(lambda w, t: F(bg).embedding_bag(t, w, offsets).sum()), (None, 0))(w, batches)
    t_w = to_torch(w)
    for row, g in zip(batches.tolist(), grads):
        t_g = torch.autograd.grad(F(torch).embedding_bag(torch.tensor(row), t_w, torch.tensor([0, 1, 1])).sum(), t_w)
        assert_same(g, t_g[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_max_norm_renormalizes_the_looked_up_rows_in_place(mode):
    a = np.random.default_rng(6).uniform(-2, 2, (6, 4))
    tokens, offsets = [0, 3, 3, 5], [0, 2]
    bag, t_bag = (
        m.nn.EmbeddingBag.from_pretrained(m.tensor(a), freeze=False, max_norm=1.5, norm_type=3.0, mode=mode)
        for m in (bg, torch)
    )
    out = bag(bg.tensor(tokens), bg.tensor(offsets))
    t_out = t_bag(torch.tensor(tokens), torch.tensor(offsets))
    assert_same(out, t_out, rtol=1e-12, atol=1e-12)
    assert_same(bag.weight, t_bag.weight.detach(), rtol=1e-12, atol=1e-12)
    out.sum().backward()
    t_out.sum().backward()
    assert_same(bag.weight.grad, t_bag.weight.grad, rtol=1e-12, atol=1e-12)


def test_embedding_max_norm_and_embedding_renorm_match_torch():
    a = np.random.default_rng(7).uniform(-2, 2, (5, 3))
    w, t_w = bg.tensor(a), torch.tensor(a)
    assert_same(
        F(bg).embedding(bg.tensor([[4, 1], [1, 0]]), w, max_norm=1.0),
        F(torch).embedding(torch.tensor([[4, 1], [1, 0]]), t_w, max_norm=1.0),
    )
    assert_same(w, t_w)
    bg.embedding_renorm_(w, bg.tensor([2, 3]), 0.5, float("inf"))
    torch.embedding_renorm_(t_w, torch.tensor([2, 3]), 0.5, float("inf"))
    assert_same(w, t_w)
    raises_like_torch(lambda m: m.embedding_renorm_(m.ones(3, 2, requires_grad=True), m.tensor([0]), 0.5, 2.0))


def test_module_trains_like_torch_and_prints_like_torch():
    bg.manual_seed(0)
    bag = bg.nn.EmbeddingBag(10, 4, mode="sum", padding_idx=-2, include_last_offset=True)
    t_bag = torch.nn.EmbeddingBag(10, 4, mode="sum", padding_idx=-2, include_last_offset=True)
    with torch.no_grad():
        t_bag.weight.copy_(torch.from_numpy(bag.weight.detach().numpy()))
    assert repr(bag) == repr(t_bag)
    assert bag.padding_idx == 8 and np.all(bag.weight.detach().numpy()[8] == 0)
    tokens, offsets, p = [1, 8, 3, 3, 9], [0, 3, 5], np.linspace(0.5, 1.5, 5)
    for _ in range(2):
        loss = bag(bg.tensor(tokens), bg.tensor(offsets), bg.tensor(p, dtype=bg.float32)).square().sum()
        t_loss = t_bag(torch.tensor(tokens), torch.tensor(offsets), torch.tensor(p, dtype=torch.float32)).square().sum()
        loss.backward()
        t_loss.backward()
        assert_same(bag.weight.grad, t_bag.weight.grad, rtol=1e-5, atol=1e-6)
        with bg.no_grad(), torch.no_grad():
            bag.weight -= 0.1 * bag.weight.grad
            t_bag.weight -= 0.1 * t_bag.weight.grad
    assert_same(bag.weight, t_bag.weight.detach(), rtol=1e-5, atol=1e-6)
    assert repr(bg.nn.EmbeddingBag(3, 2, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True)) == repr(
        torch.nn.EmbeddingBag(3, 2, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True)
    )


def test_from_pretrained_freezes_like_torch():
    a = bg.tensor([[1.0, 2.3, 3.0], [4.0, 5.1, 6.3]])
    for freeze in (True, False):
        bag = bg.nn.EmbeddingBag.from_pretrained(a, freeze=freeze)
        emb = bg.nn.Embedding.from_pretrained(a, freeze=freeze, padding_idx=0)
        assert bag.weight.requires_grad is emb.weight.requires_grad is (not freeze)
    t_out = torch.nn.EmbeddingBag.from_pretrained(to_torch(a))(torch.tensor([[1, 0]]))
    assert_same(bg.nn.EmbeddingBag.from_pretrained(a)(bg.tensor([[1, 0]])), t_out)
    raises_like_torch(lambda m: m.nn.EmbeddingBag.from_pretrained(m.ones(3)))
    raises_like_torch(lambda m: m.nn.EmbeddingBag(3, 2, padding_idx=3))


ERRORS = {
    "offsets_with_2d": lambda m: F(m).embedding_bag(m.tensor([[0, 1]]), m.ones(3, 2), [0]),
    "no_offsets": lambda m: F(m).embedding_bag(m.tensor([0, 1]), m.ones(3, 2)),
    "offsets_2d": lambda m: F(m).embedding_bag(m.tensor([0, 1]), m.ones(3, 2), m.tensor([[0]])),
    "input_3d": lambda m: F(m).embedding_bag(m.zeros(1, 1, 1, dtype=m.int64), m.ones(3, 2)),
    "weight_1d": lambda m: F(m).embedding_bag(m.tensor([0, 1]), m.ones(3), m.tensor([0])),
    "mode": lambda m: F(m).embedding_bag(m.tensor([0, 1]), m.ones(3, 2), m.tensor([0]), mode="min"),
    "max_scale": lambda m: F(m).embedding_bag(m.tensor([0]), m.ones(3, 2), m.tensor([0]), 1, 2, True, "max"),
    "max_sparse": lambda m: F(m).embedding_bag(m.tensor([0]), m.ones(3, 2), m.tensor([0]), mode="max", sparse=True),
    "weights_mean": lambda m: F(m).embedding_bag(
        m.tensor([0]), m.ones(3, 2), m.tensor([0]), per_sample_weights=m.ones(1)
    ),
    "weights_shape": lambda m: F(m).embedding_bag(
        m.tensor([0, 1]), m.ones(3, 2), m.tensor([0]), mode="sum", per_sample_weights=m.ones(3)
    ),
    "weights_dtype": lambda m: F(m).embedding_bag(
        m.tensor([0]), m.ones(3, 2), m.tensor([0]), mode="sum", per_sample_weights=m.ones(1, dtype=m.float64)
    ),
    "first_offset": lambda m: F(m).embedding_bag(m.tensor([0, 1]), m.ones(3, 2), m.tensor([1])),
    "last_offset": lambda m: F(m).embedding_bag(m.tensor([0, 1]), m.ones(3, 2), m.tensor([0, 3])),
    "index_range": lambda m: F(m).embedding_bag(m.tensor([0, 3]), m.ones(3, 2), m.tensor([0])),
    "negative_index": lambda m: F(m).embedding_bag(m.tensor([0, -1]), m.ones(3, 2), m.tensor([0])),
    "float_indices": lambda m: F(m).embedding_bag(m.tensor([0.0]), m.ones(3, 2), m.tensor([0])),
    "int_weight": lambda m: F(m).embedding_bag(m.tensor([0]), m.ones(3, 2, dtype=m.int32), m.tensor([0])),
    "padding_range": lambda m: F(m).embedding_bag(m.tensor([0]), m.ones(3, 2), m.tensor([0]), padding_idx=-4),
    "empty_rows": lambda m: F(m).embedding_bag(m.zeros(2, 0, dtype=m.int64), m.ones(3, 2)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_bad_arguments_raise_like_torch(name):
    raises_like_torch(ERRORS[name])


def test_old_argument_order_warns_and_swaps_like_torch():
    with pytest.warns(UserWarning, match="Argument order of nn.functional.embedding_bag was changed"):
        got = F(bg).embedding_bag(bg.ones(3, 2), bg.tensor([[0, 2]]))
    with pytest.warns(UserWarning, match="Argument order"):
        want = F(torch).embedding_bag(torch.ones(3, 2), torch.tensor([[0, 2]]))
    assert_same(got, want)
