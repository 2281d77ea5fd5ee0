"""Convolutions with a one-tap kernel (the pointwise convolutions of point-cloud and mixing layers) are computed as a
matrix product on CPU; values, input/weight/bias gradients and per-sample gradients still match torch's, for every
stride, padding, dilation and group count."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same

GEOMETRIES = [
    dict(),
    dict(stride=2),
    dict(padding=1),
    dict(stride=2, padding=2, dilation=3),
    dict(groups=2),
]


def _conv_and_grads(m, n, dtype, geometry):
    m.manual_seed(0)
    conv = getattr(m.nn, f"Conv{n}d")(4, 6, 1, **geometry).to(dtype)
    x = m.randn((3, 4) + (5,) * n, dtype=dtype, requires_grad=True)
    out = conv(x)
    out.pow(2).sum().backward()
    return [out.detach(), x.grad, conv.weight.grad, conv.bias.grad]


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_pointwise_convolution_matches_torch_in_float64(n, geometry):
    assert_same(
        _conv_and_grads(bg, n, bg.float64, geometry), _conv_and_grads(torch, n, torch.float64, geometry), 1e-12, 1e-12
    )


def test_pointwise_convolution_in_float32():
    assert_same(
        _conv_and_grads(bg, 1, bg.float32, dict()), _conv_and_grads(torch, 1, torch.float32, dict()), 1e-5, 1e-5
    )


def _per_sample(m):
    m.manual_seed(0)
    weight, bias = m.randn(6, 4, 1, 1, dtype=m.float64), m.randn(6, dtype=m.float64)
    x = m.randn(3, 4, 5, 5, dtype=m.float64)

    def loss(w, b, sample):
        return m.nn.functional.conv2d(sample[None], w, b, stride=2).pow(2).sum()

    return list(m.func.vmap(m.func.grad(loss, argnums=(0, 1)), in_dims=(None, None, 0))(weight, bias, x))


def test_pointwise_convolution_per_sample_gradients():
    assert_same(_per_sample(bg), _per_sample(torch), 1e-12, 1e-12)
