"""grad()/backward() semantics against torch 2.13: retain_graph, create_graph, unused inputs, dict and
GradientEdge inputs, .grad accumulation, hooks, retain_grad."""

import numpy as np
import pytest
import torch

import batched_grad as bg

pytestmark = pytest.mark.usefixtures("engine_tier")
from oracle import assert_same, pair


def test_grad_returns_tuple_and_leaves_dot_grad_alone():
    x, tx = pair(3)
    g = bg.autograd.grad((x * x).sum(), x)
    assert type(g) is tuple and len(g) == 1
    assert_same(g, torch.autograd.grad((tx * tx).sum(), tx))
    assert x.grad is None and bg.grad is bg.autograd.grad


def test_retain_graph_allows_second_call():
    x, _ = pair(3)
    y = (x.exp()).sum()
    g1 = bg.autograd.grad(y, x, retain_graph=True)
    g2 = bg.autograd.grad(y, x)
    assert_same(g1[0], torch.from_numpy(g2[0].numpy()))


def test_graph_without_saved_values_can_be_walked_twice():
    x, _ = pair(3)
    y = (x + 1).sum()
    bg.autograd.grad(y, x)
    bg.autograd.grad(y, x)


def _assigned_through_a_list(m, x):
    c = m.zeros(3, dtype=m.float64)
    c[[1, 2]] = x[[1, 1]]  # torch's test of a backward twice through saved values
    return c


GIVEN_AS_NUMBERS_OR_LISTS = {
    "indices as a list": lambda m, x: x[[1, 1, 0]],
    "indices as a NumPy array": lambda m, x: x[np.array([2, 0])],
    "a mask as a NumPy array": lambda m, x: x[np.array([True, False, True])],
    "an index tensor": lambda m, x: x[m.tensor([2, 2])],
    "assignment through a list": lambda m, x: _assigned_through_a_list(m, x),
    "a number times": lambda m, x: x * 2.0,
    "an integer times": lambda m, x: 3 * x,
    "divided by a number": lambda m, x: x / 4.0,
    "plus a number (nothing saved)": lambda m, x: x + 1,
    "minus an integer (nothing saved)": lambda m, x: 2 - x,
}


@pytest.mark.parametrize("make", GIVEN_AS_NUMBERS_OR_LISTS.values(), ids=GIVEN_AS_NUMBERS_OR_LISTS.keys())
def test_a_second_backward_through_numbers_or_lists_torch_saves_raises_as_torch(make):
    """torch makes an index list or a number operand a tensor and saves it: freed by the first backward, the second
    raises "Specify retain_graph=True" (add and sub save nothing). With retain_graph both run."""
    outcomes = []
    for m in (bg, torch):
        x = m.tensor([1.0, -2.0, 3.0], dtype=m.float64, requires_grad=True)
        y = make(m, x)
        ones = m.ones(y.shape, dtype=m.float64)
        y.backward(ones, retain_graph=True)
        y.backward(ones)
        try:
            y.backward(ones)
            outcome = None
        except RuntimeError as error:
            outcome = str(error)
        outcomes.append((outcome, x.grad.tolist()))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("order", [2, 3])
def test_higher_order_derivatives(order):
    x, tx = pair(4)
    w, tw = pair(4, 4, seed=1)

    def run(lib, x, w):
        y = lib.tanh(w @ x).pow(3).sum()
        g = y
        outs = []
        for _ in range(order):
            (g,) = lib.autograd.grad(g.sum() if g.ndim else g, x, create_graph=True)
            outs.append(g)
        return outs

    assert_same(run(bg, x, w), run(torch, tx, tw))


def test_hessian_rows_by_grad_of_grad():
    x, tx = pair(3)

    def hess(lib, x):
        (g,) = lib.autograd.grad((x.sin() * x.sum()).sum(), x, create_graph=True)
        return [lib.autograd.grad(g[i], x, retain_graph=True)[0] for i in range(3)]

    assert_same(hess(bg, x), hess(torch, tx))


def test_allow_unused_and_materialize_grads():
    x, tx = pair(3)
    y, ty = pair(2)
    assert_same(
        bg.autograd.grad((x * 2).sum(), [x, y], allow_unused=True),
        torch.autograd.grad((tx * 2).sum(), [tx, ty], allow_unused=True),
    )
    for create_graph in (False, True):
        g = bg.autograd.grad((x * 2).sum(), [x, y], materialize_grads=True, create_graph=create_graph)
        tg = torch.autograd.grad((tx * 2).sum(), [tx, ty], materialize_grads=True, create_graph=create_graph)
        assert_same(g, tg)
        assert g[1].requires_grad == tg[1].requires_grad


def test_dict_inputs_return_dict():
    x, tx = pair(3)
    y, ty = pair(3, seed=1)
    g = bg.autograd.grad((x * y).sum(), {"a": x, "b": y})
    tg = torch.autograd.grad((tx * ty).sum(), {"a": tx, "b": ty})
    assert type(g) is dict and list(g) == ["a", "b"]
    assert_same([g["a"], g["b"]], [tg["a"], tg["b"]])


def test_gradient_edge_inputs_and_outputs():
    x, tx = pair(3)

    def run(lib, x):
        m = x.exp()
        out = (m * 3).sum()
        edge = lib.autograd.graph.get_gradient_edge(m)
        (gm,) = lib.autograd.grad(out, edge, retain_graph=True)
        (gx,) = lib.autograd.grad(edge, x, gm)
        return gm, gx

    assert_same(run(bg, x), run(torch, tx))


