"""Batched Hessians against torch at the sizes where jaxlib 0.10.2 miscompiled jit(vmap(jacrev(jacrev(f))))."""

import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap

OUT, IN, BATCH = 33, 31, 64


def _problem(out=OUT, inp=IN, batch=BATCH):
    rng = np.random.default_rng(0)
    return {"W": rng.standard_normal((out, inp)), "b": rng.standard_normal(out), "X": rng.standard_normal((batch, inp))}


@pytest.fixture(scope="module")
def problem():
    return _problem()


def _torch_hessians(p, dtype):
    W, b = torch.tensor(p["W"], dtype=dtype), torch.tensor(p["b"], dtype=dtype)
    f = lambda x: torch.tanh(W @ x + b)  # noqa: E731
    return torch.func.vmap(torch.func.jacrev(torch.func.jacrev(f)))(torch.tensor(p["X"], dtype=dtype)).numpy()


@pytest.mark.slow
@pytest.mark.parametrize(
    "dtype, tol, vectorize, sizes",
    [
        ("float32", 1e-4, True, (OUT, IN, BATCH)),
        ("float64", 1e-10, True, (OUT, IN, BATCH)),
        ("float32", 1e-4, False, (5, 4, 3)),
    ],
)  # unvectorized, the loops of every row are traced: a small problem
def test_vmap_of_nested_reverse_jacobians_matches_torch(dtype, tol, vectorize, sizes):
    problem = _problem(*sizes)
    out, inp, batch = sizes
    W, b = bg.tensor(problem["W"], dtype=getattr(bg, dtype)), bg.tensor(problem["b"], dtype=getattr(bg, dtype))
    f = lambda x: bg.tanh(W @ x + b)  # noqa: E731
    # torch.func's nested jacrev (torch and batched_grad refuse autograd.functional inside vmap); one row of the
    # identity at a time where not vectorized
    chunk = None if vectorize else 1
    hessians = vmap.vmap(bg.func.jacrev(bg.func.jacrev(f, chunk_size=chunk), chunk_size=chunk))
    X = bg.tensor(problem["X"], dtype=getattr(bg, dtype))
    expected = _torch_hessians(problem, getattr(torch, dtype))
    for _ in range(3):  # the first calls run per-op kernels, the third one compiled program
        result = hessians(X)
        assert tuple(result.shape) == (batch, out, inp, inp)
        np.testing.assert_allclose(result.numpy(), expected, rtol=tol, atol=tol)


@pytest.mark.slow
def test_batched_double_backward_hessians_match_torch(problem):
    W, b = bg.tensor(problem["W"]), bg.tensor(problem["b"])
    X = bg.tensor(problem["X"], requires_grad=True)
    expected = _torch_hessians(problem, torch.float32)
    for _ in range(3):
        Y = bg.tanh(X @ W.T + b)  # (BATCH, OUT): row n depends on X[n] only
        eye_out = bg.eye(OUT).reshape(OUT, OUT, 1).expand(OUT, OUT, BATCH).permute(0, 2, 1)
        (J,) = bg.autograd.grad(Y, X, eye_out, create_graph=True, is_grads_batched=True)  # (OUT, BATCH, IN)
        seeds = bg.eye(OUT * IN).reshape(OUT * IN, OUT, 1, IN).expand(OUT * IN, OUT, BATCH, IN)
        (H,) = bg.autograd.grad(J, X, seeds, is_grads_batched=True)  # (OUT * IN, BATCH, IN)
        np.testing.assert_allclose(
            H.reshape(OUT, IN, BATCH, IN).permute(2, 0, 1, 3).numpy(), expected, rtol=1e-4, atol=1e-4
        )
