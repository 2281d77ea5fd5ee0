"""What a first call traces on the CPU backend: output shapes of deferred ops without a trace where they follow from
the op (a VJP's gradients have its operands' avals; a NumPy host form of small floats gives its output's shape on
zeros), one trace of a batched VJP for every number of rows, one jaxpr for both walks of a recorded backward's VJP,
and a forward-mode Jacobian's derived form found again by a second process. Counted in traces, not in time."""

import functools

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _lazy, _numpy_eval, _reads
from batched_grad._ops import _core
from oracle import assert_same

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="host forms run on the CPU backend only")


@pytest.fixture
def traces(monkeypatch):
    """The patterns of shapes each derived form was traced on, in order."""
    seen = []
    real = _numpy_eval._trace
    monkeypatch.setattr(
        _numpy_eval, "_trace", lambda build, pattern, *a: seen.append(pattern) or real(build, pattern, *a)
    )
    return seen


def _graphs(lib, seed):
    """Values through broadcasting arithmetic, products of every rank pairing, reductions, powers and views, with a
    double backward and a batched one: the deferred ops and VJPs a first call meets."""
    rng = np.random.default_rng(seed)
    a, b, v, m = (
        lib.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
        for s in ((7,), (3, 7), (4,), (5, 3, 4))
    )
    y = lib.tanh(b @ a) * 2.0 + (b * a).sum(1)
    y = (m @ v).sum(0) @ y + (v @ m.transpose(1, 2)).pow(2).mean()
    (g,) = lib.autograd.grad(y, a, create_graph=True)
    (h,) = lib.autograd.grad((g * g).sum() / 3.0 - g.pow(3).sum(), a)
    z = lib.tanh(b @ a)
    (rows,) = lib.autograd.grad(z, a, lib.eye(3), is_grads_batched=True)
    xs = lib.stack([a.detach(), a.detach() * 2])
    per_row = lib.func.vmap(lib.func.grad(lambda x: (lib.tanh(b.detach() @ x) ** 2).sum()))(xs)
    return [y, g, h, rows, per_row]


def test_output_avals_without_a_trace_equal_the_traced_ones():
    _lazy._signatures.clear()
    for got, expected in zip(_graphs(bg, 0), _graphs(torch, 0)):
        assert_same(got, expected, rtol=1e-4, atol=1e-5)
    signatures = list(_lazy._signatures.values())
    assert {sig.op.name for sig in signatures} >= {"vjp", "matmul", "tanh", "mul", "pow", "backward_program"}
    with jax.enable_x64(True):
        for sig in signatures:
            assert sig.out_avals == _lazy._traced_avals(sig.op, sig.static, sig.avals), sig.op


def test_a_recorded_tanh_and_its_recorded_vjp_ask_for_no_derived_form(monkeypatch):
    asked = []
    real = _numpy_eval._traced
    monkeypatch.setattr(_numpy_eval, "_traced", lambda key, *a: asked.append(key) or real(key, *a))
    x = bg.tensor(np.linspace(-1, 1, 11, dtype=np.float32), requires_grad=True)
    w = bg.tensor(np.ones((6, 11), np.float32) / 11)
    tx, tw = torch.tensor(x.detach().numpy(), requires_grad=True), torch.tensor(w.numpy())
    (g,) = bg.autograd.grad(bg.tanh(w @ x).sum(), x, create_graph=True)  # tanh and its VJP recorded, deferred
    (tg,) = torch.autograd.grad(torch.tanh(tw @ tx).sum(), tx, create_graph=True)
    assert_same(g, tg, rtol=1e-5, atol=1e-6)
    assert [key for key in asked if "Op(tanh)" in repr(key)] == []


def test_a_batched_vjp_is_traced_once_for_rows_equal_to_an_operands_size_and_not(traces):
    x = bg.tensor(np.linspace(-1, 1, 16, dtype=np.float32), requires_grad=True)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    for rows in (16, 4):  # as many rows as x has elements, then fewer (both powers of two, as rows are padded)
        v = np.random.default_rng(rows).standard_normal((rows, 16)).astype(np.float32)
        (got,) = bg.autograd.grad(bg.sinh(x), x, bg.tensor(v), is_grads_batched=True)
        (expected,) = torch.autograd.grad(torch.sinh(tx), tx, torch.tensor(v), is_grads_batched=True)
        assert_same(got, expected, rtol=1e-5, atol=1e-6)
    batched = [p for p in traces if p[-1][1] == _numpy_eval._ROWS]
    assert len(batched) == 1, batched


