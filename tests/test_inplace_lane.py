"""The lean path of in-place ops (_core.apply_in_place): where nothing follows from a write (no graph, views,
tangents nor capturing transform), an in-place op on host data takes its host result as the tensor's value. Every
other case takes the general path; either way the values, dtypes, versions, views and errors are torch's, the value
stays on the host, and nothing compiles."""

import sys
import weakref

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _host
from oracle import raises_like_torch


def _run(code, lib):
    """The value of the last `; `-separated statement of `code`, run with `m` as the library."""
    *statements, last = code.split("; ")
    scope = {"m": lib, "np": np}
    exec("\n".join(statements), scope)
    return eval(last, scope)


def _plain(value):
    """Tensors as (values, dtype name, version), for comparing what bg and torch give."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, (bg.Tensor, torch.Tensor)):
        return value.detach().numpy().tolist(), str(value.dtype), value._version
    return value.tolist() if isinstance(value, np.ndarray) else value


@pytest.mark.parametrize(
    "code",
    [
        "p = m.arange(4.0); p.add_(m.ones(4)); p.sub_(m.full((4,), 0.5), alpha=2); p.mul_(3); p.div_(2.0); p",
        "p = m.arange(4.0); p.tanh_(); p.exp_(); p",
        "p = m.ones(4); v = p[1:3]; p.add_(m.ones(4)); p.mul_(2.0); (p, v)",  # a base with a view
        "p = m.ones(4); p[:2].mul_(3.0); p",  # a view written into
        "p = m.ones(4); d = p.detach(); p.sub_(m.full((4,), 0.5)); (p, d)",  # storage shared by detach()
        "p = m.ones(4); q = p.data; p.zero_(); (p, q)",
        "p = m.ones(4); d = p.detach(); e = d.detach(); d.mul_(3.0); e.add_(m.ones(4)); (p, d, e)",  # into an alias
        "p = m.ones(4); d = p.detach(); v = p[1:]; d.mul_(3.0); (p, d, v)",  # an alias of a base with a view
        "a = np.ones(3, np.float32); t = m.from_numpy(a); d = t.detach(); d.add_(m.ones(3)); (t, d, a)",
        "p = m.ones(4); p.add_(m.ones(4, dtype=m.float64)); p",  # computed in float64, cast back
        "p = m.ones(2, 3); p.add_(m.arange(3.0)); p.copy_(m.tensor([1.0, 2.0, 3.0])); p",  # broadcast operands
        "p = m.ones(4, dtype=m.int64); p.mul_(3); p.add_(m.ones(4, dtype=m.int64), alpha=2); p",
        "p = m.ones(3, dtype=m.float64); p.fill_(2.5); p.mul_(m.tensor(2.0)); p",
        # a 0-d tensor alpha (CG's step size), 1 among them
        "p = m.ones(4); p.add_(m.full((4,), 3.0), alpha=m.tensor(0.5)); p.sub_(m.ones(4), alpha=m.tensor(1.0)); "
        "p.add_(m.full((4,), 2.0), alpha=m.tensor(1)); p.sub_(m.ones(4), alpha=m.tensor(-0.25, dtype=m.float64)); p",
        "p = m.ones(2, dtype=m.int64); p.add_(m.ones(2, dtype=m.int64), alpha=m.tensor(2)); p",
        "p = m.ones(2, dtype=m.complex64); p.add_(m.ones(2, dtype=m.complex64), alpha=0.5); p.sub_(1, alpha=2j); p",
        "p = m.ones(2, dtype=m.bool); p.add_(m.ones(2, dtype=m.bool), alpha=True); p",
        "p = m.ones(2, dtype=m.float16); p.mul_(3.5); p.add_(2, alpha=3); p",
        "a = np.ones(3, np.float32); t = m.from_numpy(a); t.add_(m.ones(3)); t.mul_(2.0); (t, a)",  # shared memory
        "p = m.ones(3, requires_grad=True); g = m.full((3,), 0.5); "
        "m.set_grad_enabled(False); p.add_(g, alpha=-0.1); p.mul_(0.5); m.set_grad_enabled(True); p",
    ],
)
def test_in_place_ops_give_torchs_values_dtypes_and_versions(code):
    assert _plain(_run(code, bg)) == _plain(_run(code, torch))


@pytest.mark.parametrize(
    "code",
    [
        "m.ones(4, dtype=m.int64).add_(m.ones(4))",  # a float result into an integer tensor
        "m.ones(3).add_(m.ones(2, 3))",  # a result larger than the tensor
        "m.ones(3).mul_(m.ones(4))",  # shapes that do not broadcast
        "m.ones(3, requires_grad=True).add_(1.0)",  # a leaf that requires grad, in grad mode
        "m.ones(3, dtype=m.bool).sub_(m.ones(3, dtype=m.bool))",
        "m.ones(3, dtype=m.bool) - True",
        "m.ones(2, dtype=m.int64).add_(m.ones(2, dtype=m.int64), alpha=0.5)",  # add and sub's checks of alpha
        "m.add(m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64), alpha=1.0)",
        "m.ones(2).add_(m.ones(2), alpha=True)",
        "m.ones(2, dtype=m.int64).add_(m.ones(2, dtype=m.int64), alpha=m.tensor(0.5))",  # a tensor alpha's kind
        "m.ones(2).add_(m.ones(2), alpha=m.tensor(True))",
        "m.ones(2).sub_(m.ones(2), alpha=m.tensor(1j))",
        "m.sub(m.ones(2), m.ones(2), alpha=1j)",
    ],
)
def test_in_place_ops_raise_torchs_errors(code):
    raises_like_torch(lambda m: _run(code, m))


def test_an_operand_that_requires_grad_records_the_in_place_op():
    code = "p = m.full((3,), 3.0); w = m.full((3,), 2.0, requires_grad=True); p.mul_(w); (p, w)"
    (got, w), (expected, t_w) = _run(code, bg), _run(code, torch)
    assert got.requires_grad and type(got.grad_fn).__name__ == type(expected.grad_fn).__name__ == "MulBackward0"
    (g,) = bg.autograd.grad(got.sum(), w)
    (t_g,) = torch.autograd.grad(expected.sum(), t_w)
    np.testing.assert_array_equal(g.numpy(), t_g.numpy())


@pytest.fixture
def moves(monkeypatch):
    """A list that gets one entry per array moved to the device: by any module's to_device, or by jax.device_put."""
    moved = []
    original, put = _host.to_device, jax.device_put
    for name, module in list(sys.modules.items()):
        if name.startswith("batched_grad") and getattr(module, "to_device", None) is original:
            monkeypatch.setattr(module, "to_device", lambda a: moved.append(a.shape) or original(a))
    monkeypatch.setattr(jax, "device_put", lambda *a, **k: moved.append("device_put") or put(*a, **k))
    return moved


