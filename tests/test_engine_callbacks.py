"""Callbacks queued on the engine (Variable._execution_engine.queue_callback) and multi-grad hooks
(autograd.graph.register_multi_grad_hook), against torch: when they run, how often, and with what."""

import functools

import pytest
import torch

import batched_grad as bg


def _both(scenario):
    """scenario(m) for batched_grad and torch; the two results must agree."""
    ours, theirs = scenario(bg), scenario(torch)
    assert ours == theirs, f"\n    bg: {ours}\n torch: {theirs}"
    return ours


def _passing(m, on_backward):
    """A Function that passes its gradient through, calling on_backward() in its backward."""

    class Passing(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            on_backward()
            return grad

    return Passing


def test_callback_runs_after_the_nodes_and_may_queue_another():
    def scenario(m):
        log = []
        queue = m.autograd.Variable._execution_engine.queue_callback

        def first():
            log.append(("first", x.grad is not None))
            queue(lambda: log.append("second"))

        x = m.ones(3, requires_grad=True)
        y = _passing(m, lambda: queue(first)).apply(x * 2)
        y.sum().backward()
        log.append("returned")
        return log

    assert _both(scenario) == [("first", True), "second", "returned"]


@pytest.mark.parametrize("depths", [(0,), (1,), (0, 1)])
def test_callbacks_of_a_reentrant_backward_run_once_at_its_own_end(depths):
    def scenario(m):
        log = []
        queue = m.autograd.Variable._execution_engine.queue_callback
        inner = _passing(m, lambda: 1 in depths and queue(lambda: log.append("inner")))

        def reenter():
            if 0 in depths:
                queue(lambda: log.append("outer"))
            t = m.ones(2, requires_grad=True)
            with m.enable_grad():
                inner.apply(t).sum().backward()
            log.append("inner backward returned")

        outer = _passing(m, reenter)
        outer.apply(m.ones(2, requires_grad=True)).sum().backward()
        return log

    _both(scenario)


def test_queue_callback_outside_a_backward_is_an_error():
    for m in (bg, torch):
        with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass"):
            m.autograd.Variable._execution_engine.queue_callback(lambda: None)


def test_callback_error_propagates_from_backward():
    def fail():
        raise ValueError("from the callback")

    for m in (bg, torch):
        x = m.ones(2, requires_grad=True)
        y = _passing(m, lambda m=m: m.autograd.Variable._execution_engine.queue_callback(fail)).apply(x)
        with pytest.raises(ValueError, match="from the callback"):
            y.sum().backward()
        assert x.grad.tolist() == [1.0, 1.0]  # the nodes ran before the callback
        # the next backward is a task of its own, with no callbacks left over
        _passing(m, lambda: None).apply(x).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]


def test_multi_grad_hook_any_runs_once_per_backward_before_earlier_hooks():
    def scenario(m):
        order = []
        x = m.ones(2, 3, requires_grad=True)
        handles = []
        for _ in range(2):
            z = x * 2 if not order else x
            mark = len(handles)
            z.register_hook(lambda g, mark=mark: order.append(("tensor", mark)))
            outs = (m.sin(z), m.cos(z))
            handles.append(
                m.autograd.graph.register_multi_grad_hook(
                    outs, lambda g, mark=mark: order.append(("any", mark, tuple(g.shape))), mode="any"
                )
            )
            x = outs[0] + outs[1]
        x.sum().backward(retain_graph=True)
        for handle in handles:
            handle.remove()
        x.sum().backward()
        return order

    _both(scenario)


def test_multi_grad_hook_all_waits_for_the_tensors_the_backward_reaches():
    def scenario(m):
        log = []
        a, b, c, d = (m.rand(2, requires_grad=True) for _ in range(4))
        a2 = a * 2
        b2 = _passing(m, lambda: None).apply(b)
        d2 = d * 3
        handle = m.autograd.graph.register_multi_grad_hook(
            (a2, b2, c, d2), lambda grads: log.append([g is not None for g in grads])
        )
        out = b2 * c
        out.sum().backward(inputs=(b2, c), retain_graph=True)
        out.sum().backward(inputs=(a2, d2), retain_graph=True)  # reaches none of them: no call
        out.sum().backward(inputs=(a2, c), retain_graph=True)
        out.sum().backward(retain_graph=True)
        m.autograd.grad(out.sum(), (b2,), retain_graph=True)
        handle.remove()
        out.sum().backward()
        log.append("removed")
        return log

    assert _both(scenario) == [
        [False, True, True, False],
        [False, False, True, False],
        [False, True, True, False],
        [False, True, False, False],
        "removed",
    ]


def test_multi_grad_hook_all_with_grad_of_a_leaf_is_torchs_error():
    for m in (bg, torch):
        a, b = m.rand(2, requires_grad=True), m.rand(2, requires_grad=True)
        m.autograd.graph.register_multi_grad_hook((a, b), lambda grads: None)
        with pytest.raises(RuntimeError, match="A leaf node was passed to _will_engine_execute_node"):
            m.autograd.grad((a * b).sum(), (a,))


def test_multi_grad_hook_invalid_mode():
    for m in (bg, torch):
        t = m.rand(2, requires_grad=True)
        with pytest.raises(ValueError, match=r"Expects mode to be one of \('all', 'any'\) but got foo"):
            m.autograd.graph.register_multi_grad_hook((t,), lambda _: None, mode="foo")


def test_multi_grad_hook_handle_is_a_context_manager():
    log = []
    t = bg.rand(2, requires_grad=True)
    with bg.autograd.graph.register_multi_grad_hook((t,), functools.partial(log.append), mode="any"):
        (t * 2).sum().backward()
    (t * 2).sum().backward()
    assert len(log) == 1
