"""MultiheadAttention, F.multi_head_attention_forward and the Transformer layers against torch 2.13: with the same
parameters, outputs, attention weights and the gradients of inputs and parameters agree (packed and separate
projections, bool and float masks, key padding, bias_k/bias_v, zero attention, batch_first, unbatched input, causal
hints, post- and pre-norm layers, stacks); parameter names, initialization, reprs, the subsequent mask and errors."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.nn as nn
from oracle import assert_same, raises_like_torch, to_torch


def _copy_parameters(ours, theirs):
    """theirs (float64) with ours' parameter values, the names and shapes checked to agree."""
    theirs.double()
    named, t_named = list(ours.named_parameters()), list(theirs.named_parameters())
    assert [n for n, _ in named] == [n for n, _ in t_named]
    with torch.no_grad():
        for (_, p), (_, q) in zip(named, t_named):
            assert tuple(p.shape) == tuple(q.shape)
            q.copy_(to_torch(p.detach()))
    return theirs


def _pair(name, *args, **kwargs):
    ours = getattr(nn, name)(*args, **kwargs).double()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the nested-tensor notice, checked on its own below
        theirs = getattr(torch.nn, name)(*args, **kwargs)
    return ours, _copy_parameters(ours, theirs)


def _input(*shape, seed=0):
    return bg.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o) if t is not None]
    return [] if out is None else [out]


def _compare(run, ours, theirs, inputs):
    """run(module, *inputs) of both modules: outputs, then the gradients of the float inputs and parameters of a
    random projection of every output."""
    t_inputs = [to_torch(x) for x in inputs]
    got, want = _flat(run(ours, *inputs)), _flat(run(theirs, *t_inputs))
    assert_same(got, want, rtol=1e-9, atol=1e-11)
    cotangents = [np.random.default_rng(7).standard_normal(tuple(w.shape)) for w in want]
    leaves = [x for x in inputs if isinstance(x, bg.Tensor) and x.requires_grad] + list(ours.parameters())
    t_leaves = [x for x in t_inputs if isinstance(x, torch.Tensor) and x.requires_grad] + list(theirs.parameters())
    grads = bg.autograd.grad(got, leaves, [bg.tensor(c) for c in cotangents], allow_unused=True)
    t_grads = torch.autograd.grad(want, t_leaves, [torch.tensor(c) for c in cotangents], allow_unused=True)
    assert_same(list(grads), list(t_grads), rtol=1e-8, atol=1e-10)


def _bool_mask(*shape, seed=5):
    mask = np.random.default_rng(seed).random(shape) < 0.3
    mask[..., 0] = False  # every row keeps a key, so no softmax is over -inf only
    return bg.tensor(mask)


def _float_mask(*shape, seed=6):
    return bg.tensor(np.random.default_rng(seed).standard_normal(shape))


def _self_attention(**call):
    return lambda m, x: m(x, x, x, **call)


def _cross_attention(**call):
    return lambda m, q, kv: m(q, kv, kv, **call)


def _separate_attention(**call):
    return lambda m, q, k, v: m(q, k, v, **call)


MHA = {
    "self": ({}, _self_attention(), [(5, 2, 8)]),
    "self-per-head-weights": ({}, _self_attention(average_attn_weights=False), [(5, 2, 8)]),
    "self-no-weights": ({}, _self_attention(need_weights=False), [(5, 2, 8)]),
    "cross": ({}, _cross_attention(), [(4, 2, 8), (6, 2, 8)]),
    "separate-inputs": ({}, _separate_attention(), [(4, 2, 8), (6, 2, 8), (6, 2, 8)]),
    "kdim-vdim": ({"kdim": 3, "vdim": 5}, _separate_attention(), [(4, 2, 8), (6, 2, 3), (6, 2, 5)]),
    "kdim-vdim-no-weights": (
        {"kdim": 3, "vdim": 5},
        _separate_attention(need_weights=False),
        [(4, 2, 8), (6, 2, 3), (6, 2, 5)],
    ),
    "no-bias": ({"bias": False}, _self_attention(), [(5, 2, 8)]),
    "bias-kv-zero-attn": ({"add_bias_kv": True, "add_zero_attn": True}, _self_attention(), [(5, 2, 8)]),
    "bias-kv-no-weights": ({"add_bias_kv": True}, _self_attention(need_weights=False), [(5, 2, 8)]),
    "batch-first": ({"batch_first": True}, _self_attention(), [(2, 5, 8)]),
    "batch-first-cross-no-weights": (
        {"batch_first": True},
        _cross_attention(need_weights=False),
        [(2, 4, 8), (2, 6, 8)],
    ),
    "unbatched": ({}, _self_attention(), [(5, 8)]),
    "unbatched-no-weights": ({"batch_first": True}, _cross_attention(need_weights=False), [(4, 8), (6, 8)]),
}


