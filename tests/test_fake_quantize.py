"""fake_quantize_per_tensor_affine and fake_quantize_per_channel_affine against torch 2.13: bit-equal values in every
float dtype (torch's CPU kernels' rounding: the float32 reciprocal, half-to-even, where a float zero point enters),
the straight-through gradient, node names, and torch's errors."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import to_torch

DTYPES = ["float64", "float32", "float16", "bfloat16"]
CHANNEL_SCALES = [0.01, 0.03, 0.05, 0.07, 0.11, 0.13, 0.17, 0.19]

CALLS = {  # name: call(m, x) on an (8, 50) input
    "per_tensor": lambda m, x: m.fake_quantize_per_tensor_affine(x, 0.037, 3, -128, 127),
    "per_tensor_narrow": lambda m, x: m.fake_quantize_per_tensor_affine(x, 0.25, 1, -4, 3),
    "per_tensor_tensor_qparams": lambda m, x: m.fake_quantize_per_tensor_affine(
        x, m.tensor(0.0371), m.tensor(-2, dtype=m.int32), -128, 127
    ),
    "per_tensor_float_point_tensor": lambda m, x: m.fake_quantize_per_tensor_affine(
        x, m.tensor(0.05, dtype=m.float64), m.tensor(1.7), -20, 20
    ),
    "per_channel": lambda m, x: m.fake_quantize_per_channel_affine(
        x, m.tensor(CHANNEL_SCALES), m.arange(-4, 4, dtype=m.int32), 0, -128, 127
    ),
    "per_channel_float_point_axis_1": lambda m, x: m.fake_quantize_per_channel_affine(
        x.t(), m.tensor(CHANNEL_SCALES), m.linspace(-5, 5, 8), 1, -128, 127
    ),
    "per_channel_half_point": lambda m, x: m.fake_quantize_per_channel_affine(
        x, m.tensor(CHANNEL_SCALES), m.linspace(-3, 3, 8).half(), 0, -8, 7
    ),
}


def _inputs(dtype):
    rng = np.random.default_rng(0)
    values = rng.normal(size=(8, 50)) * np.arange(1, 9)[:, None]
    values[0, :9] = [0.125, 0.375, -0.125, 0.0185, 1e30, -1e30, np.nan, np.inf, -np.inf]  # halfway, far out
    x = bg.tensor(values).to(getattr(bg, dtype)).requires_grad_()
    return x, to_torch(x.detach().double()).to(getattr(torch, dtype)).requires_grad_()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CALLS))
def test_values_and_gradients_are_torch_s(name, dtype):
    x, x_torch = _inputs(dtype)
    out, expected = CALLS[name](bg, x), CALLS[name](torch, x_torch)
    assert repr(out.dtype) == repr(expected.dtype)
    np.testing.assert_array_equal(np.asarray(out.double().detach().numpy()), expected.double().detach().numpy())
    assert out.grad_fn.name() == expected.grad_fn.name()
    weights = np.random.default_rng(1).normal(size=tuple(out.shape))
    (out * bg.tensor(weights).to(out.dtype)).sum().backward()
    (expected * torch.tensor(weights).to(expected.dtype)).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad.double().numpy()), x_torch.grad.double().numpy())


def test_straight_through_gradient_differentiates_again():
    x = bg.tensor([-1.3, -0.25, 0.25, 0.75, 100.0], dtype=bg.float64, requires_grad=True)
    (g,) = bg.autograd.grad(bg.fake_quantize_per_tensor_affine(x, 0.5, 1, -4, 3).sum(), x, create_graph=True)
    assert g.tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert not g.requires_grad  # the mask is a constant, as torch's
    v = bg.ones(5, dtype=bg.float64, requires_grad=True)
    (h,) = bg.autograd.grad(bg.fake_quantize_per_tensor_affine(x, 0.5, 1, -4, 3), x, v, create_graph=True)
    assert h.requires_grad and bg.autograd.grad(h.sum(), v)[0].tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]


ERRORS = [
    lambda m, x: m.fake_quantize_per_tensor_affine(x, 0.5, 1, 3, -4),
    lambda m, x: m.fake_quantize_per_tensor_affine(x, 0.5, 10, -4, 3),
    lambda m, x: m.fake_quantize_per_tensor_affine(x.int(), 0.5, 1, -4, 3),
    lambda m, x: m.fake_quantize_per_tensor_affine(x, m.tensor(0.5, requires_grad=True), m.tensor(0), -4, 3),
    lambda m, x: m.fake_quantize_per_tensor_affine(x, m.tensor(0.5), m.tensor(0.0, requires_grad=True), -4, 3),
    lambda m, x: m.fake_quantize_per_channel_affine(x, m.ones(2), m.ones(2, dtype=m.int32), 0, -2, 2),
    lambda m, x: m.fake_quantize_per_channel_affine(x, m.ones(3), m.ones(3, dtype=m.int32), 2, -2, 2),
    lambda m, x: m.fake_quantize_per_channel_affine(x, m.ones(3), m.ones(2, dtype=m.int32), 0, -2, 2),
    lambda m, x: m.fake_quantize_per_channel_affine(x, m.ones(3).double(), m.ones(3, dtype=m.int32), 0, -2, 2),
    lambda m, x: m.fake_quantize_per_channel_affine(x, m.ones(3), m.ones(3, dtype=m.int64), 0, -2, 2),
    lambda m, x: m.fake_quantize_per_channel_affine(x, m.ones(3), m.tensor([5, 0, 0], dtype=m.int32), 0, -2, 2),
    lambda m, x: m.fake_quantize_per_channel_affine(
        x, m.ones(3, requires_grad=True), m.ones(3, dtype=m.int32), 0, -2, 2
    ),
    lambda m, x: m.fake_quantize_per_channel_affine(x, m.ones(1, 3), m.ones(3, dtype=m.int32), 0, -2, 2),
    lambda m, x: m.fake_quantize_per_channel_affine(x, m.ones(3), m.ones(3, dtype=m.int32), 0, 3, -2),
    lambda m, x: m.fake_quantize_per_channel_affine(x, m.ones(4), m.ones(4, dtype=m.int32), -1, -2, 2),
]


@pytest.mark.parametrize("call", ERRORS)
def test_errors_are_torch_s(call):
    with pytest.raises(Exception) as expected:
        call(torch, torch.ones(3, 4))
    with pytest.raises(type(expected.value)) as ours:
        call(bg, bg.ones(3, 4))
    assert str(ours.value) == str(expected.value)
