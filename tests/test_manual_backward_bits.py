"""A backward pass written by hand (Karpathy's "backprop ninja" style: h.T @ dlogits, dlogits @ W.T, an outer
product, a sum over the batch) equals autograd's gradients bit for bit where torch's does, since both compute
torch's formulas with the same products."""

import numpy as np
import pytest
import torch

import batched_grad as bg


def _exact(lib, dtype):
    """Per gradient, whether the hand-written formula equals autograd's exactly."""
    rng = np.random.default_rng(7)
    t = lambda *shape: lib.tensor(rng.standard_normal(shape), dtype=dtype, requires_grad=True)  # noqa: E731
    h, w, b, A, x, v, B = t(32, 64), t(64, 27), t(27), t(7, 5), t(5), t(7), t(7, 6)
    logits = h @ w + b
    y, z = A @ x, v @ B
    for out in (logits, y, z):
        out.retain_grad()
    (logits.tanh().sum() + y.sin().sum() + z.cos().sum()).backward()
    hand = {
        "mm second": (h.T @ logits.grad, w),
        "mm first": (logits.grad @ w.T, h),
        "bias": (logits.grad.sum(0), b),
        "mv matrix": (lib.outer(y.grad, x), A),
        "mv vector": (A.T @ y.grad, x),
        "vm vector": (z.grad @ B.T, v),
        "vm matrix": (lib.outer(v, z.grad), B),
    }
    return {name: bool((formula == leaf.grad).all()) for name, (formula, leaf) in hand.items()}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_hand_written_gradients_are_exact_where_torchs_are(dtype):
    expected = _exact(torch, getattr(torch, dtype))
    assert all(expected.values())
    assert _exact(bg, getattr(bg, dtype)) == expected
