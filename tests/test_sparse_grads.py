"""Sparse gradients of dense parameters (Embedding(sparse=True)) and the optimizers that take them, against torch."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch

LOOKUPS = [[1, 2, 1], [4, 0, 2]]


def _table(lib, rows=6, dim=4, dtype="float64", seed=0, **kw):
    emb = lib.nn.Embedding(rows, dim, sparse=True, dtype=getattr(lib, dtype), **kw)
    with lib.no_grad():
        emb.weight.copy_(lib.tensor(np.random.RandomState(seed).randn(rows, dim)))
    return emb


def _loss(out):
    return out.pow(2).sum() + out.sin().sum()


def _sparse_parts(g):
    """What a sparse gradient is made of: indices, values, size, coalesced flag."""
    return (
        g.is_sparse,
        g._indices().tolist(),
        np.asarray(g._values().detach().numpy()),
        tuple(g.shape),
        g.is_coalesced(),
        g.requires_grad,
    )


def _assert_same_sparse(a, b):
    pa, pb = _sparse_parts(a), _sparse_parts(b)
    assert pa[:2] == pb[:2] and pa[3:] == pb[3:], (pa, pb)
    np.testing.assert_array_equal(pa[2], pb[2])


@pytest.mark.parametrize("padding_idx", [None, 2, -4])
def test_backward_gives_torchs_sparse_gradient(padding_idx):
    got = {}
    for lib in (bg, torch):
        emb = _table(lib, padding_idx=padding_idx)
        _loss(emb(lib.tensor(LOOKUPS))).backward()
        got[lib] = emb.weight.grad
    _assert_same_sparse(got[bg], got[torch])
    assert got[bg].layout == bg.sparse_coo


def test_functional_embedding_and_autograd_grad():
    got = {}
    for lib in (bg, torch):
        w = _table(lib).weight
        out = lib.nn.functional.embedding(lib.tensor(LOOKUPS), w, sparse=True)
        (got[lib],) = lib.autograd.grad(_loss(out), w)
        assert w.grad is None
    _assert_same_sparse(got[bg], got[torch])


def test_max_norm_renormalizes_and_the_gradient_stays_sparse():
    got = {}
    for lib in (bg, torch):
        emb = _table(lib, max_norm=1.0)
        _loss(emb(lib.tensor(LOOKUPS))).backward()
        got[lib] = (emb.weight.detach().numpy().copy(), emb.weight.grad)
    np.testing.assert_allclose(got[bg][0], got[torch][0], rtol=1e-12)
    _assert_same_sparse(got[bg][1], got[torch][1])


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(lambda lib, emb: _loss(emb(lib.tensor(LOOKUPS))), id="same-rows"),
        pytest.param(lambda lib, emb: emb(lib.tensor([[5, 2], [3, 3]])).sin().sum(), id="other-rows"),
        pytest.param(lambda lib, emb: emb(lib.tensor([2, 4])).pow(3).sum(), id="padding-like-subset"),
    ],
)
def test_accumulation_over_backwards_keeps_the_grad_object(second):
    got = {}
    for lib in (bg, torch):
        emb = _table(lib)
        _loss(emb(lib.tensor(LOOKUPS))).backward()
        first = emb.weight.grad
        second(lib, emb).backward()
        second(lib, emb).backward()
        assert emb.weight.grad is first
        got[lib] = first
    _assert_same_sparse(got[bg], got[torch])


def test_dense_and_sparse_gradients_mix_as_torchs():
    got = {}
    for lib in (bg, torch):
        emb = _table(lib)
        w = emb.weight
        idx = lib.tensor(LOOKUPS)
        (w * 3).sum().backward()  # a dense .grad takes a sparse gradient in place
        dense = w.grad
        _loss(emb(idx)).backward()
        assert w.grad is dense and not w.grad.is_sparse
        first = w.grad.numpy().copy()
        w.grad = None  # a sparse .grad and a dense gradient: a new dense .grad
        _loss(emb(idx)).backward()
        (w * w).sum().backward()
        assert not w.grad.is_sparse
        second = w.grad.numpy().copy()
        w.grad = None  # both in one backward: the engine sums them densely
        ((w * 2).sum() + _loss(emb(idx))).backward()
        got[lib] = (first, second, w.grad.is_sparse, w.grad.numpy().copy())
    for a, b in zip(got[bg], got[torch]):
        np.testing.assert_array_equal(a, b)


def test_zero_grad_keeps_an_empty_sparse_gradient():
    got = {}
    for lib in (bg, torch):
        emb = _table(lib)
        opt = lib.optim.SGD(emb.parameters(), lr=0.1)
        _loss(emb(lib.tensor(LOOKUPS))).backward()
        opt.zero_grad(set_to_none=False)
        empty = emb.weight.grad
        parts = _sparse_parts(empty)
        got[lib] = (parts[:2] + parts[3:], parts[2].shape)
    assert got[bg] == got[torch]
    # the next gradient fills the empty one (torch's CPU add_ into it fails to resize its storage; here it is the
    # gradient torch gives on its own)
    emb = _table(bg)
    emb(bg.tensor(LOOKUPS)).sum().backward()
    emb.zero_grad(set_to_none=False)
    emb(bg.tensor([[3, 1]])).pow(2).sum().backward()
    fresh = _table(torch)
    fresh(torch.tensor([[3, 1]])).pow(2).sum().backward()
    _assert_same_sparse(emb.weight.grad, fresh.weight.grad)


OPTIMIZERS = {
    "sgd": lambda lib, p: lib.optim.SGD(p, lr=0.1),
    "sgd-momentum": lambda lib, p: lib.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1),
    "sgd-nesterov-maximize": lambda lib, p: lib.optim.SGD(p, lr=0.05, momentum=0.5, nesterov=True, maximize=True),
    "adagrad": lambda lib, p: lib.optim.Adagrad(p, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.2),
    "adagrad-maximize": lambda lib, p: lib.optim.Adagrad(p, lr=0.1, maximize=True),
    "sparse-adam": lambda lib, p: lib.optim.SparseAdam(p, lr=0.05),
    "sparse-adam-maximize": lambda lib, p: lib.optim.SparseAdam(p, lr=0.05, betas=(0.8, 0.9), maximize=True),
}


def _trained(lib, make_opt, dtype, zero=True):
    emb = _table(lib, dtype=dtype, padding_idx=2)
    opt = make_opt(lib, emb.parameters())
    for batch in ([[1, 2, 1], [4, 0, 2]], [[5, 5, 3], [1, 2, 0]], [[0, 1, 2], [3, 4, 5]], [[1, 1, 1], [4, 4, 0]]):
        if zero:
            opt.zero_grad()
        _loss(emb(lib.tensor(batch))).backward()
        opt.step()
    return emb.weight.detach().numpy().copy(), opt


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizers_on_sparse_gradients_match_torch(name):
    for zero in (True, False):  # without zero_grad the sparse gradients accumulate between steps
        a, opt = _trained(bg, OPTIMIZERS[name], "float64", zero)
        b, _ = _trained(torch, OPTIMIZERS[name], "float64", zero)
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizers_on_sparse_gradients_float32(name):
    a, _ = _trained(bg, OPTIMIZERS[name], "float32")
    b, _ = _trained(torch, OPTIMIZERS[name], "float32")
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_sparse_adam_state_matches_torch():
    (_, a), (_, b) = (
        _trained(bg, OPTIMIZERS["sparse-adam"], "float64"),
        _trained(torch, OPTIMIZERS["sparse-adam"], "float64"),
    )
    sa, sb = a.state_dict()["state"][0], b.state_dict()["state"][0]
    assert sa["step"] == sb["step"] == 4
    for key in ("exp_avg", "exp_avg_sq"):
        np.testing.assert_array_equal(sa[key].numpy(), sb[key].numpy())


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda lib, p: lib.optim.Adam(p), id="Adam"),
        pytest.param(lambda lib, p: lib.optim.AdamW(p), id="AdamW"),
        pytest.param(lambda lib, p: lib.optim.RMSprop(p), id="RMSprop"),
        pytest.param(lambda lib, p: lib.optim.Adadelta(p), id="Adadelta"),
        pytest.param(lambda lib, p: lib.optim.Adamax(p), id="Adamax"),
        pytest.param(lambda lib, p: lib.optim.NAdam(p), id="NAdam"),
        pytest.param(lambda lib, p: lib.optim.RAdam(p), id="RAdam"),
        pytest.param(lambda lib, p: lib.optim.Rprop(p), id="Rprop"),
        pytest.param(lambda lib, p: lib.optim.ASGD(p), id="ASGD"),
        pytest.param(lambda lib, p: lib.optim.Adafactor(p), id="Adafactor"),
        pytest.param(lambda lib, p: lib.optim.SGD(p, lr=0.1, weight_decay=0.1), id="SGD-weight-decay"),
        pytest.param(lambda lib, p: lib.optim.Adagrad(p, weight_decay=0.1), id="Adagrad-weight-decay"),
    ],
)
def test_optimizers_refuse_sparse_gradients_as_torch(make):
    def step(lib):
        emb = _table(lib)
        _loss(emb(lib.tensor(LOOKUPS))).backward()
        make(lib, emb.parameters()).step()

    raises_like_torch(step)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda lib: lib.optim.SparseAdam([lib.nn.Parameter(lib.ones(2)).to_sparse()]), id="sparse-param"),
        pytest.param(lambda lib: lib.optim.SparseAdam([lib.ones(2, requires_grad=True)], lr=0.0), id="lr"),
        pytest.param(lambda lib: lib.optim.SparseAdam([lib.ones(2, requires_grad=True)], eps=-1.0), id="eps"),
        pytest.param(lambda lib: lib.optim.SparseAdam([lib.ones(2, requires_grad=True)], betas=(1.0, 0.5)), id="beta0"),
        pytest.param(lambda lib: lib.optim.SparseAdam([lib.ones(2, requires_grad=True)], betas=(0.5, 1.5)), id="beta1"),
    ],
)
def test_sparse_adam_errors_as_torch(make):
    raises_like_torch(make)


def test_sparse_adam_refuses_a_dense_gradient_as_torch():
    def step(lib):
        p = lib.nn.Parameter(lib.ones(3))
        (p * 2).sum().backward()
        lib.optim.SparseAdam([p]).step()

    raises_like_torch(step)


def _skip_gram(lib, steps=5, vocab=20, dim=8, negatives=3, seed=0):
    """word2vec's skip-gram with negative sampling: a center and a context table, each pair scored by a dot product,
    sampled negatives pushed apart; both tables sparse, trained by SparseAdam."""
    rng = np.random.RandomState(seed)
    centers, contexts = _table(lib, vocab, dim, "float32", seed=1), _table(lib, vocab, dim, "float32", seed=2)
    opt = lib.optim.SparseAdam(list(centers.parameters()) + list(contexts.parameters()), lr=0.01)
    losses = []
    for _ in range(steps):
        center = lib.tensor(rng.randint(0, vocab, 16))
        context = lib.tensor(rng.randint(0, vocab, 16))
        negative = lib.tensor(rng.randint(0, vocab, (16, negatives)))
        c = centers(center)
        positive_score = (c * contexts(context)).sum(1)
        negative_score = lib.bmm(contexts(negative), c.unsqueeze(2)).squeeze(2)
        loss = -(lib.nn.functional.logsigmoid(positive_score) + lib.nn.functional.logsigmoid(-negative_score).sum(1))
        loss = loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, centers.weight.detach().numpy().copy(), contexts.weight.detach().numpy().copy()


@pytest.mark.slow
def test_word2vec_skip_gram_with_sparse_adam_matches_torch():
    got, want = _skip_gram(bg), _skip_gram(torch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    for a, b in zip(got[1:], want[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_refuses_sparse_gradients():
    """torch 2.13's clip_grad_norm_ has no norm of a sparse gradient (it raises); so does this one."""
    emb = _table(bg)
    _loss(emb(bg.tensor(LOOKUPS))).backward()
    with pytest.raises(RuntimeError, match="sparse"):
        bg.nn.utils.clip_grad_norm_(emb.parameters(), 0.5)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(dict(mode="sum"), id="sum"),
        pytest.param(dict(mode="mean"), id="mean"),
        pytest.param(dict(mode="mean", padding_idx=2), id="mean-padding"),
        pytest.param(dict(mode="sum", padding_idx=1, weighted=True), id="sum-weighted-padding"),
    ],
)
def test_embedding_bag_sparse_gradient(options):
    options = dict(options)
    weighted = options.pop("weighted", False)
    got = {}
    for lib in (bg, torch):
        bag = lib.nn.EmbeddingBag(6, 3, sparse=True, dtype=lib.float64, **options)
        with lib.no_grad():
            bag.weight.copy_(lib.tensor(np.random.RandomState(0).randn(6, 3)))
        weights = lib.tensor(np.linspace(0.5, 2, 7)).requires_grad_() if weighted else None
        out = bag(lib.tensor([1, 2, 1, 4, 0, 2, 5]), lib.tensor([0, 3, 3, 5]), per_sample_weights=weights)
        out.pow(2).sum().backward()
        got[lib] = (out.detach().numpy(), bag.weight.grad, weights)
    np.testing.assert_array_equal(got[bg][0], got[torch][0])
    a, b = _sparse_parts(got[bg][1]), _sparse_parts(got[torch][1])
    assert a[:2] == b[:2] and a[3:] == b[3:]
    np.testing.assert_allclose(a[2], b[2], rtol=1e-14)
    if weighted:
        np.testing.assert_allclose(got[bg][2].grad.numpy(), got[torch][2].grad.numpy(), rtol=1e-14)


