"""The activations beyond relu/elu/gelu/silu/softplus against torch 2.13: values and first and second derivatives
(float32 and float64, with inputs on every kink), node names, errors, in-place forms, and the activation modules'
outputs and reprs."""

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.nn as nn
import batched_grad.nn.functional as F
from oracle import FLOAT_TIERS, FLOATS, assert_same, check_both, raises_like_torch, to_torch

# the kinks of every piecewise function among the values (-3, 3, 6, +-1, +-0.5, 0)
KINKS = [-4.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 6.0, 7.0, -0.25]
CALLS = {
    "hardtanh": lambda F, x: F.hardtanh(x),
    "hardtanh-range": lambda F, x: F.hardtanh(x, -0.5, 3.0),
    "relu6": lambda F, x: F.relu6(x),
    "hardsigmoid": lambda F, x: F.hardsigmoid(x),
    "hardswish": lambda F, x: F.hardswish(x),
    "hardshrink": lambda F, x: F.hardshrink(x),
    "hardshrink-lambd": lambda F, x: F.hardshrink(x, 1.0),
    "softshrink": lambda F, x: F.softshrink(x, 1.0),
    "softsign": lambda F, x: F.softsign(x),
    "tanhshrink": lambda F, x: F.tanhshrink(x),
    "threshold": lambda F, x: F.threshold(x, 1.0, 20.0),
    "logsigmoid": lambda F, x: F.logsigmoid(x),
    "mish": lambda F, x: F.mish(x),
    "selu": lambda F, x: F.selu(x),
    "celu": lambda F, x: F.celu(x, 0.5),
    "rrelu-eval": lambda F, x: F.rrelu(x),
    "softmin": lambda F, x: F.softmin(x.reshape(3, 4), 1),
    "glu": lambda F, x: F.glu(x.reshape(3, 4)),
    "glu-dim": lambda F, x: F.glu(x.reshape(2, 6), 0),
    "prelu": lambda F, x: F.prelu(x.reshape(2, 3, 2), x[:3].detach() * 0 + 0.2),
    "prelu-one": lambda F, x: F.prelu(x.reshape(3, 4), x[:1] * 0.5),
}


def _module(name):
    return torch.nn.functional if name == "torch" else F


@pytest.mark.parametrize(("dtype", "batched"), FLOAT_TIERS)
@pytest.mark.parametrize("name", CALLS)
def test_values_and_derivatives(name, dtype, batched):
    x = bg.tensor(KINKS, dtype=FLOATS[dtype][0], requires_grad=True)
    check_both(
        lambda m, x: CALLS[name](torch.nn.functional if m is torch else F, x),
        [x],
        batched=batched,
        gradgrad=name != "hardsigmoid",
        **FLOATS[dtype][1],
    )


def test_hardsigmoid_has_no_double_backward():
    def double_backward(m):
        x = m.tensor(KINKS, requires_grad=True)
        (g,) = m.autograd.grad(m.nn.functional.hardsigmoid(x).sum(), x, create_graph=True)
        m.autograd.grad(g.sum(), x)

    raises_like_torch(double_backward)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["hardsigmoid", "hardswish"])
def test_hard_activations_round_as_torch(name, dtype):
    """Bit for bit on a fine grid: torch divides (x + 3) by 6 (and x by 3), which XLA would turn into a multiply by
    the reciprocal, and hardsigmoid's backward scales by 1/6 rounded to float32 in every dtype."""

    def values_and_grad(m):
        x = m.linspace(-4, 4, 1601, dtype=getattr(m, dtype), requires_grad=True)
        y = getattr(m.nn.functional, name)(x)
        (g,) = m.autograd.grad(y, x, m.linspace(-1, 2, 1601, dtype=getattr(m, dtype)))
        return y, g

    for got, want in zip(values_and_grad(bg), values_and_grad(torch)):
        np.testing.assert_array_equal(got.detach().double().numpy(), want.detach().double().numpy())


@pytest.mark.parametrize("name", CALLS)
def test_node_names(name):
    x = bg.tensor(KINKS, requires_grad=True)
    got, want = CALLS[name](F, x), CALLS[name](torch.nn.functional, to_torch(x))
    assert got.grad_fn.name() == want.grad_fn.name()


@pytest.mark.parametrize("name", ["hardtanh_", "threshold_", "selu_", "celu_", "relu_", "elu_", "leaky_relu_"])
def test_functional_inplace(name):
    args = {"threshold_": (0.5, 2.0)}.get(name, ())

    def call(m, x):
        y = x * 1
        out = getattr(m.nn.functional, name)(y, *args)
        assert out is y
        return y

    check_both(call, [bg.tensor(KINKS, dtype=bg.float64, requires_grad=True)], gradgrad=False)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.selu(m.tensor([-1.0, 2.0])),
        lambda m: m.celu(m.tensor([-1.0, 2.0]), 2.0),
        lambda m: m.threshold(m.tensor([-1.0, 2.0]), 0.5, 3.0),
        lambda m: m.hardshrink(m.tensor([-1.0, 0.2])),
        lambda m: m.tensor([-1.0, 0.2]).hardshrink(0.1),
        lambda m: m.prelu(m.tensor([[-1.0, 2.0]]), m.tensor([0.1, 0.3])),
        lambda m: m.tensor([[-1.0, 2.0]]).prelu(m.tensor([0.5])),
        lambda m: m.rrelu(m.tensor([-1.0, 2.0])),
    ],
    ids=["selu", "celu", "threshold", "hardshrink", "hardshrink-method", "prelu", "prelu-method", "rrelu"],
)
def test_torch_level_functions(call):
    assert_same(call(bg), call(torch))


