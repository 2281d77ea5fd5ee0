"""Accumulation into an existing .grad on the CPU backend: float gradients of one dtype are added with NumPy, so the
sum stays on the host where the in-place updates of an optimizer step read it (nothing moves to the device and no
XLA add runs), with torch's values, in either engine tier."""

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg


def _two_backwards(lib, w0, x0, dtype):
    w = lib.tensor(w0.astype(dtype), requires_grad=True)
    x = lib.tensor(x0.astype(dtype))
    for scale in (1.0, 3.0):
        (w * x * scale).sum().backward()
    return w


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_second_backward_adds_into_grad_on_the_host(engine_tier, dtype):
    rng = np.random.default_rng(3)
    w0, x0 = rng.standard_normal((5, 4)), rng.standard_normal(4)
    expected = _two_backwards(torch, w0, x0, dtype).grad.numpy()
    w = _two_backwards(bg, w0, x0, dtype)
    assert type(w.grad._v) is np.ndarray
    assert w.grad.numpy().dtype == dtype
    np.testing.assert_array_equal(w.grad.numpy(), expected)


def test_accumulating_after_zero_moves_nothing_to_the_device(monkeypatch):
    w = bg.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    (w * 2.0).sum().backward()
    w.grad.zero_()
    puts = []
    real = jax.device_put
    monkeypatch.setattr(jax, "device_put", lambda *a, **k: puts.append(a) or real(*a, **k))
    (w * 5.0).sum().backward()
    assert type(w.grad._v) is np.ndarray and puts == []
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 2), 5.0, np.float32))


def test_a_mixed_dtype_accumulation_keeps_the_dtype_of_grad():
    w = bg.tensor(np.ones(3), requires_grad=True)
    w.grad_dtype = None
    w.grad = bg.zeros(3, dtype=bg.float32)
    (w * 2.0).sum().backward()
    t = torch.ones(3, dtype=torch.float64, requires_grad=True)
    t.grad_dtype = None
    t.grad = torch.zeros(3, dtype=torch.float32)
    (t * 2.0).sum().backward()
    assert w.grad.dtype == bg.float32 and t.grad.dtype == torch.float32
    np.testing.assert_array_equal(w.grad.numpy(), t.grad.numpy())
