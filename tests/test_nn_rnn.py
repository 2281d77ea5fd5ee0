"""RNN, LSTM, GRU and their cells against torch 2.13: with the same parameters, the outputs, final states and the
gradients of inputs, initial states and every parameter agree (stacked, bidirectional, batch_first, unbatched,
projections, no bias, given states), second derivatives too; parameter names, shapes, initialization bounds,
reprs and errors."""

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.nn as nn
from oracle import assert_same, raises_like_torch, to_torch

LAYERS = {
    "rnn": ("RNN", (3, 4), {}),
    "rnn-relu-stacked": ("RNN", (3, 4, 2), {"nonlinearity": "relu"}),
    "lstm": ("LSTM", (3, 4), {}),
    "lstm-stacked-bidirectional": ("LSTM", (3, 4, 2), {"bidirectional": True}),
    "lstm-batch-first": ("LSTM", (3, 5), {"batch_first": True, "num_layers": 2}),
    "lstm-projection": ("LSTM", (3, 5, 2), {"proj_size": 2, "bidirectional": True}),
    "lstm-no-bias": ("LSTM", (3, 4), {"bias": False}),
    "gru": ("GRU", (3, 4), {}),
    "gru-stacked-bidirectional": ("GRU", (3, 4, 3), {"bidirectional": True}),
    "gru-batch-first-no-bias": ("GRU", (3, 4), {"batch_first": True, "bias": False}),
}