def test_a_recorded_vjps_reads_and_copies_come_from_one_trace(monkeypatch):
    made = []
    real = jax.make_jaxpr
    monkeypatch.setattr(_reads.jax, "make_jaxpr", lambda fn, **k: made.append(fn) or real(fn, **k))

    def fn(a, b, *, scale):
        return a, a * b * scale

    avals = (((3,), np.dtype(np.float32)), ((3,), np.dtype(np.float32)))
    # a new partial each time, as the engine makes them
    assert _reads.output_reads(functools.partial(fn, scale=2.0), avals, differentiable_only=True) == (1, 3)
    assert _reads.output_copies(functools.partial(fn, scale=2.0), avals) == (0, -1)
    assert len(made) == 1


@pytest.fixture
def host_vjps_checked(monkeypatch):
    """Every node VJP of an op with a hand-written host rule (Op.host_vjp) checked bit for bit against the form
    derived from the op's jaxpr, which ran there before; per call, the op's name, whether its cotangents were batched
    and whether the rule computed it (rather than declining to the derived form)."""
    seen, derived_ran = [], []
    real, real_derived = _core.VJP.host, _core.derived_vjp
    monkeypatch.setattr(_core, "derived_vjp", lambda *a: derived_ran.append(True) or real_derived(*a))

    def checked(*args, spec):
        derived_ran.clear()
        out = real(*args, spec=spec)
        by_rule = not derived_ran
        if spec.sig.op.host_vjp is not None and spec.sig.op.name in (
            "matmul",
            "mul",
            "add",
            "sub",
            "div",
            "tanh",
            "pow",
        ):
            derived = _numpy_eval.derived_vjp(_core._vjp_fn, spec, args)
            assert len(out) == len(derived)
            for got, want in zip(out, derived):
                assert got.shape == want.shape and got.dtype == want.dtype
                if spec.sig.op.name == "tanh" and got.dtype == np.float64 and spec.batch is None:
                    # NumPy's tanh, as before: ulps of the scale, where 1 - tanh cancels
                    np.testing.assert_allclose(got, want, rtol=0, atol=8 * np.finfo(np.float64).eps * abs(want).max())
                elif spec.sig.op.name == "matmul" and got.ndim == 2 and spec.batch is None:
                    # mm's second gradient is torch's a.T @ ct, the derived form's (ct.T @ a).T: a sum in another order
                    np.testing.assert_allclose(got, want, rtol=0, atol=64 * np.finfo(got.dtype).eps * abs(want).max())
                else:
                    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
            seen.append((spec.sig.op.name, spec.batch is not None, by_rule))
        return out

    monkeypatch.setattr(_core.VJP, "host", checked)
    return seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_host_vjps_of_products_and_arithmetic_give_the_derived_forms_bits(host_vjps_checked, dtype):
    rng = np.random.default_rng(1)
    shapes = {"v": (6,), "w": (6,), "m": (5, 6), "n": (6, 4), "s": ()}
    bt = {k: bg.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for k, s in shapes.items()}
    tt = {k: torch.tensor(v.detach().numpy(), requires_grad=True) for k, v in bt.items()}

    def products(t, lib):  # dot, mv, a vector times a matrix, mm, with broadcasting arithmetic and tanh around them
        p = lib.tanh(t["m"] @ t["v"]) * t["s"]
        q = (t["m"] @ t["n"]) - (t["v"] @ t["n"]) / 3.0 + p.sum() - t["v"] @ t["w"]
        return (lib.tanh(q) * (q + 1.0)).sum(1) + q.pow(2).sum(1) - q.pow(3).mean(1)

    for rows in (None, 4):
        leaves = list(bt.values())
        tleaves = list(tt.values())
        if rows is None:
            got = bg.autograd.grad(products(bt, bg).sum(), leaves)
            expected = torch.autograd.grad(products(tt, torch).sum(), tleaves)
        else:
            eye = np.eye(rows, 5, dtype=dtype)
            got = bg.autograd.grad(products(bt, bg), leaves, bg.tensor(eye), is_grads_batched=True)
            expected = torch.autograd.grad(products(tt, torch), tleaves, torch.tensor(eye), is_grads_batched=True)
        for g, e in zip(got, expected):
            assert_same(g, e, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6 if dtype == np.float32 else 1e-12)
    by_rule = {(name, batched) for name, batched, ruled in host_vjps_checked if ruled}
    declined = {(name, batched) for name, batched, ruled in host_vjps_checked if not ruled}
    names = ("matmul", "mul", "sub", "div", "tanh", "add", "pow")
    every = {(name, batched) for name in names for batched in (False, True)}
    cubes = {("pow", False), ("pow", True)}  # the exponent 3 keeps the derived form
    if dtype == np.float32:
        assert by_rule == every and declined == cubes
    else:  # the rows of a float64 tanh's VJP keep the derived form (XLA's tanh)
        assert by_rule == every - {("tanh", True)} and declined == cubes | {("tanh", True)}


