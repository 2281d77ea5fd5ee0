"""Targets of class indices whose shape does not fit the input's, as old per-character loops make them (a 0-dim
target[c] against a (1, C) output): nll_loss and cross_entropy raise torch's error, in torch's order, for each input
rank; an unbatched input takes its class as a 0-dim or a one-element 1-D target (torch's backward then refuses
the latter; its value is compared)."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch

MISFITS = [
    ((1, 5), ()),
    ((3, 5), ()),
    ((1, 5), (2,)),
    ((3, 5), (3, 2)),
    ((5,), (2,)),
    ((2, 5, 4), (2,)),
    ((2, 5, 4), ()),
    ((2, 5, 4), (2, 4, 1)),
    ((2, 5, 4, 3), (2, 4)),
    ((2, 5, 4, 3), (2, 4, 2)),
    ((2, 5, 4, 3, 2), (2, 4, 3, 1)),
]


@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
@pytest.mark.parametrize("shapes", MISFITS, ids=str)
def test_misfit_targets_raise_torchs_error(loss, shapes):
    input_shape, target_shape = shapes
    raises_like_torch(
        lambda m: getattr(m.nn.functional, loss)(m.zeros(input_shape), m.zeros(target_shape, dtype=m.long))
    )


@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_unbatched_input_takes_a_one_element_target(loss, reduction):
    def program(m):
        x = m.tensor([0.3, -1.2, 2.0, 0.5], dtype=m.float64)
        return getattr(m.nn.functional, loss)(x, m.tensor([2]), reduction=reduction)

    assert_same(program(bg), program(torch))


# cross_entropy takes a target of the input's shape as class probabilities and any other as class indices, whatever
# its dtype: a float target of another shape, or an integer one of the input's shape, raises torch's dtype error
TARGET_KINDS = [
    ((2, 3), (2,), "float32"),
    ((2, 3), (2, 4), "float32"),
    ((2, 3), (3, 3), "float32"),
    ((2, 3, 4), (2, 4), "float64"),
    ((3,), (), "float32"),
    ((2, 3), (2, 3), "int64"),
    ((3,), (3,), "int64"),
    ((2, 3), (2, 3), "bool"),
    ((2, 3), (2,), "int32"),
]


@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
@pytest.mark.parametrize("shapes", TARGET_KINDS, ids=str)
def test_target_kind_follows_its_shape(loss, shapes):
    input_shape, target_shape, dtype = shapes
    raises_like_torch(
        lambda m: getattr(m.nn.functional, loss)(m.zeros(input_shape), m.zeros(target_shape, dtype=getattr(m, dtype)))
    )