@pytest.mark.parametrize("name", MHA)
def test_multihead_attention_matches_torch(name):
    kwargs, run, shapes = MHA[name]
    ours, theirs = _pair("MultiheadAttention", 8, 2, **kwargs)
    _compare(run, ours, theirs, [_input(*shape, seed=i) for i, shape in enumerate(shapes)])


MASKS = {
    "bool-attn-mask": lambda: {"attn_mask": _bool_mask(5, 5)},
    "float-attn-mask": lambda: {"attn_mask": _float_mask(5, 5)},
    "per-head-attn-mask": lambda: {"attn_mask": _float_mask(4, 5, 5)},
    "key-padding": lambda: {"key_padding_mask": _bool_mask(2, 5)},
    "both-masks": lambda: {"attn_mask": _bool_mask(5, 5), "key_padding_mask": _bool_mask(2, 5, seed=9)},
    "float-both-masks": lambda: {"attn_mask": _float_mask(5, 5), "key_padding_mask": _float_mask(2, 5)},
    "causal": lambda: {
        "attn_mask": nn.Transformer.generate_square_subsequent_mask(5, dtype=bg.float64),
        "is_causal": True,
    },
    "causal-with-padding": lambda: {
        "attn_mask": nn.Transformer.generate_square_subsequent_mask(5, dtype=bg.float64),
        "is_causal": True,
        "key_padding_mask": _bool_mask(2, 5),
    },
}


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")  # a float causal mask, a bool padding
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("name", MASKS)
def test_masks_match_torch(name, need_weights):
    masks = MASKS[name]()
    t_masks = {k: to_torch(v) for k, v in masks.items()}
    ours, theirs = _pair("MultiheadAttention", 8, 2, add_zero_attn=name == "both-masks")

    def run(module, x):
        return module(x, x, x, need_weights=need_weights, **(masks if module is ours else t_masks))

    _compare(run, ours, theirs, [_input(5, 2, 8)])


def test_unbatched_masks_match_torch():
    ours, theirs = _pair("MultiheadAttention", 8, 2)
    masks = {"attn_mask": _bool_mask(2, 4, 6), "key_padding_mask": _bool_mask(6)}
    t_masks = {k: to_torch(v) for k, v in masks.items()}
    _compare(
        lambda m, q, kv: m(q, kv, kv, **(masks if m is ours else t_masks)),
        ours,
        theirs,
        [_input(4, 8), _input(6, 8, seed=1)],
    )


def test_functional_with_static_keys_and_values_matches_torch():
    rng = np.random.default_rng(3)
    weights = [bg.tensor(rng.standard_normal(shape), requires_grad=True) for shape in ((24, 8), (24,), (8, 8), (8,))]
    static = [bg.tensor(rng.standard_normal((4, 6, 4)), requires_grad=True) for _ in range(2)]
    query = _input(5, 2, 8)

    def run(lib, q, w_in, b_in, w_out, b_out, static_k, static_v):
        return lib.nn.functional.multi_head_attention_forward(
            q, q, q, 8, 2, w_in, b_in, None, None, False, 0.0, w_out, b_out, static_k=static_k, static_v=static_v
        )

    inputs = [query, *weights, *static]
    got, want = run(bg, *inputs), run(torch, *to_torch(inputs))
    assert_same(got, want, rtol=1e-9, atol=1e-11)
    grads = bg.autograd.grad(got[0].sum() + got[1].sum(), inputs)
    t_inputs = to_torch(inputs)
    t_out = run(torch, *t_inputs)
    assert_same(
        list(grads), list(torch.autograd.grad(t_out[0].sum() + t_out[1].sum(), t_inputs)), rtol=1e-8, atol=1e-10
    )


def test_dropout_in_training_and_not_in_eval():
    ours, theirs = _pair("MultiheadAttention", 8, 2, dropout=0.5)
    x = _input(5, 2, 8)
    out, weights = ours(x, x, x)
    rows = weights.detach().numpy().sum(-1)
    assert not np.allclose(rows, 1.0)  # dropped and rescaled attention weights
    ours.eval(), theirs.eval()
    _compare(_self_attention(), ours, theirs, [x])


