"""Integer and bool tensors through ops whose float behaviour is tested elsewhere, against torch 2.13: the result's
dtype and values, or torch's error. Found by running every op database record on every dtype side by side."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


def _bools(m):
    return m.tensor([True, False, True, True])


def _ints(m):
    return m.tensor([[3, 1, 2], [2, 4, 6]])


RESULTS = {
    "median-int": lambda m: m.median(_ints(m)),
    "median-int32": lambda m: m.median(_ints(m).int()),
    "nanmedian-int": lambda m: m.nanmedian(_ints(m)),
    "diff-bool": lambda m: m.diff(_bools(m)),
    "diff-bool-prepend": lambda m: m.diff(_bools(m), prepend=m.tensor([False]), n=2),
    "matrix_power-int": lambda m: m.matrix_power(m.tensor([[1, 1], [0, 1]]), 3),
    "linalg.matrix_power-int-0": lambda m: m.linalg.matrix_power(m.tensor([[1, 1], [0, 1]]), 0),
    "add-bool-alpha": lambda m: m.add(_bools(m), m.tensor([False, False, True, False]), alpha=2),
    "add-bool-alpha-0": lambda m: m.add(_bools(m), m.tensor([True, False, True, False]), alpha=0),
    "add-bool-number-alpha": lambda m: m.add(_bools(m), True, alpha=3),
    "add_-bool-alpha": lambda m: _bools(m).add_(m.tensor([False, True, True, False]), alpha=5),
    "add-int-bool-alpha": lambda m: m.add(_ints(m)[0], m.tensor([True, False, True]), alpha=2),
    **{
        f"{name}-int-{scalars}": (lambda m, name=name, kw=kw: getattr(m, name)(*_fused_operands(m, name), **kw))
        for name in ("addmm", "addmv", "addbmm", "baddbmm")
        for scalars, kw in {
            "fractional-beta": dict(beta=0.5, alpha=-2),
            "fractional-alpha": dict(alpha=2.7),
            "bool-beta": dict(beta=True),
        }.items()
    },
}


def _fused_operands(m, name):
    a, v, t = m.ones(3, 3, dtype=m.int64), m.tensor([1, 2, 3]), m.ones(2, 3, 3, dtype=m.int64)
    return {"addmm": (v, a, a), "addmv": (v, a, v), "addbmm": (a, t, t), "baddbmm": (t, t, t)}[name]


@pytest.mark.parametrize("name", list(RESULTS))
def test_result_is_torch_s(name):
    ours, theirs = RESULTS[name](bg), RESULTS[name](torch)
    assert repr(ours.dtype) == repr(theirs.dtype)
    np.testing.assert_array_equal(np.asarray(ours.numpy()), theirs.numpy())


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.median(_bools(m)),
        lambda m: m.median(_bools(m), 0),
        lambda m: m.nanmedian(_bools(m)),
        lambda m: m.matrix_power(m.tensor([[1, 1], [0, 1]]), -1),
        lambda m: m.addr(m.ones(3, 3, dtype=m.int64), m.tensor([1, 2, 3]), m.tensor([1, 2, 3]), beta=0.5),
        lambda m: m.addr(m.ones(3, 3, dtype=m.int64), m.tensor([1, 2, 3]), m.tensor([1, 2, 3]), alpha=1.5),
        lambda m: m.addr(m.ones(3, 3, dtype=m.int64), m.tensor([1, 2, 3]), m.tensor([1, 2, 3]), beta=True),
        lambda m: m.sub(_bools(m), _bools(m), alpha=2),
    ],
)
def test_refused_as_torch(call):
    raises_like_torch(call)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nn.functional.dropout(m.ones(3, dtype=m.int64)),
        lambda m: m.nn.functional.dropout(m.ones(3, dtype=m.bool), p=0.2),
        lambda m: m.nn.functional.dropout2d(m.ones(2, 3, 4, dtype=m.int64)),
        lambda m: m.nn.functional.alpha_dropout(m.ones(3, dtype=m.int64), training=True),
        lambda m: m.feature_dropout(m.tensor(2.0), 0.5, True),
        lambda m: m.feature_alpha_dropout(m.ones(3), 0.5, True),
        lambda m: m.cartesian_prod(m.ones(2, 2)),
        lambda m: m.cartesian_prod(m.tensor(2.0), m.ones(2)),
        lambda m: m.dist(m.ones(3, dtype=m.int64), m.zeros(3, dtype=m.int64)),
        lambda m: m.nn.functional.kl_div(m.ones(3), m.ones(3, dtype=m.int64), reduction="sum"),
        lambda m: m.nn.functional.kl_div(m.ones(3, dtype=m.int64), m.ones(3), reduction="sum"),
    ],
)
def test_integer_inputs_refused_as_torch(call):
    raises_like_torch(call)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nn.functional.dropout(m.ones(3, dtype=m.int64), p=0.0),
        lambda m: m.nn.functional.dropout(m.ones(0, dtype=m.int64), p=0.5),
        lambda m: m.nn.functional.dropout(m.ones(3, dtype=m.int64), training=False),
        lambda m: m.nn.functional.alpha_dropout(m.ones(3, dtype=m.int64), p=1.0, training=True),
        lambda m: m.feature_dropout(m.tensor(2.0), 0.5, False),
    ],
)
def test_integer_inputs_kept_where_torch_keeps_them(call):
    ours, theirs = call(bg), call(torch)
    assert repr(ours.dtype) == repr(theirs.dtype)
    np.testing.assert_array_equal(np.asarray(ours.numpy()), theirs.numpy())
