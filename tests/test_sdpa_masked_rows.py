"""scaled_dot_product_attention with query rows whose every key is masked: torch's attention (its fused CPU kernel and
its composite alike) gives such a row zero weights, so the row's output is zero and its gradients are zero, where a
plain softmax would give NaN. MultiheadAttention without weights (which attends through scaled_dot_product_attention),
and so the Transformer layers, inherit it; MultiheadAttention returning its weights keeps softmax's NaN, as torch."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same


def _masks(lib, requires_grad):
    keep = lib.zeros(3, 3, dtype=lib.bool)
    keep[1, :2] = True  # rows 0 and 2 see no key at all
    additive = lib.zeros(3, 3, dtype=lib.float64).masked_fill(~keep, float("-inf"))
    return keep, additive.requires_grad_(requires_grad)


def _attend(lib, shape, mask_kind, mask_requires_grad=False, second_order=False):
    q = lib.tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)
    keep, additive = _masks(lib, mask_requires_grad)
    mask = keep if mask_kind == "bool" else additive
    out = lib.nn.functional.scaled_dot_product_attention(q, q * 0.5, q.flip(-1), attn_mask=mask)
    leaves = [q] + ([additive] if mask_requires_grad else [])
    grads = lib.autograd.grad(out.pow(2).sum(), leaves, create_graph=second_order)
    if second_order:
        grads = grads + lib.autograd.grad(grads[0].sum(), q)
    return [out.detach(), *[g.detach() for g in grads]]


@pytest.mark.parametrize(
    "shape, mask_kind, mask_requires_grad, second_order",
    [
        ((1, 2, 3, 4), "bool", False, False),  # torch's fused CPU kernel
        ((1, 2, 3, 4), "float", False, False),
        ((1, 2, 3, 4), "float", True, True),  # a mask requiring grad: the composite, differentiable twice
        ((2, 3, 4), "bool", False, True),  # 3-D inputs: the composite
    ],
)
def test_rows_with_every_key_masked_are_zero_as_torchs(shape, mask_kind, mask_requires_grad, second_order):
    got = _attend(bg, shape, mask_kind, mask_requires_grad, second_order)
    expected = _attend(torch, shape, mask_kind, mask_requires_grad, second_order)
    assert_same(got, expected, rtol=1e-9, atol=1e-12)
    assert not np.isnan(got[0].numpy()).any() and (got[0].numpy()[..., [0, 2], :] == 0).all()


def test_dropped_attention_keeps_masked_rows_zero():
    q = bg.randn(1, 1, 3, 4, dtype=bg.float64, requires_grad=True)
    keep, _ = _masks(bg, False)
    out = bg.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=keep, dropout_p=0.5)
    (g,) = bg.autograd.grad(out.sum(), q)
    assert (out.detach().numpy()[..., [0, 2], :] == 0).all() and np.isfinite(g.numpy()).all()


def _encoder_and_attention(lib):
    lib.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the nested-tensor and mismatched-mask notices
        layer = lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=lib.float64)
        mha = lib.nn.MultiheadAttention(8, 2, batch_first=True, dtype=lib.float64)
        state = np.random.default_rng(1)
        with lib.no_grad():
            for p in list(layer.parameters()) + list(mha.parameters()):
                p.copy_(lib.tensor(state.standard_normal(tuple(p.shape)) * 0.3))
        x = lib.tensor(np.random.default_rng(2).standard_normal((2, 5, 8)), requires_grad=True)
        padded = lib.tensor([[True, True, False, False, False], [False] * 5])
        causal = lib.nn.Transformer.generate_square_subsequent_mask(5, dtype=lib.float64)
        encoded = layer(x, src_mask=causal, src_key_padding_mask=padded, is_causal=True)
        attended, _ = mha(x, x, x, key_padding_mask=padded, attn_mask=causal, need_weights=False)
        weighted, weights = mha(x, x, x, key_padding_mask=padded, attn_mask=causal)
    grads = lib.autograd.grad((encoded.sum(), attended.sum()), [x, *layer.parameters()])
    return [encoded, attended, weighted, weights, *grads]


def test_transformer_layers_over_fully_padded_rows_match_torch():
    got, expected = _encoder_and_attention(bg), _encoder_and_attention(torch)
    assert_same(got, expected, rtol=1e-9, atol=1e-11)
    assert np.isfinite(got[0].detach().numpy()).all() and np.isnan(got[3].detach().numpy()).any()
