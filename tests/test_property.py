"""Property-based: random small graphs built from the op database's composable ops (tests/op_db.py: smooth on all
reals, of tame growth, (3, 3) tensors to a (3, 3) tensor), checked against torch for grad(), backward() and
create_graph double backward."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import batched_grad as bg
import op_db
from oracle import assert_same

COMPOSABLE = [e for e in op_db.ENTRIES if e.composable]
UNARY = {e.name: e.call for e in COMPOSABLE if len(e.args) == 1}
BINARY = {e.name: e.call for e in COMPOSABLE if len(e.args) == 2}

steps = st.lists(
    st.one_of(
        st.tuples(st.just("u"), st.sampled_from(sorted(UNARY)), st.integers(0, 10)),
        st.tuples(st.just("b"), st.sampled_from(sorted(BINARY)), st.integers(0, 10), st.integers(0, 10)),
    ),
    min_size=1,
    max_size=6,
)


def build(lib, program, leaves):
    pool = list(leaves)
    for step in program:
        if step[0] == "u":
            pool.append(UNARY[step[1]](lib, pool[step[2] % len(pool)]))
        else:
            pool.append(BINARY[step[1]](lib, pool[step[2] % len(pool)], pool[step[3] % len(pool)]))
    return pool[-1]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(program=steps, n_leaves=st.integers(1, 2), seed=st.integers(0, 2**16))
@pytest.mark.parametrize("engine_tier", ["per-node", "fused"], indirect=True)
def test_random_graph_matches_torch(engine_tier, program, n_leaves, seed):
    rng = np.random.default_rng(seed)
    data = [rng.uniform(-1, 1, (3, 3)) for _ in range(n_leaves)]
    weight = rng.standard_normal((3, 3))
    v = rng.standard_normal((3, 3))
    results = []
    for lib in (bg, torch):
        leaves = [lib.tensor(d, requires_grad=True) for d in data]
        out = build(lib, program, leaves)
        loss = (out * lib.tensor(weight)).sum()
        grads = lib.autograd.grad(loss, leaves, create_graph=True, allow_unused=True)
        grads = [lib.zeros(3, 3, dtype=lib.float64) if g is None else g for g in grads]
        # a grad that does not require grad has zero second derivative (torch and JAX-derived VJPs may
        # differ in which constant results they mark as requiring grad; the values must agree)
        live = [g for g in grads if g.requires_grad]
        second = lib.autograd.grad(live, leaves, [lib.tensor(v)] * len(live), allow_unused=True) if live else []
        second = [lib.zeros(3, 3, dtype=lib.float64) if s is None else s.detach() for s in second] or [
            lib.zeros(3, 3, dtype=lib.float64) for _ in leaves
        ]
        out2 = build(lib, program, leaves)
        (out2 * lib.tensor(weight)).sum().backward()
        results.append(([g.detach() for g in grads], second, [x.grad for x in leaves]))
    assert_same(results[0], results[1], rtol=1e-7, atol=1e-9)