def test_embedding_bag_max_mode_refuses_sparse_as_torch():
    raises_like_torch(lambda lib: lib.nn.EmbeddingBag(4, 2, mode="max", sparse=True)(lib.tensor([[0, 1]])))


def test_lbfgs_reads_sparse_gradients_densely_as_torch():
    got = {}
    for lib in (bg, torch):
        emb = _table(lib, rows=6, dim=3)
        opt = lib.optim.LBFGS(emb.parameters(), lr=0.5, max_iter=4)
        idx = lib.tensor(LOOKUPS)

        def closure():
            opt.zero_grad()
            loss = (emb(idx) - 0.3).pow(2).sum()
            loss.backward()
            return loss

        for _ in range(2):
            opt.step(closure)
        got[lib] = emb.weight.detach().numpy().copy()
    np.testing.assert_allclose(got[bg], got[torch], rtol=1e-12)


def test_node_name_hooks_and_create_graph_as_torch():
    got = {}
    for lib in (bg, torch):
        w = _table(lib).weight
        idx = lib.tensor(LOOKUPS)
        out = lib.nn.functional.embedding(idx, w, sparse=True)
        name = out.grad_fn.name() if lib is bg else type(out.grad_fn).__name__
        seen = []
        handle = w.register_hook(lambda g: seen.append(g.is_sparse))
        (g,) = lib.autograd.grad(_loss(out), w, create_graph=True)
        handle.remove()
        got[lib] = (name, seen, g.requires_grad, g.is_sparse, g._indices().tolist())
    assert got[bg] == got[torch]


