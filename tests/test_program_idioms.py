"""Idioms met in public training programs (data pipelines, RL loops, samplers), each run with torch and with
batched_grad and compared: same values, same dtypes, same draws for the same seed, same errors."""

import array
import collections

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


@pytest.mark.parametrize(
    "make",
    [
        lambda: collections.deque([3.0, 1.5, -2.0]),
        lambda: array.array("f", [1.0, 2.5]),
        lambda: array.array("q", [4, -7]),
        lambda: [collections.deque([1, 2]), (3, 4)],
        lambda: collections.UserList([True, False]),
    ],
    ids=["deque", "array-float", "array-int", "nested-deque", "userlist"],
)
def test_tensor_reads_any_python_sequence(make):
    assert_same(bg.tensor(make()), torch.tensor(make()))


@pytest.mark.parametrize("data", [{1: 2}, {1, 2}, "ab", b"ab"], ids=["dict", "set", "str", "bytes"])
def test_tensor_refuses_what_is_not_a_sequence(data):
    raises_like_torch(lambda m: m.tensor(data))


def test_randint_with_high_and_size_keyword_draws_as_torch():
    bg.manual_seed(5)
    torch.manual_seed(5)
    ours = [bg.randint(9, size=(1,)).item() for _ in range(6)] + bg.randint(4, size=(2, 3)).tolist()
    theirs = [torch.randint(9, size=(1,)).item() for _ in range(6)] + torch.randint(4, size=(2, 3)).tolist()
    assert ours == theirs
    assert bg.randint(9, size=(2,)).dtype == bg.int64


@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2),
        lambda m: m.nn.GRU(3, 4, num_layers=2, bias=False),
        lambda m: m.nn.RNN(3, 4),
    ],
    ids=["lstm-bidirectional-proj", "gru-no-bias", "rnn"],
)
def test_recurrent_layers_flatten_parameters_and_list_all_weights_as_torch(make):
    bg.manual_seed(0)
    torch.manual_seed(0)
    ours, theirs = make(bg), make(torch)
    assert ours.flatten_parameters() is None and theirs.flatten_parameters() is None
    assert len(ours.all_weights) == len(theirs.all_weights)
    for our_layer, their_layer in zip(ours.all_weights, theirs.all_weights):
        assert len(our_layer) == len(their_layer)
        for a, b in zip(our_layer, their_layer):
            assert isinstance(a, bg.nn.Parameter)
            assert_same(a.detach(), b.detach())
    x = bg.randn(5, 2, 3)
    assert_same(ours(x)[0], theirs(torch.from_numpy(x.numpy()))[0], rtol=1e-5, atol=1e-6)
