"""Pooling over 1, 2 and 3 dims against torch 2.13: max (with indices) and average pooling, the adaptive forms,
lp pooling and max unpooling; values, first and second derivatives, node names, errors, and the modules' outputs
and reprs."""

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.nn as nn
import batched_grad.nn.functional as F
from oracle import FLOAT_TIERS, FLOATS, assert_same, check_both, raises_like_torch, to_torch


def _f(m):
    return torch.nn.functional if m is torch else F


def leaf(dtype, *shape, seed=0):
    return bg.tensor(np.random.default_rng(seed).uniform(-1, 1, shape), dtype=FLOATS[dtype][0], requires_grad=True)


CALLS = {  # name: (call, input shape)
    "max_pool1d": (lambda F, x: F.max_pool1d(x, 3), (2, 3, 10)),
    "max_pool1d-geometry": (lambda F, x: F.max_pool1d(x, 3, 2, 1, 2, ceil_mode=True), (3, 11)),
    "max_pool3d": (lambda F, x: F.max_pool3d(x, 2), (2, 2, 4, 5, 4)),
    "max_pool3d-geometry": (
        lambda F, x: F.max_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), ceil_mode=True),
        (2, 5, 6, 5),
    ),
    "max_pool2d-indices": (lambda F, x: F.max_pool2d(x, 3, 2, 1, return_indices=True)[0], (2, 3, 7, 6)),
    "avg_pool1d": (lambda F, x: F.avg_pool1d(x, 3, 2, 1), (2, 3, 10)),
    "avg_pool1d-ceil": (lambda F, x: F.avg_pool1d(x, 4, 3, 2, True, False), (3, 10)),
    "avg_pool3d": (lambda F, x: F.avg_pool3d(x, 2), (2, 2, 4, 5, 4)),
    "avg_pool3d-geometry": (lambda F, x: F.avg_pool3d(x, 3, 2, 1, True, False, None), (2, 5, 6, 5)),
    "avg_pool3d-divisor": (lambda F, x: F.avg_pool3d(x, 2, divisor_override=3), (2, 4, 4, 4)),
    "adaptive_avg_pool1d": (lambda F, x: F.adaptive_avg_pool1d(x, 4), (2, 3, 10)),
    "adaptive_avg_pool2d": (lambda F, x: F.adaptive_avg_pool2d(x, (3, 4)), (2, 3, 7, 9)),
    "adaptive_avg_pool2d-none": (lambda F, x: F.adaptive_avg_pool2d(x, (None, 2)), (3, 7, 5)),
    "adaptive_avg_pool2d-one": (lambda F, x: F.adaptive_avg_pool2d(x, 1), (2, 3, 7, 9)),
    "adaptive_avg_pool3d": (lambda F, x: F.adaptive_avg_pool3d(x, (2, 3, 2)), (2, 2, 5, 7, 4)),
    "adaptive_max_pool1d": (lambda F, x: F.adaptive_max_pool1d(x, 4), (2, 3, 10)),
    "adaptive_max_pool2d": (lambda F, x: F.adaptive_max_pool2d(x, (3, 4)), (2, 3, 7, 9)),
    "adaptive_max_pool3d": (lambda F, x: F.adaptive_max_pool3d(x, 2), (2, 2, 5, 7, 4)),
    "lp_pool1d": (lambda F, x: F.lp_pool1d(x.abs() + 0.1, 2, 3), (2, 3, 10)),
    "lp_pool2d": (lambda F, x: F.lp_pool2d(x.abs() + 0.1, 3.0, (2, 3), 2), (2, 3, 7, 9)),
    "lp_pool3d": (lambda F, x: F.lp_pool3d(x.abs() + 0.1, 1.5, 2), (2, 2, 4, 4, 4)),
    "max_unpool1d": (lambda F, x: F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2), (2, 3, 10)),
    "max_unpool2d": (
        lambda F, x: F.max_unpool2d(*F.max_pool2d(x, 3, 2, 1, return_indices=True), 3, 2, 1, output_size=(7, 6)),
        (2, 3, 7, 6),
    ),
    "max_unpool3d": (lambda F, x: F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2), (2, 2, 4, 4, 4)),
    "torch-max_pool1d": (lambda F, x: (torch if F is torch.nn.functional else bg).max_pool1d(x, 2), (2, 3, 10)),
    "torch-adaptive_avg_pool1d": (
        lambda F, x: (torch if F is torch.nn.functional else bg).adaptive_avg_pool1d(x, 3),
        (2, 3, 10),
    ),
}


