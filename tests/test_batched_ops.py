"""Every op of the op database (tests/op_db.py) that it marks as supporting batched grad, under
is_grads_batched=True: the batched grad equals the stacked per-row grads at first and second order, and no built-in
op falls back to the per-row loop. Each family's ops are concatenated into one output so that one compiled program
per family covers them all; an op the database records as a known failure here runs alone, as an expected failure.
An op left out has its reason in its record (test_op_db.py checks that there is one).

The default tier checks every such op with a backward of its own that compiles quickly, at first order in every leaf
and at second order in the leaf most ops of its family read, and the Jacobian seeds of the families _basis.py has
rules for; the slow tier (pytest -m slow) adds the ops the database marks slow, the aliases and in-place forms, the
second order in every leaf, the other families' Jacobian seeds and the Jacobians' second derivatives."""

import collections
import warnings

import numpy as np
import pytest

import batched_grad as bg
import op_db
import vmap
from batched_grad import _lazy

B = 3


def _swept(entry):
    return entry.batched and "batched" not in entry.xfail


def _slow(family, part=None):
    case = f"{family}:{part}" if part else family
    return pytest.param(case, marks=pytest.mark.slow, id=case)


def _families(test):
    return sorted({e.family for e in op_db.ENTRIES if _swept(e) and test(e)})


# the default tier checks each family's ops that have a backward of their own (not aliases or in-place forms, which
# reach their base's) and compile quickly; the slow tier checks the rest
FAMILIES = _families(lambda e: not e.slow and not e.alias_of)
SLOW = [_slow(f, "slow") for f in _families(lambda e: e.slow)]
FORMS = [_slow(f, "forms") for f in _families(lambda e: e.alias_of)]
# the families of the ops that batched_grad/_basis.py has rules for (elementwise ops, reshapes, matrix products):
# their Jacobian test runs in the default tier, the others' in the slow tier
BASIS_FAMILIES = ["binary", "linalg", "shape", "unary"]
JACOBIAN_FAMILIES = [f if f in BASIS_FAMILIES else _slow(f) for f in FAMILIES]
KNOWN_FAILURES = [
    pytest.param(f"op:{e.name}", marks=pytest.mark.xfail(strict=True, reason=e.xfail["batched"]))
    for e in op_db.ENTRIES
    if e.batched and "batched" in e.xfail
]


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _entries(case):
    """The records a case runs: one known failure ("op:name"), or a family's swept ones: "family" (those the default
    tier checks), "family:slow" (slow to compile) or "family:forms" (aliases and in-place forms)."""
    if case.startswith("op:"):
        return [op_db.BY_NAME[case[3:]]]
    family, _, part = case.partition(":")
    parts = {"slow": lambda e: e.slow, "forms": lambda e: e.alias_of and not e.slow}
    test = parts.get(part, lambda e: not e.slow and not e.alias_of)
    return [e for e in op_db.entries(family) if _swept(e) and test(e)]


def _outputs(entries):
    """The float64 outputs of every record's calls (sample and variants), those of the records that are twice
    differentiable, and the float leaves they read, the leaf most records read first; records with arguments of the
    same shape and domain share one leaf."""
    cache = {}
    outs, twice = [], []
    readers = collections.Counter(a for e in entries for a in dict.fromkeys(e.args) if a.domain.differentiable)
    for entry in entries:
        args = op_db.make_args(entry, bg, cache=cache)
        for call in entry.calls().values():
            new = [o for o in _flat(call(bg, *args)) if isinstance(o, bg.Tensor) and o.dtype == bg.float64]
            assert any(o.requires_grad for o in new), f"{entry.name}: no output requires grad"
            outs += new
            twice += new if entry.gradgrad else []
    leaves = [cache[a] for a, _ in readers.most_common()]
    return outs, twice, leaves


def _cat(outs):
    return bg.cat([o.reshape(-1) for o in outs]) if outs else None


def _random_like(rng, tensors, batch=()):
    return [bg.tensor(rng.standard_normal(batch + tuple(t.shape))) for t in tensors]


def _second_order_grads(out, leaves, rng):
    """The grads (of a random projection of `out`) that can be differentiated again."""
    if out is None:
        return []
    grads = bg.autograd.grad(out, leaves, _random_like(rng, [out]), create_graph=True, allow_unused=True)
    return [g for g in grads if g is not None and g.requires_grad]


def _assert_rows(batched, rows, b):
    for got, want in zip(batched, rows):
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_allclose(got[b].numpy(), want.numpy(), rtol=1e-9, atol=1e-12)


