"""Autograd hooks beyond tensor hooks, against torch: grad_fn.register_prehook / register_hook (what they see, what
they may replace, their errors, their handles), hooks on AccumulateGrad nodes,
Tensor.register_post_accumulate_grad_hook, and calling a grad_fn directly. Also: hooks see rows under
is_grads_batched, and a graph without hooks still fuses."""

from collections import OrderedDict

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _fused
from oracle import assert_same


def _plain(value):
    """Tensors (also inside tuples) as nested lists, for comparing logs."""
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, (bg.Tensor, torch.Tensor)):
        return np.asarray(value.detach().numpy()).round(10).tolist()
    return value


def _graph(m):
    a = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
    b = m.tensor([0.5, -1.0, 2.0], dtype=m.float64, requires_grad=True)
    c = m.tensor([4.0, 5.0, 6.0], dtype=m.float64)
    y = a * b
    z = (y * c).exp() * 0.01
    return a, b, y, z


def _run_both(scenario):
    """scenario(m, log) for bg and for torch; their logs and returned values must agree."""
    results = []
    for m in (bg, torch):
        log = []
        out = scenario(m, log)
        results.append((_plain(log), _plain(out)))
    assert results[0] == results[1], f"\n    bg: {results[0]}\n torch: {results[1]}"


def test_node_hooks_see_grad_outputs_and_grad_inputs_as_torchs():
    def scenario(m, log):
        a, b, y, z = _graph(m)
        y.grad_fn.register_prehook(lambda go: log.append(("pre", go)))
        y.grad_fn.register_hook(lambda gi, go: log.append(("post", gi, go)))
        z.grad_fn.register_hook(lambda gi, go: log.append(("z post", gi, go)))
        z.sum().backward()
        return a.grad, b.grad

    _run_both(scenario)


def test_a_node_computes_only_the_gradients_the_call_needs_as_torchs():
    """grad() for some inputs: a node's other inputs lead nowhere needed, and its hook sees None for them."""

    def scenario(m, log):
        a, b, y, z = _graph(m)
        y.grad_fn.register_hook(lambda gi, go: log.append(("post", gi)))
        for inputs in ([a], [b], [a, b], [z]):
            log.append(m.autograd.grad(z.sum(), inputs, retain_graph=True))
        return None

    _run_both(scenario)


def test_node_hooks_replace_gradients_in_order_as_torchs():
    def scenario(m, log):
        a, b, y, z = _graph(m)
        y.grad_fn.register_prehook(lambda go: (go[0] * 10,))
        y.grad_fn.register_prehook(lambda go: log.append(("second pre sees", go)))
        y.grad_fn.register_hook(lambda gi, go: (gi[0] + 1, None))  # b gets no gradient
        y.grad_fn.register_hook(lambda gi, go: log.append(("second post sees", gi)))
        z.sum().backward()
        return a.grad, b.grad

    _run_both(scenario)


def test_handles_remove_node_hooks():
    def scenario(m, log):
        a, b, y, z = _graph(m)
        pre = y.grad_fn.register_prehook(lambda go: (go[0] * 0,))
        post = y.grad_fn.register_hook(lambda gi, go: log.append("post"))
        pre.remove()
        z.sum().backward(retain_graph=True)
        post.remove()
        z.sum().backward()
        return a.grad, b.grad

    _run_both(scenario)


@pytest.mark.parametrize(
    "hook",
    [
        lambda go: (go[0], go[0]),
        lambda go: go[0],
        lambda go: [go[0]],
        lambda go: (5,),
        lambda go: (go[0][:2],),
        lambda go: (go[0].float(),),
    ],
)
def test_prehook_results_are_checked_as_torchs(hook):
    messages = []
    for m in (bg, torch):
        a, b, y, z = _graph(m)
        y.grad_fn.register_prehook(hook)
        with pytest.raises((TypeError, RuntimeError)) as caught:
            z.sum().backward()
        messages.append((type(caught.value), str(caught.value)))
    assert messages[0] == messages[1]


