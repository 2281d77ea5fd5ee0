"""No compile per value or per shape: a sweep runs each op with 20 distinct numbers or sizes and counts kernel traces
(bg.compile_count()) and XLA compiles; then each op that changed is checked against torch, values and gradients.
The ops with a number operand are those of the op database (tests/op_db.py) that give a call with one (number_call);
the sizes come from host data (masks, nonzero, slices, reshapes, joins)."""

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
import op_db
from oracle import assert_same, to_torch

_xla_compiles = [0]


def _count_xla_compile(event, duration, **kwargs):
    if event.endswith("backend_compile_duration"):
        _xla_compiles[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_xla_compile)

N = 20
WARMUP = 3  # the first few values or sizes may compile (a new dtype, a first kernel)


def _rng(i):
    return np.random.default_rng(100 + i)


def _floats(i, n=1000, requires_grad=False):
    return bg.tensor(_rng(i).standard_normal(n).astype(np.float32), requires_grad=requires_grad)


BASE = bg.tensor(np.random.default_rng(0).standard_normal(1000).astype(np.float32))
RESHAPES = [
    (2, 500),
    (4, 250),
    (5, 200),
    (8, 125),
    (10, 100),
    (20, 50),
    (25, 40),
    (40, 25),
    (50, 20),
    (100, 10),
    (125, 8),
    (200, 5),
    (250, 4),
    (500, 2),
    (1000, 1),
    (1, 1000),
    (2, 2, 250),
    (2, 5, 100),
    (4, 5, 50),
    (10, 10, 10),
]


def _mask(i):
    v = _floats(i)
    return v[v > 0]


def _mask_grad(i):
    v = _floats(i, requires_grad=True)
    v[v > 0].sum().backward()
    return v.grad


def _mask_assign(i):
    v = bg.tensor(_rng(i).integers(-2, 3, 1000).astype(np.float32))
    v[v == 0] = -1
    return v


def _masked_select(i):
    v = _floats(i)
    return bg.masked_select(v, v > 0)


def _nonzero(i):
    return bg.nonzero(bg.tensor(_rng(i).integers(0, 2, 1000)))


def _index_by_nonzero(i):
    v = _floats(i)
    return v[bg.nonzero(v > 0).squeeze(1)]


def _slice(i):
    return BASE[: 100 + i]


def _slice_grad(i):
    x = _floats(0, requires_grad=True)
    x[: 100 + i].sum().backward()
    return x.grad


def _reshape(i):
    return BASE.reshape(RESHAPES[i])


def _reshape_grad(i):
    x = _floats(0, requires_grad=True)
    x.reshape(RESHAPES[i]).sum().backward()
    return x.grad


def _cat(i):
    return bg.cat([BASE[: 10 + i], BASE[:5]])


def _number_case(entry):
    """The op with the i-th number operand: 0.55, 0.8, 1.05, ... (never a whole number, which an op might take as
    a special case; int(4 * c) is 2, 3, 4, ...)."""
    return lambda i: entry.number_call(bg, BASE, 0.55 + 0.25 * i)


NUMBERS = {e.name: e for e in op_db.ENTRIES if e.number_call}
SWEEP = {
    **{name: _number_case(e) for name, e in NUMBERS.items()},
    "mask": _mask,
    "mask_grad": _mask_grad,
    "mask_assign": _mask_assign,
    "masked_select": _masked_select,
    "nonzero": _nonzero,
    "index_by_nonzero": _index_by_nonzero,
    "slice": _slice,
    "slice_grad": _slice_grad,
    "reshape": _reshape,
    "reshape_grad": _reshape_grad,
    "cat": _cat,
}
CASES = [
    pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=NUMBERS[case].xfail["compile"]))
    if case in NUMBERS and "compile" in NUMBERS[case].xfail
    else case
    for case in sorted(SWEEP)
]


@pytest.mark.parametrize("case", CASES)
def test_a_new_value_or_size_compiles_nothing_after_the_first_few(case):
    run = SWEEP[case]
    for i in range(WARMUP):
        np.asarray(run(i))
    traces, compiles = bg.compile_count(), _xla_compiles[0]
    for i in range(WARMUP, N):
        np.asarray(run(i))
    assert bg.compile_count() - traces == 0, f"{case}: {bg.compile_count() - traces} kernels traced"
    assert _xla_compiles[0] - compiles == 0, f"{case}: {_xla_compiles[0] - compiles} XLA compiles"


def test_the_sweep_counts_compiles():
    """The counters see a compile: a kernel for a shape not seen before."""
    traces, compiles = bg.compile_count(), _xla_compiles[0]
    bg.tensor(np.ones(977, np.float32)).exp()
    assert bg.compile_count() > traces and _xla_compiles[0] > compiles