def _pair(cls, args, kwargs, dtype=torch.float64):
    ours = getattr(nn, cls)(*args, **kwargs).double()
    theirs = getattr(torch.nn, cls)(*args, **kwargs).to(dtype)
    with torch.no_grad():
        for (name, p), (t_name, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert name == t_name and tuple(p.shape) == tuple(q.shape)
            q.copy_(to_torch(p.detach()))
    return ours, theirs


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _compare(ours, theirs, inputs, gradgrad=False):
    t_inputs = [to_torch(x) if not isinstance(x, tuple) else tuple(to_torch(y) for y in x) for x in inputs]
    got, want = _flat(ours(*inputs)), _flat(theirs(*t_inputs))
    assert_same(got, want, rtol=1e-9, atol=1e-11)
    rng = np.random.default_rng(1)
    cotangents = [rng.standard_normal(tuple(w.shape)) for w in want]
    leaves = [x for x in _flat(inputs) if x.requires_grad] + list(ours.parameters())
    t_leaves = [x for x in _flat(t_inputs) if x.requires_grad] + list(theirs.parameters())
    grads = bg.autograd.grad(got, leaves, [bg.tensor(c) for c in cotangents], create_graph=gradgrad, allow_unused=True)
    t_grads = torch.autograd.grad(
        want, t_leaves, [torch.tensor(c) for c in cotangents], create_graph=gradgrad, allow_unused=True
    )
    assert_same([g for g in grads], [t for t in t_grads], rtol=1e-8, atol=1e-10)
    if gradgrad:
        total = sum((g * g).sum() for g in grads[:1])
        t_total = sum((g * g).sum() for g in t_grads[:1])
        assert_same(
            bg.autograd.grad(total, leaves[:1])[0], torch.autograd.grad(t_total, t_leaves[:1])[0], rtol=1e-7, atol=1e-9
        )


def _input(shape, seed=0):
    return bg.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


@pytest.mark.parametrize("name", LAYERS)
def test_layers_match_torch(name):
    cls, args, kwargs = LAYERS[name]
    ours, theirs = _pair(cls, args, kwargs)
    assert repr(ours) == repr(theirs)
    shape = (2, 5, 3) if kwargs.get("batch_first") else (5, 2, 3)
    _compare(ours, theirs, [_input(shape)], gradgrad=name in ("lstm", "gru", "rnn"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rnn", "lstm-projection", "gru-stacked-bidirectional"])
def test_given_states_and_unbatched_input(name):
    cls, args, kwargs = LAYERS[name]
    ours, theirs = _pair(cls, args, kwargs)
    directions = 2 if kwargs.get("bidirectional") else 1
    layers = args[2] if len(args) > 2 else kwargs.get("num_layers", 1)
    hidden = kwargs.get("proj_size") or args[1]
    h0 = _input((directions * layers, 2, hidden), seed=3)
    state = (h0, _input((directions * layers, 2, args[1]), seed=4)) if cls == "LSTM" else h0
    _compare(ours, theirs, [_input((5, 2, 3)), state])
    unbatched = (state[0][:, 0], state[1][:, 0]) if cls == "LSTM" else state[:, 0]
    _compare(ours, theirs, [_input((5, 3)), unbatched])


CELLS = {
    "RNNCell": {},
    "RNNCell-relu": {"nonlinearity": "relu"},
    "LSTMCell": {},
    "GRUCell": {},
    "GRUCell-no-bias": {"bias": False},
}


@pytest.mark.parametrize("name", CELLS)
def test_cells_match_torch(name):
    cls = name.split("-")[0]
    ours, theirs = _pair(cls, (3, 4), CELLS[name])
    assert repr(ours) == repr(theirs)
    _compare(ours, theirs, [_input((2, 3))], gradgrad=True)
    state = (_input((2, 4), 1), _input((2, 4), 2)) if cls == "LSTMCell" else _input((2, 4), 1)
    _compare(ours, theirs, [_input((2, 3)), state])
    _compare(ours, theirs, [_input((3,))])
    got = ours(_input((2, 3)))
    got = got[0] if cls == "LSTMCell" else got
    want = theirs(torch.zeros(2, 3, dtype=torch.float64, requires_grad=True))
    assert got.grad_fn.name() == (want[0] if cls == "LSTMCell" else want).grad_fn.name()


def test_initialization_and_dropout_between_layers():
    bg.manual_seed(0)
    layer = nn.LSTM(10, 25, 2)
    values = np.concatenate([p.detach().numpy().reshape(-1) for p in layer.parameters()])
    assert np.abs(values).max() <= 0.2 and np.abs(values).max() > 0.19
    ours, theirs = _pair("GRU", (3, 4, 3), {"dropout": 0.5})
    ours.eval(), theirs.eval()
    _compare(ours, theirs, [_input((5, 2, 3))])
    ours.train()
    bg.manual_seed(1)
    first = ours(_input((5, 2, 3)))[0]
    assert not np.allclose(first.detach().numpy(), ours.eval()(_input((5, 2, 3)))[0].detach().numpy())
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.5)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nn.RNN(3, 4, nonlinearity="sigmoid"),
        lambda m: m.nn.LSTM(3, 4, proj_size=4),
        lambda m: m.nn.GRU(3, 4, proj_size=2),
        lambda m: m.nn.LSTM(3, 0),
        lambda m: m.nn.RNN(3, 4, num_layers=0),
        lambda m: m.nn.GRU(3, 4, dropout=1.5),
        lambda m: m.nn.RNNCell(3, 4, nonlinearity="gelu")(m.ones(2, 3)),
        lambda m: m.nn.LSTM(3, 4)(m.ones(5, 2, 3, 1)),
        lambda m: m.nn.GRU(3, 4)(m.ones(5, 2, 2)),
        lambda m: m.nn.RNN(3, 4)(m.ones(5, 2, 3), m.ones(2, 2, 4)),
        lambda m: m.nn.GRUCell(3, 4)(m.ones(2, 2, 3)),
    ],
    ids=[
        "nonlinearity",
        "proj-size",
        "proj-gru",
        "hidden-zero",
        "layers-zero",
        "dropout-range",
        "cell-nonlinearity",
        "input-4d",
        "input-size",
        "hidden-shape",
        "cell-3d",
    ],
)
def test_errors(call):
    raises_like_torch(call)