def _optimizer_steps(lib, p, steps):
    """Hand-written SGD with momentum on a parameter whose .grad a backward made: the in-place updates alone."""
    buf = lib.zeros_like(p)
    with lib.no_grad():
        for _ in range(steps):
            buf.mul_(0.9).add_(p.grad)
            p.add_(buf, alpha=-0.01)
            p.sub_(p, alpha=1e-4)
    p.grad.zero_()
    return p


def test_optimizer_updates_stay_on_the_host_and_compile_nothing(moves):
    rng = np.random.default_rng(5)
    w0, x0 = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    ps = {}
    for lib in (bg, torch):
        p = ps[lib] = lib.tensor(w0, requires_grad=True)
        (p * lib.tensor(x0)).tanh().sum().backward()
    _optimizer_steps(bg, ps[bg], 1)  # warm: a first call may compile
    (ps[bg] * bg.tensor(x0)).tanh().sum().backward()
    moved, compiles = len(moves), bg.compile_count()
    _optimizer_steps(bg, ps[bg], 20)
    assert len(moves) == moved, f"the updates moved {moves[moved:]} to the device"
    assert bg.compile_count() == compiles
    assert type(ps[bg]._v) is np.ndarray and type(ps[bg].grad._v) is np.ndarray
    _optimizer_steps(torch, ps[torch], 1)
    (ps[torch] * torch.tensor(x0)).tanh().sum().backward()
    _optimizer_steps(torch, ps[torch], 20)
    assert ps[bg]._version == ps[torch]._version
    np.testing.assert_allclose(ps[bg].detach().numpy(), ps[torch].detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not ps[bg].grad.numpy().any()


def test_a_tensor_alpha_on_the_host_scales_without_a_comparison(monkeypatch):
    """add_ and sub_ with a one-element Tensor alpha whose value is on the host (CG's step size) read it to tell 1
    from the other values, rather than compare tensors (an op, its result and a read of that); the other alphas
    compare as before."""
    compared = []
    equal = bg.Tensor.__eq__
    monkeypatch.setattr(bg.Tensor, "__eq__", lambda a, b: compared.append(b) or equal(a, b))
    p, g = bg.ones(4), bg.full((4,), 2.0)
    for alpha in (bg.tensor(0.5), bg.tensor(1.0), bg.tensor([1.0]), bg.tensor(-0.25) * bg.tensor(2.0)):
        p.add_(g, alpha=alpha)
        p.sub_(g, alpha=alpha)
    assert compared == []
    np.testing.assert_array_equal(p.numpy(), np.ones(4, np.float32))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        p.add_(g, alpha=bg.ones(2))  # compared: bool() of the comparison raises
    assert len(compared) == 1


@pytest.mark.parametrize(
    "write",
    ["p.add_(g)", "p.sub_(g)", "p.mul_(0.999)", "p.div_(g)", "p.zero_()", "p -= g", "p.add_(p)"],
)
def test_a_value_nothing_else_holds_is_written_into(write):
    """Host data that only the tensor holds takes an in-place result in its own memory (no new array), with torch's
    values and versions."""
    rng = np.random.default_rng(7)
    p0, g0 = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    results = {}
    for lib in (bg, torch):
        p, g = lib.tensor(p0), lib.tensor(g0)
        held = weakref.ref(p._v) if lib is bg else None  # a reference to it would be one more holder
        exec(write, {"p": p, "g": g})
        results[lib] = p
        if lib is bg:
            assert p._v is held()
    assert _plain(results[bg]) == _plain(results[torch])


@pytest.mark.parametrize("write", ["w.grad.zero_()", "w.grad.mul_(0.5)", "w.grad.add_(w.grad)"])
def test_a_detached_alias_writes_into_the_memory_it_shares(write, fusion_state):
    """A `.grad` after backward (a detached alias of the host gradient the engine made: a structure seen for the first
    time runs op by op) and a `.detach()` of a tensor write into the memory they share with their base where nothing
    else holds it (no new array): the base and each alias see the write, with torch's values and versions."""
    rng = np.random.default_rng(8)
    w0, x0 = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    results = {}
    for lib in (bg, torch):
        w, x = lib.tensor(w0, requires_grad=True), lib.tensor(x0)
        (x * w).sum().backward()
        held = weakref.ref(w.grad._v) if lib is bg else None
        exec(write, {"w": w})
        a = lib.arange(6.0)
        alias = a.detach()
        alias.mul_(2.0)
        results[lib] = (w.grad, w.grad._version, a, a._version, alias)
        if lib is bg:
            assert w.grad._v is held() is not None
    assert _plain(results[bg]) == _plain(results[torch])


@pytest.mark.parametrize(
    "code",
    [
        # a value held by a node's saved operand: torch's backward reads the result of exp, bg's the operand
        "x = m.full((3,), 0.5, requires_grad=True); y = x.exp(); m.set_grad_enabled(False); x.zero_(); "
        "x.add_(m.ones(3)); m.set_grad_enabled(True); (m.autograd.grad(y.sum(), x)[0], x)",
        # a copy's source stays as it was when the copy is written into, and the copy when the source is
        "g = m.arange(3.0); p = m.zeros(3); p.copy_(g); p.add_(m.ones(3)); g.mul_(2.0); (p, g)",
        "g = m.arange(3.0); p = m.zeros(3, dtype=m.float64); p.copy_(g); g.zero_(); p.mul_(2.0); (p, g)",
        # a value another tensor's op read before the write
        "a = m.arange(4.0); b = a * 2.0; c = a.sum(); a.add_(m.ones(4)); (a, b, c)",
        "a = m.arange(4.0); n = a.clone(); a.mul_(3.0); n.zero_(); (a, n)",
        "a = m.arange(4.0); r = a.reshape(2, 2); a.zero_(); (a, r)",
    ],
)
def test_a_value_held_elsewhere_is_not_written_into(code):
    assert _plain(_run(code, bg)) == _plain(_run(code, torch))


def test_a_value_held_by_numpy_or_the_device_is_not_written_into():
    p, g = bg.arange(4.0), bg.ones(4)
    kept = p._v
    view = kept[1:]
    p.add_(g)
    assert p._v is not kept and view.tolist() == [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(p.numpy(), [1.0, 2.0, 3.0, 4.0])
    q = bg.arange(3.0)
    (q @ bg.ones(3)).item()  # read twice by kernels: moved to the device for good
    (q @ bg.ones(3)).item()
    q.zero_()
    assert not q.numpy().any()


def test_add_with_alpha_rounds_once_where_float64_would_round_twice():
    """alpha * g is exact in float64 for float32 operands, but p + alpha * g rounded to float64 and then to float32
    is not torch's fused multiply-add: here the exact sum lies just above the midpoint 1 + 2**-24 of two float32s,
    float64 rounds it onto the midpoint, and float32 then rounds it to even (1.0) where torch gives 1 + 2**-23.
    The factors: 11854442 * 11872131 = 2**47 + 574, so alpha * g = 2**-24 * (1 + 574 * 2**-47)."""
    alpha, g = 11854442 * 2.0**-35, 11872131 * 2.0**-36
    twice = np.float32(np.float64(alpha) * np.float64(np.float32(g)) + 1.0)
    rng = np.random.default_rng(11)
    p0 = np.concatenate([[1.0], rng.standard_normal(999)]).astype(np.float32)
    g0 = np.concatenate([[g], rng.standard_normal(999)]).astype(np.float32)
    got, expected = bg.tensor(p0).add_(bg.tensor(g0), alpha=alpha), torch.tensor(p0).add_(torch.tensor(g0), alpha=alpha)
    assert twice == 1.0 and got[0].item() == expected[0].item() == 1 + 2.0**-23
    for a in (-0.01, 1e-30, 3.0):
        got.add_(bg.tensor(g0), alpha=a).sub_(bg.tensor(g0 * 0.5), alpha=a)
        expected.add_(torch.tensor(g0), alpha=a).sub_(torch.tensor(g0 * 0.5), alpha=a)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def _writes_under_transforms(m):
    """In-place writes that a lean front must leave to the full path: into a capture of a grad transform (torch's
    error), and with a dual operand (its tangent reaches the tensor), each after writes of the same ops it takes."""
    results = []
    captured = m.ones(3)

    def f(x):
        captured.mul_(2.0)  # a write into a capture, before it reads an operand of the transform
        return (x * captured).sum()

    with pytest.raises(RuntimeError) as caught:
        m.func.grad(f)(m.ones(3))
    results.append(str(caught.value))
    fw = m.autograd.forward_ad
    with fw.dual_level():
        p = m.ones(3)
        p.mul_(3.0)
        p.add_(fw.make_dual(m.ones(3), m.full((3,), 2.0)))
        p.mul_(2.0)
        p -= m.full((3,), 0.5)
        results.append((p.tolist(), fw.unpack_dual(p).tangent.tolist()))
    return results


def test_lean_in_place_fronts_leave_transforms_to_the_full_path():
    assert _writes_under_transforms(bg) == _writes_under_transforms(torch)


@pytest.mark.parametrize(
    "code",
    [
        "p = m.arange(6.0); g = m.full((6,), 0.25); p -= g; p *= 2.0; p /= g; p += 1; p.div_(3); p",
        "p = m.arange(6.0); g = m.full((6,), 0.25); p.add_(g, alpha=-0.01); p.sub_(g, alpha=0.5); "
        "p.add_(g, alpha=1.0); p",
        "p = m.arange(6.0, dtype=m.float64); p.add_(m.ones(6, dtype=m.float64), alpha=1e-3); p.sub_(p, alpha=0.25); p",
        "p = m.ones(2, 3); p.add_(m.arange(3.0), alpha=0.5); p.mul_(m.tensor(2.0)); p.copy_(m.tensor(7.0)); p",
        "p = m.ones(4); p.add_(2.0, alpha=0.5); p.mul_(2**60); p.add_(m.ones(4, dtype=m.float64), alpha=0.5); p",
        "p = m.ones(3); p.mul_(True); p.add_(m.ones(3), alpha=m.tensor(0.5)); p.copy_(m.arange(3)); p",
        "p = m.ones(3); p.sub_(1.5, 2.0 * m.ones(3)); p",  # torch's deprecated signature (scalar first)
    ],
)
def test_lean_in_place_fronts_give_torchs_values_and_versions(code):
    assert _plain(_run(code, bg)) == _plain(_run(code, torch))


@pytest.mark.parametrize(
    "code",
    [
        "m.ones(3).add_(m.ones(2, 3), alpha=0.5)",  # a result larger than the tensor
        "m.ones(3).copy_(m.ones(4))",
        "m.ones(3).mul_(m.ones(4))",
        "m.ones(3, requires_grad=True).add_(m.ones(3), alpha=0.5)",
        "m.ones(3, requires_grad=True).zero_()",
    ],
)
def test_lean_in_place_fronts_raise_torchs_errors(code):
    raises_like_torch(lambda m: _run(code, m))


def test_a_value_written_into_is_read_as_a_new_one(moves):
    """Host data that a program read once moves to the device on its second read (a weight); written into in place,
    it holds new values, so the next program's read is a first one again, as a new array's would be: a loop that
    updates a tensor in place and reads it in a recorded op keeps it on the host, written into each time."""
    w = bg.full((1,), 0.5, requires_grad=True)
    p = bg.arange(8.0)
    written = 0
    for _ in range(4):
        (g,) = bg.autograd.grad((p * w).tanh().sum(), w)
        held = weakref.ref(p._v)
        p.mul_(0.5)
        written += p._v is held()
    assert written and type(p._v) is np.ndarray and (8,) not in moves, (written, moves)
    expected = torch.arange(8.0) * 0.125
    np.testing.assert_allclose(g.numpy(), ((1 - torch.tanh(expected * 0.5) ** 2) * expected).sum().numpy(), rtol=1e-6)


@pytest.mark.parametrize(
    "code",
    [
        "t = m.zeros(4, 1, 5); t[3, 0, 2] = 1; t[1, 0] = 2.5; t[:, 0, 1:4] = -1; t[..., -1] = True; "
        "t[0] = m.ones(1, 5); t",
        "t = m.zeros(3, 4, dtype=m.int64); t[1] = 7; t[2, ::2] = 3; t[0, 1] = True; t",
        "t = m.zeros(3, dtype=m.bool); t[1] = 1; t[2] = True; t",
        "t = m.zeros(2, 3, dtype=m.float64); t[1] = m.arange(3.0, dtype=m.float64); t[0, 1:] = float('-inf'); t",
        "t = m.zeros(4); v = t[1:3]; t[0] = 5.0; (t, v)",  # a live view: the full path refreshes it
        "t = m.zeros(4); s = [t[i].item() for i in range(4)]; t[2] = 3.0; t[3] = t[2] * 2; t",  # views that died
        "a = np.zeros(3, np.float32); t = m.from_numpy(a); t[1] = 4.0; (t, a)",  # memory shared with NumPy
        "t = m.zeros(3, dtype=m.int32); t[0] = 2.7; t[1] = m.tensor(5, dtype=m.int32); t",
    ],
)
def test_lean_setitem_gives_torchs_values_and_versions(code):
    assert _plain(_run(code, bg)) == _plain(_run(code, torch))


@pytest.mark.parametrize(
    "code",
    [
        "t = m.zeros(3); t[3] = 1.0",
        "t = m.zeros(3, 2); t[0] = m.ones(3)",
        "t = m.zeros(3, dtype=m.int8); t[0] = 300",
        "t = m.zeros(3, dtype=m.int64); t[0] = float('nan')",
    ],
)
def test_lean_setitem_raises_torchs_errors(code):
    raises_like_torch(lambda m: _run(code, m))


def test_setitem_writes_host_data_nothing_else_holds_in_place():
    t = bg.zeros(64)
    for i in range(3):
        float(t[i])  # views of it, read and dropped
    held = weakref.ref(t._v)
    for i in range(64):
        t[i] = i * 0.5
    assert t._v is held() and t._version == 64 and t.tolist() == [i * 0.5 for i in range(64)]


@pytest.mark.parametrize(
    "code",
    [
        "c = m.zeros(3, 4); r = c[1]; c[1, 2] += 5.0; r.mul_(2.0); c[0] = r; c[:, 3] -= 1; (c, r, c[2, 1])",
        "c = m.zeros(2, 3); e = c[1, 2]; e += 4; e *= 2; c[0, :2] = e; (c, e)",  # an element's 0-d view
        "w = m.ones(3, 3); g = m.arange(9.0).reshape(3, 3); col = w[:, 1]; col -= 0.5 * g[:, 1]; w.zero_(); (w, col)",
        "a = m.arange(6.0); v = a[::2]; v.add_(a[1::2]); a.tanh_(); (a, v)",
        "x = m.ones(4, requires_grad=True); m.set_grad_enabled(False); v = x[1:]; v.mul_(3.0); "
        "m.set_grad_enabled(True); (x, v)",
    ],
)
def test_writes_through_views_give_torchs_values_and_versions(code):
    assert _plain(_run(code, bg)) == _plain(_run(code, torch))


def test_writes_through_views_of_host_data_go_into_its_memory():
    c = bg.zeros(5, 10)
    held = weakref.ref(c._v)
    for i in range(5):
        for j in range(10):
            c[i, j] += (c[i, j - 1] if j else 0.5) * 2.0  # a view of an element, written in place
    assert c._v is held() and c._version == 100
    np.testing.assert_allclose(c.numpy(), np.broadcast_to(0.5 * 2.0 ** np.arange(1, 11), (5, 10)))


def test_a_view_held_elsewhere_is_not_written_through():
    """A view whose memory another array also holds (numpy()'s read-only view, README: "Memory shared with NumPy") is
    not written into: the write takes the general path, which gives the tensors new values."""
    c = bg.zeros(4)
    v = c[1:3]
    kept = v.numpy()
    v.add_(1.0)
    c[0] += 2.0
    assert kept.tolist() == [0.0, 0.0] and c.tolist() == [2.0, 1.0, 1.0, 0.0] and v.tolist() == [1.0, 1.0]
