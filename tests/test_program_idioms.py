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