def test_batched_gradients_of_a_sparse_lookup_are_refused_by_name():
    w = _table(bg).weight
    out = bg.nn.functional.embedding(bg.tensor([1, 3]), w, sparse=True)
    with pytest.raises(RuntimeError, match="sparse=True"):
        bg.autograd.grad(out, w, bg.ones(2, 2, 4, dtype=bg.float64), is_grads_batched=True)


def test_a_weight_computed_from_a_leaf_gets_a_dense_gradient():
    """A difference from torch (whose nodes carry the sparse gradient on): here the leaf's gradient is dense, with
    torch's values."""
    got = {}
    for lib in (bg, torch):
        w = _table(lib).weight
        _loss(lib.nn.functional.embedding(lib.tensor(LOOKUPS), w * 2, sparse=True)).backward()
        got[lib] = w.grad.to_dense().numpy()
    assert not _table(bg).weight.is_sparse
    np.testing.assert_array_equal(got[bg], got[torch])


def test_second_backward_without_retain_graph_raises_as_torch():
    def twice(lib):
        w = _table(lib).weight
        loss = _loss(lib.nn.functional.embedding(lib.tensor(LOOKUPS), w, sparse=True))
        loss.backward(retain_graph=True)
        loss.backward()  # retained: a second sparse gradient
        assert w.grad._indices().shape[1] == 6
        loss.backward()

    raises_like_torch(twice)


