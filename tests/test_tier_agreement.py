"""A float32 value must not depend on which tier of the engine computed it: every float32 unary op of the op database
gives the same values and first derivatives (within 2 ulp) through its eager host form, its per-op kernel, a fused
program, a vmap.vmap program and batched cotangents (is_grads_batched), saturated regions included. The ops of a
sweep run together in each tier, so that each tier compiles one program (or one kernel per op) for the whole sweep.
The default suite sweeps a representative subset (the ops with host forms, the ops computed in float64, saturating
ones); the slow tier sweeps them all."""

import numpy as np
import pytest

import batched_grad as bg
import vmap
from batched_grad import _fused, _fusion, _host, _lazy
from op_db import REAL, entries

ULPS = 2
SIZE = 48  # values from the op's domain, then as many in the saturated ranges 5 <= |x| < 10 where it is all reals
REPRESENTATIVE = ("tanh", "neg", "sigmoid", "exp", "expm1", "cosh", "erf", "erfc", "lgamma", "polygamma", "mvlgamma")


class Sweep:
    """Ops (op database records) with a float32 sample each."""

    def __init__(self, ops):
        self.ops = ops
        self.inputs = [self._sample(e, seed) for seed, e in enumerate(ops)]
        self.names = [e.name for e in ops]
        self.differentiable = [e for e in ops if e.differentiable]

    @staticmethod
    def _sample(entry, seed):
        rng = np.random.default_rng(seed)
        domain = entry.args[0].domain
        x = rng.uniform(domain.low, domain.high, 2 * SIZE)
        if domain is REAL:
            x[SIZE:] = rng.uniform(5.0, 10.0, SIZE) * rng.choice([-1.0, 1.0], SIZE)
        return x.astype(np.float32)

    def leaves(self):
        return [bg.tensor(x, requires_grad=True) for x in self.inputs]

    def forward_and_derivatives(self, xs):
        """The ops' float outputs and, for the differentiable ones, the derivative (the gradient with unit
        cotangents)."""
        outs = [_float_outputs(e, x) for e, x in zip(self.ops, xs)]
        diff = [(x, o) for x, o, e in zip(xs, outs, self.ops) if e.differentiable]
        ys = [y for _, o in diff for y in o]
        grads = bg.autograd.grad(ys, [x for x, _ in diff], [bg.ones_like(y) for y in ys])
        return [[y.detach() for y in o] for o in outs], list(grads)


def _float32_unary():
    return [
        e
        for e in entries("unary")
        if len(e.args) == 1 and e.result == "float" and "float32" in e.dtypes and e.args[0].domain.kind == "float"
    ]


ALL = _float32_unary()
SWEEPS = {"representative": [e for e in ALL if e.name in REPRESENTATIVE], "all": ALL}


def _float_outputs(entry, x):
    out = entry.call(bg, x)
    return [o for o in (out if isinstance(out, tuple) else (out,)) if o.dtype.is_floating_point]


def _numpy(values, grads):
    return [[v.numpy() for v in vs] for vs in values], [g.numpy() for g in grads]


def _eager(sweep, monkeypatch, host):
    """Each op alone: its host form (where it has one) or, with `host` False, its kernel; the per-node backward."""
    if not host:
        monkeypatch.setattr(_host, "HOST_ELEMENTS", 0)
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 10**9)
    with bg.no_grad():
        alone = [[v.numpy() for v in _float_outputs(e, bg.tensor(x))] for e, x in zip(sweep.ops, sweep.inputs)]
    values, grads = _numpy(*sweep.forward_and_derivatives(sweep.leaves()))
    _assert_agree(_disagreements(sweep.names, alone, values, "eager (not recorded) vs recorded"))
    return values, grads


def _fused_tier(sweep, monkeypatch):
    runs = []
    run = _fused.run
    monkeypatch.setattr(_fused, "run", lambda *a, **k: (runs.append(1), run(*a, **k))[1])
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)
    monkeypatch.setattr(_fusion, "_mode", ["always"])
    result = _numpy(*sweep.forward_and_derivatives(sweep.leaves()))
    assert runs, "the backward did not run as one fused program"
    return result


def _vmapped(sweep):
    """The ops and their derivatives in one vmap.vmap program over two rows (the sample cut in halves)."""

    def per_row(*xs):
        values, grads = sweep.forward_and_derivatives(list(xs))
        return [v for vs in values for v in vs], grads

    rows = [bg.tensor(x.reshape(2, -1), requires_grad=True) for x in sweep.inputs]  # not inside vmap: torch refuses
    flat, grads = vmap.vmap(per_row)(*rows)
    flat = iter([v.numpy().reshape(-1) for v in flat])
    counts = [len(_float_outputs(e, bg.tensor(x[:1]))) for e, x in zip(sweep.ops, sweep.inputs)]
    return [[next(flat) for _ in range(n)] for n in counts], [g.numpy().reshape(-1) for g in grads]