# ---- against torch --------------------------------------------------------------------------------------------


def _pair(a, requires_grad=True):
    x = bg.tensor(a, requires_grad=requires_grad)
    return x, to_torch(x)


def _grads_match(f, *arrays, rtol=1e-6):
    """f on bg and torch tensors made from `arrays`: values, then gradients of a weighted sum of the result."""
    pairs = [_pair(a) for a in arrays]
    y, t = f(*[p[0] for p in pairs], bg), f(*[p[1] for p in pairs], torch)
    assert_same(y, t, rtol=rtol)
    weights = np.random.default_rng(1).standard_normal(tuple(t.shape)).astype(str(t.dtype).split(".")[-1])
    (y * bg.tensor(weights)).sum().backward()
    (t * torch.tensor(weights)).sum().backward()
    for x, tx in pairs:
        assert_same(x.grad, tx.grad, rtol=rtol)
    assert y.grad_fn.name() == t.grad_fn.name()


SIGNED = np.array([-2.0, -1.5, -0.0, 0.0, 0.3, 1.0, 2.5])


@pytest.mark.parametrize("exponent", [1.7, 2.5, 0.25, -1.3, 4, 5, -3, 10, 2.0, 3, -1, 0, 1, float("nan"), True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_by_a_number_like_torch(exponent, dtype):
    _grads_match(lambda x, m: x**exponent, SIGNED.astype(dtype), rtol=1e-5)


@pytest.mark.parametrize("exponent", [4, 5, 7, 2.5])
def test_pow_of_integers_by_a_number_like_torch(exponent):
    assert_same(bg.tensor([-3, -1, 0, 1, 2, 5]) ** exponent, torch.tensor([-3, -1, 0, 1, 2, 5]) ** exponent)


def test_a_new_exponent_reuses_the_kernel():
    x = bg.tensor(SIGNED)
    x**1.25
    before = bg.compile_count()
    assert_same(x**1.75, torch.tensor(SIGNED) ** 1.75)
    assert bg.compile_count() == before


MATRIX = np.random.default_rng(2).standard_normal((4, 5))


@pytest.mark.parametrize("index", ["mask", "row_mask", "int_tensor", "repeated", "slice_then_array", "nonzero"])
def test_advanced_indexing_on_the_host_like_torch(index):
    def f(x, m):
        if index == "mask":
            return x[x > 0]
        if index == "row_mask":
            return x[m.tensor([True, False, True, True])]
        if index == "int_tensor":
            return x[m.tensor([3, 0, -1])]
        if index == "repeated":
            return x[m.tensor([1, 1, 2, 1]), m.tensor([0, 0, 4, 0])]
        if index == "slice_then_array":
            return x[1:, m.tensor([4, 0, 4])]
        return x[m.nonzero(x > 0, as_tuple=True)]

    _grads_match(f, MATRIX)


def test_masked_select_broadcast_like_torch():
    mask = np.array([True, False, True, False, True])
    _grads_match(lambda x, m: m.masked_select(x, m.tensor(mask)), MATRIX)
    _grads_match(lambda x, m: m.masked_select(x, m.tensor(MATRIX > 0).unsqueeze(0).expand(2, 4, 5)), MATRIX[0])


def test_nonzero_like_torch():
    a = (MATRIX > 0).astype(np.int64)
    assert_same(bg.nonzero(bg.tensor(a)), torch.nonzero(torch.tensor(a)))


@pytest.mark.parametrize("value", ["number", "tensor0d", "row", "int_number"])
def test_masked_assignment_like_torch(value):
    def f(x, m):
        y = x * 1
        mask = m.tensor(MATRIX[:, 0] > 0) if value == "row" else y > 0.5
        v = {
            "number": -1.5,
            "int_number": 7,
            "tensor0d": m.tensor(2.0, dtype=m.float64, requires_grad=True),
            "row": m.tensor(np.arange(5.0), requires_grad=True),
        }[value]
        y[mask] = v
        return y, v

    (y, v), (t, tv) = f(bg.tensor(MATRIX, requires_grad=True), bg), f(torch.tensor(MATRIX, requires_grad=True), torch)
    assert_same(y, t)
    assert y.grad_fn.name() == t.grad_fn.name() == "IndexPutBackward0"
    y.sum().backward()
    t.sum().backward()
    if isinstance(v, bg.Tensor):
        assert_same(v.grad, tv.grad)


def test_masked_assignment_compiles_nothing_for_a_new_mask():
    v = bg.tensor(MATRIX)
    v[v > 0] = 0.0
    before = bg.compile_count()
    for i in range(3):
        w = bg.tensor(_rng(i).standard_normal((4, 5)))
        w[w > 0] = 0.0
        t = torch.tensor(np.array(w.numpy()))
        assert_same(w, t)
    assert bg.compile_count() == before


@pytest.mark.parametrize("view", ["slice", "select", "strided", "reshape", "permute", "expand", "unsqueeze"])
def test_host_views_like_torch(view):
    def f(x, m):
        return {
            "slice": lambda: x[1:3],
            "select": lambda: x[2],
            "strided": lambda: x[::2, 1:5:2],
            "reshape": lambda: x.reshape(2, 10),
            "permute": lambda: x.permute(1, 0),
            "expand": lambda: x[:1].expand(3, 5),
            "unsqueeze": lambda: x[None, :, None],
        }[view]()

    _grads_match(f, MATRIX)


def test_a_host_view_shares_its_base_like_torch():
    x, t = bg.tensor(MATRIX.copy()), torch.tensor(MATRIX.copy())
    xv, tv = x[1:3], t[1:3]
    assert xv._base is x and xv.stride() == tv.stride() and xv.storage_offset() == tv.storage_offset()
    x.add_(1)
    t.add_(1)
    assert_same(xv, tv)
    xv.mul_(2)
    tv.mul_(2)
    assert_same(x, t)
    assert xv._version == tv._version


def test_in_place_through_a_host_view_of_a_non_leaf_like_torch():
    def f(x, m):
        y = x * 1
        y[1:3].mul_(3)
        y.reshape(20)[:4].add_(1)
        return y

    _grads_match(f, MATRIX)


@pytest.mark.parametrize("join", ["cat", "stack"])
def test_joins_on_the_host_like_torch(join):
    def f(x, m):
        other = m.tensor(MATRIX[:2].astype(np.float32), requires_grad=False)
        return m.cat([x, other], 0) if join == "cat" else m.stack([x, x, x[:, :]], 1)

    _grads_match(f, MATRIX)


def test_host_ops_keep_tracing_paths():
    """Under a JAX transform the kernels run (traced values never reach NumPy)."""
    x = bg.tensor(MATRIX, requires_grad=True)
    tx = torch.tensor(MATRIX, requires_grad=True)
    g = bg.func.grad(lambda a: (a[1:3].reshape(-1) ** 2.5).sum())(x.detach().abs())
    tg = torch.func.grad(lambda a: (a[1:3].reshape(-1) ** 2.5).sum())(tx.detach().abs())
    assert_same(g, tg)
    rows = bg.vmap(lambda r: bg.cat([r[1:4], r.reshape(5, 1)[:2, 0]]))(x.detach())
    assert_same(rows, torch.stack([torch.cat([r[1:4], r.reshape(5, 1)[:2, 0]]) for r in tx.detach()]))


def test_fused_backward_of_host_nodes_matches():
    """A structure seen often enough fuses into one program: host-recorded nodes join it with the same gradients."""
    expected = None
    for _ in range(4):
        x = bg.tensor(MATRIX, requires_grad=True)
        (x[1:3].reshape(-1)[x[1:3].reshape(-1) > 0] * 2).sum().backward()
        expected = x.grad if expected is None else expected
        assert_same(x.grad, to_torch(expected))
    t = torch.tensor(MATRIX, requires_grad=True)
    (t[1:3].reshape(-1)[t[1:3].reshape(-1) > 0] * 2).sum().backward()
    assert_same(x.grad, t.grad)


@pytest.mark.parametrize("activation", ["leaky_relu", "elu", "hardtanh", "relu6"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activations_with_number_operands_like_torch(activation, dtype):
    def f(x, m):
        F = m.nn.functional
        return {
            "leaky_relu": lambda: F.leaky_relu(x, 0.3),
            "elu": lambda: F.elu(x, 0.7),
            "hardtanh": lambda: F.hardtanh(x, -1.5, 0.3),
            "relu6": lambda: F.relu6(x * 4),
        }[activation]()

    _grads_match(f, SIGNED.astype(dtype), rtol=1e-5)


@pytest.mark.parametrize("value", [2.5, -3, True])
@pytest.mark.parametrize("dtype", ["float32", "int64", "float64"])
def test_fill_by_a_number_like_torch(value, dtype):
    assert_same(
        bg.zeros(3, dtype=getattr(bg, dtype)).fill_(value), torch.zeros(3, dtype=getattr(torch, dtype)).fill_(value)
    )


def test_a_host_selected_element_is_a_0d_tensor_like_any_other():
    def run(m):
        x = m.tensor([1.5, -2.0], dtype=m.float64)
        e = x[1]
        return str(e.device), tuple(e.shape), e.numpy().shape, e.item(), str(e.dtype)

    assert run(bg) == run(torch)