def test_sparse_updates_with_a_new_number_of_rows_compile_nothing():
    """A sparse gradient added into a dense tensor (the step of SparseAdam or of sparse SGD with momentum) runs on the
    host: a batch that looks up a number of rows never seen compiles no kernel, and matches torch."""
    results = []
    for lib in (bg, torch):
        lib.manual_seed(0)
        emb = lib.nn.Embedding(50, 4, sparse=True)
        with lib.no_grad():
            emb.weight.copy_(lib.tensor(np.linspace(-1, 1, 200, dtype=np.float32).reshape(50, 4)))
        opt = lib.optim.SparseAdam(emb.parameters(), lr=0.1)
        compiles = []
        for rows in (3, 5, 7, 11, 13):
            opt.zero_grad()
            emb(lib.tensor(np.arange(rows) * 3 % 50)).pow(2).sum().backward()
            opt.step()
            compiles.append(bg.compile_count())
        results.append((emb.weight.detach().numpy().copy(), compiles))
    (got, compiles), (want, _) = results
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert compiles[-1] == compiles[1]  # after the first step's, no kernel for 7, 11 or 13 rows


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("first", ["sparse", "dense"])
def test_a_sparse_gradient_given_to_a_leafs_backward_reaches_grad_as_torchs(first, create_graph):
    """leaf.backward(sparse) hands the sparse gradient to the leaf's AccumulateGrad: it accumulates into a sparse
    `.grad` in place (the same object, without create_graph) and into a dense one by value."""
    seen = {}
    for lib in (bg, torch):

        def sparse(values, lib=lib):
            return lib.sparse_coo_tensor(lib.tensor([[1, 1, 2]]), lib.tensor(values, dtype=lib.float64), (3,))

        p = lib.tensor([1.5, 1.5, 0.5], dtype=lib.float64, requires_grad=True)
        p.grad = sparse([1.0, 2.0, 3.0]) if first == "sparse" else lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)
        before = p.grad
        for _ in range(2):
            p.backward(sparse([0.5, 0.25, 4.0]), create_graph=create_graph)
        (direct,) = lib.autograd.grad(p, p, sparse([0.5, 0.25, 4.0]))
        seen[lib] = (p.grad is before, str(p.grad.layout), p.grad.to_dense().tolist(), str(direct.layout))
    assert seen[bg] == seen[torch]
