"""torch.lobpcg against torch 2.13: the eigenpairs of symmetric (generalized, batched, preconditioned) problems by
both methods, the gradient of the computed eigenpairs with respect to A (symmetrized), its second order, and the
errors."""

import re

import numpy as np
import pytest
import torch

import batched_grad as bg

pytestmark = pytest.mark.filterwarnings("ignore:A is not")


def _symmetric(rng, *shape, shift=0.0):
    a = rng.random(shape)
    return a @ np.swapaxes(a, -1, -2) / 10 + shift * np.eye(shape[-1])


def _signed(U):
    """Each eigenvector with the sign that makes its largest-magnitude entry positive."""
    idx = np.abs(U).argmax(-2)[..., None, :]
    return U * np.sign(np.take_along_axis(U, idx, -2))


def _both(fn):
    return fn(bg), fn(torch)


@pytest.mark.parametrize("method", ["ortho", "basic"])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_eigenpairs_match_torch(method, largest, batch):
    a = _symmetric(np.random.default_rng(0), *batch, 9, 9, shift=0.1)
    x = np.random.default_rng(1).standard_normal((*batch, 9, 3))
    ours, theirs = _both(lambda m: m.lobpcg(m.tensor(a), k=2, X=m.tensor(x), largest=largest, method=method))
    np.testing.assert_allclose(ours[0].numpy(), theirs[0].numpy(), rtol=1e-7)
    np.testing.assert_allclose(_signed(ours[1].numpy()), _signed(theirs[1].numpy()), atol=1e-5)
    assert ours[0].shape == theirs[0].shape and ours[1].shape == theirs[1].shape


def test_basic_method_on_a_problem_whose_search_space_is_exhausted():
    """Three vectors in ten dimensions fill the space in a few steps, where the basis' Gram matrix turns singular
    (torch's basic method fails there): the step drops the dependent directions and converges."""
    rng = np.random.default_rng(0)
    a = _symmetric(rng, 10, 10, shift=0.01)
    E, U = bg.lobpcg(bg.tensor(a), k=2, X=bg.tensor(rng.standard_normal((10, 3))), largest=False, method="basic")
    np.testing.assert_allclose(E.numpy(), np.linalg.eigvalsh(a)[:2], rtol=1e-7)
    np.testing.assert_allclose(a @ U.numpy(), U.numpy() * E.numpy(), atol=1e-7)


def test_generalized_problem_preconditioner_and_random_start():
    rng = np.random.default_rng(2)
    a, b = _symmetric(rng, 12, 12), _symmetric(rng, 12, 12, shift=1.0)
    ik = np.linalg.inv(a + np.eye(12))
    ours, theirs = _both(lambda m: m.lobpcg(m.tensor(a), k=2, B=m.tensor(b), iK=m.tensor(ik), n=3, largest=False))
    np.testing.assert_allclose(ours[0].numpy(), theirs[0].numpy(), rtol=1e-6)
    U = ours[1].numpy()
    np.testing.assert_allclose(U.T @ b @ U, np.eye(2), atol=1e-7)  # B-orthonormal eigenvectors
    np.testing.assert_allclose(a @ U, b @ U * ours[0].numpy(), atol=1e-6)
    one, _ = bg.lobpcg(bg.tensor(a, dtype=bg.float32), niter=3, tol=1e-3)
    assert one.dtype == bg.float32 and tuple(one.shape) == (1,)


def _signed_pairs(m, A, k, largest, n=None, tol=None):
    n = k if n is None else n
    X = m.eye(A.shape[-1], n, dtype=A.dtype).expand(*A.shape[:-1], n)
    D, U = m.lobpcg(A=A, k=k, X=X, largest=largest, tol=tol)
    _, idx = U.abs().max(-2, keepdim=True)
    return D, U * U.gather(-2, idx).sign()


@pytest.mark.parametrize(
    "k, n, batch, largest",
    [(1, 1, (), True), (2, 2, (), False), (2, 2, (2,), True), (1, 1, (2,), False), (2, 3, (), True)],
)
def test_gradient_matches_torch_and_is_symmetric(k, n, batch, largest):
    a = _symmetric(np.random.default_rng(3), *batch, 9, 9, shift=0.05)
    weights = np.random.default_rng(4).random((*batch, 9, k))
    grads = {}
    for m in (bg, torch):
        A = m.tensor(a, requires_grad=True)
        D, U = _signed_pairs(m, A, k, largest, n, tol=1e-12)  # converged past the default: both agree closely
        (D.sum() + (U * m.tensor(weights)).sum()).backward()
        grads[m] = A.grad.numpy()
    np.testing.assert_allclose(grads[bg], grads[torch], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[bg], np.swapaxes(grads[bg], -1, -2), atol=1e-12)


def test_second_order_passes_gradgradcheck():
    A = bg.tensor(_symmetric(np.random.default_rng(5), 6, 6, shift=0.1), requires_grad=True)
    grad_outputs = [bg.tensor([0.003]), bg.tensor(np.random.default_rng(6).random((6, 1)) / 100)]
    assert bg.autograd.gradcheck(lambda A: _signed_pairs(bg, A, 1, True), A)
    assert bg.autograd.gradgradcheck(lambda A: _signed_pairs(bg, A, 1, True), A, grad_outputs, atol=1e-4)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.lobpcg(m.eye(5, dtype=m.float64), k=2),
        lambda m: m.lobpcg(m.ones(4, 5)),
        lambda m: m.lobpcg(m.eye(6), B=m.eye(5)),
    ],
)
def test_errors_match_torch(call):
    with pytest.raises((ValueError, AssertionError)) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value), match=re.escape(str(theirs.value))):
        call(bg)


def test_backward_with_b_and_unprovided_arguments_are_refused():
    rng = np.random.default_rng(7)
    a, b = _symmetric(rng, 9, 9), _symmetric(rng, 9, 9, shift=1.0)
    for m in (bg, torch):
        A = m.tensor(a, requires_grad=True)
        D, _ = m.lobpcg(A, B=m.tensor(b))
        with pytest.raises(ValueError, match="lobpcg.backward does not support backward with B != I yet."):
            D.sum().backward()
    with pytest.raises(NotImplementedError, match="tracker not provided"):
        bg.lobpcg(bg.tensor(a), tracker=lambda worker: None)
    with pytest.raises(ValueError, match="method must be 'ortho' or 'basic'"):
        bg.lobpcg(bg.tensor(a), method="fast")
