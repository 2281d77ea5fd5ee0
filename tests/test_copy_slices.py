"""An in-place op through a view against torch 2.13: the base's node is one CopySlices whose edges are the base's
old one and the op's other operands' (torch's graph: the op's node sits inside it); its double backward records a
view of the gradient, the op's derivative node and a CopySlices write, as torch's; a derivative that is the
incoming gradient itself (add, sub, clone) records no node; gradients, second derivatives and batched gradients are
torch's, per node and as one program."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same


def _graph(fn):
    if fn is None:
        return "None"
    return f"{type(fn).__name__}({', '.join(_graph(n) for n, _ in fn.next_functions)})"


# in-place ops through a view of `base` (a clone of a leaf), with `other` a second leaf
WRITES = {
    "copy_": lambda m, base, other: base[:2].copy_(other),
    "mul_ number": lambda m, base, other: base[:2].mul_(2),
    "mul_ tensor": lambda m, base, other: base[:2].mul_(other),
    "add_ tensor": lambda m, base, other: base[1:3].add_(other),
    "relu_": lambda m, base, other: base.view(2, 2).relu_(),
    "exp_": lambda m, base, other: base[1:].exp_(),
    "zero_": lambda m, base, other: base[:2].zero_(),
    "view of a view": lambda m, base, other: base[:3][1:].tanh_(),
    "threshold_": lambda m, base, other: m.nn.functional.threshold(base.view(4), 0.0, 0.0, True),
}
VALUES = np.array([0.5, -1.5, 2.0, 0.25])


def _written(m, name):
    leaf = m.tensor(VALUES, requires_grad=True)
    other = m.tensor([1.5, -0.5], requires_grad=True)
    base = leaf.clone()
    WRITES[name](m, base, other)
    return leaf, other, base


@pytest.mark.parametrize("name", WRITES)
def test_the_base_node_is_torchs_copy_slices(name):
    assert _graph(_written(bg, name)[2].grad_fn) == _graph(_written(torch, name)[2].grad_fn)


def _derivatives(m, name):
    leaf, other, base = _written(m, name)
    loss = (base * base.sin()).sum()
    firsts = m.autograd.grad(loss, (leaf, other), create_graph=True, allow_unused=True)
    used = [(g, x) for g, x in zip(firsts, (leaf, other)) if g is not None and g.requires_grad]
    seconds = m.autograd.grad(sum((g * g).sum() for g, _ in used), [x for _, x in used], allow_unused=True)
    return [None if g is None else g.detach() for g in firsts], list(seconds)


@pytest.mark.parametrize("name", WRITES)
def test_first_and_second_derivatives_are_torchs_per_node_and_as_one_program(name):
    expected = _derivatives(torch, name)
    for _ in range(3):  # the third sighting of a structure runs as one program
        got = _derivatives(bg, name)
        assert_same(got[0], expected[0])
        assert_same(got[1], expected[1])


@pytest.mark.parametrize("name", ["mul_ tensor", "exp_", "view of a view"])
def test_batched_gradients_through_copy_slices_equal_the_loop(name):
    leaf, other, base = _written(bg, name)
    out = base * 2
    rows = bg.tensor(np.random.default_rng(0).standard_normal((3, 4)))
    batched = bg.autograd.grad(out, (leaf, other), rows, is_grads_batched=True, retain_graph=True, allow_unused=True)
    for b in range(3):
        row = bg.autograd.grad(out, (leaf, other), rows[b], retain_graph=True, allow_unused=True)
        for got, want in zip(batched, row):
            assert (got is None) == (want is None)
            if got is not None:
                np.testing.assert_allclose(got[b].numpy(), want.numpy(), rtol=1e-12)


def _gradient_penalty(m):
    """torch's test of an in-place threshold through a view: the gradient of sigmoid(threshold_(view)) with respect
    to the input, recorded, summed and differentiated again."""
    inputs = m.linspace(-2, 2, 48, dtype=m.float64).reshape(1, 3, 4, 4).requires_grad_()
    view = (inputs + 1).view_as(inputs)
    out = m.sigmoid(m.nn.functional.threshold(view, 0.0, 0.0, True))
    (gradients,) = m.autograd.grad(out, inputs, m.ones_like(out), create_graph=True)
    penalty = gradients.sum()
    penalty.backward()
    return penalty, inputs.grad


def test_the_double_backward_of_an_in_place_op_through_a_view_has_torchs_nodes():
    penalty, grad = _gradient_penalty(bg)
    t_penalty, t_grad = _gradient_penalty(torch)
    write = penalty.grad_fn.next_functions[0][0]
    t_write = t_penalty.grad_fn.next_functions[0][0]
    assert write.name() == t_write.name() == "torch::autograd::CopySlices"
    assert write.next_functions[1][0].name() == t_write.next_functions[1][0].name() == "ThresholdBackwardBackward0"
    assert_same(penalty.detach(), t_penalty.detach())
    assert_same(grad, t_grad)


@pytest.mark.parametrize(
    "op, passes",
    [
        (lambda x: x + 1, True),
        (lambda x: x - 2, True),
        (lambda x: x.clone(), True),
        (lambda x: x.view(3), False),
        (lambda x: 1 - x, False),
    ],
    ids=["add", "sub", "clone", "view", "rsub"],
)
def test_a_derivative_that_is_the_gradient_itself_records_no_node(op, passes):
    for m in (bg, torch):
        x = m.ones(3, requires_grad=True)
        v = m.ones(3, requires_grad=True)
        (g,) = m.autograd.grad(op(x), x, v, create_graph=True)
        assert (g is v) == passes, m.__name__


def test_a_result_saved_by_the_op_is_version_checked():
    def backward_after_change(m):
        leaf = m.tensor(VALUES, requires_grad=True)
        base = leaf.clone()
        base[1:].exp_()  # exp_ saves its result, a view of the base
        base.mul_(2)
        base.sum().backward()

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        backward_after_change(torch)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        backward_after_change(bg)