def test_declared_reads_of_host_vjps_equal_the_walked_ones(monkeypatch):
    """A recorded backward reads what each gradient reads from its host rule's declaration (no trace): the same
    masks as the walk of the VJP's jaxpr, and no gradient passed through as its cotangent."""
    specs = []
    real = _core._declared_reads
    monkeypatch.setattr(_core, "_declared_reads", lambda spec: specs.append(spec) or real(spec))
    _core._vjp_reads.cache_clear()
    _core._vjp_copies.cache_clear()
    for dtype in (np.float32, np.float64):
        rng = np.random.default_rng(2)
        a, b = (bg.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in ((4, 3), (3,)))
        y = (bg.tanh(a @ b) * a.sum(1) / (b @ b) - bg.neg(a @ b) * 2.0).pow(2) + (b @ a.T).pow(3)
        (g,) = bg.autograd.grad(y.sum(), b, create_graph=True)
        (h,) = bg.autograd.grad(g, b, bg.eye(3, dtype=g.dtype), is_grads_batched=True, create_graph=True)
        h.sum().backward()
    declared = {spec for spec in specs if real(spec) is not None}
    assert {spec.sig.op.name for spec in declared} >= {"tanh", "matmul", "mul", "div", "neg", "pow"}
    for spec in declared:
        spec = _core._vjp_spec(*spec[:4])
        sig = spec.sig
        avals = [a for a, s in zip(sig.avals, spec.saved_mask) if s] + [sig.out_avals[0]]
        vjp = functools.partial(_core._vjp_fn, spec=spec)
        assert real(spec) == _reads.output_reads(vjp, avals, differentiable_only=True), sig.op
        assert all([c < len(avals) - 1 for c in _reads.output_copies(vjp, avals)]), sig.op  # no cotangent passed on


def test_a_recorded_second_order_vjp_is_traced_once_for_its_walks_and_its_host_form(monkeypatch):
    made = []
    real = jax.make_jaxpr
    monkeypatch.setattr(jax, "make_jaxpr", lambda fn, **k: made.append(fn) or real(fn, **k))
    rng = np.random.default_rng(5)
    w, x, v = (rng.standard_normal(s).astype(np.float32) for s in ((7, 13), (13,), (13,)))
    got = bg.autograd.functional.hvp(lambda x: bg.tanh(bg.tensor(w) @ x).pow(2).sum(), bg.tensor(x), bg.tensor(v))
    tw = torch.tensor(w)
    expected = torch.autograd.functional.hvp(
        lambda x: torch.tanh(tw @ x).pow(2).sum(), torch.tensor(x), torch.tensor(v)
    )
    assert_same(got, expected, rtol=1e-4, atol=1e-5)
    second = [
        f.keywords["spec"]
        for f in made
        if isinstance(f, functools.partial) and f.func is _core._vjp_fn and f.keywords["spec"].sig.op.name == "vjp"
    ]
    assert second and len(second) == len(set(second))  # a VJP of a recorded VJP: one trace, walked and evaluated