@pytest.mark.parametrize(("dtype", "batched"), FLOAT_TIERS)
@pytest.mark.parametrize("name", CALLS)
def test_values_and_derivatives(name, dtype, batched):
    call, shape = CALLS[name]
    check_both(lambda m, x: call(_f(m), x), [leaf(dtype, *shape)], batched=batched, **FLOATS[dtype][1])


@pytest.mark.parametrize("name", CALLS)
def test_node_names(name):
    call, shape = CALLS[name]
    x = leaf("float64", *shape)
    assert call(F, x).grad_fn.name() == call(torch.nn.functional, to_torch(x)).grad_fn.name()


INDICES = {
    "max_pool1d": lambda F, x: F.max_pool1d(x[0], 3, 2, 1, return_indices=True),
    "max_pool2d": lambda F, x: F.max_pool2d(x, 3, 2, 1, 2, ceil_mode=True, return_indices=True),
    "max_pool2d_with_indices": lambda F, x: F.max_pool2d_with_indices(x, 2),
    "max_pool3d": lambda F, x: F.max_pool3d(x[None], (1, 2, 3), return_indices=True),
    "adaptive_max_pool1d": lambda F, x: F.adaptive_max_pool1d(x[0], 3, True),
    "adaptive_max_pool2d": lambda F, x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True),
    "adaptive_max_pool3d": lambda F, x: F.adaptive_max_pool3d_with_indices(x[None], (2, 2, 3)),
    "ties": lambda F, x: F.max_pool2d(x.round(), 2, return_indices=True),
    "ties-adaptive": lambda F, x: F.adaptive_max_pool2d(x.round(), 3, return_indices=True),
}


@pytest.mark.parametrize("name", INDICES)
def test_indices(name):
    x = leaf("float64", 2, 3, 7, 8, seed=4)
    got, want = INDICES[name](F, x), INDICES[name](torch.nn.functional, to_torch(x))
    assert_same(tuple(got), tuple(want))
    if name.startswith("ties"):  # the gradient goes to the index torch picks
        check_both(lambda m, x: INDICES[name](_f(m), x)[0], [x], gradgrad=False)


def test_torch_adaptive_max_pool1d_gives_values_and_indices():
    """torch.adaptive_max_pool1d returns (values, indices) and takes no return_indices; nn.functional's returns the
    values alone unless asked."""
    x = bg.tensor(np.random.default_rng(3).standard_normal((2, 3, 8)), requires_grad=True)
    values, indices = bg.adaptive_max_pool1d(x, 3)
    want_values, want_indices = torch.adaptive_max_pool1d(to_torch(x), 3)
    assert_same((values, indices), (want_values, want_indices))
    assert values.grad_fn.name() == want_values.grad_fn.name() and not indices.requires_grad
    check_both(lambda m, t: m.adaptive_max_pool1d(t, 3)[0], [x], gradgrad=False)
    raises_like_torch(lambda m: m.adaptive_max_pool1d(m.ones(1, 2, 5), 2, True))
    assert isinstance(F.adaptive_max_pool1d(x, 3), bg.Tensor)


def test_nan_windows():
    x = bg.tensor([[[[1.0, float("nan"), 3.0, 0.5], [float("nan"), 2.0, -1.0, 4.0]]]], requires_grad=True)
    for name in ("max_pool2d", "adaptive_max_pool2d"):
        args = (2,) if name == "max_pool2d" else ((1, 2),)
        check_both(lambda m, x: getattr(_f(m), name)(x, *args, return_indices=True)[0], [x], gradgrad=False)
        got = getattr(F, name)(x, *args, return_indices=True)[1]
        assert_same(got, getattr(torch.nn.functional, name)(to_torch(x), *args, return_indices=True)[1])