def test_parameters_and_initialization_match_torch():
    for kwargs in ({}, {"kdim": 3, "vdim": 5, "add_bias_kv": True}, {"bias": False}):
        ours, theirs = nn.MultiheadAttention(8, 2, **kwargs), torch.nn.MultiheadAttention(8, 2, **kwargs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        assert repr(ours) == repr(theirs)
        for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            values = p.detach().numpy()
            if name.endswith("bias"):  # in_proj_bias and out_proj.bias start at zero
                assert (values == 0).all(), name
            elif q.ndim == 2:  # xavier uniform
                assert np.abs(values).max() <= np.sqrt(6.0 / (q.shape[0] + q.shape[1])) and values.std() > 0, name
            else:  # bias_k, bias_v: xavier normal of a (1, 1, E) tensor, std sqrt(2 / (E + E))
                assert 0 < values.std() < 1.5, name
    assert (ours.in_proj_bias, ours.bias_k, ours.q_proj_weight) == (None, None, None)


def test_multihead_attention_errors_match_torch():
    raises_like_torch(lambda lib: lib.nn.MultiheadAttention(8, 0))
    raises_like_torch(lambda lib: lib.nn.MultiheadAttention(8, 3))
    x, k = _input(5, 2, 8), _input(6, 2, 8)
    cases = [
        lambda m, x, k: m(x, k, k[:, :1]),
        lambda m, x, k: m(x[0], k, k),
        lambda m, x, k: m(x[:, :, :4], x[:, :, :4], x[:, :, :4]),
        lambda m, x, k: m(x, x, x, attn_mask=x[0, 0, :5].reshape(1, 5) > 0),
        lambda m, x, k: m(x, x, x, attn_mask=x[:, :, 0].reshape(2, 5) > 0),
        lambda m, x, k: m(x, x, x, key_padding_mask=x[0, 0, :3].reshape(1, 3) > 0),
        lambda m, x, k: m(x, x, x, key_padding_mask=x[:, 0, :3] > 0),
        lambda m, x, k: m(
            x, x, x, key_padding_mask=x[0, 0, :4].to(bg.int64 if isinstance(m, nn.Module) else torch.int64)
        ),
        lambda m, x, k: m(x, x, x, attn_mask=x[0, 0, :1].reshape(1, 1, 1, 1)),
        lambda m, x, k: m(x, x, x, need_weights=False, is_causal=True),
        lambda m, x, k: m(x[:, 0], x[:, 0], x[:, 0], attn_mask=x[0, 0, :1].expand(3, 5, 5)),
    ]
    ours, theirs = _pair("MultiheadAttention", 8, 2)
    for case in cases:
        raises_like_torch(lambda lib: case(ours if lib is bg else theirs, *((x, k) if lib is bg else to_torch((x, k)))))


def test_mismatched_mask_types_warn_as_torch():
    ours, _ = _pair("MultiheadAttention", 8, 2)
    x = _input(5, 2, 8)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
        ours(x, x, x, attn_mask=_float_mask(5, 5), key_padding_mask=_bool_mask(2, 5))


LAYERS = {
    "encoder-layer": ("TransformerEncoderLayer", {}, lambda m, s: m(s), [(5, 2, 8)]),
    "encoder-layer-norm-first-gelu": (
        "TransformerEncoderLayer",
        {"norm_first": True, "activation": "gelu"},
        lambda m, s: m(s),
        [(5, 2, 8)],
    ),
    "encoder-layer-batch-first-no-bias": (
        "TransformerEncoderLayer",
        {"batch_first": True, "bias": False},
        lambda m, s: m(s),
        [(2, 5, 8)],
    ),
    "decoder-layer": ("TransformerDecoderLayer", {}, lambda m, t, s: m(t, s), [(4, 2, 8), (5, 2, 8)]),
    "decoder-layer-norm-first": (
        "TransformerDecoderLayer",
        {"norm_first": True},
        lambda m, t, s: m(t, s),
        [(4, 2, 8), (5, 2, 8)],
    ),
    "decoder-layer-unbatched": ("TransformerDecoderLayer", {}, lambda m, t, s: m(t, s), [(4, 8), (5, 8)]),
}


@pytest.mark.parametrize("name", LAYERS)
def test_transformer_layers_match_torch(name):
    cls, kwargs, run, shapes = LAYERS[name]
    ours, theirs = _pair(cls, 8, 2, dim_feedforward=16, dropout=0.0, **kwargs)
    assert repr(ours) == repr(theirs)
    _compare(run, ours, theirs, [_input(*shape, seed=i) for i, shape in enumerate(shapes)])


def test_encoder_and_decoder_stacks_match_torch():
    def build(lib):
        layer = lib.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
        encoder = lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(8), enable_nested_tensor=False)
        decoder = lib.nn.TransformerDecoder(lib.nn.TransformerDecoderLayer(8, 2, 16, 0.0, batch_first=True), 2)
        return lib.nn.ModuleList([encoder, decoder])

    ours = build(bg).double()
    theirs = _copy_parameters(ours, build(torch))
    assert repr(ours) == repr(theirs)
    masks = {"mask": bg.ones(5, 5, dtype=bg.bool).triu(1), "src_key_padding_mask": _bool_mask(2, 5)}
    t_masks = {k: to_torch(v) for k, v in masks.items()}
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=bg.float64)

    def run(module, src, tgt):
        memory = module[0](src, **(masks if module is ours else t_masks))
        return module[1](tgt, memory, tgt_mask=tgt_mask if module is ours else to_torch(tgt_mask))

    _compare(run, ours, theirs, [_input(2, 5, 8), _input(2, 4, 8, seed=1)])


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")  # torch's own
def test_encoder_inference_zeroes_padded_positions_as_torch():
    """In eval mode without gradients torch runs the stack on nested tensors, its padded positions zero."""

    def build(lib):
        layer = lib.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        return lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(8))

    ours = build(bg).double().eval()
    theirs = _copy_parameters(ours, build(torch)).eval()
    src = _input(3, 5, 8)
    padding = bg.tensor([[False] * 3 + [True] * 2, [False] * 5, [False] * 4 + [True]])
    with bg.no_grad(), torch.no_grad():
        got = ours(src, src_key_padding_mask=padding)
        assert_same(got, theirs(to_torch(src), src_key_padding_mask=to_torch(padding)), rtol=1e-9, atol=1e-11)
        assert_same(got[0, 4], theirs.norm(torch.zeros(8, dtype=torch.float64)), rtol=1e-9, atol=1e-11)
        not_left_aligned = bg.tensor([[True] + [False] * 4] * 3)
        assert_same(
            ours(src, src_key_padding_mask=not_left_aligned),
            theirs(to_torch(src), src_key_padding_mask=to_torch(not_left_aligned)),
            rtol=1e-9,
            atol=1e-11,
        )
    _compare(lambda m, x: m(x, src_key_padding_mask=padding if m is ours else to_torch(padding)), ours, theirs, [src])


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch(batch_first):
    ours, theirs = _pair("Transformer", 8, 2, 2, 1, 16, 0.0, batch_first=batch_first)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    src, tgt = ((2, 5, 8), (2, 4, 8)) if batch_first else ((5, 2, 8), (4, 2, 8))
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=bg.float64)

    def run(module, s, t):
        return module(s, t, tgt_mask=tgt_mask if module is ours else to_torch(tgt_mask))

    _compare(run, ours, theirs, [_input(*src), _input(*tgt, seed=1)])
    ours.eval(), theirs.eval()
    _compare(run, ours, theirs, [_input(*src), _input(*tgt, seed=1)])


