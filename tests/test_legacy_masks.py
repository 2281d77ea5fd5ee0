"""Masks and indices as code written for torch 0.4-1.1 makes them (ByteTensor masks, small integer dtypes), against
torch 2.13: uint8 masks index with a deprecation warning per use, a single value written through a lone uint8 mask
is refused as masked_fill_ refuses it, index tensors of other integer dtypes are refused, index_put's accumulate
takes masks, where() takes a uint8 condition with a once-per-process warning, masked_scatter warns before refusing."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message).split(" (Triggered internally")[0] for w in caught]


def _same_with_warnings(fn):
    expected, want = _warnings_of(lambda: fn(torch))
    actual, got = _warnings_of(lambda: fn(bg))
    assert_same(actual, expected)
    assert got == want
    return got


def _byte(m, values):
    return m.tensor(values, dtype=m.uint8)


READS = {
    "alone": lambda m: m.arange(6.0).view(2, 3)[_byte(m, [1, 0])],
    "after_slice": lambda m: m.arange(6.0).view(2, 3)[:, _byte(m, [1, 0, 1])],
    "two_dims": lambda m: m.arange(6.0).view(2, 3)[_byte(m, [[1, 0, 1], [0, 1, 0]])],
    "numpy_mask": lambda m: m.arange(3.0)[np.array([0, 1, 1], np.uint8)],
    "zero_dim_is_a_bool": lambda m: m.arange(3.0)[m.tensor(1, dtype=m.uint8)],
    "int32_index": lambda m: m.arange(3.0)[m.tensor([2, 0], dtype=m.int32)],
}


@pytest.mark.parametrize("name", READS)
def test_uint8_mask_reads_warn_each_time(name):
    got = _same_with_warnings(lambda m: [READS[name](m), READS[name](m)])
    assert len(got) == (2 if name in ("alone", "after_slice", "two_dims", "numpy_mask") else 0)


def _written(index, value):
    def program(m):
        x = m.arange(6.0).view(2, 3)
        x[index(m)] = value(m)
        return x

    return program


WRITES_ACCEPTED = {
    "several_values": _written(lambda m: _byte(m, [1, 0, 1])[None].expand(2, 3), lambda m: m.arange(4.0)),
    "mask_and_index": _written(lambda m: (_byte(m, [1, 0]), m.tensor([2])), lambda m: m.tensor(9.0)),
    "bool_mask_scalar": _written(lambda m: (_byte(m, [0, 1]).bool(), 1), lambda m: 7.0),
}


@pytest.mark.parametrize("name", WRITES_ACCEPTED)
def test_uint8_mask_writes_torch_accepts(name):
    _same_with_warnings(WRITES_ACCEPTED[name])


WRITES_REFUSED = {
    "scalar": _written(lambda m: _byte(m, [1, 0]), lambda m: 5.0),
    "zero_dim_value": _written(lambda m: _byte(m, [1, 0]), lambda m: m.tensor(5.0)),
    "one_element_value": _written(lambda m: _byte(m, [1, 0]), lambda m: m.tensor([5.0])),
    "after_int": _written(lambda m: (_byte(m, [1, 0]), 1), lambda m: 5.0),
    "after_ellipsis": _written(lambda m: (Ellipsis, _byte(m, [1, 0, 1])), lambda m: 5.0),
    "numpy_mask": _written(lambda m: np.array([1, 0], np.uint8), lambda m: 5.0),
    "index_put_": lambda m: m.zeros(3).index_put_((_byte(m, [1, 0, 1]),), m.tensor(1.0)),
}


@pytest.mark.parametrize("name", WRITES_REFUSED)
def test_one_value_through_a_lone_uint8_mask_is_refused(name):
    raises_like_torch(WRITES_REFUSED[name])


@pytest.mark.parametrize("dtype", ["int8", "int16", "float32", "float64"])
@pytest.mark.parametrize("where", ["getitem", "setitem", "index_put_accumulate"])
def test_index_tensors_of_other_dtypes_are_refused(dtype, where):
    def program(m):
        x, idx = m.arange(3.0), m.tensor([1, 0]).to(getattr(m, dtype))
        if where == "getitem":
            return x[idx]
        if where == "setitem":
            x[idx] = m.tensor([4.0, 5.0])
            return x
        return x.index_put((idx,), m.tensor(1.0), accumulate=True)

    raises_like_torch(program)


@pytest.mark.parametrize("mask_dtype", ["uint8", "bool"])
def test_index_put_accumulate_takes_masks(mask_dtype):
    def program(m):
        mask = m.tensor([[1, 0, 1], [0, 0, 1]]).to(getattr(m, mask_dtype))
        x = m.arange(6.0, requires_grad=True).view(2, 3)
        rows = m.tensor([1, 0]).to(getattr(m, mask_dtype))
        y = x.index_put((mask,), m.tensor([10.0, 20.0, 30.0]), accumulate=True)
        z = x.index_put((rows,), m.tensor(1.0), accumulate=True)
        (grad,) = m.autograd.grad((y * y).sum() + (z * z).sum(), x)
        return y, z, grad

    _same_with_warnings(program)


def test_where_takes_a_uint8_condition_warning_once():
    def program(m):
        condition = _byte(m, [1, 0, 1])
        return [m.where(condition, m.ones(3), m.zeros(3)), m.ones(3).where(condition, m.full((3,), 2.0))]

    expected, actual = program(torch), program(bg)  # each library's once-per-process warning spent, if not yet
    assert_same(actual, expected)
    assert _warnings_of(lambda: program(bg))[1] == []
    bg.set_warn_always(True)
    try:
        got = _warnings_of(lambda: bg.where(_byte(bg, [1, 0]), bg.ones(2), bg.zeros(2)))[1]
    finally:
        bg.set_warn_always(False)
    assert got == [
        "where received a uint8 condition tensor. This behavior is deprecated and will be removed in a future version "
        "of PyTorch. Use a boolean condition instead."
    ]


def test_masked_scatter_warns_about_uint8_then_refuses():
    def program(m):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(RuntimeError) as error:
                m.zeros(3).masked_scatter(_byte(m, [1, 0, 1]), m.ones(3))
        return [str(w.message).split(" (Triggered internally")[0] for w in caught], str(error.value)

    assert program(bg) == program(torch)


def test_set_default_tensor_type_warns_once_per_process():
    def program(m):
        _, first = _warnings_of(lambda: m.set_default_tensor_type("torch.DoubleTensor"))
        _, second = _warnings_of(lambda: m.set_default_tensor_type(m.FloatTensor))
        return len(first) <= 1, second, m.get_default_dtype() is m.float32

    assert program(bg) == program(torch) == (True, [], True)
