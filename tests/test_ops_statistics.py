"""The reductions and scans beyond the basics against torch 2.13: nansum, nanmean, count_nonzero, aminmax,
logcumsumexp, cummax/cummin, median, nanmedian, kthvalue, mode, quantile, nanquantile, msort, diff, trapezoid,
cumulative_trapezoid, cov, corrcoef, renorm and logdet (values, indices, dtypes, first and second derivatives, node
names, ties and nan, errors)."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import FLOAT_TIERS, FLOATS, assert_same, check_both, raises_like_torch, to_torch


def leaf(dtype, *shape, seed=0):
    # distinct values (ties get their own tests)
    return bg.tensor(
        np.random.default_rng(seed).permutation(np.linspace(-1, 1, int(np.prod(shape)))).reshape(shape),
        dtype=FLOATS[dtype][0],
        requires_grad=True,
    )


def values(out):
    return out[0] if isinstance(out, tuple) else out


CALLS = {
    "nansum": lambda m, x: m.nansum(x.log()),
    "nansum-dim": lambda m, x: x.log().nansum(1, keepdim=True),
    "nanmean": lambda m, x: m.nanmean(x.log()),
    "nanmean-dim": lambda m, x: x.log().nanmean((0, 2)),
    "aminmax": lambda m, x: m.cat([t.reshape(-1) for t in m.aminmax(x)]),
    "aminmax-dim": lambda m, x: m.aminmax(x, dim=1, keepdim=True).max,
    "logcumsumexp": lambda m, x: m.logcumsumexp(x, 1),
    "cummax": lambda m, x: m.cummax(x, 2),
    "cummin": lambda m, x: x.cummin(0),
    "median": lambda m, x: m.median(x),
    "median-dim": lambda m, x: x.median(1),
    "median-keepdim": lambda m, x: m.median(x, -1, True),
    "nanmedian": lambda m, x: m.nanmedian(x.log()),
    "nanmedian-dim": lambda m, x: x.log().nanmedian(2),
    "kthvalue": lambda m, x: m.kthvalue(x, 2),
    "kthvalue-dim": lambda m, x: x.kthvalue(3, 0, True),
    "mode": lambda m, x: m.mode(x.round(), 1),
    "quantile": lambda m, x: m.quantile(x, 0.3),
    "quantile-dim": lambda m, x: x.quantile(0.75, 1, True),
    "quantile-many": lambda m, x: m.quantile(x, m.tensor([0.1, 0.5, 0.9], dtype=x.dtype), dim=2),
    "quantile-lower": lambda m, x: m.quantile(x, 0.4, 1, interpolation="lower"),
    "quantile-higher": lambda m, x: m.quantile(x, 0.4, 1, interpolation="higher"),
    "quantile-midpoint": lambda m, x: m.quantile(x, 0.4, 0, interpolation="midpoint"),
    "quantile-nearest": lambda m, x: m.quantile(x, m.tensor([0.25, 0.5], dtype=x.dtype), interpolation="nearest"),
    "nanquantile": lambda m, x: m.nanquantile(x.log(), 0.5, 1),
    "msort": lambda m, x: m.msort(x),
    "diff": lambda m, x: m.diff(x),
    "diff-order": lambda m, x: x.diff(2, 0),
    "diff-pend": lambda m, x: m.diff(x, 1, 1, prepend=x[:, :1] * 2, append=x[:, -1:]),
    "trapezoid": lambda m, x: m.trapezoid(x),
    "trapezoid-dx": lambda m, x: m.trapezoid(x, dx=0.5, dim=1),
    "trapezoid-x": lambda m, x: m.trapezoid(x, x[0, 0].cumsum(0) + 2),
    "trapz": lambda m, x: m.trapz(x, dim=0),
    "cumulative_trapezoid": lambda m, x: m.cumulative_trapezoid(x),
    "cumulative_trapezoid-dx": lambda m, x: m.cumulative_trapezoid(x, dx=2.0, dim=0),
    "renorm": lambda m, x: m.renorm(x, 2, 0, 0.8),
    "renorm-inf": lambda m, x: x.renorm(float("inf"), 2, 0.5),
    "renorm-p1": lambda m, x: m.renorm(x, 1, 1, 1.0),
}


@pytest.mark.parametrize(("dtype", "batched"), FLOAT_TIERS)
@pytest.mark.parametrize("name", CALLS)
def test_values_and_derivatives(name, dtype, batched):
    x = leaf(dtype, 3, 4, 5)
    check_both(lambda m, x: CALLS[name](m, x), [x], batched=batched, **FLOATS[dtype][1])


# torch's trapezoid multiplies by dx with its Tensor-Scalar overload (MulBackward1), which batched_grad's single
# mul does not distinguish: its node is MulBackward0
@pytest.mark.parametrize("name", [name for name in CALLS if not name.startswith("trap")])
def test_node_names(name):
    x = leaf("float64", 3, 4, 5)
    got, want = values(CALLS[name](bg, x)), values(CALLS[name](torch, to_torch(x)))
    assert got.grad_fn.name() == want.grad_fn.name()


MATRICES = {
    "cov": lambda m, x: m.cov(x),
    "cov-correction": lambda m, x: x.cov(correction=0),
    "cov-weights": lambda m, x: m.cov(
        x, fweights=m.tensor([1, 2, 1, 3]), aweights=m.tensor([0.5, 1.0, 2.0, 1.0], dtype=x.dtype)
    ),
    "cov-vector": lambda m, x: m.cov(x[0]),
    "corrcoef": lambda m, x: m.corrcoef(x),
    "logdet": lambda m, x: m.logdet(x[:, :3] @ x[:, :3].mT + m.eye(3, dtype=x.dtype)),
    "logdet-negative": lambda m, x: m.logdet(m.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=x.dtype) + x[:2, :2] * 0),
}


@pytest.mark.parametrize(("dtype", "batched"), FLOAT_TIERS)
@pytest.mark.parametrize("name", MATRICES)
def test_matrix_statistics(name, dtype, batched):
    x = leaf(dtype, 3, 4, seed=5)
    check_both(lambda m, x: MATRICES[name](m, x), [x], batched=batched, **FLOATS[dtype][1])


def test_ties_and_nan():
    x = bg.tensor(
        [[1.0, 3.0, 3.0, 2.0, 3.0, 0.0], [2.0, 2.0, 1.0, 1.0, 5.0, 5.0], [1.0, float("nan"), 0.0, 2.0, 1.0, 1.0]],
        requires_grad=True,
    )
    tx = to_torch(x)
    for name in ("cummax", "cummin"):
        assert_same(tuple(getattr(bg, name)(x, 1)), tuple(getattr(torch, name)(tx, 1)))
    assert_same(tuple(bg.mode(x, 1)), tuple(torch.mode(tx, 1)))
    assert_same(tuple(bg.mode(bg.tensor([1, 2, 2, 1, 3]))), tuple(torch.mode(torch.tensor([1, 2, 2, 1, 3]))))
    assert_same(bg.median(x), torch.median(tx))
    assert_same(bg.median(x[:2]), torch.median(tx[:2]))
    check_both(lambda m, x: m.median(x[:2]), [x])  # ties share the gradient
    assert_same(bg.median(x, 1).values, torch.median(tx, 1).values)
    assert_same(bg.nanmedian(x), torch.nanmedian(tx))
    assert_same(tuple(bg.nanmedian(x, 1)), tuple(torch.nanmedian(tx, 1)))
    assert_same(bg.quantile(x, 0.5, 1), torch.quantile(tx, 0.5, 1))
    assert_same(bg.nanquantile(x, bg.tensor([0.3, 0.8]), 1), torch.nanquantile(tx, torch.tensor([0.3, 0.8]), 1))
    assert_same(bg.nanmedian(bg.tensor([float("nan")] * 2)), torch.nanmedian(torch.tensor([float("nan")] * 2)))
    assert_same(bg.nansum(bg.tensor([1, 2])), torch.nansum(torch.tensor([1, 2])))
    assert_same(
        bg.count_nonzero(bg.tensor([[0, 1], [2, 0]]), 0), torch.count_nonzero(torch.tensor([[0, 1], [2, 0]]), 0)
    )
    assert_same(
        bg.count_nonzero(bg.tensor([[0.0, 1.5], [2.0, 0.0]])),
        torch.count_nonzero(torch.tensor([[0.0, 1.5], [2.0, 0.0]])),
    )
    assert_same(tuple(bg.aminmax(bg.tensor([1, 5, 2]))), tuple(torch.aminmax(torch.tensor([1, 5, 2]))))
    check_both(lambda m, x: m.aminmax(x[:2], dim=1).max, [x])


def test_kthvalue_and_mode_pick_the_element_torch_picks():
    """Among equal elements, kthvalue returns the one torch's quickselect leaves at k and mode the one at the end of
    torch's sorted run; kthvalue ranks nan above every number (its k-th smallest is a number while k is below the
    count of numbers)."""
    rng = np.random.default_rng(6)
    rows = rng.integers(0, 4, (4, 60)).astype(float)
    with_nans = rows.copy()
    with_nans[:, ::5] = np.nan
    for data in (rows, with_nans, rows.astype(np.int64)):
        for k in (1, 7, 30, 60):
            got, want = bg.kthvalue(bg.tensor(data), k, 1), torch.kthvalue(torch.tensor(data), k, 1)
            assert_same(tuple(got), tuple(want))
        got = bg.kthvalue(bg.tensor(data.T), 20, 0, keepdim=True)
        assert_same(tuple(got), tuple(torch.kthvalue(torch.tensor(data.T), 20, 0, keepdim=True)))
    for data in (rows, rows.astype(np.int64)):
        assert_same(tuple(bg.mode(bg.tensor(data), 1)), tuple(torch.mode(torch.tensor(data), 1)))
        assert_same(tuple(bg.mode(bg.tensor(data.T), 0, True)), tuple(torch.mode(torch.tensor(data.T), 0, True)))
    check_both(
        lambda m, x: m.kthvalue(x.round(), 3, 1).values * 2 + m.mode(x.round(), 1).values,
        [bg.tensor(rows[:, :9], requires_grad=True)],
    )


def test_running_extremes_take_every_nan():
    """cummax/cummin: from the first nan on the value is nan and the index the latest nan's (torch's scan takes each
    nan it meets); the gradient goes to those elements."""
    data = [[1.0, float("nan"), 3.0, float("nan"), 0.5, 4.0], [2.0, 2.0, float("nan"), 1.0, float("nan"), float("nan")]]
    x = bg.tensor(data, requires_grad=True)
    for name in ("cummax", "cummin"):
        assert_same(tuple(getattr(bg, name)(x, 1)), tuple(getattr(torch, name)(to_torch(x), 1)))
        check_both(lambda m, x: getattr(m, name)(x, 1).values.nan_to_num(0.0), [x])


def test_logdet_of_a_complex_matrix_is_complex():
    def program(m):
        x = m.tensor([[2 + 1j, 0.5], [0.3j, 1.0]], dtype=m.complex128, requires_grad=True)
        y = m.logdet(x)
        return y, m.autograd.grad(y.real + 2 * y.imag, x)[0], m.logdet(m.tensor([[0.0, 1], [1, 0]], dtype=m.complex64))

    assert_same(program(bg), program(torch))


def test_empty_inputs():
    def program(m):
        empty = m.ones(0, 3)
        return tuple(m.aminmax(empty, dim=1)) + tuple(m.median(empty.to(d)) for d in (m.int64, m.int32, m.uint8))

    assert_same(program(bg), program(torch))


def test_result_types():
    x = bg.tensor([[1.0, 3.0], [2.0, 0.0]])
    for name in ("cummax", "median", "kthvalue", "mode", "nanmedian"):
        out = getattr(bg, name)(x, 1) if name != "kthvalue" else bg.kthvalue(x, 1, 1)
        assert type(out).__name__ == name and out.values is out[0] and out.indices is out[1]
    out = bg.aminmax(x)
    assert type(out).__name__ == "aminmax" and out.min is out[0]


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nanmean(m.tensor([1, 2])),
        lambda m: m.kthvalue(m.ones(3), 4),
        lambda m: m.aminmax(m.ones(0)),
        lambda m: m.quantile(m.ones(3), 1.5),
        lambda m: m.quantile(m.ones(3, dtype=m.int64), 0.5),
        lambda m: m.quantile(m.ones(3), 0.5, interpolation="cubic"),
        lambda m: m.quantile(m.ones(0), 0.5),
        lambda m: m.diff(m.tensor(1.0)),
        lambda m: m.cov(m.ones(2, 2, 2)),
        lambda m: m.renorm(m.ones(3), 2, 0, 1),
        lambda m: m.median(m.ones(2, 0), 1),
        lambda m: m.quantile(m.ones(3, dtype=m.float16), 0.5),
        lambda m: m.nanquantile(m.ones(3, dtype=m.bfloat16), 0.5),
        lambda m: m.nanquantile(m.ones(3), 1.5),
        lambda m: m.nanquantile(m.ones(0), 0.5),
        lambda m: m.nanquantile(m.ones(3), 0.5, interpolation="cubic"),
        lambda m: m.aminmax(m.ones(0, 3), dim=0),
    ],
    ids=[
        "nanmean-int",
        "kthvalue-k",
        "aminmax-empty",
        "quantile-q",
        "quantile-int",
        "quantile-interpolation",
        "quantile-empty",
        "diff-scalar",
        "cov-dims",
        "renorm-dims",
        "median-empty",
        "quantile-half",
        "nanquantile-bfloat16",
        "nanquantile-q",
        "nanquantile-empty",
        "nanquantile-interpolation",
        "aminmax-empty-dim",
    ],
)
def test_errors(call):
    raises_like_torch(call)
