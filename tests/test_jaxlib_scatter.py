"""jaxlib 0.8.0 to 0.10.1 miscompile, on CPU, a float64 scatter fused with its update for some shapes: the backward of
indexing a captured tensor under vmap gave wrong rows (batched_grad/_xla_flags.py works around it)."""

import numpy as np
import pytest
import torch
import torch.func

import batched_grad as bg
import batched_grad.func
from oracle import assert_same


@pytest.mark.parametrize("rows, n, m", [(4, 5, 3), (4, 5, 2), (4, 5, 4), (5, 5, 3)])
def test_gradients_of_indexing_a_captured_tensor_under_vmap_match_torch(rows, n, m):
    rng = np.random.default_rng(0)
    W, X, C = rng.standard_normal((m, n)), rng.standard_normal((rows, n)), rng.standard_normal((rows, n))

    def run(lib):
        w = lib.tensor(W, dtype=lib.float64)
        x, c = lib.tensor(X, dtype=lib.float64), lib.tensor(C, dtype=lib.float64)
        per_row = lib.func.vmap(lambda xi, ci: lib.func.vjp(lambda v: xi * v[0] + xi * v[-1], w)[1](ci)[0])(x, c)
        return per_row, lib.func.vmap(lib.func.grad(lambda v, xi: (xi * v[1]).sin().sum()), in_dims=(None, 0))(w, x)

    assert_same(run(bg), run(torch), rtol=1e-10, atol=1e-12)