@pytest.mark.parametrize(
    "hook",
    [
        lambda gi, go: (gi[0],),
        lambda gi, go: gi[0],
        lambda gi, go: (5, None),
        lambda gi, go: (gi[0].float(), gi[1]),
        lambda gi, go: (gi[0], gi[1][1:]),
    ],
)
def test_hook_results_are_checked_as_torchs(hook):
    messages = []
    for m in (bg, torch):
        a, b, y, z = _graph(m)
        y.grad_fn.register_hook(hook)
        with pytest.raises((TypeError, RuntimeError)) as caught:
            z.sum().backward()
        messages.append((type(caught.value), str(caught.value)))
    assert messages[0] == messages[1]


def test_a_none_gradient_cannot_be_replaced_by_a_value():
    messages = []
    for m in (bg, torch):
        a = m.tensor([1.0, 2.0], requires_grad=True)
        y = a * m.tensor([3.0, 4.0])
        y.grad_fn.register_hook(lambda gi, go: (gi[0], m.ones(2)))
        with pytest.raises(RuntimeError) as caught:
            y.sum().backward()
        messages.append(str(caught.value))
    assert messages[0] == messages[1] == "can't replace a None gradient with a non-None value"


def test_accumulate_grad_hooks_and_post_accumulate_hooks_run_in_torchs_order():
    def scenario(m, log):
        a = m.tensor([1.0, 2.0], requires_grad=True)
        y = a * 3
        acc = y.grad_fn.next_functions[0][0]
        acc.register_prehook(lambda go: (log.append(("acc pre", go)), (go[0] * 2,))[1])
        acc.register_hook(lambda gi, go: log.append(("acc post", gi, go)))
        a.register_hook(lambda g: (log.append(("tensor hook", g)), g + 1)[1])
        a.register_post_accumulate_grad_hook(lambda t: log.append(("post accumulate", t is a, t.grad.clone())))
        y.sum().backward()
        log.append("grad() runs tensor hooks only")
        (g,) = m.autograd.grad((a * 3).sum(), a)
        return a.grad, g

    _run_both(scenario)


def test_post_accumulate_hooks_can_step_an_optimizer_inside_backward():
    """torch's optimizer-in-backward idiom; the steps after the second run in the fused program's path too."""

    def scenario(m, log):
        p = m.tensor([1.0, 2.0, -1.0], dtype=m.float64, requires_grad=True)

        def step(t):
            with m.no_grad():
                t.sub_(0.1 * t.grad)
            t.grad = None

        p.register_post_accumulate_grad_hook(step)
        for _ in range(5):
            ((p * p).sum() + (p * 3).sum()).backward()
            log.append(p.detach().clone())
        return p.grad

    _run_both(scenario)


def test_post_accumulate_hooks_see_every_accumulation_and_come_off():
    def scenario(m, log):
        p = m.tensor([1.0], requires_grad=True)
        handle = p.register_post_accumulate_grad_hook(lambda t: log.append(t.grad.clone()))
        p.register_post_accumulate_grad_hook(lambda t: t)  # a Tensor returned is ignored
        (p * 2).sum().backward()
        (p * 3).sum().backward()
        handle.remove()
        (p * 4).sum().backward()
        q = m.tensor([1.0], requires_grad=True)
        q.register_post_accumulate_grad_hook(lambda t: log.append(("q", t.grad.requires_grad)))
        (q**2).sum().backward(create_graph=True)
        (q * p).sum().backward(inputs=[p])  # q is not an input: its hook does not run
        return p.grad

    _run_both(scenario)


