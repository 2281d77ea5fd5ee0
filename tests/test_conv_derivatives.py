"""Derivatives of convolutions against torch.func 2.13: per-sample gradients (vmap of grad over one-sample
convolutions, whose weight and bias gradients come from one product with the input's stacked taps), gradients of
one operand at a time, forward-mode tangents, and second derivatives; float64, rtol 1e-6."""

import numpy as np
import pytest
import torch
import torch.func

import batched_grad as bg
import batched_grad.func  # noqa: F401 - bg.func
import batched_grad.nn.functional  # noqa: F401 - bg.nn.functional
from test_func import assert_tree

RNG = np.random.default_rng(3)

# (input (N, C, H, W), weight shape, stride, padding, dilation, groups): kernel taps (<= 4 channels per group) and
# channels-last convolutions; the last one sample's stacked taps (16 * 24 * 24 * 9 > 65,536) take XLA's transpose
GEOMETRIES = {
    "taps": ((5, 1, 9, 8), (4, 1, 3, 3), 1, 0, 1, 1),
    "taps_grouped_strided": ((3, 4, 9, 10), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2),
    "channels_last": ((4, 8, 7, 7), (5, 8, 3, 3), 1, 1, 1, 1),
    "channels_last_grouped_dilated": ((3, 8, 9, 9), (4, 4, 2, 3), 2, (0, 1), 2, 2),
    "channels_last_large_sample": ((2, 16, 24, 24), (3, 16, 3, 3), 1, 0, 1, 1),
}


def data(geometry):
    x_shape, w_shape, *_ = geometry
    return RNG.standard_normal(x_shape), RNG.standard_normal(w_shape), RNG.standard_normal(w_shape[0])


def conv(m, geometry):
    _, _, stride, padding, dilation, groups = geometry
    return lambda x, w, b: m.nn.functional.conv2d(x, w, b, stride, padding, dilation, groups)


def both(case):
    """case(m, arrays as m's tensors) run with torch and with batched_grad."""

    def run(m, arrays):
        return case(m, *[m.tensor(a, dtype=m.float64) for a in arrays])

    return run


@pytest.mark.parametrize("name", GEOMETRIES)
@pytest.mark.parametrize("argnums", [(0,), (1,), (0, 1)])  # of the weight and the bias
def test_per_sample_grads(name, argnums):
    geometry = GEOMETRIES[name]
    arrays = data(geometry)

    def case(m, x, w, b):
        loss = lambda w, b, xi: (conv(m, geometry)(xi.unsqueeze(0), w, b) ** 2).sum()  # noqa: E731
        return m.func.vmap(m.func.grad(loss, argnums=argnums), (None, None, 0))(w, b, x)

    assert_tree(both(case)(bg, arrays), both(case)(torch, arrays))


@pytest.mark.parametrize("name", GEOMETRIES)
@pytest.mark.parametrize("wanted", [(0,), (1,), (2,), (1, 2), (0, 1, 2)])
def test_grads_of_some_operands(name, wanted):
    geometry = GEOMETRIES[name]
    arrays = data(geometry)

    def case(m, x, w, b):
        return m.func.grad(lambda x, w, b: (conv(m, geometry)(x, w, b) ** 2).sum(), argnums=wanted)(x, w, b)

    assert_tree(both(case)(bg, arrays), both(case)(torch, arrays))


@pytest.mark.parametrize("name", GEOMETRIES)
def test_jvp(name):
    geometry = GEOMETRIES[name]
    arrays = data(geometry)
    tangents = data(geometry)

    def case(m, x, w, b, tx, tw, tb):
        return m.func.jvp(conv(m, geometry), (x, w, b), (tx, tw, tb))

    assert_tree(both(case)(bg, arrays + tangents), both(case)(torch, arrays + tangents))


@pytest.mark.parametrize("name", ["taps", "channels_last"])
def test_per_sample_hessian_of_weight(name):
    geometry = GEOMETRIES[name]
    x, w, b = data(geometry)
    arrays = (x[:2, :, :5, :5], w, b)

    def case(m, x, w, b):
        loss = lambda w, xi: (m.tanh(conv(m, geometry)(xi.unsqueeze(0), w, b)) ** 2).sum()  # noqa: E731
        return m.func.vmap(m.func.hessian(loss), (None, 0))(w, x)

    assert_tree(both(case)(bg, arrays), both(case)(torch, arrays))
