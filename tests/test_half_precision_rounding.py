"""bfloat16 and float16 ops as torch's CPU kernels round them, bit-equal to torch: products and quotients with a
scalar `other` (a Python number or a one-element Tensor) keep the scalar's float32 value, compute in float32 and
round once (0.044715 * x of a hand-written GELU, scores / sqrt(d) of attention), forward and backward, as do
add and sub with an alpha (in the half dtype there, an SGD step), addcmul, addcdiv and lerp (Adam's moment
updates) with their value or weight; softmax,
var and std (a hand-written LayerNorm) compute in float32 and round once; x ** 3 and x ** -2 in bfloat16 round the
square first, x ** 3 in float16 rounds once; sigmoid and the activations of torch.nn.functional compute in float32
and round once."""

import numpy as np
import pytest
import torch

import batched_grad as bg

RNG = np.random.default_rng(0)
X = RNG.standard_normal(512).astype(np.float32)
SCALARS = [0.044715, 8**0.5, -1.3e-3, 3]

CASES = {
    "mul": lambda m, x, s: x * s,
    "rmul": lambda m, x, s: s * x,
    "div": lambda m, x, s: x / s,
    "rdiv": lambda m, x, s: s / x,
    "torch.mul": lambda m, x, s: m.mul(x, s),
    "torch.div": lambda m, x, s: m.div(x, s),
    "mul-0d-float32": lambda m, x, s: x * m.tensor(s, dtype=m.float32),
    "div-0d-float64": lambda m, x, s: x / m.tensor(s, dtype=m.float64),
    "mul_": lambda m, x, s: x.clone().mul_(s),
    "div_": lambda m, x, s: x.clone().div_(s),
    "imul": lambda m, x, s: _imul(x.clone(), s),
    "same-dtype-tensor": lambda m, x, s: x * (x.flip(0) + s),
    "add-alpha": lambda m, x, s: m.add(x, x.flip(0), alpha=s),
    "sub_-alpha": lambda m, x, s: x.clone().sub_(x.flip(0), alpha=s),
    "addcmul": lambda m, x, s: m.addcmul(x, x, x.flip(0), value=s),
    "addcmul_": lambda m, x, s: x.clone().addcmul_(x, x.flip(0), value=s),
    "addcdiv": lambda m, x, s: m.addcdiv(x, x, x.flip(0).abs() + 1, value=s),
    "lerp": lambda m, x, s: m.lerp(x, x.flip(0), s),
    "lerp_": lambda m, x, s: x.clone().lerp_(x.flip(0), s / 8),
    "lerp-tensor-weight": lambda m, x, s: m.lerp(x, x.flip(0), x.abs() / (4 * abs(s))),
}


def _imul(x, s):
    x *= s
    return x


def _values(fn, m, dtype, s):
    return np.asarray(fn(m, m.tensor(X).to(getattr(m, dtype)), s).float().numpy())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_scalar_products_round_once_like_torch(name, dtype):
    for s in SCALARS:
        np.testing.assert_array_equal(_values(CASES[name], bg, dtype, s), _values(CASES[name], torch, dtype, s))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gradients_of_scalar_products(dtype):
    def grads(m):
        x = m.tensor(X).to(getattr(m, dtype)).requires_grad_()
        g = m.tensor(X[::-1].copy()).to(getattr(m, dtype))
        (x * 0.044715 + x / 8**0.5).backward(g)
        return np.asarray(x.grad.float().numpy())

    np.testing.assert_array_equal(grads(bg), grads(torch))


def test_a_hand_written_gelu_in_bfloat16_matches_torch():
    def gelu(m):
        x = m.tensor(X).to(m.bfloat16)
        c = m.sqrt(m.tensor(2.0 / m.pi))
        return np.asarray((0.5 * x * (1 + m.tanh(c * (x + 0.044715 * x * x * x)))).float().numpy())

    np.testing.assert_array_equal(gelu(bg), gelu(torch))


REDUCTIONS = {
    "softmax": lambda m, x: m.softmax(x / 3, dim=-1),
    "softmax-dim0": lambda m, x: m.nn.functional.softmax(x, dim=0),
    "var": lambda m, x: x.var(dim=-1, keepdim=True, unbiased=False),
    "var-all": lambda m, x: m.var(x),
    "std": lambda m, x: x.std(dim=-1),
    "var_mean": lambda m, x: m.var_mean(x, dim=0)[0],
    "std_mean": lambda m, x: m.std_mean(x, dim=1)[0],
    "layer-norm-by-hand": lambda m, x: (x - x.mean(-1, keepdim=True)) / m.sqrt(x.var(-1, keepdim=True) + 1e-5),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_softmax_and_variances_compute_in_float32(name, dtype):
    def values(m):
        x = m.tensor(X.reshape(32, 16) * 4).to(getattr(m, dtype))
        return np.asarray(REDUCTIONS[name](m, x).float().numpy())

    np.testing.assert_array_equal(values(bg), values(torch))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("exponent", [2, 3, 3.0, -2, -1, 0.5, 4, 1.7])
def test_powers_round_like_torch(exponent, dtype):
    def values(m):
        x = m.tensor(np.abs(X) + 0.01).to(getattr(m, dtype))
        return [np.asarray(v.float().numpy()) for v in (m.pow(x, exponent), x**exponent, x.pow(exponent))]

    for actual, expected in zip(values(bg), values(torch)):
        np.testing.assert_array_equal(actual, expected)


ACTIVATIONS = ["silu", "softplus", "elu", "mish", "logsigmoid", "hardswish", "leaky_relu", "hardtanh", "selu", "celu"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", ACTIVATIONS + ["sigmoid"])
def test_activations_compute_in_float32(name, dtype):
    """torch's CPU kernels run a half-float activation in float32 (its number parameters as float32 values) and
    round once; SwiGLU's silu and a sigmoid gate in bfloat16 are bit-equal to torch's."""

    def values(m):
        x = m.tensor(X * 3).to(getattr(m, dtype))
        fn = m.sigmoid if name == "sigmoid" else getattr(m.nn.functional, name)
        return np.asarray(fn(x).float().numpy())

    np.testing.assert_array_equal(values(bg), values(torch))
