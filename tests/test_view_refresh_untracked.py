"""Writes into a tensor that autograd does not track bring its live views up to date by their values alone (the
rows of a `for i, row in enumerate(X): X[i] = ...` loop are all alive at every write); compared with torch, for
views of several kinds, for a view of a view, and next to a tracked base whose views still rejoin the graph."""

import numpy as np
import torch

import batched_grad


def _row_updates(m):
    X = m.tensor(np.linspace(-2.0, 3.0, 24).reshape(8, 3))
    column, block, flipped = X[:, 1], X[2:5, ::2], X.t()
    inner = block[1]
    seen = []
    for i, row in enumerate(X):
        weight = (-((row - X) ** 2).sum(1).sqrt() + 4).clamp_min(0)
        X[i] = (weight[:, None] * X).sum(0) / weight.sum()
        seen.append(row.clone())
    X[0].mul_(2)
    X.add_(1)
    return [X, column, block, flipped, inner, m.stack(seen)]


def test_live_views_of_an_untracked_base_follow_its_writes():
    for actual, expected in zip(_row_updates(batched_grad), _row_updates(torch)):
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)


def _tracked_views(m):
    w = m.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    base = w * 1
    row, column = base[0], base[:, 1]
    base[1] = base[1] * 3
    (row.sum() + column.sum() * 2).backward()
    return [row.detach(), column.detach(), w.grad, type(column.grad_fn).__name__]


def test_views_of_a_tracked_base_still_rejoin_the_graph():
    actual, expected = _tracked_views(batched_grad), _tracked_views(torch)
    for a, e in zip(actual[:3], expected[:3]):
        np.testing.assert_allclose(a.numpy(), e.numpy())
    assert actual[3] == expected[3]