@pytest.mark.parametrize(
    "call",
    [
        lambda F, m: F.max_pool3d(m.ones(2, 3), 2),
        lambda F, m: F.max_pool3d(m.ones(1, 2, 2, 2), 3),
        lambda F, m: F.max_pool1d(m.ones(2, 3, 4, 5), 2),
        lambda F, m: F.adaptive_avg_pool2d(m.ones(2), 2),
        lambda F, m: F.adaptive_max_pool3d(m.ones(2, 2, 3, 3, 3).long(), 2),
        lambda F, m: F.max_unpool2d(m.ones(1, 1, 2, 2), m.zeros(1, 1, 2, 3, dtype=m.int64), 2),
        lambda F, m: F.avg_pool3d(m.ones(1, 1, 4, 4, 4), 2, padding=2),
        lambda F, m: F.avg_pool1d(m.ones(2, 3, 4, 5), 2),
        lambda F, m: F.adaptive_max_pool2d(m.ones(2), 2),
        lambda F, m: F.adaptive_avg_pool1d(m.ones(2, 3, 4, 5), 2),
        lambda F, m: F.adaptive_max_pool1d(m.ones(2, 3, 3).long(), 2),
        lambda F, m: F.max_pool1d(m.ones(2, 3).long(), 1),
    ],
    ids=[
        "max3d-dims",
        "max3d-too-small",
        "max1d-dims",
        "adaptive-dims",
        "adaptive-max-long",
        "unpool-indices",
        "avg3d-pad",
        "avg1d-dims",
        "adaptive-max-dims",
        "adaptive-avg1d-dims",
        "adaptive-max1d-long",
        "max1d-long",
    ],
)
def test_errors(call):
    raises_like_torch(lambda m: call(_f(m), m))


MODULES = {
    "MaxPool1d": ((3,), {}, (2, 3, 10)),
    "MaxPool2d": ((3, 2, 1), {"ceil_mode": True}, (2, 3, 7, 6)),
    "MaxPool3d": ((2, 1, 1), {"ceil_mode": True}, (2, 2, 4, 4, 4)),
    "AvgPool1d": ((2,), {}, (2, 3, 10)),
    "AvgPool2d": ((3,), {"stride": 2, "padding": 1}, (2, 3, 7, 6)),
    "AvgPool3d": ((2,), {}, (2, 2, 4, 4, 4)),
    "AdaptiveAvgPool1d": ((4,), {}, (2, 3, 10)),
    "AdaptiveAvgPool2d": (((5, 7),), {}, (2, 3, 9, 9)),
    "AdaptiveAvgPool3d": ((2,), {}, (2, 2, 4, 5, 4)),
    "AdaptiveMaxPool1d": ((3,), {}, (2, 3, 10)),
    "AdaptiveMaxPool2d": ((3,), {}, (2, 3, 7, 6)),
    "AdaptiveMaxPool3d": ((2,), {}, (2, 2, 4, 5, 4)),
    "LPPool1d": ((1.5, 2, 1), {}, (2, 3, 10)),
    "LPPool2d": ((2, 3), {}, (2, 3, 7, 6)),
    "LPPool3d": ((2, 2), {}, (2, 2, 4, 4, 4)),
}


@pytest.mark.parametrize("name", MODULES)
def test_modules(name):
    args, kwargs, shape = MODULES[name]
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    x = leaf("float64", *shape, seed=2)
    if name.startswith("LP"):
        x = (x.abs() + 0.1).detach().requires_grad_()
    check_both(lambda m, x: (ours if m is bg else theirs)(x), [x], gradgrad=False)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_pool_with_indices_and_unpool_modules(n):
    pool = getattr(nn, f"MaxPool{n}d")(2, return_indices=True)
    unpool, tunpool = getattr(nn, f"MaxUnpool{n}d")(2), getattr(torch.nn, f"MaxUnpool{n}d")(2)
    assert repr(unpool) == repr(tunpool)
    x = leaf("float64", *(2, 2) + (6,) * n, seed=5)
    values, indices = pool(x)
    want_values, want_indices = getattr(torch.nn, f"MaxPool{n}d")(2, return_indices=True)(to_torch(x))
    assert_same((values, indices), (want_values, want_indices))
    assert_same(
        unpool(values, indices, output_size=x.shape), tunpool(want_values, want_indices, output_size=to_torch(x).shape)
    )
