"""The Jacobian-seed rules (_basis.py) are found for the ops they are written for: a Jacobian's backward program
through a matrix product, nn.functional.linear and elementwise ops applies each rule, and the result equals the
dense Jacobian. A renamed op whose rule is no longer found fails here instead of silently losing the fast path."""

import numpy as np
import pytest

import batched_grad as bg
from batched_grad import _basis, _compiled
from batched_grad.autograd.functional import jacobian


@pytest.fixture
def rule_hits(monkeypatch):
    hits = {"matmul": 0, "linear": 0, "diagonal": 0}

    def counting(name, rule):
        def counted(values, cts, spec):
            grads = rule(values, cts, spec)
            hits[name] += grads is not None
            return grads

        return counted

    for name, rule in list(_basis._RULES.items()):
        monkeypatch.setitem(_basis._RULES, name, counting(name, rule))
    monkeypatch.setattr(_basis, "_diagonal", counting("diagonal", _basis._diagonal))
    monkeypatch.setattr(_compiled, "_background", [False])  # the program compiles when first needed
    return hits


def _jacobian_four_times(f, x, want):
    for _ in range(4):  # the first calls run node by node; then the structure runs as one program
        got = jacobian(f, bg.tensor(x), vectorize=True)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_a_jacobians_backward_applies_the_matmul_linear_and_diagonal_rules(rule_hits):
    rng = np.random.default_rng(7)
    w1, w2, b2, x = (
        rng.standard_normal((13, 11)),
        rng.standard_normal((5, 11)),
        rng.standard_normal(5),
        rng.standard_normal(11),
    )
    W1, W2, B2 = bg.tensor(w1), bg.tensor(w2), bg.tensor(b2)
    # tanh's VJP (diagonal) keeps the seed a basis row, which the product's VJP then reads as a row of W1
    _jacobian_four_times(lambda t: bg.tanh(W1 @ t), x, np.diag(1 - np.tanh(w1 @ x) ** 2) @ w1)
    assert rule_hits["diagonal"] >= 1 and rule_hits["matmul"] >= 1, rule_hits
    _jacobian_four_times(lambda t: bg.nn.functional.linear(t, W2, B2), x, w2)
    assert rule_hits["linear"] >= 1, rule_hits