@pytest.mark.parametrize(
    "call",
    [
        lambda F, m: F.hardtanh(m.ones(2), 2.0, 1.0),
        lambda F, m: F.softshrink(m.ones(2), -1.0),
        lambda F, m: F.glu(m.ones(3, 3)),
        lambda F, m: F.glu(m.tensor(1.0)),
        lambda F, m: F.hardswish(m.ones(2).long()),
        lambda F, m: F.prelu(m.ones(2, 3), m.ones(2)),
        lambda F, m: F.prelu(m.ones(2, 3), m.ones(3, 1)),
        lambda F, m: F.mish(m.ones(2, dtype=m.int64)),
        lambda F, m: F.rrelu(m.ones(2, dtype=m.int64)),
        lambda F, m: F.rrelu(m.ones(2, dtype=m.int64), training=True),
        lambda F, m: F.prelu(m.ones(2, 3, dtype=m.float64), m.ones(3)),
        lambda F, m: F.softshrink(m.ones(2, dtype=m.float64), -0.5),
    ],
    ids=[
        "hardtanh-range",
        "softshrink-negative",
        "glu-odd",
        "glu-scalar",
        "hardswish-int",
        "prelu-channels",
        "prelu-2d-weight",
        "mish-int",
        "rrelu-int",
        "rrelu-training-int",
        "prelu-dtypes",
        "softshrink-double",
    ],
)
def test_errors(call):
    raises_like_torch(lambda m: call(m.nn.functional if m is torch else F, m))


def test_rrelu_training_draws_slopes_in_range():
    bg.manual_seed(0)
    x = bg.tensor(np.linspace(-2, 2, 41), requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    slopes = (y / x).detach().numpy()
    negative = x.detach().numpy() < 0
    assert ((slopes[negative] >= 0.1) & (slopes[negative] <= 0.3)).all() and len(np.unique(slopes[negative])) > 5
    assert np.allclose(slopes[x.detach().numpy() > 0], 1)
    (g,) = bg.autograd.grad(y.sum(), x)
    assert np.allclose(g.numpy()[negative], slopes[negative])
    assert y.grad_fn.name() == "RreluWithNoiseBackward0"


MODULES = {
    "Identity": ((), {}),
    "Identity-args": ((3,), {"x": 4}),
    "ReLU6": ((), {}),
    "ReLU6-inplace": ((True,), {}),
    "Hardtanh": ((), {}),
    "Hardtanh-args": ((-2, 3, True), {}),
    "Hardsigmoid": ((), {}),
    "Hardsigmoid-inplace": ((True,), {}),
    "Hardswish": ((), {}),
    "Hardshrink": ((), {}),
    "Softshrink": ((0.3,), {}),
    "Softsign": ((), {}),
    "Tanhshrink": ((), {}),
    "Threshold": ((0.1, 20), {}),
    "Threshold-inplace": ((0.1, 2, True), {}),
    "LogSigmoid": ((), {}),
    "Mish": ((), {}),
    "Mish-inplace": ((True,), {}),
    "SELU": ((), {}),
    "SELU-inplace": ((True,), {}),
    "CELU": ((), {}),
    "CELU-args": ((0.5, True), {}),
    "ELU": ((), {}),
    "ELU-args": ((0.5,), {}),
    "LeakyReLU": ((), {}),
    "LeakyReLU-args": ((0.2, True), {}),
    "SiLU": ((), {}),
    "SiLU-inplace": ((True,), {}),
    "GLU": ((), {}),
    "GLU-dim": ((0,), {}),
    "Softmax": ((), {"dim": 1}),
    "LogSoftmax": ((-1,), {}),
    "Softmin": ((0,), {}),
    "Softmax2d": ((), {}),
    "PReLU": ((), {}),
    "RReLU-eval": ((0.1, 0.3), {}),
}


@pytest.mark.parametrize("name", MODULES)
def test_modules(name):
    args, kwargs = MODULES[name]
    cls = name.split("-")[0]
    ours, theirs = getattr(nn, cls)(*args, **kwargs), getattr(torch.nn, cls)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    ours.eval()
    theirs.eval()
    x = bg.tensor(np.random.default_rng(0).uniform(-4, 7, (2, 4, 3, 2)), dtype=bg.float64, requires_grad=True)

    def call(m, x):
        return (ours.double() if m is bg else theirs.double())(x * 1)

    check_both(call, [x], gradgrad=False)


def test_prelu_module_parameters():
    ours, theirs = nn.PReLU(3, 0.1), torch.nn.PReLU(3, 0.1)
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert_same(ours.weight, theirs.weight.detach())
    x = bg.tensor(np.random.default_rng(1).uniform(-1, 1, (2, 3, 4)), dtype=bg.float32, requires_grad=True)
    y = ours(x)
    (ty := theirs(to_torch(x))).sum().backward()
    y.sum().backward()
    assert_same(y, ty, rtol=1e-5)
    assert_same(ours.weight.grad, theirs.weight.grad, rtol=1e-5)


def test_softmax2d_shape_error():
    with pytest.raises(ValueError, match="expected input to be 3D or 4D"):
        nn.Softmax2d()(bg.ones(2, 3))
    with pytest.raises(AssertionError):
        nn.Hardtanh(1.0, 1.0)
