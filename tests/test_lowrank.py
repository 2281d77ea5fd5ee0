"""torch.svd_lowrank and torch.pca_lowrank against torch 2.13: the same seed draws the same test matrix and the same
range basis, so the factors are torch's up to the sign of each singular pair (the SVD of the small projected matrix
is wide when q < n, and LAPACK builds choose different signs for wide SVDs); batches, M, gradients and the argument
errors."""

import numpy as np
import pytest
import torch

import batched_grad as bg

RNG = np.random.default_rng(0)
TALL = RNG.standard_normal((12, 5))
BATCH = RNG.standard_normal((2, 10, 4))
LOW_RANK = RNG.standard_normal((15, 3)) @ RNG.standard_normal((3, 9))


def both(name, a, **kwargs):
    results = []
    for lib in (torch, bg):
        lib.manual_seed(0)
        extra = {k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        results.append([t.numpy() for t in getattr(lib, name)(lib.tensor(a), **extra)])
    return results


@pytest.mark.parametrize(
    "name, a, kwargs",
    [
        ("svd_lowrank", TALL, {}),
        ("svd_lowrank", TALL, {"q": 3, "niter": 0}),
        ("svd_lowrank", TALL, {"q": 4, "M": np.ones((1, 5))}),
        ("svd_lowrank", BATCH, {"q": 3}),
        ("pca_lowrank", TALL, {}),
        ("pca_lowrank", LOW_RANK, {"q": 3, "niter": 4}),
        ("pca_lowrank", TALL, {"center": False, "q": 2}),
    ],
)
def test_factors_as_torch(name, a, kwargs):
    (U, S, V), (tU, tS, tV) = both(name, a, **kwargs)[::-1]
    np.testing.assert_allclose(S, tS, rtol=1e-12)
    signs = np.sign(np.sum(U * tU, axis=-2, keepdims=True))  # one sign per singular pair, for U and V alike
    np.testing.assert_allclose(U * signs, tU, atol=1e-12)
    np.testing.assert_allclose(V * signs, tV, atol=1e-12)


def test_a_wide_input_gives_torchs_singular_values_and_reconstructs_it():
    theirs, ours = both("svd_lowrank", LOW_RANK.T, q=3)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    U, S, V = ours
    assert U.shape == (9, 3) and V.shape == (15, 3)
    np.testing.assert_allclose(U @ np.diag(S) @ V.T, LOW_RANK.T, atol=1e-10)


def test_gradients_as_torch():
    grads = []
    for lib in (torch, bg):
        lib.manual_seed(0)
        x = lib.tensor(TALL, requires_grad=True)
        U, S, V = lib.pca_lowrank(x, q=3)
        (S.sum() + (V * V).sum()).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], atol=1e-10)


def test_float32_inputs_keep_their_dtype():
    theirs, ours = both("pca_lowrank", TALL.astype(np.float32))
    for x, y in zip(ours, theirs):
        assert x.dtype == y.dtype == np.float32
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5)


@pytest.mark.parametrize("kwargs", [{"q": 6}, {"q": -1}, {"niter": -1}])
def test_argument_errors_as_torch(kwargs):
    messages = []
    for lib in (torch, bg):
        with pytest.raises(ValueError) as caught:
            lib.pca_lowrank(lib.tensor(TALL), **kwargs)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
