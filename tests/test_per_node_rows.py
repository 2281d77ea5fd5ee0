"""The per-node tier of repeated backward passes (autograd.functional's rows): a node's VJP that reads saved values
already computed runs at once on the host, rather than being deferred and then evaluated as a structure of its own
(which cost every row a structure key, a clock reading and a deferred call)."""

import numpy as np
import torch

import batched_grad as bg
import batched_grad.autograd.functional  # noqa: F401
from batched_grad import _lazy


def _energy(lib, w):
    return lambda x: (lib.tanh(w @ x) ** 2).sum()


def _count_evaluations(monkeypatch):
    evaluated = []
    real = _lazy._evaluate
    monkeypatch.setattr(_lazy, "_evaluate", lambda target: evaluated.append(target) or real(target))
    return evaluated


def test_hessian_rows_evaluate_only_the_forward(monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 10**9)  # the per-node tier, as a first call runs it
    rng = np.random.default_rng(5)
    w0, x0 = rng.standard_normal((6, 8)) / 3, rng.standard_normal(8)
    expected = torch.autograd.functional.hessian(_energy(torch, torch.tensor(w0)), torch.tensor(x0)).numpy()
    evaluated = _count_evaluations(monkeypatch)
    got = bg.autograd.functional.hessian(_energy(bg, bg.tensor(w0)), bg.tensor(x0)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert len(evaluated) <= 1  # the forward's deferred calls, once; no row defers a VJP


def test_jacobian_rows_evaluate_only_the_forward(monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 10**9)
    rng = np.random.default_rng(6)
    w0, x0 = rng.standard_normal((5, 7)), rng.standard_normal(7)
    expected = torch.autograd.functional.jacobian(lambda x: torch.tanh(torch.tensor(w0) @ x), torch.tensor(x0))
    evaluated = _count_evaluations(monkeypatch)
    w = bg.tensor(w0)
    got = bg.autograd.functional.jacobian(lambda x: bg.tanh(w @ x), bg.tensor(x0))
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12, atol=1e-14)
    assert len(evaluated) <= 1
