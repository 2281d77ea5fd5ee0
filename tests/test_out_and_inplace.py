"""The out= keyword of elementwise functions and the in-place methods (acos_, atan2_, eq_, cumsum_, addcmul_, ...)
against torch 2.13: values, dtypes, versions, gradients and errors."""

import pytest
import torch

import batched_grad as bg
from test_tensor import _restore_modes, assert_like_torch  # noqa: F401

# ---- out= ---------------------------------------------------------------------------------------------------
OUT_CALLS = [
    "m.mul(a, 2, out=o)",
    "m.add(a, b, out=o)",
    "m.add(a, b, alpha=2, out=o)",
    "m.sub(a, 1, out=o)",
    "m.div(a, b, out=o)",
    "m.div(a, 2, rounding_mode='floor', out=o)",
    "m.pow(a, 2, out=o)",
    "m.sin(a, out=o)",
    "m.exp(a, out=o)",
    "m.atan2(a, b, out=o)",
    "m.maximum(a, b, out=o)",
    "m.clamp(a, 0, 0.5, out=o)",
    "m.eq(a, 1, out=o)",
    "m.lt(a, b, out=o)",
    "m.isnan(a, out=o)",
    "m.relu(a, out=o)",
    "m.abs(a, out=o)",
    "m.where(a > 0, a, b, out=o)",
    "m.lerp(a, b, 0.5, out=o)",
    "m.lerp(a, b, b, out=o)",
    "m.addcmul(a, a, b, value=2, out=o)",
    "m.round(a, out=o)",
    "m.neg(a, out=o)",
    "m.remainder(a, 2, out=o)",
    "m.hypot(a, b, out=o)",
    "m.true_divide(a, b, out=o)",
    "m.logical_and(a, b, out=o)",
]
OUTS = {
    "same": "m.zeros(3)",
    "double": "m.zeros(3, dtype=m.float64)",
    "long": "m.zeros(3, dtype=m.int64)",
    "bool": "m.zeros(3, dtype=m.bool)",
    "resized": "m.zeros(2)",
    "empty": "m.zeros(0)",
    "2d": "m.zeros(1, 3)",
}


@pytest.mark.parametrize("out", OUTS)
@pytest.mark.parametrize("call", OUT_CALLS)
def test_out(call, out):
    assert_like_torch(
        f"a = m.tensor([1., 2., 3.])\nb = m.tensor([0.5, 2.5, -1.])\no = {OUTS[out]}\nr = {call}\nr is o, o, V(o)"
    )


@pytest.mark.parametrize(
    "code",
    [
        "a = m.ones(3)\nm.add(a, 1, out=a)\na, V(a)",  # out is an input
        "x = m.zeros(2, 3)\nv = x[0]\nm.add(m.ones(3), 1, out=v)\nx, V(x)",  # out is a view: its base sees the result
        "x = m.ones(3, dtype=m.int64)\nm.add(x, 1, out=m.zeros(3))",
        "m.add(m.ones(3, requires_grad=True), 1, out=m.zeros(3))",
        "m.add(m.ones(3), 1, out=m.zeros(3, requires_grad=True))",
        "with m.no_grad():\n    r = m.add(m.ones(3, requires_grad=True), 1, out=m.zeros(3, requires_grad=True))\nr",
        "m.add(m.ones(3), 1.5, out=m.zeros(3, dtype=m.int64))",
        "m.sin(m.ones(3, dtype=m.int64), out=m.zeros(3, dtype=m.int64))",
        "m.add(m.ones(3), 1, out=[1])",
        "m.mul(2, 3, out=m.zeros(()))",
    ],
)
def test_out_cases(code):
    assert_like_torch(code)


def test_out_resizes_with_torch_warning():
    assert_like_torch("o = m.zeros(2)\nm.exp(m.zeros(3), out=o)\no")  # outcome() compares the warnings too


def test_methods_take_no_out():
    with pytest.raises(TypeError):
        bg.ones(2).add(1, out=bg.zeros(2))
    with pytest.raises(TypeError):
        torch.ones(2).add(1, out=torch.zeros(2))