def test_transformer_initialization_and_errors():
    model = nn.Transformer(8, 2, 1, 1, 16)
    for name, p in model.named_parameters():
        values = p.detach().numpy()
        if p.ndim > 1:
            assert np.abs(values).max() <= np.sqrt(6.0 / (p.shape[0] + p.shape[1])), name
    ours, theirs = _pair("Transformer", 8, 2, 1, 1, 16)
    raises_like_torch(lambda lib: (ours if lib is bg else theirs)(*(_arg(lib, (5, 2, 8)), _arg(lib, (4, 3, 8)))))
    raises_like_torch(lambda lib: (ours if lib is bg else theirs)(*(_arg(lib, (5, 2, 8)), _arg(lib, (4, 2, 6)))))
    raises_like_torch(lambda lib: lib.nn.TransformerEncoderLayer(8, 2, activation="tanh"))


def _arg(lib, shape):
    x = _input(*shape)
    return x if lib is bg else to_torch(x)


def test_generate_square_subsequent_mask_matches_torch():
    assert_same(
        nn.Transformer.generate_square_subsequent_mask(4), torch.nn.Transformer.generate_square_subsequent_mask(4)
    )
    assert_same(
        nn.Transformer.generate_square_subsequent_mask(3, dtype=bg.float64),
        torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float64),
    )


def test_nested_tensor_notice_as_torch():
    layer = nn.TransformerEncoderLayer(8, 2)
    with pytest.warns(UserWarning, match="enable_nested_tensor is True, but self.use_nested_tensor is False"):
        nn.TransformerEncoder(layer, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, batch_first=True), 1)
        nn.Transformer(8, 2, 1, 1, 16, batch_first=True)
    for m in (torch, bg):  # a sequence-first nn.Transformer builds an encoder that cannot take the nested path
        with pytest.warns(UserWarning, match="because encoder_layer.self_attn.batch_first was not True"):
            m.nn.Transformer(8, 2, 1, 1, 16)
