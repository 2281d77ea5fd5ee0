"""torch.binomial against torch 2.13: the same seed draws the same counts (both of torch's samplers: inversion
for small count * p, BTRS otherwise; float32 and float64; broadcast parameters; an explicit generator), no
derivative, and torch's dtype error."""

import pytest
import torch

import batched_grad as bg


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_draws_as_torch(dtype):
    draws = []
    for lib in (torch, bg):
        lib.manual_seed(0)
        d = getattr(lib, dtype)
        counts = lib.tensor([10.0, 5.0, 100.0, 1000.0, 0.0, 7.0], dtype=d)
        probs = lib.tensor([0.5, 0.2, 0.3, 0.9, 0.5, 1.0], dtype=d)
        broadcast = lib.binomial(lib.tensor([[10.0], [3.0]], dtype=d), lib.tensor([0.5, 0.2], dtype=d))
        seeded = lib.binomial(counts, probs, generator=lib.Generator().manual_seed(3))
        draws.append((lib.binomial(counts, probs).tolist(), lib.binomial(counts, probs).tolist(), seeded.tolist()))
        draws[-1] += (broadcast.tolist(), str(seeded.dtype))
    assert draws[1] == draws[0]


def test_no_derivative_and_the_dtype_error_as_torch():
    for lib in (torch, bg):
        count = lib.tensor([10.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="derivative for aten::binomial is not implemented"):
            lib.binomial(count, lib.tensor([0.5])).sum().backward()
        with pytest.raises(ValueError, match="binomial only supports floating-point dtypes for count, got: Long"):
            lib.binomial(lib.tensor([10]), lib.tensor([0.5]))
