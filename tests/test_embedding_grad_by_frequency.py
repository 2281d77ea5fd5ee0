"""scale_grad_by_freq of F.embedding / nn.Embedding and F.embedding_bag / nn.EmbeddingBag against torch 2.13: the
values are the lookups; the table's gradient is scaled per index, for embedding by the index's count in the input,
for embedding_bag as torch's CPU kernel scales it (the k-th distinct index, in sorted order, divided by the count of
the k-th sorted index), through padding, per-sample weights, mean bags and 2-D inputs. With sparse=True the backward
raises torch's error; max mode is refused as torch refuses it. Forward-mode AD of a table that requires grad and
the double backward, where torch's derivative is the unscaled lookup, are refused with an error naming the
argument."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def _embedding_grads(m, indices, padding_idx, as_module):
    table = m.tensor(np.random.default_rng(0).standard_normal((6, 3)), requires_grad=True)
    if as_module:
        layer = m.nn.Embedding(6, 3, padding_idx=padding_idx, scale_grad_by_freq=True, dtype=m.float64)
        with m.no_grad():
            layer.weight.copy_(table)
        table = layer.weight
        out = layer(m.tensor(indices))
    else:
        out = m.nn.functional.embedding(m.tensor(indices), table, padding_idx=padding_idx, scale_grad_by_freq=True)
    cotangent = m.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape)))
    (grad,) = m.autograd.grad(out, table, cotangent)
    return [out.detach(), grad, type(out.grad_fn).__name__]


@pytest.mark.parametrize("indices", [[0, 0, 1, 5, 5, 5], [[2, 0, 2], [1, 2, 4]]])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("as_module", [False, True])
def test_embedding_gradient_is_divided_by_each_index_count(indices, padding_idx, as_module):
    got = _embedding_grads(bg, indices, padding_idx, as_module)
    expected = _embedding_grads(torch, indices, padding_idx, as_module)
    assert got[2] == expected[2]
    assert_same(got[:2], expected[:2], rtol=1e-15, atol=0)


def _bag_case(m, seed):
    rng = np.random.default_rng(seed)
    rows, n = int(rng.integers(2, 8)), int(rng.integers(1, 12))
    indices = rng.integers(0, rows, n)
    offsets = np.sort(rng.integers(0, n + 1, int(rng.integers(1, 4))))
    offsets[0] = 0
    mode = ("sum", "mean")[seed % 2]
    padding_idx = int(rng.integers(0, rows)) if seed % 3 == 0 else None
    table = m.tensor(rng.standard_normal((rows, 3)), requires_grad=True)
    leaves = [table]
    weights = None
    if mode == "sum" and seed % 4 == 0:
        weights = m.tensor(rng.standard_normal(n), requires_grad=True)
        leaves.append(weights)
    out = m.nn.functional.embedding_bag(
        m.tensor(indices),
        table,
        m.tensor(offsets),
        mode=mode,
        scale_grad_by_freq=True,
        padding_idx=padding_idx,
        per_sample_weights=weights,
    )
    grads = m.autograd.grad(out, leaves, m.tensor(rng.standard_normal(tuple(out.shape))))
    return [out.detach(), *grads]


@pytest.mark.parametrize("seed", [*range(4), *(pytest.param(s, marks=pytest.mark.slow) for s in range(4, 12))])
def test_embedding_bag_gradient_is_scaled_as_torchs_kernel(seed):
    assert_same(_bag_case(bg, seed), _bag_case(torch, seed), rtol=1e-12, atol=1e-14)


def test_embedding_bag_module_over_rows_matches_torch():
    def run(m):
        bags = m.nn.EmbeddingBag(5, 2, mode="sum", scale_grad_by_freq=True, dtype=m.float64)
        with m.no_grad():
            bags.weight.copy_(m.arange(10.0, dtype=m.float64).reshape(5, 2))
        bags(m.tensor([[0, 0, 1], [3, 0, 3]])).sum().backward()
        return bags.weight.grad

    assert_same(run(bg), run(torch), rtol=1e-15, atol=0)


@pytest.mark.parametrize("bag", [False, True])
def test_sparse_gradients_raise_torchs_error_in_backward(bag):
    def run(m):
        layer = (m.nn.EmbeddingBag if bag else m.nn.Embedding)(5, 2, sparse=True, scale_grad_by_freq=True)
        out = layer(m.tensor([[0, 0, 1]]))
        out.sum().backward()

    raises_like_torch(run)


def test_max_bags_are_refused_as_torch():
    raises_like_torch(
        lambda m: m.nn.functional.embedding_bag(
            m.tensor([[0, 1]]), m.ones(3, 2, requires_grad=True), mode="max", scale_grad_by_freq=True
        )
    )


def test_without_a_gradient_the_lookup_is_plain():
    for m in (bg, torch):
        table = m.arange(10.0).reshape(5, 2)
        with m.autograd.forward_ad.dual_level():
            dual = m.autograd.forward_ad.make_dual(table, m.ones_like(table))
            out = m.nn.functional.embedding(m.tensor([0, 0, 3]), dual, scale_grad_by_freq=True)
            assert m.autograd.forward_ad.unpack_dual(out).tangent.sum().item() == 6.0


@pytest.mark.slow
def test_transforms_give_torchs_reverse_mode():
    def grads(m):
        f = lambda w: m.nn.functional.embedding(m.tensor([2, 2, 0]), w, scale_grad_by_freq=True).pow(2).sum()  # noqa
        table = m.arange(8.0, dtype=m.float64).reshape(4, 2)
        return [m.func.grad(f)(table), m.func.jacrev(f)(table)]

    assert_same(grads(bg), grads(torch), rtol=1e-15, atol=0)


def test_what_torch_derives_unscaled_is_refused_naming_the_argument():
    table = bg.arange(8.0, dtype=bg.float64).reshape(4, 2).requires_grad_()
    (grad,) = bg.autograd.grad(
        bg.nn.functional.embedding(bg.tensor([2, 2, 0]), table, scale_grad_by_freq=True).pow(2).sum(),
        table,
        create_graph=True,
    )
    with pytest.raises(NotImplementedError, match="double backward of scale_grad_by_freq=True"):
        bg.autograd.grad(grad.sum(), table)
    with bg.autograd.forward_ad.dual_level():
        dual = bg.autograd.forward_ad.make_dual(table, bg.ones_like(table))
        with pytest.raises(NotImplementedError, match="forward-mode AD with scale_grad_by_freq=True"):
            bg.nn.functional.embedding(bg.tensor([2, 2, 0]), dual, scale_grad_by_freq=True)
