"""bg.testing.assert_close against torch.testing.assert_close: the same verdicts, exception types and messages."""

import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch

PASSING = [
    lambda m: (m.tensor([1.0, 2.0]), m.tensor([1.0, 2.0 + 1e-6])),  # float32: rtol 1.3e-6, atol 1e-5
    lambda m: (m.tensor([1.0], dtype=m.float64), m.tensor([1.0 + 1e-8], dtype=m.float64)),
    lambda m: (m.tensor([float("nan")]), m.tensor([float("nan")])),  # with equal_nan below
    lambda m: ([m.tensor(1), {"a": m.tensor([True])}], [m.tensor(1), {"a": m.tensor([True])}]),
    lambda m: (1.0, 1.0 + 1e-9),
    lambda m: (None, None),
    lambda m: (m.ones(2, dtype=m.float64), m.ones(2)),  # with check_dtype=False below
    lambda m: (m.tensor([1.0]), m.tensor([1.5])),  # with rtol=0.5, atol=0 below
]
OPTIONS = [{}, {}, {"equal_nan": True}, {}, {}, {}, {"check_dtype": False}, {"rtol": 0.5, "atol": 0.0}]


@pytest.mark.parametrize("i", range(len(PASSING)))
def test_close_inputs_pass(i):
    torch.testing.assert_close(*PASSING[i](torch), **OPTIONS[i])
    bg.testing.assert_close(*PASSING[i](bg), **OPTIONS[i])


FAILING = [
    lambda m: m.testing.assert_close(m.tensor([1.0, 2.0, 3.0]), m.tensor([1.0, 2.5, 3.0])),
    lambda m: m.testing.assert_close(m.tensor([[1.0, 2.0], [3.0, 4.0]]), m.tensor([[1.0, 2.0], [3.1, 0.0]])),
    lambda m: m.testing.assert_close(
        m.tensor([1.0, 2.0], dtype=m.float64), m.tensor([1.0, 2.0 + 1e-6], dtype=m.float64)
    ),
    lambda m: m.testing.assert_close(m.tensor([1, 2]), m.tensor([1, 3])),
    lambda m: m.testing.assert_close(m.tensor(True), m.tensor(False)),
    lambda m: m.testing.assert_close(m.tensor(1.0), m.tensor(1.1)),
    lambda m: m.testing.assert_close(m.tensor([float("nan"), 1.0]), m.tensor([float("nan"), 1.0])),
    lambda m: m.testing.assert_close([m.tensor(1.0)], [m.tensor(2.0)]),
    lambda m: m.testing.assert_close({"a": m.ones(2)}, {"a": m.zeros(2)}),
    lambda m: m.testing.assert_close(m.ones(2), m.ones(3)),
    lambda m: m.testing.assert_close(m.ones(2), m.ones(2, dtype=m.float64)),
    lambda m: m.testing.assert_close(1.0, 1.5),
    lambda m: m.testing.assert_close(1, 1.0),
    lambda m: m.testing.assert_close(m.ones(2), 1.0),
    lambda m: m.testing.assert_close([1, 2], [1]),
    lambda m: m.testing.assert_close({"a": 1}, {"b": 1}),
    lambda m: m.testing.assert_close(m.ones(2), m.zeros(2), rtol=1e-3),
    lambda m: m.testing.assert_close(m.ones(2), m.zeros(2), msg="custom"),
]


@pytest.mark.parametrize("i", range(len(FAILING)))
def test_mismatches_raise_torchs_exception_and_message(i):
    got, want = raises_like_torch(FAILING[i])
    assert str(got) == str(want)