# ---- in-place methods --------------------------------------------------------------------------------------
UNARY_INPLACE = [
    "acos_",
    "acosh_",
    "asin_",
    "asinh_",
    "atan_",
    "atanh_",
    "cosh_",
    "sinh_",
    "tan_",
    "erf_",
    "erfc_",
    "expm1_",
    "log10_",
    "log1p_",
    "log2_",
    "rsqrt_",
    "sign_",
    "frac_",
    "absolute_",
    "negative_",
]
BINARY_INPLACE = [
    "atan2_",
    "arctan2_",
    "hypot_",
    "divide_",
    "multiply_",
    "subtract_",
    "true_divide_",
    "floor_divide_",
    "eq_",
    "ne_",
    "lt_",
    "le_",
    "gt_",
    "ge_",
    "greater_",
    "less_",
]
LOGICAL_INPLACE = ["logical_and_", "logical_or_", "logical_xor_", "logical_not_"]
DOMAIN = "m.tensor([0.25, 0.5, 0.75], dtype=m.float64)"
POSITIVE = "m.tensor([1.25, 1.5, 2.75], dtype=m.float64)"


@pytest.mark.parametrize("name", UNARY_INPLACE)
def test_unary_inplace(name):
    x = POSITIVE if name == "acosh_" else DOMAIN
    assert_like_torch(f"x = {x}\nr = x.{name}()\nr is x, x, V(x)")
    assert_like_torch(
        f"a = {x}.requires_grad_()\ny = a * 1\ny.{name}()\n"
        "y.grad_fn.name(), m.autograd.grad(y.sum(), a) if y.requires_grad else None"
    )
    assert_like_torch(f"x = {x}.requires_grad_()\nx.{name}()")  # a leaf that requires grad


@pytest.mark.parametrize("name", BINARY_INPLACE)
def test_binary_inplace(name):
    other = "m.tensor([0.5, 0.5, 1.0], dtype=m.float64)"
    assert_like_torch(f"x = {DOMAIN}\nr = x.{name}({other})\nr is x, x, V(x)")
    assert_like_torch(
        f"a = {DOMAIN}.requires_grad_()\nb = {other}.requires_grad_()\ny = a * 1\ny.{name}(b)\n"
        "y.grad_fn.name(), m.autograd.grad(y.sum(), (a, b)) if y.requires_grad else None"
    )


@pytest.mark.parametrize("name", LOGICAL_INPLACE)
def test_logical_inplace(name):
    other = "" if name == "logical_not_" else "m.tensor([0., 0.5, 1.0], dtype=m.float64)"
    assert_like_torch(f"x = m.tensor([0., 0.5, 0.], dtype=m.float64)\nr = x.{name}({other})\nr is x, x, V(x)")
    # torch records nothing: it writes into a leaf that requires grad, and leaves a non-leaf's history as it was (the
    # gradient passes through unchanged). Here the leaf rule holds, and the derivative is zero.
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        getattr(bg.ones(3, requires_grad=True), name)(*([bg.ones(3)] if other else []))
    a = bg.tensor([0.0, 0.5, 0.0], requires_grad=True)
    y = a * 2
    getattr(y, name)(*([bg.tensor([0.0, 0.5, 1.0])] if other else []))
    assert y.requires_grad and bg.autograd.grad(y.sum(), a)[0].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "code",
    [
        "x = m.tensor([1., 2., 3.])\nx.cumsum_(0)\nx, V(x)",
        "x = m.tensor([[1., 2.], [3., 4.]])\nx.cumprod_(1)\nx",
        "x = m.tensor([1, 2, 3])\nx.bitwise_and_(m.tensor([3, 3, 1]))\nx",
        "x = m.tensor([1, 2, 3])\nx.bitwise_or_(4)\nx",
        "x = m.tensor([1, 2, 3])\nx.bitwise_xor_(m.tensor([1, 1, 1]))\nx",
        "x = m.tensor([1, 2, 3])\nx.acos_()",
        "x = m.tensor([1, 2, 3])\nx.eq_(2)\nx, x.dtype",
        "x = m.tensor([1., 2., 3.])\nx.atan2_(m.ones(2, 3))",
        "a = m.tensor([1., 2., 3.], requires_grad=True)\ny = a * 1\ny.cumsum_(0)\ny.grad_fn.name(), "
        "m.autograd.grad((y * m.tensor([1., 10., 100.])).sum(), a)",
        "x = m.ones(2, 3)\nx[0].atan_()\nx, V(x)",
    ],
)
def test_inplace_cases(code):
    assert_like_torch(code)
