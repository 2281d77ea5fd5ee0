"""In-place ops, augmented assignment and __setitem__: values, gradients, the leaf rules, version counters,
views and aliases, and the error for a saved value modified in place — against torch 2.13."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch
from test_tensor import _restore_modes, assert_like_torch, outcome  # noqa: F401

INPLACE_CALLS = [
    "add_(2)",
    "add_(m.tensor([1., 2., 3.]), alpha=2)",
    "sub_(2)",
    "sub_(m.tensor([1., 2., 3.]))",
    "mul_(3)",
    "mul_(m.tensor([1., 2., 3.]))",
    "div_(2)",
    "div_(m.tensor([1., 2., 4.]))",
    "pow_(2)",
    "pow_(m.tensor([1., 2., 3.]))",
    "zero_()",
    "fill_(5)",
    "fill_(m.tensor(2.5))",
    "copy_(m.tensor([4., 5., 6.]))",
    "copy_(m.tensor(7.))",
    "copy_(m.tensor([1, 2, 3]))",
    "clamp_(1.5, 2.5)",
    "clamp_(min=2)",
    "clamp_(max=2)",
    "neg_()",
]
AUGMENTED = ["+= 2", "-= m.tensor([1., 2., 3.])", "*= 2", "/= m.tensor([2., 4., 8.])", "**= 2", "%= 2"]


@pytest.mark.parametrize("call", INPLACE_CALLS)
def test_inplace_values_and_versions(call):
    assert_like_torch(f"x = m.tensor([1., 2., 3.])\nr = x.{call}\nr is x, x, V(x)")


@pytest.mark.parametrize("call", INPLACE_CALLS)
def test_inplace_on_a_non_leaf_is_recorded(call):
    assert_like_torch(
        f"a = m.tensor([1., 2., 3.], requires_grad=True)\ny = a * a\ny.{call}\n"
        "(y * m.tensor([1., 10., 100.])).sum().backward()\ny.is_leaf, a.grad, V(y)"
    )


@pytest.mark.parametrize("call", [c for c in INPLACE_CALLS if not c.startswith(("pow_", "clamp_"))])
def test_inplace_grad_fn_names_and_edges(call):
    assert_like_torch(
        f"a = m.tensor([1., 2., 3.], requires_grad=True)\ny = a * a\ny.{call}\n"
        "y.grad_fn.name(), names(y.grad_fn), y.requires_grad"
    )


@pytest.mark.parametrize("call", INPLACE_CALLS)
def test_inplace_on_a_leaf_that_requires_grad_raises(call):
    assert_like_torch(f"x = m.tensor([1., 2., 3.], requires_grad=True)\nx.{call}")
    assert_like_torch(f"x = m.tensor([1., 2., 3.], requires_grad=True)\nx.{call}\nx, V(x)")  # message and no change


@pytest.mark.parametrize("call", INPLACE_CALLS)
def test_inplace_under_no_grad_updates_a_leaf(call):
    assert_like_torch(
        f"x = m.tensor([1., 2., 3.], requires_grad=True)\nwith m.no_grad():\n    x.{call}\n"
        "x, x.is_leaf, x.grad_fn, V(x)"
    )


@pytest.mark.parametrize("op", AUGMENTED)
def test_augmented_assignment(op):
    assert_like_torch(f"x = m.tensor([1., 2., 3.])\ny = x\nx {op}\ny is x, x, V(x)")
    assert_like_torch(
        f"a = m.tensor([1., 2., 3.], requires_grad=True)\ny = a * 1\ny {op}\ny.sum().backward()\n"
        "a.grad, y.grad_fn.name()"
    )
    assert_like_torch(f"x = m.tensor([1., 2., 3.], requires_grad=True)\nx {op}")


SETITEM = [
    "x[0] = 5",
    "x[1:] = 0",
    "x[1:] = m.tensor([7., 8.])",
    "x[...] = 2",
    "x[:] = 3",
    "x[None] = 1",
    "x[m.tensor([0, 2])] = m.tensor([9., 8.])",
    "x[m.tensor([True, False, True])] = 4",
    "x[[0, 1]] = 6",
    "x[-1] = m.tensor(2.5)",
    "x[0:3:2] = m.tensor([1., 1.])",
]


@pytest.mark.parametrize("stmt", SETITEM)
def test_setitem(stmt):
    assert_like_torch(f"x = m.tensor([1., 2., 3.], requires_grad=True)\n{stmt}")
    assert_like_torch(
        f"x = m.tensor([1., 2., 3.], requires_grad=True)\nwith m.no_grad():\n    {stmt}\nx, x.is_leaf, V(x)"
    )


@pytest.mark.parametrize("stmt", SETITEM[1::2])
def test_setitem_gradients(stmt):
    assert_like_torch(
        f"a = m.tensor([1., 2., 3.], requires_grad=True)\nx = a * 2\n{stmt}\n"
        "(x * m.tensor([1., 10., 100.])).sum().backward()\na.grad, x.requires_grad"
    )


@pytest.mark.parametrize(
    "stmt",
    [
        "x[0, 1] = 0",
        "x[:, 0] = m.tensor([5., 6.])",
        "x[1] = m.tensor([1., 2., 3.])",
        "x[:, m.tensor([0])] = 1",
        "x[0, m.tensor([0])] = 1",
        "x[m.tensor([0]), 0] = 1",
        "x[..., 0] = 1",
        "x[..., m.tensor([0])] = 1",
        "x[x > 2] = 0",
        "x[0:2] = 9",
        "x[1, ...] = 2",
    ],
)
def test_setitem_2d_and_leaf_messages(stmt):
    assert_like_torch(f"x = m.arange(6.).reshape(2, 3)\n{stmt}\nx, V(x)")
    assert_like_torch(f"x = m.arange(6.).reshape(2, 3).requires_grad_()\n{stmt}")


GRADIENTS = [
    "y = a * 2\ny.add_(a)",
    "y = a * 2\ny.mul_(a)",
    "y = a * 2\ny.pow_(2)",
    "y = a * 2\ny.div_(a)",
    "y = a * 2\ny.sub_(a * 3)",
    "y = a * 2\ny.copy_(b)",
    "y = a * 2\ny[1] = b[0]",
    "y = a * 2\ny[0:2] *= a[1:]",
    "y = a * 2\ny += a\ny *= a\ny -= 1\ny /= a\ny **= 2",
    "y = a * 1\ny.mul_(y)",
    "y = a.clone()\ny[m.tensor([0, 2])] = b[:2]",
    "y = a.clone()\ny[y > 2] = 0",
    "y = a * b\ny.clamp_(2, 6)\ny.neg_()",
    "y = a.sigmoid()\nz = y * 1\nz.mul_(2)\ny = z",
    "y = b.clone()\ny.copy_(a)\ny.add_(b)",
]


@pytest.mark.parametrize("code", GRADIENTS)
def test_gradients_through_inplace_ops(code):
    assert_like_torch(
        "a = m.tensor([1., 2., 3.], requires_grad=True)\nb = m.tensor([4., 5., 6.], requires_grad=True)\n"
        f"{code}\n(y * m.tensor([1., 2., 3.])).sum().backward()\ny, a.grad, b.grad"
    )


def test_gradients_through_a_chain_of_inplace_ops():
    a = bg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    ta = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    for m, x in [(bg, a), (torch, ta)]:
        y = x * 1
        y[1:] *= x[:2]
        y.add_(x.sin())
        y[0] = x[2] ** 2
        (y * m.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)


VIEWS = [
    "x = m.arange(6.).reshape(2, 3)\nr = x[0]\nc = x[:, 1]\nr.mul_(10)\nx, r, c, V(x), V(r), V(c)",
    "x = m.arange(6.).reshape(2, 3)\nt = x.t()\nt[0, 1] = -1\nx, t, V(x)",
    "x = m.arange(6.).reshape(2, 3)\nf = x.view(-1)\nf[4] = 100\nx, V(x)",
    "x = m.arange(6.).reshape(2, 3)\nf = x.view(-1)\nx[1] = 0\nf, V(f)",
    "x = m.arange(6.).reshape(2, 3)\nv = x[1:]\nw = v[0, 1:]\nw.add_(1)\nx, v",
    "x = m.arange(6.).reshape(2, 3)\nu = x.unbind(1)\nu[2].zero_()\nx, u[0]",
    "x = m.arange(6)\nv = x[1:3]\nv.add_(1)\nx, V(x)",
    "x = m.tensor([float('inf'), 1., 2.])\nv = x[1:]\nv.mul_(2)\nx",
    "x = m.ones(3)\nv = x[1:]\nx.add_(1)\nV(x), V(v), v",
    "x = m.ones(3, requires_grad=True)\nv = x[1:]\nv.add_(1)",
    "x = m.ones(3, requires_grad=True)\nv = x.view(3)\nv.mul_(2)",
    "x = m.ones(3, requires_grad=True)\nv = x[1:]\nwith m.no_grad():\n    v.add_(1)\nx, x.is_leaf",
    "a = m.tensor([[1., 2.], [3., 4.]], requires_grad=True)\ny = a.clone()\nv = y[0]\nw = y[:, 0]\nv.mul_(3)\n"
    "(w * m.tensor([1., 5.])).sum().backward()\na.grad, w.detach(), y",
    "a = m.tensor([[1., 2.], [3., 4.]], requires_grad=True)\ny = a.clone()\ny[0].exp_()\ny.sum().backward()\na.grad",
    "a = m.tensor([1., 2., 3.], requires_grad=True)\ny = a * 1\nv = y[1:]\ny.mul_(2)\n(v * v).sum().backward()\na.grad",
]

ALIASES = [
    "x = m.ones(3)\nd = x.detach()\nd.add_(1)\nx, V(x), V(d)",
    "x = m.ones(3)\nd = x.data\nd.add_(1)\nx, V(x), V(d)",
    "x = m.ones(3)\nx.add_(1)\nV(x.data), V(x.detach())",
    "x = m.ones(3, requires_grad=True)\nx.data.mul_(3)\nx, x.is_leaf, x.requires_grad",
    "x = m.ones(3, requires_grad=True)\nx.detach().zero_()\nx, V(x)",
    "x = m.ones(3, requires_grad=True)\nd = x.detach()\nwith m.no_grad():\n    x.add_(1)\nd",
    "x = m.arange(6.).reshape(2, 3)\nd = x[1].detach()\nd.fill_(7)\nx",
    "x = m.arange(6.).reshape(2, 3)\nd = x.detach()[0]\nd.neg_()\nx",
    "a = m.tensor([1., 2.], requires_grad=True)\ny = a * 2\ny.detach().add_(10)\ny, y.grad_fn.name()",
    "a = m.tensor([1., 2.], requires_grad=True)\ny = a * 2\nd = y.detach()\ny.add_(1)\nd",
    "x = m.ones(2, requires_grad=True)\ny = x * 2\ny.detach_()\ny.add_(1)\ny, x",
    "x = m.ones(2)\nd = x.detach()\nd.requires_grad_()\nd.add_(1)",
]


@pytest.mark.parametrize("code", VIEWS + ALIASES)
def test_views_and_aliases_share_values_like_torch(code):
    assert_like_torch(code)


def test_dtype_and_shape_rules():
    for code in [
        "x = m.arange(6)\nx.add_(1.5)",
        "x = m.ones(3, dtype=m.int32)\nx.add_(m.ones(3, dtype=m.int64))\nx",
        "x = m.ones(3)\nx.add_(m.ones(3, dtype=m.float64))\nx",
        "x = m.ones(3, dtype=m.int64)\nx.copy_(m.tensor([1.7, 2., -3.5]))\nx",
        "x = m.ones(3)\nx.add_(m.ones(2, 3))",
        "x = m.ones(3)\nx.fill_(m.tensor([2.]))",
        "x = m.ones(2, 3)\nx.copy_(m.tensor([1., 2., 3.]))\nx",
        "x = m.ones(3, dtype=m.bool)\nx.mul_(2.5)",
        "x = m.ones(3)\nx.mul_(1j)",
    ]:
        assert_like_torch(code)


def test_version_counter_counts_like_torch():
    assert_like_torch(
        "x = m.ones(3)\nx.add_(1)\nx.mul_(3)\nx[0] = 1\nx[0] += 1\nx.clamp_(min=0)\nx.copy_(x)\nx += 1\nV(x)"
    )
    assert_like_torch("x = m.ones(3, requires_grad=True)\ny = x * 1\nV(x), V(y)")
    assert_like_torch("x = m.ones(3)\ny = x.clone()\ny.add_(1)\nV(x), V(y)")


SAVED_MODIFIED = [
    "y = x.exp()\nz = y * y\ny.add_(1)",
    "y = x * 1\nz = y * y\ny.mul_(2)",
    "y = x * 1\nz = y * y\ny.exp_()",
    "y = x * 1\nz = y * y\ny[0] = 5",
    "y = x * 1\nz = y * y\ny.detach().add_(1)",
    "y = x * 1\nv = y[1:]\nz = v * v\nv.add_(1)",
    "y = x * 1\nz = y * y\nwith m.no_grad():\n    y.add_(1)",
    "y = x * 1\nz = y[1:] * y[:2]\ny[0] = 1",
    "y = x * 1\nz = y * 2\ny.add_(1)",
    "y = x * 1\ny.mul_(y)\nz = y",
    "y = x * 1\nz = y.clone()\ny.add_(1)",
]


@pytest.mark.parametrize("code", SAVED_MODIFIED)
def test_backward_through_a_modified_saved_value(code):
    """Raises where torch raises (the message up to the part naming the tensor's node; all of it in the next test)."""
    code = f"x = m.tensor([1., 2., 3.], requires_grad=True)\n{code}\nz.sum().backward()\nx.grad"
    (expected, _), (got, _) = outcome(torch, code), outcome(bg, code)
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and got[0] == expected[0]
        assert got[1].split("]")[0] == expected[1].split("]")[0]
        assert got[1].split(" is at ")[1] == expected[1].split(" is at ")[1]
    else:
        assert got == expected


# torch's derivative of these reads their result (so an in-place change of the result raises, of the input not),
# both, or neither (indices, or intermediates of a composite): each case changes the input, then the result. In
# float64, so that the printed gradients do not depend on float32 rounding; the backward weighs z by its values, as
# the gradient of softmax(y).sum() is zero only up to rounding, whose sign depends on the CPU's summation order
TORCH_SAVES = [
    "y.exp()",
    "y.tanh()",
    "y.sigmoid()",
    "y.sqrt()",
    "y.relu()",
    "y.reciprocal()",
    "y.tan()",
    "m.softmax(y, 0)",
    "m.nn.functional.log_softmax(y, 0)",
    "m.linalg.inv(y[:2, None] * m.eye(2))",
    "y.prod()",
    "y.norm()",
    "m.logsumexp(y, 0)",
    "y.amax()",
    "y.max()",
    "m.cumprod(y, 0)",
    "y.std()",
    "2 ** y",
    "y ** y",
    "m.hypot(y, y)",
    "m.sort(y)[0]",
    "y.max(0)[0]",
    "m.where(y > 1, y, y * 2)",
    "m.nn.functional.l1_loss(y, y.detach() * 0)",
    "m.nn.functional.cross_entropy(y[None], m.tensor([1]))",
    "y.sin()",
    "y ** 2",
    "y * 3",
    "y / 3",
    "y / y.detach()",
    "2 / y",
]


@pytest.mark.slow
@pytest.mark.parametrize("changed", ["y", "z"])
@pytest.mark.parametrize("op", TORCH_SAVES)
def test_inplace_change_of_what_torch_saves_raises_like_torch(op, changed, engine_tier):
    assert_like_torch(
        f"x = m.tensor([1., 2., 3.], dtype=m.float64, requires_grad=True)\ny = x * 1\nz = {op}\n{changed}.mul_(2)\n"
        "(z * z.detach()).sum().backward()\nx.grad"
    )


@pytest.mark.parametrize("op", ["exp_()", "sigmoid_()", "tanh_()", "relu_()", "sqrt_()", "mul_(2)"])
def test_result_saved_by_an_inplace_op_is_the_tensor_it_changed(op):
    assert_like_torch(
        f"x = m.tensor([1., 2., 3.], requires_grad=True)\ny = x * 1\ny.{op}\nz = y * 1\n"
        "y.add_(1)\nz.sum().backward()\nx.grad"
    )


def test_modified_saved_value_full_message():
    x = bg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.exp()
    z = y * y
    y.add_(1)
    with pytest.raises(RuntimeError) as info:
        z.sum().backward()
    tx = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    ty = tx.exp()
    tz = ty * ty
    ty.add_(1)
    with pytest.raises(RuntimeError) as expected:
        tz.sum().backward()
    assert str(info.value) == str(expected.value)
    assert str(info.value).startswith(
        "one of the variables needed for gradient computation has been modified by an "
        "inplace operation: [torch.FloatTensor [3]], which is output 0 of Add"
    )


def test_optimizer_style_updates_match_torch():
    results = []
    for m in (bg, torch):
        w = m.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
        x = m.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])
        for _ in range(3):
            loss = ((x @ w).tanh() ** 2).sum()
            loss.backward()
            with m.no_grad():
                w -= 0.1 * w.grad
                w.grad.zero_()
            w.data.mul_(0.99)
        results.append((w.detach().numpy().copy(), w.is_leaf, w.requires_grad, w.grad.numpy().copy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    assert results[0][1:3] == results[1][1:3] == (True, True)
    assert not results[0][3].any() and not results[1][3].any()


def test_a_view_taken_before_its_base_required_grad_refuses_in_place_like_torch():
    def write_through(m, through_view):
        base = m.zeros(2, 3)
        view = base[:]
        base.requires_grad = True
        (view if through_view else base).add_(5)

    for through_view in (False, True):
        raises_like_torch(lambda m: write_through(m, through_view))

    def view_made_to_require_grad(m):
        view = m.zeros(2, 3)[:]
        view.requires_grad_()
        view.mul_(2)

    raises_like_torch(view_made_to_require_grad)


def test_setting_data_of_a_tensor_that_requires_grad_to_integers_raises_like_torch():
    def assign(m):
        x = m.ones(3, requires_grad=True)
        x.data = m.tensor([1, 2, 3])

    raises_like_torch(assign)
    x = bg.ones(3)
    x.data = bg.tensor([1, 2, 3])  # allowed where no gradient is needed
    assert x.dtype == bg.int64


def _seeded_double_backward(m, other_requires_grad):
    """A cotangent seed set and reset in place around each create_graph grad (a jacobian by rows), then the rows
    differentiated again: torch's double backward saves the seed only where the root's node multiplies it by a
    value that requires grad (here `w`); otherwise only products of it, and the later writes raise nothing."""
    m.set_default_dtype(m.float64)
    rows = []
    for _ in range(4):  # repeated, so that the fused tiers record the backward as one op
        x = m.ones(3, requires_grad=True)
        w = m.arange(3.0, requires_grad=other_requires_grad)
        y = x * x * w
        seed = m.zeros(3)
        for i in range(3):
            seed[i] = 1.0
            rows.append(m.autograd.grad(y, x, seed, retain_graph=True, create_graph=True)[0])
            seed[i] = 0.0
    inputs = (x, w) if other_requires_grad else (x,)
    return [g for r in rows[-3:] for g in m.autograd.grad(r.sum(), inputs, retain_graph=True)]


def test_a_seed_written_after_a_create_graph_grad_raises_only_where_torch_saved_it(engine_tier):
    expected = _seeded_double_backward(torch, False)
    actual = _seeded_double_backward(bg, False)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-12)
    raises_like_torch(lambda m: _seeded_double_backward(m, True))
