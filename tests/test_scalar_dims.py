"""0-dim tensors given a dim, against torch 2.13: a scalar's dims are -1 and 0 (others raise torch's IndexError,
where these ops took any dim), and the ops that reduce over the last dim take a scalar as its own distance."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def _scalar(m):
    return m.tensor(2.0)


REFUSED = {
    "logcumsumexp": lambda m: m.logcumsumexp(_scalar(m), 1),
    "cummax": lambda m: m.cummax(_scalar(m), 1),
    "cummin": lambda m: m.cummin(_scalar(m), -2),
    "aminmax": lambda m: m.aminmax(_scalar(m), dim=1),
    "median": lambda m: m.median(_scalar(m), 1),
    "nanmedian": lambda m: m.nanmedian(_scalar(m), -2),
    "mode": lambda m: m.mode(_scalar(m), 1),
    "kthvalue": lambda m: m.kthvalue(_scalar(m), 1, 1),
    "flatten-start": lambda m: m.flatten(_scalar(m), 1),
    "flatten-end": lambda m: _scalar(m).flatten(0, 2),
    "roll": lambda m: m.roll(_scalar(m), 1, 0),
    "roll-last": lambda m: m.roll(_scalar(m), 1, -1),
    "cumulative_trapezoid": lambda m: m.cumulative_trapezoid(_scalar(m)),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_scalar_refuses_other_dims(name):
    raises_like_torch(REFUSED[name])


TAKEN = {
    "logcumsumexp": lambda m: m.logcumsumexp(_scalar(m), -1),
    "cummax": lambda m: tuple(m.cummax(_scalar(m), 0)),
    "median": lambda m: tuple(m.median(_scalar(m), -1)),
    "mode": lambda m: tuple(m.mode(_scalar(m), 0)),
    "aminmax": lambda m: tuple(m.aminmax(_scalar(m), dim=0)),
    "flatten": lambda m: m.flatten(_scalar(m), 0, -1),
    "roll-flattened": lambda m: m.roll(_scalar(m), 1),
    "nonzero_static": lambda m: m.nonzero_static(_scalar(m), size=3),
    "pairwise_distance": lambda m: m.nn.functional.pairwise_distance(_scalar(m), m.tensor(5.0)),
    "pairwise_distance-broadcast": lambda m: m.nn.functional.pairwise_distance(m.ones(3), m.tensor(2.0)),
    "triplet_margin_loss": lambda m: m.nn.functional.triplet_margin_loss(_scalar(m), m.tensor(1.0), m.tensor(4.0)),
}


@pytest.mark.parametrize("name", list(TAKEN))
def test_a_scalar_takes_its_own_dims(name):
    assert_same(TAKEN[name](bg), TAKEN[name](torch))


def test_pairwise_distance_of_scalars_differentiates():
    def program(m):
        y = m.tensor(5.0, dtype=m.float64, requires_grad=True)
        d = m.nn.functional.pairwise_distance(m.tensor(2.0, dtype=m.float64), y)
        return d, m.autograd.grad(d, y)[0], d.grad_fn.name()

    ours, theirs = program(bg), program(torch)
    assert_same(ours[:2], theirs[:2])
    assert ours[2] == theirs[2]
