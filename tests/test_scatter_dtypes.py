"""The scatter and index families on bool and narrow integer tensors against torch 2.13: a bool sum is an `or`, a
product an `and` (JAX adds no bools: these crashed inside it), mean of bools is refused with torch's errors, and
int32 reductions stay int32."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


def _flags(m):
    return m.tensor([[True, False, False], [False, False, True]])


def _sources(m):
    return m.tensor([[True, True, False], [False, True, True]])


def _positions(m):
    return m.tensor([[0, 0, 1], [1, 1, 0]])


def _ints(m):
    return m.tensor([[1, 2, 3], [4, 5, 6]], dtype=m.int32)


CALLS = {
    **{
        f"scatter_reduce-{reduce}-{include}": (
            lambda m, r=reduce, i=include: _flags(m).scatter_reduce(0, _positions(m), _sources(m), r, include_self=i)
        )
        for reduce in ("sum", "prod", "amax", "amin")
        for include in (True, False)
    },
    "scatter": lambda m: _flags(m).scatter(0, _positions(m), _sources(m)),
    "scatter-value": lambda m: _flags(m).scatter(0, _positions(m), True),
    "scatter-add": lambda m: _flags(m).scatter(0, _positions(m), _sources(m), reduce="add"),
    "scatter-multiply": lambda m: _flags(m).scatter(0, _positions(m), _sources(m), reduce="multiply"),
    "scatter_add": lambda m: _flags(m).scatter_add(0, _positions(m), _sources(m)),
    "index_add": lambda m: _flags(m).index_add(0, m.tensor([1, 0]), _sources(m)),
    "index_add-alpha": lambda m: _flags(m).index_add(0, m.tensor([1, 0]), _sources(m), alpha=2),
    "index_copy": lambda m: _flags(m).index_copy(0, m.tensor([1, 0]), _sources(m)),
    "index_fill": lambda m: m.index_fill(_flags(m), 1, m.tensor([1]), True),
    "put": lambda m: _flags(m).put(m.tensor([0, 1]), m.tensor([True, True])),
    "put-accumulate": lambda m: _flags(m).put(m.tensor([0, 1, 1]), m.tensor([True, True, False]), accumulate=True),
    "index_put-accumulate": lambda m: _flags(m).index_put(
        (m.tensor([0, 0]),), m.tensor([True, False, True]), accumulate=True
    ),
    "kron": lambda m: m.kron(_flags(m), _sources(m)),
    "gather": lambda m: _flags(m).gather(1, m.tensor([[0, 0], [2, 1]])),
    **{
        f"index_reduce-{reduce}": lambda m, r=reduce: _flags(m).index_reduce(0, m.tensor([1, 0]), _sources(m), r)
        for reduce in ("prod", "amax", "amin")
    },
    **{
        f"int32-index_reduce-{reduce}": lambda m, r=reduce: _ints(m).index_reduce(0, m.tensor([1, 0]), _ints(m), r)
        for reduce in ("prod", "mean", "amax", "amin")
    },
    **{
        f"int32-scatter_reduce-{reduce}": lambda m, r=reduce: _ints(m).scatter_reduce(
            0, m.tensor([[1, 0, 0]]), _ints(m), r
        )
        for reduce in ("sum", "prod", "mean", "amax", "amin")
    },
}


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("name", list(CALLS))
def test_values_and_dtypes_are_torch_s(name):
    ours, theirs = CALLS[name](bg), CALLS[name](torch)
    assert repr(ours.dtype) == repr(theirs.dtype)
    np.testing.assert_array_equal(np.asarray(ours.numpy()), theirs.numpy())


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize(
    "call",
    [
        lambda m: _flags(m).scatter_reduce(0, _positions(m), _sources(m), "mean"),
        lambda m: _flags(m).scatter_reduce(0, _positions(m), _sources(m), "mean", include_self=False),
        lambda m: _flags(m).index_reduce(0, m.tensor([1, 0]), _sources(m), "mean"),
    ],
)
def test_mean_of_bools_is_refused(call):
    raises_like_torch(call)
