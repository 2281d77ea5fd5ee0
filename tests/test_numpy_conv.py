"""The NumPy row of lax.conv_general_dilated (_numpy_conv.py): equal to XLA's convolution over its parameters
(strides, padding that pads or crops, input and kernel dilation, feature and batch groups, any dimension order), and
it gives small convolutions, transposed convolutions and their gradients host forms: a new size compiles nothing, with
torch's values."""

import itertools

import jax
import numpy as np
import pytest
import torch
from jax import lax

import batched_grad as bg
from batched_grad._numpy_conv import conv_general_dilated
from oracle import assert_same

LAYOUTS = {1: ("NCW", "OIW", "NCW"), 2: ("NHWC", "HWIO", "NCHW"), 3: ("NCDHW", "OIDHW", "NDHWC")}


# (groups, batch groups), stride, input dilation, padding, kernel dilation
_PARAMS = ([(1, 1), (2, 1), (1, 2)], [1, 2], [1, 2], [(1, 2), (-1, 1), (0, 0)], [1, 2])
# a few of their combinations that take each value, for the default run
_SOME = [((1, 1), 1, 1, (1, 2), 1), ((2, 1), 2, 1, (-1, 1), 2), ((1, 2), 1, 2, (0, 0), 1), ((1, 2), 2, 2, (1, 2), 2)]


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_row_equals_xlas_convolution(dims):
    _compare_with_xla(dims, _SOME)


@pytest.mark.slow
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_row_equals_xlas_convolution_over_every_combination(dims):
    _compare_with_xla(dims, itertools.product(*_PARAMS))


def _compare_with_xla(dims, grid):
    rng = np.random.default_rng(dims)
    for (groups, batches), stride, lhs_dilation, pad, rhs_dilation in grid:
        spatial = (9, 7, 5)[:dims]
        lhs_spec, rhs_spec, out_spec = LAYOUTS[dims]
        x = rng.standard_normal((4, 6) + spatial)  # N, C, *spatial
        w = rng.standard_normal((6 if batches == 1 else 4, 6 // groups) + (3,) * dims)  # O, I, *kernel
        letters = "DHW"[-dims:]
        x = np.transpose(x, [("NC" + letters).index(c) for c in lhs_spec])
        w = np.transpose(w, [("OI" + letters).index(c) for c in rhs_spec])
        numbers = lax.conv_dimension_numbers(x.shape, w.shape, LAYOUTS[dims])
        params = dict(
            window_strides=(stride,) * dims,
            padding=(pad,) * dims,
            lhs_dilation=(lhs_dilation,) * dims,
            rhs_dilation=(rhs_dilation,) * dims,
            dimension_numbers=numbers,
            feature_group_count=groups,
            batch_group_count=batches,
        )
        with jax.enable_x64(True):
            expected = np.asarray(lax.conv_general_dilated(x, w, **params))
        got = conv_general_dilated(x, w, **params)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def _network_grads(lib, sizes):
    lib.manual_seed(0)
    net = lib.nn.Sequential(
        lib.nn.Conv2d(3, 8, 3, padding=1),
        lib.nn.Tanh(),
        lib.nn.Conv2d(8, 8, 3, stride=2, groups=2, dilation=2),
        lib.nn.ConvTranspose2d(8, 4, 2, stride=2),
    )
    rng = np.random.default_rng(0)
    found = []
    for batch, side in sizes:
        x = lib.tensor(rng.standard_normal((batch, 3, side, side)).astype(np.float32), requires_grad=True)
        loss = net(x).pow(2).mean()
        net.zero_grad()
        loss.backward()
        found += [loss.detach(), x.grad] + [p.grad for p in net.parameters()]
    return found


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="host forms run on the CPU backend only")
def test_small_convolutions_at_new_sizes_compile_nothing():
    _network_grads(bg, [(2, 11), (3, 13)])  # the other ops met on these patterns of sizes
    before = bg.compile_count()
    sizes = [(4, 12), (3, 9), (2, 16)]
    found = _network_grads(bg, sizes)
    assert bg.compile_count() == before
    for got, expected in zip(found, _network_grads(torch, sizes)):
        assert_same(got, expected, rtol=1e-4, atol=1e-5)
