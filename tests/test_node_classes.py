"""The recorded graph as torch's graph printers see it: each node's class is named as torch's node class
(type(grad_fn).__name__), a first .grad made by backward(create_graph=True) is a recorded copy (CopyBackwards), and
once_differentiable's results lead to an Error node whose edges reach fresh leaves. Checked against torch 2.13."""

import pytest
import torch

import batched_grad as bg


def _described(node):
    """A node and what its edges lead to, by class name, as torch's tests print a graph."""
    if node is None:
        return "None"
    inner = ", ".join(_described(n) for n, _ in node.next_functions)
    return f"{type(node).__name__}({inner})"


def _graphs(m):
    x = m.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = m.tensor([1.5, 2.0, -0.5], requires_grad=True)
    y = (x * w).tanh().sum()
    copied = m.zeros(3)
    copied.copy_(x)
    return [y.grad_fn, (x.exp() + 1).grad_fn, x.clone().grad_fn, x[1:].grad_fn, copied.grad_fn]


def test_node_classes_are_named_as_torch_names_them():
    ours, theirs = _graphs(bg), _graphs(torch)
    assert [_described(n) for n in ours] == [_described(n) for n in theirs]
    for node in ours:
        assert type(node).__name__ == node.name().split("::")[-1]
    x = bg.tensor([0.5, -1.0], requires_grad=True)
    (g,) = bg.autograd.grad(x.tanh().sum(), x, create_graph=True)  # a recorded backward has a class of its own
    assert type(g.grad_fn).__name__ == g.grad_fn.name() == "TanhBackwardBackward0"


# ops whose gradient torch makes with one op on the cotangent (sum's expand, unsqueeze's squeeze)
GRADIENT_MAKERS = {
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(0),
    "mean": lambda x: x.mean(1),
    "neg": lambda x: -x,
    "scaled": lambda x: x * 3,
    "t": lambda x: x.t(),
    "permute": lambda x: x.permute(1, 0),
    "reshape": lambda x: x.reshape(6),
    "unsqueeze": lambda x: x.unsqueeze(0),
    "squeeze": lambda x: x[:1].squeeze(0),
    "flip": lambda x: x.flip(0),
    "roll": lambda x: x.roll(1, 0),
    "tril": lambda x: x.tril(),
    "cumsum": lambda x: x.cumsum(1),
    "index_select": lambda x: x.index_select(1, x.new_zeros(2).long()),
    "tanh": lambda x: x.tanh(),
    "exp": lambda x: x.exp(),
    "log1p": lambda x: x.abs().log1p(),
    "sqrt": lambda x: x.abs().sqrt(),
    "relu": lambda x: x.relu(),
    "clamp": lambda x: x.clamp(-0.5, 0.5),
    "square": lambda x: x**2,
    "mm": lambda x: x.t().mm(x),
}


@pytest.mark.parametrize("name", sorted(GRADIENT_MAKERS))
def test_a_recorded_gradient_is_named_as_torchs_node_that_makes_it(name):
    def gradient_node(m):
        x = m.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]], dtype=m.float64, requires_grad=True)
        out = GRADIENT_MAKERS[name](x)
        (g,) = m.autograd.grad(out, x, m.ones_like(out, requires_grad=True), create_graph=True)
        return type(g.grad_fn).__name__

    assert gradient_node(bg) == gradient_node(torch)


def _first_grad_under_create_graph(m):
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x.exp() * 3).sum().backward(create_graph=True)
    copy = x.grad.grad_fn
    first, second = [n for n, _ in copy.next_functions]
    (x.grad.sum()).backward()  # the copy is differentiable: x.grad takes the second derivative too
    constant = m.tensor([1.0, 2.0], requires_grad=True)
    (constant * 2).sum().backward(create_graph=True)
    return type(copy).__name__, first, second is not None, x.grad.detach().tolist(), constant.grad.grad_fn


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_a_first_grad_under_create_graph_is_a_recorded_copy():
    ours, theirs = _first_grad_under_create_graph(bg), _first_grad_under_create_graph(torch)
    assert ours[:3] == theirs[:3] == ("CopyBackwards", None, True)
    assert ours[3] == pytest.approx(theirs[3])
    assert ours[4] is None and theirs[4] is None  # a gradient that requires no grad is kept as it is


def _once_differentiable_graph(m):
    class Scaled(m.autograd.Function):
        @staticmethod
        def forward(ctx, a, factor, b):
            ctx.factor = factor
            ctx.save_for_backward(a, b)
            return a * b + factor * b

        @staticmethod
        @m.autograd.function.once_differentiable
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, None, g * (a + ctx.factor)

    a = m.tensor([1.0, 2.0], requires_grad=True)
    b = m.tensor([3.0, 4.0], requires_grad=True)
    out = Scaled.apply(a, 2.0, b).sum()
    grads = m.autograd.grad(out, (a, b), m.tensor(1.0, requires_grad=True), create_graph=True)
    return grads


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_once_differentiable_results_lead_to_an_error_node_over_fresh_leaves():
    ours, theirs = _once_differentiable_graph(bg), _once_differentiable_graph(torch)
    for got, want in zip(ours, theirs):
        assert _described(got.grad_fn) == _described(want.grad_fn) == "Error(AccumulateGrad(), None, AccumulateGrad())"
        assert torch.equal(torch.tensor(got.detach().numpy()), want.detach())
    leaf = ours[0].grad_fn.next_functions[0][0].variable
    assert leaf.is_leaf and leaf.requires_grad  # not `a`: nothing reaches the inputs' graph
    with pytest.raises(RuntimeError, match="marked with @once_differentiable"):
        ours[0].sum().backward()


def test_node_is_a_virtual_base_of_every_node_class():
    def case(m):
        node = m.autograd.graph.Node
        a = m.rand(3, requires_grad=True)
        b = a.exp()

        class Identity(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                return grad

        nodes = [b.grad_fn, b.grad_fn.next_functions[0][0], Identity.apply(a).grad_fn]
        return [
            [isinstance(n, node) for n in nodes],
            [issubclass(type(n), node) for n in nodes],
            [node in type(n).mro() for n in nodes],
            [isinstance(x, node) for x in (None, 1, node, a)],
            issubclass(node, node),
        ]

    assert case(bg) == case(torch)
