"""In-place view ops (squeeze_, unsqueeze_, t_, transpose_, swapdims_, swapaxes_) and resize_ / resize_as_: the
tensor keeps its identity, its version is bumped, its views and base stay consistent and gradients flow as in torch
2.13 (also per sample under vmap + grad)."""

import functools

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.func
from test_tensor import _restore_modes, assert_like_torch  # noqa: F401

# each case: build x (a non-leaf that requires grad), change its shape in place, and show what torch shows
NON_LEAF = "w = m.arange(1., 7.).reshape(1, 2, 3).requires_grad_()\nx = w * 2\nv = V(x)\n"
SHAPE_CALLS = [
    "squeeze_()",
    "squeeze_(0)",
    "squeeze_(1)",
    "squeeze_((0, 2))",
    "squeeze_(-3)",
    "unsqueeze_(0)",
    "unsqueeze_(-1)",
    "unsqueeze_(3)",
    "transpose_(0, 2)",
    "transpose_(-1, 1)",
    "swapdims_(1, 2)",
    "swapaxes_(0, 1)",
]


@pytest.mark.parametrize("call", SHAPE_CALLS)
def test_non_leaf_keeps_identity_and_records_torch_node(call):
    assert_like_torch(
        NON_LEAF + f"y = x.{call}\n"
        "y.sum().mul(m.arange(1., 2.)).backward()\n"
        "y is x, x, V(x) - v, x.is_leaf, names(x.grad_fn), w.grad"
    )


@pytest.mark.parametrize(
    "code",
    [
        "x = m.ones(2, 3) * m.ones(1, 3, requires_grad=True)\ny = x.t_()\ny is x, x, V(x)",
        "x = m.ones(3) * m.ones(3, requires_grad=True)\nx.t_(), V(x)",
        "x = m.tensor(2.) * m.tensor(1., requires_grad=True)\nx.t_(), V(x)",
        "x = m.ones(1, 3)\nx.squeeze_(0); x.unsqueeze_(1); x.t_(); x.transpose_(0, 1); x.swapdims_(0, 1)\nx, V(x)",
        "m.ones(2, 3, 1).squeeze_(0)",
    ],
)
def test_shapes_versions_and_grad_fns(code):
    assert_like_torch(code)


@pytest.mark.parametrize(
    "code",
    [
        "m.ones(1, 3).squeeze_(2)",
        "m.ones(1, 3).unsqueeze_(3)",
        "m.ones(1, 3).transpose_(0, 2)",
        "m.ones(1, 3, 2).t_()",
        "m.ones(1, 3, requires_grad=True).squeeze_(0)",
        "m.ones(1, 3, requires_grad=True).squeeze_(5)",
        "m.ones(2, 3, requires_grad=True).t_()",
        "m.ones(1, 3, requires_grad=True)[0:1].unsqueeze_(0)",
        "b = m.ones(1, 3, requires_grad=True) * 2\na, c = b.split([1, 2], dim=1)\na.squeeze_(0)",
        "b = m.ones(2, 3, requires_grad=True) * 2\nb.unbind(0)[0].unsqueeze_(0)",
    ],
)
def test_errors_as_torch(code):
    assert_like_torch(code)


def test_leaf_under_no_grad_stays_a_leaf_and_accumulates_new_shape():
    assert_like_torch(
        "w = m.ones(1, 3, requires_grad=True)\n"
        "with m.no_grad():\n    w.squeeze_(0)\n"
        "(w * m.arange(3.)).sum().backward()\n"
        "w.shape, w.is_leaf, w.requires_grad, V(w), w.grad"
    )


def test_saved_value_changed_by_squeeze_raises_on_backward():
    assert_like_torch("w = m.ones(1, 3, requires_grad=True)\nx = w * 2\ny = x * x\nx.squeeze_(0)\ny.sum().backward()")


def test_output_saved_before_the_change_still_backpropagates():
    assert_like_torch(
        "w = m.ones(1, 3, requires_grad=True)\nx = w * 2\ny = x.exp()\nx.squeeze_(0)\n"
        "(y.sum() + x.sum()).backward()\nw.grad"
    )


def test_view_of_a_non_leaf_stays_a_view_of_its_base():
    assert_like_torch(
        "w = m.arange(1., 7.).reshape(2, 3).requires_grad_()\nb = w * 2\nv = b[0:1]\n"
        "v.unsqueeze_(0)\nr = (v.shape, v._base is b, V(b), V(v))\n"
        "v.mul_(3)\n(b * m.arange(6.).reshape(2, 3)).sum().backward()\n"
        "r, b, w.grad"
    )


