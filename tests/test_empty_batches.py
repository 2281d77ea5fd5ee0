"""Empty inputs (a batch of none, as a last or filtered batch makes) through layers and ops against torch 2.13:
shapes, dtypes and values; convolutions and pooling crashed inside JAX reshaping zero-size arrays."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

CALLS = {
    "conv1d": lambda m: m.nn.functional.conv1d(m.ones(0, 2, 5), m.ones(3, 2, 2)),
    "conv2d": lambda m: m.nn.functional.conv2d(m.ones(0, 2, 4, 4), m.ones(3, 2, 3, 3), padding=1),
    "conv2d-module": lambda m: m.nn.Conv2d(2, 3, 3)(m.ones(0, 2, 5, 5)),
    "conv_transpose2d": lambda m: m.nn.functional.conv_transpose2d(m.ones(0, 2, 3, 3), m.ones(2, 3, 2, 2)),
    "max_pool1d_with_indices": lambda m: m.max_pool1d_with_indices(m.ones(0, 2, 5), 2)[0],
    "max_pool2d": lambda m: m.nn.functional.max_pool2d(m.ones(0, 2, 4, 4), 2),
    "avg_pool2d": lambda m: m.nn.functional.avg_pool2d(m.ones(0, 2, 4, 4), 2),
    "adaptive_avg_pool1d": lambda m: m.nn.functional.adaptive_avg_pool1d(m.ones(0, 2, 5), 2),
    "adaptive_max_pool1d": lambda m: m.nn.functional.adaptive_max_pool1d(m.ones(0, 2, 5), 2),
    "adaptive_avg_pool2d": lambda m: m.nn.functional.adaptive_avg_pool2d(m.ones(0, 2, 5, 5), 2),
    "adaptive_max_pool2d": lambda m: m.nn.functional.adaptive_max_pool2d(m.ones(0, 2, 5, 5), 2),
    "max_unpool2d": lambda m: m.nn.functional.max_unpool2d(
        *m.nn.functional.max_pool2d(m.ones(0, 1, 4, 4), 2, return_indices=True), 2
    ),
    "pixel_shuffle": lambda m: m.pixel_shuffle(m.ones(0, 4, 2, 1), 2),
    "pixel_unshuffle": lambda m: m.pixel_unshuffle(m.ones(0, 1, 4, 2), 2),
    "pixel_unshuffle-no-channels": lambda m: m.pixel_unshuffle(m.ones(2, 0, 4, 2), 2),
    "nonzero_static": lambda m: m.nonzero_static(m.ones(0, 3), size=2, fill_value=5),
    "nonzero_static-default-fill": lambda m: m.nonzero_static(m.ones(2, 0), size=1),
    "bincount-weights": lambda m: m.bincount(m.ones(0, dtype=m.int64), m.ones(0), minlength=3),
    "bincount-half-weights": lambda m: m.bincount(m.tensor([0, 2]), m.ones(2, dtype=m.float16)),
    "std-one-element": lambda m: m.ones(1).std(),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_like_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = CALLS[name](bg), CALLS[name](torch)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert_same(ours, theirs)


def test_the_dof_warning_points_at_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bg.ones(1).std()
    assert [w.filename for w in caught] == [__file__]


def test_gradients_through_an_empty_batch():
    def program(m):
        m.manual_seed(0)
        layer = m.nn.Conv2d(2, 3, 3).double()
        out = m.nn.functional.adaptive_avg_pool2d(layer(m.ones(0, 2, 5, 5, dtype=m.float64)), 1)
        out.sum().backward()
        return out, layer.weight.grad, layer.bias.grad

    ours, theirs = program(bg), program(torch)
    assert_same(ours, theirs)
    assert np.asarray(ours[1].numpy()).shape == (3, 2, 3, 3)
