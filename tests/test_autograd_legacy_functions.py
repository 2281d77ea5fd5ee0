"""torch.autograd._functions against torch 2.13: Resize (a shape change that keeps the number of elements, whose
gradient takes the input's shape back; a contiguous input is aliased, another copied) and the deprecated Type."""

import warnings

import pytest
import torch
import torch.autograd._functions  # noqa: F401  (torch imports it on demand only)

import batched_grad as bg
import batched_grad.autograd._functions  # noqa: F401
from oracle import assert_same, pair, raises_like_torch


@pytest.mark.parametrize("transpose", [False, True], ids=["contiguous", "strided"])
def test_resize_values_gradient_and_node(transpose):
    for lib, x in zip((bg, torch), pair(2, 3)):
        source = x.t() if transpose else x
        out = lib.autograd._functions.Resize.apply(source, (3, 2))
        assert type(out.grad_fn).__name__ == "ResizeBackward"
        assert tuple(out.shape) == (3, 2)
        weights = lib.arange(6.0, dtype=lib.float64).reshape(3, 2)
        (out * weights).sum().backward()
        if lib is bg:
            got, got_grad = out, x.grad
        else:
            assert_same(got, out.detach())
            assert_same(got_grad, x.grad)


def test_resize_refuses_another_number_of_elements():
    raises_like_torch(lambda lib: lib.autograd._functions.Resize.apply(lib.ones(2, 3, requires_grad=True), (4,)))


def test_resize_output_is_a_view_made_inside_a_function():
    # the output aliases its input's memory, so writing into it in place is refused as torch refuses it
    raises_like_torch(
        lambda lib: lib.autograd._functions.Resize.apply(lib.ones(2, 3, requires_grad=True), (6,)).add_(1)
    )


def test_resize_is_a_gradient_edge_target():
    for lib in (bg, torch):
        x = lib.autograd._functions.Resize.apply(lib.ones(2, requires_grad=True).clone(), (2,))
        edge = lib.autograd.graph.get_gradient_edge(x)
        out = (x.clone() * 3).sum()
        by_tensor = lib.autograd.grad(out, x, retain_graph=True)[0]
        by_edge = lib.autograd.grad(out, edge)[0]
        assert by_tensor.tolist() == by_edge.tolist() == [3.0, 3.0]


def test_type_converts_warns_and_returns_the_gradient_in_the_input_type():
    for lib, x in zip((bg, torch), pair(3)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = lib.autograd._functions.Type.apply(x.float(), lib.DoubleTensor)
        assert [w.category for w in caught] == [FutureWarning]
        assert "`torch.autograd._functions.Type` is deprecated" in str(caught[0].message)
        assert str(out.dtype) == "torch.float64" and type(out.grad_fn).__name__ == "TypeBackward"
        out.sum().backward()
        assert str(x.grad.dtype) == "torch.float64" and x.grad.tolist() == [1.0, 1.0, 1.0]


def test_utils_sum_a_broadcast_gradient_back():
    from torch.autograd._functions.utils import maybe_unexpand as torch_unexpand
    from torch.autograd._functions.utils import maybe_view as torch_view

    from batched_grad.autograd._functions.utils import maybe_unexpand, maybe_view

    g = pair(4, 2, 3)
    for size in [(2, 3), (2, 1), (1, 3), (4, 2, 3)]:
        assert_same(maybe_unexpand(g[0], size), torch_unexpand(g[1], torch.Size(size)))
    assert maybe_view(g[0], (4, 2, 3)) is g[0]
    assert_same(maybe_view(g[0], (8, 3)), torch_view(g[1], torch.Size((8, 3))))