def test_views_of_a_transposed_tensor_keep_their_elements():
    assert_like_torch(
        "w = m.arange(1., 4.).reshape(1, 3).requires_grad_()\nb = w * 2\nv = b[0]\n"
        "b.t_()\nr = (b.shape, v.shape, v._base is b)\n"
        "b.mul_(m.tensor([[1.], [10.], [100.]]))\n"
        "(v * m.tensor([1., 2., 3.])).sum().backward()\n"
        "r, v.detach(), b.detach(), w.grad"
    )


def test_write_into_a_view_after_the_base_changed_shape():
    assert_like_torch(
        "b = m.arange(6.).reshape(2, 3)\nv = b[:, 1]\nd = b.detach()\nb.unsqueeze_(0)\nb.transpose_(0, 2)\n"
        "v.fill_(-1)\nd.shape, b, V(d)"
    )


def _loss(lib, weight, x, t):
    x = x.mm(weight)
    y = x.squeeze_(0)
    return (y - t).sum()


def test_per_sample_gradients_through_squeeze_under_vmap_of_grad():
    rng = np.random.default_rng(0)
    weight, x, t = rng.standard_normal((4, 2)), rng.standard_normal((6, 1, 4)), rng.standard_normal((6, 2))
    got = bg.func.vmap(functools.partial(bg.func.grad(functools.partial(_loss, bg)), bg.tensor(weight)))(
        bg.tensor(x), bg.tensor(t)
    )
    torch_loss = functools.partial(_loss, torch)
    want = torch.func.vmap(functools.partial(torch.func.grad(torch_loss), torch.tensor(weight)))(
        torch.tensor(x), torch.tensor(t)
    )
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-12)


# ---- resize ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "x = m.arange(6.).reshape(2, 3)\ny = x.resize_(3, 2)\ny is x, x, V(x)",
        "x = m.arange(6.).reshape(2, 3)\nx.resize_([6]), x.resize_(m.Size([3, 2])), V(x)",
        "x = m.arange(6.)\nx.resize_(6), V(x)",
        "x = m.arange(6.)\nx.resize_(2, 2), V(x)",
        "x = m.arange(4.)\nx.resize_(2, 3)[0], V(x)",
        "x = m.arange(6, dtype=m.int64).reshape(2, 3)\nx.resize_as_(m.ones(6)), V(x)",
        "x = m.arange(6.)\nm.resize_as_(x, m.ones(3, 2)), V(x)",
        "b = m.arange(4.)\nv = b[1:3]\nb.resize_(2, 2)\nb.mul_(10)\nv, V(v)",
        "b = m.arange(4.)\nv = b[1:3]\nb.resize_(3, 2)\nb.mul_(10)\nv, b[:2]",
        "b = m.arange(4.)\nv = b[:2]\nv.resize_(2, 1)\nv.mul_(10)\nb, v",
        "b = m.arange(6.)\nv = b[1:3]\nv.resize_(2, 2)\nv.fill_(-1)\nb, v, v._base is b",
        "b = m.arange(4.).reshape(2, 2)\nv = b.t()\nv.resize_(4)\nv, v.is_contiguous()",
        "m.ones(2, 3, requires_grad=True).resize_(6)",
        "(m.ones(2, 3, requires_grad=True) * 2).resize_(2, 3)",
        "w = m.ones(2, requires_grad=True)\nwith m.no_grad():\n    w.resize_(3)",
        "m.ones(2, 3, requires_grad=True).resize_as_(m.ones(2))",
        "m.ones(2).resize_(2, -1)",
        "m.ones(2).resize_(2.0)",
    ],
)
def test_resize_as_torch(code):
    assert_like_torch(code)


@pytest.mark.parametrize(
    "code",
    [
        "w = m.arange(6.).reshape(2, 3).requires_grad_()\ny = w.resize(3, 2)\n"
        "(y * m.arange(6.).reshape(3, 2)).sum().backward()\ny, w.grad",
        "w = m.arange(6.).requires_grad_()\nw.resize_as(m.ones(2, 3))",
        "m.ones(2, 3).resize(4)",
    ],
)
def test_deprecated_out_of_place_resize(code):
    assert_like_torch(code)