def test_a_gradient_edge_is_a_plain_named_tuple_as_torchs():
    x, tx = pair(3)
    edges = [lib.autograd.graph.get_gradient_edge(v.exp()) for lib, v in ((bg, x), (torch, tx))]
    for edge in edges:
        assert isinstance(edge, tuple) and edge.output_nr == 0 and edge[0] is edge.node
    assert hasattr(edges[0], "__dict__") == hasattr(edges[1], "__dict__")  # no dict per edge
    assert type(edges[0].node).__name__ == type(edges[1].node).__name__ == "ExpBackward0"


def test_a_gradient_edge_as_an_output_takes_an_implicit_gradient():
    x, tx = pair(2)

    def run(lib, x):
        scalar = x.sin().cos().sum()
        other = (x * x).sum()
        edge = lib.autograd.graph.get_gradient_edge(scalar)
        (implicit,) = lib.autograd.grad(edge, x, retain_graph=True)  # a scalar's edge: a gradient of one
        (mixed,) = lib.autograd.grad((edge, other), x, retain_graph=True)
        lib.autograd.backward((edge, other), retain_graph=True)
        del scalar  # the edge keeps its part of the graph alive
        lib.autograd.backward(edge)
        return implicit, mixed, x.grad

    assert_same(run(bg, x), run(torch, tx))


def test_non_leaf_inputs_and_retain_grad():
    x, tx = pair(3)

    def run(lib, x):
        m = x * 2
        m.retain_grad()
        y = (m * m).sum()
        (gm,) = lib.autograd.grad(y, m, retain_graph=True)
        lib.autograd.backward(y, inputs=[m])
        return gm, m.grad, x.grad

    assert_same(run(bg, x), run(torch, tx))


def test_backward_inputs_restricts_accumulation():
    x, tx = pair(3)
    y, ty = pair(3, seed=1)
    (x * y).sum().backward(inputs=[x])
    (tx * ty).sum().backward(inputs=[tx])
    assert_same([x.grad, y.grad], [tx.grad, ty.grad])


def test_grad_accumulates_in_place_then_out_of_place_with_create_graph():
    x, tx = pair(3)
    for t in (x, tx):
        (t * 3).sum().backward()
        first = t.grad
        (t * 3).sum().backward()
        assert t.grad is first
        (t * t).sum().backward(create_graph=True)
        assert t.grad is not first and t.grad.requires_grad
    assert_same(x.grad, tx.grad)


def test_hooks_on_leaf_and_non_leaf():
    x, tx = pair(3)

    def run(lib, x):
        m = x * 2
        handle = m.register_hook(lambda g: g * 10)
        x.register_hook(lambda g: g + 1)
        (g1,) = lib.autograd.grad((m * 3).sum(), x)
        handle.remove()
        (g2,) = lib.autograd.grad((x * 2 * 3).sum(), x)
        (x * 4).sum().backward()
        return g1, g2, x.grad

    assert_same(run(bg, x), run(torch, tx))


def test_hook_seeing_and_returning_none_keeps_grad():
    x, _ = pair(3)
    seen = []
    x.register_hook(lambda g: seen.append(g.shape))
    (x * 2).sum().backward()
    assert seen == [(3,)] and x.grad.tolist() == [2.0, 2.0, 2.0]


def test_grad_fn_names_and_next_functions():
    x, tx = pair(3)
    y = x * 2
    ty = tx * 2
    assert y.grad_fn.name() == ty.grad_fn.name() == "MulBackward0"
    assert [type(n).__name__ if n else None for n, _ in y.grad_fn.next_functions] == ["AccumulateGrad", None]
    assert y.grad_fn.next_functions[0][0].variable is x


def test_create_graph_under_no_grad_still_builds_graph():
    x, tx = pair(3)
    with bg.no_grad():
        y = x * 1
    loss = (x * x).sum()
    with bg.no_grad():
        (g,) = bg.autograd.grad(loss, x, create_graph=True)
    assert g.requires_grad and not y.requires_grad


def test_float64_grad_output_for_float32_output():
    x = bg.tensor([1.0, 2.0], requires_grad=True)
    (g,) = bg.autograd.grad(x * 2, x, bg.ones(2, dtype=bg.float64))
    assert g.dtype is bg.float32


def test_unreached_branch_does_not_run():
    x, _ = pair(3)
    y, _ = pair(3, seed=1)
    calls = []

    class Spy(bg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g

    out = (x * 2).sum() + Spy.apply(y).sum()
    bg.autograd.grad(out, x)
    assert calls == []


def test_grad_of_output_wrt_itself_and_multiple_outputs():
    x, tx = pair(3)
    outs = lambda lib, x: [x.sin(), x.cos().sum()]
    v = np.arange(3.0)
    g = bg.autograd.grad(outs(bg, x), x, [bg.tensor(v), None])
    tg = torch.autograd.grad(outs(torch, tx), tx, [torch.tensor(v), None])
    assert_same(g, tg)


def test_a_leaf_and_its_graph_are_freed_without_the_cycle_collector():
    import gc
    import weakref

    gc.disable()
    try:
        x = bg.tensor([1.0, 2.0], requires_grad=True)
        y = (x * x).sum()
        node = bg.autograd.graph.get_gradient_edge(x).node
        assert node is y.grad_fn.next_functions[0][0].next_functions[0][0]  # one accumulator per leaf in a graph
        (g,) = bg.autograd.grad(y, x)
        assert g.tolist() == [2.0, 4.0]
        x_ref, node_ref = weakref.ref(x), weakref.ref(node)
        del x, y, node, g
        assert x_ref() is None and node_ref() is None  # the accumulator holds the leaf, not the other way round
        base = bg.tensor([1.0, 2.0])
        views = [base.detach() for _ in range(100)]  # many live aliases: dead references are still dropped
        del views
        for _ in range(40):
            base.detach()
        assert len(base._views) < 40
    finally:
        gc.enable()