def _batched(sweep, monkeypatch, fused, basis):
    """The derivatives from batched cotangents: the rows of an identity per output (a Jacobian; its diagonal), or
    unit cotangents scaled by powers of two (exact scalings, undone)."""
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0 if fused else 10**9)
    monkeypatch.setattr(_fusion, "_mode", ["always" if fused else "auto"])
    xs = [x for x, e in zip(sweep.leaves(), sweep.ops) if e.differentiable]
    ys = [_float_outputs(e, x)[0] for e, x in zip(sweep.differentiable, xs)]
    scales = bg.tensor([1.0, 2.0, 4.0]).reshape(3, 1)  # no scaling into subnormals, which XLA flushes to zero
    cts = [bg.eye(2 * SIZE) if basis else scales * bg.ones(2 * SIZE) for _ in ys]
    grads = bg.autograd.grad(ys, xs, cts, is_grads_batched=True)
    if basis:
        return [np.diagonal(g.numpy()).copy() for g in grads]
    return [(g / scales).numpy() for g in grads]


def _ulps(a, b):
    """The distance in units in the last place between two float arrays of one dtype (nan from nan: 0). Subnormals
    count as zero: XLA's CPU code flushes them to zero, NumPy's host forms (and torch) keep them."""
    ints = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}[a.dtype]
    tiny = np.finfo(a.dtype).tiny
    flushed = [np.where(np.abs(v) < tiny, np.zeros_like(v), v).astype(a.dtype) for v in (a, b)]
    ia, ib = (v.view(ints).astype(np.int64) for v in flushed)
    ordered = [np.where(i < 0, np.iinfo(ints).min - i, i) for i in (ia, ib)]  # bits as an ordered integer line
    return np.where(np.isnan(a) & np.isnan(b), 0, np.abs(ordered[0] - ordered[1]))


def _disagreements(names, got, want, what):
    bad = []
    for name, g, w in zip(names, got, want):
        for a, b in zip(g if isinstance(g, list) else [g], w if isinstance(w, list) else [w]):
            a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
            d = _ulps(a, b)
            if d.max() > ULPS:
                k = int(d.argmax())
                bad.append(f"{what}: {name}: {int(d.max())} ulp at {k} ({a.reshape(-1)[k]!r} vs {b.reshape(-1)[k]!r})")
    return bad


def _assert_agree(bad):
    assert not bad, "\n".join(bad)


def _assert_tiers_agree(sweep, got, want, tier):
    derivative_names = [e.name for e in sweep.differentiable]
    _assert_agree(
        _disagreements(sweep.names, got[0], want[0], f"values ({tier})")
        + _disagreements(derivative_names, got[1], want[1], f"derivatives ({tier})")
    )


@pytest.fixture(scope="module", params=["representative", pytest.param("all", marks=pytest.mark.slow)])
def sweep(request):
    return Sweep(SWEEPS[request.param])


@pytest.fixture(scope="module")
def reference(sweep):
    with pytest.MonkeyPatch.context() as monkeypatch:
        return _eager(sweep, monkeypatch, host=True)


def test_the_full_sweep_covers_every_float32_unary_op():
    names = {e.name for e in ALL}
    assert set(REPRESENTATIVE) <= names
    assert {"sin", "log1p", "sinc", "i0", "logit", "digamma", "erfinv", "rsqrt", "frac"} <= names
    assert len(ALL) >= 60


def test_host_forms_and_kernels_agree(sweep, reference, monkeypatch):
    _assert_tiers_agree(sweep, _eager(sweep, monkeypatch, host=False), reference, "kernel vs host form")


def test_a_fused_program_agrees_with_the_eager_ops(sweep, reference, monkeypatch):
    _assert_tiers_agree(sweep, _fused_tier(sweep, monkeypatch), reference, "fused vs eager")


def test_a_vmapped_program_agrees_with_the_eager_ops(sweep, reference):
    _assert_tiers_agree(sweep, _vmapped(sweep), reference, "vmap vs eager")


@pytest.mark.parametrize(
    ("fused", "basis"),
    [(False, True), (True, True), (False, False), (True, False)],
    ids=["per-node-identity", "fused-identity", "per-node-scaled", "fused-scaled"],
)
def test_batched_cotangents_agree_with_the_eager_derivatives(sweep, reference, monkeypatch, fused, basis):
    grads = _batched(sweep, monkeypatch, fused, basis)
    names = [e.name for e in sweep.differentiable]
    _assert_agree(_disagreements(names, grads, reference[1], "derivatives (batched vs eager)"))
