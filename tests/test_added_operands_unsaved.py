"""An operand that enters an op's result only as an added term (linear's and bilinear's bias, a convolution's or
batch norm's bias, addmm's / addmv's / baddbmm's / addbmm's / addr's input) is not saved, as torch's nodes do not
save it: an optimizer's step on a bias between a forward and a backward through it (two losses on one graph, a GAN's
second update) leaves the backward valid, and the saved-tensor hooks see only the factors."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same


def _layers(m):
    m.manual_seed(0)
    return {
        "linear": (m.nn.Linear(3, 2), (4, 3)),
        "linear_3d": (m.nn.Linear(3, 2), (2, 4, 3)),
        "conv2d": (m.nn.Conv2d(2, 3, 3), (1, 2, 5, 5)),
        "conv_transpose1d": (m.nn.ConvTranspose1d(2, 3, 3), (1, 2, 5)),
        "batch_norm": (m.nn.BatchNorm1d(3), (4, 3)),
    }


@pytest.mark.parametrize("kind", ["linear", "linear_3d", "conv2d", "conv_transpose1d", "batch_norm"])
def test_a_bias_changed_in_place_after_the_forward(kind):
    def run(m):
        layer, shape = _layers(m)[kind]
        layer.double()
        x = m.linspace(-1, 1, int(m.tensor(shape).prod()), dtype=m.float64).reshape(shape).requires_grad_()
        y = layer(x)
        with m.no_grad():
            layer.bias.add_(1.0)
        (y * y).sum().backward()
        return x.grad, layer.weight.grad, layer.bias.grad

    for got, want in zip(run(bg), run(torch)):
        assert_same(got, want)


FUSED_PRODUCTS = {
    "addmm": lambda m, c, a, b: m.addmm(c, a, b, beta=0.5),
    "addmv": lambda m, c, a, b: m.addmv(c, a, b[:, 0]),
    "baddbmm": lambda m, c, a, b: m.baddbmm(c, a[None], b[None], alpha=2),
    "addbmm": lambda m, c, a, b: m.addbmm(c, a[None], b[None]),
    "addr": lambda m, c, a, b: m.addr(c, a[0], b[0]),
    "bilinear": lambda m, c, a, b: m.nn.functional.bilinear(a, a, b[None].expand(2, 3, 3), c),
}
INPUT_SHAPES = {"addmv": (3,), "baddbmm": (1, 3, 3), "bilinear": (2,)}


@pytest.mark.parametrize("name", list(FUSED_PRODUCTS))
def test_the_added_input_of_a_product_changed_in_place(name):
    def run(m):
        a = m.arange(9.0, dtype=m.float64).reshape(3, 3).requires_grad_()
        b = m.linspace(-1, 1, 9, dtype=m.float64).reshape(3, 3).requires_grad_()
        c = m.ones(INPUT_SHAPES.get(name, (3, 3)), dtype=m.float64, requires_grad=True)
        packed = []
        with m.autograd.graph.saved_tensors_hooks(lambda t: packed.append(tuple(t.shape)) or t, lambda t: t):
            y = FUSED_PRODUCTS[name](m, c, a, b)
        with m.no_grad():
            c.mul_(3.0)
        (y * y).sum().backward()
        return sorted(packed), a.grad, b.grad, c.grad

    (packed, *grads), (want_packed, *want) = run(bg), run(torch)
    assert packed == want_packed
    for got, expected in zip(grads, want):
        assert_same(got, expected)


@pytest.mark.parametrize("structure_read", [False, True], ids=["graph-unread", "next_functions-read"])
def test_a_changed_weight_still_raises_naming_the_saved_transpose(structure_read):
    """torch's linear saves weight.t(): its error gives that view's shape and its regenerated node, whether or not
    the graph's structure (our weight.t() node, made when next_functions is read) was looked at."""

    def run(m):
        layer = m.nn.Linear(3, 1)
        y = layer(m.ones(2, 3, requires_grad=True))
        if structure_read:
            assert len(y.grad_fn.next_functions) == 3
        with m.no_grad():
            layer.weight.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as error:
            y.sum().backward()
        return str(error.value)

    assert run(bg) == run(torch)


ADDED_AND_FACTORS = {
    "addcmul": lambda m, c, a, b: m.addcmul(c, a, b, value=0.5),
    "addmm": lambda m, c, a, b: m.addmm(c, a, b),
}


@pytest.mark.parametrize("grads", ["input", "tensor1", "tensor2", "factors", "all"])
@pytest.mark.parametrize("name", list(ADDED_AND_FACTORS))
def test_a_factor_is_saved_only_for_the_other_factors_gradient(name, grads):
    """What the saved-tensor hooks see, as torch's nodes save it: a factor where the other factor needs a gradient,
    nothing where only the added input does; gradients and second derivatives as torch's."""

    def run(m):
        wanted = {"input": "c", "tensor1": "a", "tensor2": "b", "factors": "ab", "all": "abc"}[grads]
        a = m.arange(1.0, 10.0, dtype=m.float64).reshape(3, 3).requires_grad_("a" in wanted)
        b = m.linspace(-1, 1, 9, dtype=m.float64).reshape(3, 3).requires_grad_("b" in wanted)
        c = m.full((3, 3), 0.25, dtype=m.float64, requires_grad="c" in wanted)
        packed = []
        with m.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t.sum().item()) or t, lambda t: t):
            y = ADDED_AND_FACTORS[name](m, c, a, b)
        leaves = [t for t in (a, b, c) if t.requires_grad]
        first = m.autograd.grad((y * y).sum(), leaves, create_graph=True)
        second = m.autograd.grad(sum(g.sum() for g in first), leaves, allow_unused=True)
        return sorted(packed), first, second

    (packed, *grads_got), (want_packed, *grads_want) = run(bg), run(torch)
    assert packed == want_packed
    assert_same(grads_got, grads_want)
