"""Shapes that do not broadcast raise torch's RuntimeError naming the mismatch torch names: torch compares two shapes
from their last dimension, and folds three or more operands in pairwise from the left, so with several mismatches
the rightmost one of the first failing pair is the one reported."""

import pytest
import torch

import batched_grad as bg

SHAPE_PAIRS = [((100, 100), (128, 128)), ((2, 3, 4), (5, 3, 6)), ((3, 1, 4), (2, 5, 1, 7)), ((4, 2), (3,))]

BINARY = {
    "add": lambda m, a, b: a + b,
    "sub_method": lambda m, a, b: a.sub(b),
    "mul_function": lambda m, a, b: m.mul(a, b),
    "add_in_place": lambda m, a, b: a.add_(b),
    "atan2": lambda m, a, b: m.atan2(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b),
    "less_than": lambda m, a, b: a < b,
    "mse_loss": lambda m, a, b: m.nn.functional.mse_loss(a, b),
    "lerp": lambda m, a, b: m.lerp(a, b, 0.5),
    "addcmul_last_pair": lambda m, a, b: m.addcmul(a, a, b),
    "where_self_other": lambda m, a, b: m.where(m.ones(a.shape, dtype=m.bool), a, b),
    "broadcast_tensors": lambda m, a, b: m.broadcast_tensors(a, b),
}


def _message(lib, op, a_shape, b_shape):
    with pytest.raises(RuntimeError) as caught:
        op(lib, lib.zeros(a_shape), lib.zeros(b_shape))
    return str(caught.value)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
def test_mismatched_shapes_name_the_dimension_torch_names(name, shapes):
    if name == "add_in_place" and len(shapes[1]) > len(shapes[0]):
        pytest.skip("an in-place result cannot grow; torch raises a different message first")
    expected = _message(torch, BINARY[name], *shapes)
    assert _message(bg, BINARY[name], *shapes) == expected


def test_three_operands_report_the_first_failing_pair():
    """(3,) and (5,) fail before the 4-d third operand joins, so the dimension is counted in the 1-d pair."""

    def op(lib):
        return lib.addcmul(lib.zeros(3), lib.zeros(5), lib.zeros(1, 1, 1, 1))

    with pytest.raises(RuntimeError) as expected:
        op(torch)
    with pytest.raises(RuntimeError) as actual:
        op(bg)
    assert str(actual.value) == str(expected.value)