@pytest.mark.parametrize(
    "name, enforce_sorted", [("rnn", True), ("gru", True), ("lstm-projection", False), ("lstm-batch-first", False)]
)
def test_packed_sequences_match_torch(name, enforce_sorted):
    """A PackedSequence in, a PackedSequence out: each sequence runs for its own length (the reverse direction starts
    at its own last step), given states and final states in the caller's order; gradients reach the padded input,
    the states and every parameter."""
    cls, args, kwargs = LAYERS[name]
    ours, theirs = _pair(cls, args, kwargs)
    batch_first = kwargs.get("batch_first", False)
    lengths = [5, 4, 2] if enforce_sorted else [2, 5, 4]
    directions = 2 if kwargs.get("bidirectional") else 1
    layers = args[2] if len(args) > 2 else kwargs.get("num_layers", 1)
    hidden = kwargs.get("proj_size") or args[1]

    def run(m, module, padded, h0):
        rnn_utils = m.nn.utils.rnn
        packed = rnn_utils.pack_padded_sequence(padded, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
        state = (h0, h0[..., :1].expand(*h0.shape[:-1], args[1]) * 0.5) if cls == "LSTM" else h0
        out, final = module(packed, state)
        unpacked, out_lengths = rnn_utils.pad_packed_sequence(out, batch_first=batch_first)
        finals = list(final) if cls == "LSTM" else [final]
        loss = (unpacked**2).sum() + sum((f * f.cos()).sum() for f in finals)
        leaves = [padded, h0, *module.parameters()]
        return [out.data, out.batch_sizes, out_lengths, *finals, *m.autograd.grad(loss, leaves)]

    padded = _input((3, 5, 3) if batch_first else (5, 3, 3))
    h0 = _input((directions * layers, 3, hidden), seed=2)
    got = run(bg, ours, padded, h0)
    want = run(torch, theirs, to_torch(padded), to_torch(h0))
    assert_same(got, want, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_dropout_between_layers_of_a_packed_batch_draws_torchs_mask(kind):
    """Between layers torch drops out the packed data (its rows in packed order), not a padded tensor: the same seed
    gives the same outputs, gradients and the same draws afterwards."""

    def run(m):
        m.manual_seed(3)
        module = getattr(m.nn, kind)(3, 4, num_layers=3, bidirectional=True, batch_first=True, dropout=0.3)
        x = m.tensor(np.random.default_rng(1).standard_normal((3, 5, 3)), dtype=m.float32, requires_grad=True)
        packed = m.nn.utils.rnn.pack_padded_sequence(x, m.tensor([5, 2, 4]), batch_first=True, enforce_sorted=False)
        out, _ = module(packed)
        unpacked = m.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]
        unpacked.pow(2).sum().backward()
        return unpacked, x.grad, m.rand(2)

    assert_same(run(bg), run(torch), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch_first, enforce_sorted", [(True, False), (True, True), (False, False)])
def test_padded_output_layout_decides_a_later_dropout_mask(batch_first, enforce_sorted):
    """pad_packed_sequence lays its result out as torch's (batch-first and unsorted: row-major, from an index_select
    after the transpose), so dropout over it draws torch's mask, element for element; its strides and node agree."""

    def run(m):
        m.manual_seed(4)
        x = m.tensor(np.random.default_rng(2).standard_normal((3, 5, 2)), requires_grad=True)
        lengths = [5, 4, 2] if enforce_sorted else [4, 5, 2]
        padded = x if batch_first else x.transpose(0, 1)
        packed = m.nn.utils.rnn.pack_padded_sequence(padded, lengths, batch_first, enforce_sorted)
        out = m.nn.utils.rnn.pad_packed_sequence(packed, batch_first, total_length=6)[0]
        dropped = m.nn.functional.dropout(out, p=0.5)
        dropped.sum().backward()
        return dropped, x.grad, out.stride(), type(out.grad_fn).__name__

    got, want = run(bg), run(torch)
    assert got[2:] == want[2:]
    assert_same(got[:2], want[:2])


@pytest.mark.parametrize(
    "kind,kwargs", [("GRU", {}), ("LSTM", {"bidirectional": True, "proj_size": 2}), ("RNN", {"bias": False})]
)
def test_private_weight_name_lists_as_torch(kind, kwargs):
    """Public initialisation code walks `_flat_weights_names` / `_all_weights` and writes `_parameters[name]`."""

    def run(m):
        m.manual_seed(0)
        layer = getattr(m.nn, kind)(3, 4, 2, **kwargs).double()
        for name in layer._flat_weights_names:
            if "weight" in name:
                m.nn.init.xavier_uniform_(layer._parameters[name])
        flat = [tuple(w.shape) for w in layer._flat_weights]
        out, _ = layer(m.ones(5, 2, 3, dtype=m.float64))
        return layer._all_weights, layer._flat_weights_names, flat, out

    (names, flat_names, shapes, out), (t_names, t_flat_names, t_shapes, t_out) = run(bg), run(torch)
    assert (names, flat_names, shapes) == (t_names, t_flat_names, t_shapes)
    assert_same(out, t_out)
