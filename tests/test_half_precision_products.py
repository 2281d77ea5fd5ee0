"""bfloat16 and float16 fused products as torch's CPU kernels round them: addmm, addmv, baddbmm and linear with a
bias on 2-D input accumulate and scale in float32 and round once (linear on other ranks rounds the product, then
the sum, as torch's matmul and add, except a contiguous 3-D input, whose rows torch folds into one addmm);
bit-equal to torch."""

import numpy as np
import pytest
import torch

import batched_grad as bg

RNG = np.random.default_rng(0)
X, C, V = (RNG.standard_normal(shape).astype(np.float32) for shape in ((5, 6), (5, 5), (6,)))

CASES = {
    "addmm": lambda m, x, c, v: m.addmm(c, x, x.T, beta=-4.775, alpha=2.0315),
    "addmv": lambda m, x, c, v: m.addmv(c[0], x, v, beta=0.5, alpha=3),
    "baddbmm": lambda m, x, c, v: m.baddbmm(c[None], x[None], x.T[None], beta=0.3, alpha=1.7),
    "linear-2d": lambda m, x, c, v: m.nn.functional.linear(x.T, c, c[0]),
    "linear-1d": lambda m, x, c, v: m.nn.functional.linear(x[:, 0], c, c[1]),
    "linear-3d": lambda m, x, c, v: m.nn.functional.linear(x.T[None].expand(2, 6, 5), c, c[2]),
    # a contiguous 3-D input: torch folds its rows into one addmm, which rounds once
    "linear-3d-contiguous": lambda m, x, c, v: m.nn.functional.linear(x.T[None].expand(2, 6, 5).contiguous(), c, c[2]),
    "linear-3d-module": lambda m, x, c, v: _module_of(m, c)(m.stack([x.T, -x.T])).detach(),
}


def _module_of(m, c):
    layer = m.nn.Linear(5, 5).to(c.dtype)
    with m.no_grad():
        layer.weight.copy_(c)
        layer.bias.copy_(c[3])
    return layer


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", CASES)
def test_half_precision_products_round_as_torch(case, dtype):
    results = []
    for lib in (torch, bg):
        x, c, v = (lib.tensor(a).to(getattr(lib, dtype)) for a in (X, C, V))
        results.append(CASES[case](lib, x, c, v).float().numpy())
    np.testing.assert_array_equal(results[1], results[0])