@pytest.mark.parametrize(
    "case",
    [
        lambda m: (m.tensor([1.0], requires_grad=True) * 2).register_post_accumulate_grad_hook(lambda t: None),
        lambda m: m.zeros(2).register_post_accumulate_grad_hook(lambda t: None),
    ],
)
def test_post_accumulate_hook_registration_errors_match_torch(case):
    messages = []
    for m in (bg, torch):
        with pytest.raises(RuntimeError) as caught:
            case(m)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_a_post_accumulate_hook_returning_a_non_tensor_raises_as_torch():
    messages = []
    for m in (bg, torch):
        p = m.tensor([1.0], requires_grad=True)
        p.register_post_accumulate_grad_hook(lambda t: 5)
        with pytest.raises(TypeError) as caught:
            (p * 2).sum().backward()
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


# ---- calling a node --------------------------------------------------------------------------------------------
def test_calling_a_grad_fn_returns_its_gradients_as_torchs():
    def scenario(m, log):
        a, b, y, z = _graph(m)
        c = m.tensor([4.0, 5.0, 6.0], dtype=m.float64)
        g = m.ones(3, dtype=m.float64)
        log.append(y.grad_fn(g))  # two inputs: a tuple
        log.append((a * c).grad_fn(g))  # c needs no gradient: None in its place
        log.append(a.exp().grad_fn(g))  # one input: the Tensor itself
        log.append(a.exp().grad_fn(g).requires_grad)  # recorded under grad mode (exp's backward reads its result)
        with m.no_grad():
            e = a.exp()
        log.append(e.requires_grad)
        s = a.pow(2)
        with m.no_grad():
            log.append(s.grad_fn(g).requires_grad)
        u = m.stack([a, b]).unbind()
        log.append(u[0].grad_fn(g, None))  # one gradient per output
        log.append(y.grad_fn(None))
        acc = y.grad_fn.next_functions[0][0]
        log.append(acc(m.full((3,), 2.0, dtype=m.float64)))  # AccumulateGrad accumulates
        return a.grad

    _run_both(scenario)


def test_nodes_take_the_gradients_of_differentiable_outputs_as_torchs():
    def scenario(m, log):
        x = m.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]], requires_grad=True)
        values, _ = x.max(1)
        ordered, _ = x.sort(1)
        log.append(values.grad_fn(m.ones(2)))  # max's node takes no gradient for its indices
        log.append(ordered.grad_fn(m.full((2, 3), 2.0)))
        values.grad_fn.register_prehook(lambda go: log.append(("pre", go)))
        values.grad_fn.register_hook(lambda gi, go: log.append(("post", gi, go)))

        class Argmax(m.autograd.Function):  # a custom Function's node takes one gradient per output
            @staticmethod
            def forward(ctx, a):
                index = a.argmax()
                ctx.mark_non_differentiable(index)
                return a * 2, index

            @staticmethod
            def backward(ctx, g, _):
                return 2 * g

        doubled, _ = Argmax.apply(x)
        doubled.grad_fn.register_prehook(lambda go: log.append(("function pre", go)))
        (values.sum() + doubled.sum()).backward()
        return x.grad

    _run_both(scenario)


