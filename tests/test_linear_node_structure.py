"""nn.functional.linear's graph against torch 2.13: a 2-D input records torch's addmm(bias, input, weight.t())
(mm without a bias), whose weight edge leads through a TBackward0 node to the weight (made when the graph is first
looked at, numbered just before the product); the engine runs ready nodes in torch's order (a leaf's AccumulateGrad
first, then the node made last), so module, node, tensor and post-accumulate-grad hooks fire as torch's do."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same


def _graph(fn):
    if fn is None:
        return "None"
    return f"{type(fn).__name__}({', '.join(_graph(n) for n, _ in fn.next_functions)})"


def _hook_log(lib):
    """Every hook torch has around a module wrapping one Linear: the module's full backward hook, pre- and post-hooks
    on each node reached through next_functions (numbered as reached), tensor hooks and post-accumulate-grad hooks
    on the input and the parameters."""
    log = []

    class Wrapper(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = lib.nn.Linear(4, 3)

        def forward(self, x):
            return self.linear(x)

    x = lib.ones(2, 4, requires_grad=True)
    module = Wrapper()
    module.register_full_backward_hook(lambda *_: log.append("module"))
    loss = module(x).sum()
    count = [0]

    def hook_all(nodes):
        for node, _ in nodes:
            if node is None:
                continue
            count[0] += 1
            name = f"{node.name()}#{count[0]}"
            node.register_prehook(lambda _, name=name: log.append("pre " + name))
            node.register_hook(lambda _a, _b, name=name: log.append("post " + name))
            hook_all(node.next_functions)

    hook_all(((loss.grad_fn, None),))
    for name, t in [("x", x), ("weight", module.linear.weight), ("bias", module.linear.bias)]:
        t.register_hook(lambda _, name=name: log.append("tensor " + name))
        t.register_post_accumulate_grad_hook(lambda _, name=name: log.append("accumulated " + name))
    loss.backward()
    return log


def test_hooks_around_a_linear_module_fire_in_torchs_order():
    assert _hook_log(bg) == _hook_log(torch)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("requiring", ["both", "input", "weight"])
def test_two_dimensional_linear_records_torchs_nodes(bias, requiring):
    shapes = []
    for lib in (bg, torch):
        x = lib.ones(2, 4, requires_grad=requiring != "weight")
        w = lib.ones(3, 4, requires_grad=requiring != "input")
        b = lib.ones(3, requires_grad=True) if bias else None
        shapes.append(_graph(lib.nn.functional.linear(x, w, b).grad_fn))
    assert shapes[0] == shapes[1]


def test_the_weight_node_comes_just_before_the_product():
    x, w = bg.ones(2, 4, requires_grad=True), bg.ones(3, 4, requires_grad=True)
    before = (x * 1).grad_fn._sequence_nr()
    product = bg.nn.functional.linear(x * 1, w).grad_fn
    transpose = product.next_functions[1][0]
    assert transpose.name() == "TBackward0" and transpose.next_functions[0][0] is w.clone().grad_fn.next_functions[0][0]
    assert before < transpose._sequence_nr() < product._sequence_nr()
    assert product.next_functions[1][0] is transpose  # made once


def _derivatives(lib, x, w, b, look):
    """First and second derivatives of a loss through linear, the graph looked at or not before each backward."""
    y = lib.nn.functional.linear(x, w, b)
    if look:
        _graph(y.grad_fn)
    first = lib.autograd.grad((y.tanh() ** 2).sum(), (x, w, b), create_graph=True)
    if look:
        _graph(first[1].grad_fn)
    second = lib.autograd.grad(sum((g * g).sum() for g in first), (x, w, b))
    return first, second


@pytest.mark.parametrize("look", [False, True], ids=["unseen", "seen"])
def test_derivatives_are_torchs_whether_the_graph_was_looked_at(look):
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s) for s in [(5, 4), (3, 4), (3,)]]
    ours = [bg.tensor(v, requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    expected = _derivatives(torch, *theirs, look)
    for _ in range(3):  # per node, then as one program
        first, second = _derivatives(bg, *ours, look)
        assert_same([g.detach() for g in first], [g.detach() for g in expected[0]])
        assert_same(second, expected[1])


def test_batched_gradients_of_the_weight_after_the_graph_was_looked_at():
    x, w = bg.ones(2, 4) * 0.5, bg.arange(12.0).reshape(3, 4).requires_grad_()
    y = bg.nn.functional.linear(x, w)
    _graph(y.grad_fn)
    rows = bg.eye(6).reshape(6, 2, 3)
    batched = bg.autograd.grad(y, w, rows, is_grads_batched=True, retain_graph=True)[0]
    looped = bg.stack([bg.autograd.grad(y, w, r, retain_graph=True)[0] for r in rows])
    assert_same(batched, torch.tensor(looped.tolist()))


def test_changing_the_weight_in_place_is_caught_after_the_graph_was_looked_at():
    x, w = bg.ones(2, 4, requires_grad=True), bg.ones(3, 4, requires_grad=True)
    y = bg.nn.functional.linear(x, w)
    _graph(y.grad_fn)
    with bg.no_grad():
        w.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_saved_tensor_hooks_unpack_once_each_after_the_graph_was_looked_at():
    unpacked = []
    x, w = bg.ones(2, 4, requires_grad=True), bg.arange(12.0).reshape(3, 4).requires_grad_()
    with bg.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: unpacked.append(tuple(t.shape)) or t):
        y = bg.nn.functional.linear(x, w)
    _graph(y.grad_fn)
    y.sum().backward()
    assert sorted(unpacked) == [(2, 4), (3, 4)]  # the weight is packed before the graph shows its transpose
    assert_same(x.grad, torch.ones(2, 3) @ torch.arange(12.0).reshape(3, 4))
    assert_same(w.grad, torch.ones(3, 2) @ torch.ones(2, 4))


def test_recording_a_linear_layer_makes_no_torch_size(monkeypatch):
    """linear's checks read its operands' shapes as tuples: recording a layer makes no torch.Size (a Python object
    per read, on every forward); shapes that do not fit still raise torch's messages."""
    from batched_grad import _tensor

    made = []
    size = _tensor.Size
    x, w, b = bg.ones(5, 4), bg.ones(3, 4, requires_grad=True), bg.zeros(3, requires_grad=True)
    earlier = bg.nn.functional.linear(x, w, b)  # its graph holds the leaves' AccumulateGrad nodes
    monkeypatch.setattr(_tensor, "Size", lambda shape: made.append(shape) or size(shape))
    y = bg.nn.functional.linear(x, w, b)
    assert made == [] and earlier.grad_fn is not None
    assert_same(y, torch.full((5, 3), 4.0))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(5x4 and 3x2\)"):
        bg.nn.functional.linear(x, bg.ones(2, 3))
    with pytest.raises(RuntimeError, match="expanded size"):
        bg.nn.functional.linear(x, w, bg.zeros(2))