def _check_batched_equals_rows(entries, every_leaf):
    """First order in every leaf; second order in the leaf most records read, or in every leaf."""
    outs, twice, leaves = _outputs(entries)
    out = _cat(outs)
    rng = np.random.default_rng(1)
    cots = _random_like(rng, [out], (B,))[0]
    with vmap.fallback_warnings(), warnings.catch_warnings():
        warnings.simplefilter("error", vmap.FallbackWarning)
        batched = bg.autograd.grad(out, leaves, cots, retain_graph=True, allow_unused=True, is_grads_batched=True)
        grads = _second_order_grads(_cat(twice), leaves if every_leaf else leaves[:1], rng)
        v2 = _random_like(rng, grads, (B,))
        second = (
            bg.autograd.grad(grads, leaves, v2, retain_graph=True, allow_unused=True, is_grads_batched=True)
            if grads
            else []
        )
    for b in range(B):
        _assert_rows(batched, bg.autograd.grad(out, leaves, cots[b], retain_graph=True, allow_unused=True), b)
        if grads:
            rows = bg.autograd.grad(grads, leaves, [v[b] for v in v2], retain_graph=True, allow_unused=True)
            _assert_rows(second, rows, b)


@pytest.mark.parametrize("case", FAMILIES + SLOW + FORMS + KNOWN_FAILURES)
def test_batched_equals_per_row_loop_at_first_and_second_order(case, monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)  # one program per family instead of a kernel per op
    _check_batched_equals_rows(_entries(case), every_leaf=False)


@pytest.mark.slow
@pytest.mark.parametrize("case", FAMILIES + [p.values[0] for p in SLOW + FORMS] + KNOWN_FAILURES)
def test_batched_equals_per_row_loop_at_second_order_in_every_leaf(case, monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)
    _check_batched_equals_rows(_entries(case), every_leaf=True)


def _seeds(outputs, dense):
    """jacobian()'s cotangents: per output, its block of columns of the identity."""
    numels = [o.numel() for o in outputs]
    eye = np.eye(sum(numels))
    blocks = np.split(eye, np.cumsum(numels)[:-1], axis=1)
    for block in blocks if dense and len(eye) > 1 else ():
        block[tuple(np.argwhere(block == 0)[0])] = -0.0  # the same numbers, not the identity's bits: plain cotangents
    return [bg.tensor(b.reshape((len(eye),) + tuple(o.shape))) for b, o in zip(blocks, outputs)]


def _first_derivatives(outputs, twice, leaves, dense):
    """Every output's Jacobian in every leaf (its rows)."""
    return bg.autograd.grad(
        outputs, leaves, _seeds(outputs, dense), retain_graph=True, allow_unused=True, is_grads_batched=True
    )


def _second_derivatives(outputs, twice, leaves, dense):
    """The Jacobian of the twice differentiable outputs in the leaf most records read, with its graph, and the
    derivatives of its squared norm in every leaf."""
    if not twice:
        return []
    jac = bg.autograd.grad(
        twice,
        leaves[0],
        _seeds(twice, dense),
        retain_graph=True,
        create_graph=True,
        allow_unused=True,
        is_grads_batched=True,
    )[0]
    if jac is None or not jac.requires_grad:
        return [jac]
    return [jac, *bg.autograd.grad((jac * jac).sum(), leaves, retain_graph=True, allow_unused=True)]


def _check_seeds_as_rows(case, derivatives):
    """The identity as grad_outputs (a Jacobian) takes the rules of batched_grad/_basis.py; the same values given
    as ordinary cotangents take the plain batched VJPs: the derivatives agree."""
    outs, twice, leaves = _outputs(_entries(case))
    outputs = [o for o in outs if o.requires_grad]
    twice = [o for o in twice if o.requires_grad]
    results = [derivatives(outputs, twice, leaves, dense) for dense in (False, True)]
    for got, want in zip(*results):
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("case", JACOBIAN_FAMILIES + SLOW + FORMS + KNOWN_FAILURES)
def test_jacobian_seeds_carried_as_rows_equal_dense_cotangents(case, monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)
    _check_seeds_as_rows(case, _first_derivatives)


@pytest.mark.slow
@pytest.mark.parametrize("case", FAMILIES + [p.values[0] for p in SLOW + FORMS] + KNOWN_FAILURES)
def test_jacobian_seeds_carried_as_rows_equal_dense_cotangents_at_second_order(case, monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)
    _check_seeds_as_rows(case, _second_derivatives)