def test_a_custom_functions_node_is_not_callable_as_torchs():
    messages = []
    for m in (bg, torch):

        class Double(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return 2 * g

        y = Double.apply(m.ones(2, requires_grad=True))
        with pytest.raises(TypeError) as caught:
            y.grad_fn(m.ones(2))
        messages.append(str(caught.value))
    assert messages[0] == messages[1] == "'DoubleBackward' object is not callable"


@pytest.mark.parametrize(
    "call",
    [
        lambda m, y: y.grad_fn(),
        lambda m, y: y.grad_fn(m.ones(3), m.ones(3)),
        lambda m, y: y.grad_fn(5),
    ],
)
def test_calling_a_grad_fn_wrongly_raises_as_torch(call):
    messages = []
    for m in (bg, torch):
        a = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with pytest.raises(TypeError) as caught:
            call(m, a * a)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_calling_a_grad_fn_after_its_graph_was_freed_raises_as_torch():
    messages = []
    for m in (bg, torch):
        a = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = a * a
        y.sum().backward()
        with pytest.raises(RuntimeError) as caught:
            y.grad_fn(m.ones(3))
        messages.append(str(caught.value).split(" (")[0])
    assert messages[0] == messages[1]


# ---- batched mode, custom Functions, the fused path ---------------------------------------------------------------
def test_node_hooks_see_rows_under_is_grads_batched():
    x = bg.tensor([1.0, 2.0, 3.0], dtype=bg.float64, requires_grad=True)
    shapes = []
    y = x.sin()
    y.grad_fn.register_prehook(lambda go: (shapes.append(tuple(go[0].shape)), (go[0] * 2,))[1])
    y.grad_fn.register_hook(lambda gi, go: (gi[0] + go[0],))
    cotangents = bg.tensor(np.random.default_rng(0).standard_normal((4, 3)))
    (batched,) = bg.autograd.grad(y, x, cotangents, is_grads_batched=True, retain_graph=True)
    rows = [bg.autograd.grad(y, x, cotangents[i], retain_graph=True)[0] for i in range(4)]
    assert set(shapes) == {(3,)}
    np.testing.assert_allclose(batched.numpy(), np.stack([r.numpy() for r in rows]))
    expected = 2 * cotangents.numpy() * np.cos(x.detach().numpy()) + 2 * cotangents.numpy()
    np.testing.assert_allclose(batched.numpy(), expected)


def test_node_hooks_on_a_custom_function_node():
    def scenario(m, log):
        class Cube(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x**3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 3 * x**2 * g

        x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        y = Cube.apply(x)
        y.grad_fn.register_prehook(lambda go: (go[0] + 1,))
        y.grad_fn.register_hook(lambda gi, go: log.append((gi, go)))
        y.sum().backward()
        return x.grad

    _run_both(scenario)


def test_a_graph_fuses_again_once_its_node_hooks_are_removed(monkeypatch):
    fused = []
    run = _fused.run
    monkeypatch.setattr(_fused, "run", lambda *args, **kw: fused.append(1) or run(*args, **kw))
    w = bg.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)
    x = bg.tensor(np.linspace(0, 1, 4))

    def grads(hooked):
        y = bg.tanh(w @ x)
        handle = y.grad_fn.register_prehook(lambda go: (go[0] * 2,)) if hooked else None
        (g,) = bg.autograd.grad(y.sum(), w)
        return g, handle

    plain = bg.tensor(grads(False)[0].numpy())
    fused.clear()
    for _ in range(4):  # a node with hooks runs in the per-node engine, whatever the structure's count
        doubled, handle = grads(True)
        assert_same(doubled, 2 * plain)
    assert not fused
    handle.remove()
    for _ in range(4):
        assert_same(grads(False)[0], plain)
    assert fused


def test_assigned_backward_hooks_dicts_act_as_torchs():
    """Legacy code assigns `t._backward_hooks = OrderedDict()` and fills it: a leaf's hooks then run on its
    gradient; a non-leaf keeps the dict but torch runs none of its hooks; None drops what register_hook added."""
    results = []
    for m in (bg, torch):
        a = m.tensor([1.0, 2.0], requires_grad=True)
        a._backward_hooks = OrderedDict()
        a._backward_hooks["double"] = lambda g: g * 2
        b = a * 1
        b._backward_hooks = OrderedDict(triple=lambda g: g * 3)
        assert list(b._backward_hooks) == ["triple"]
        b.sum().backward()
        c = m.tensor([1.0, 2.0], requires_grad=True)
        c.register_hook(lambda g: g * 5)
        c._backward_hooks = None
        (c * 1).sum().backward()
        results.append((a.grad.tolist(), c.grad.tolist(), c._backward_hooks))
    assert results[0] == results[1] == ([2.0, 2.0], [1.0, 1.0], None)
