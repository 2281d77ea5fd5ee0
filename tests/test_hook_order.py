"""Which hooks a backward runs, and in what order, against torch: backward(inputs=...) runs the inputs' nodes whole
(their node hooks, a leaf's AccumulateGrad and its hooks) while grad() only captures there; a leaf's tensor hooks,
AccumulateGrad pre-hooks, post-accumulate-grad hooks and AccumulateGrad hooks run in torch's order, and `.grad`
takes over the gradient the engine no longer needs (in-place changes of one are seen through the other)."""

import numpy as np
import pytest
import torch

import batched_grad as bg


def _log_of_hooks(m, call):
    """The hooks a call runs on `b = a.clone()` with tensor hooks (1) and node pre-hooks (2) on both, torch's test
    of prehook order rephrased; `call(a, b)` runs the backward. Returns (log, b.grad)."""
    log = []

    def tensor_hook(g):
        log.append(("tensor", g.item()))
        return g * 3

    def node_prehook(gs):
        log.append(("node", gs[0].item()))
        return (gs[0] * 2,)

    a = m.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.register_hook(tensor_hook)
    b.grad_fn.register_prehook(node_prehook)
    accumulator = b.grad_fn.next_functions[0][0]
    a.register_hook(tensor_hook)
    accumulator.register_prehook(node_prehook)
    call(m, a, b)
    b_grad = b.grad.item() if b.retains_grad else None
    return log, b_grad, None if a.grad is None else a.grad.item()


CALLS = {
    "backward": lambda m, a, b: b.sum().backward(retain_graph=True),
    "grad of the leaf": lambda m, a, b: m.autograd.grad(b.sum(), a, retain_graph=True),
    "grad of the non-leaf": lambda m, a, b: m.autograd.grad(b.sum(), b, retain_graph=True),
    "backward to the non-leaf": lambda m, a, b: b.sum().backward(inputs=(b,)),
    "backward to the leaf": lambda m, a, b: b.sum().backward(inputs=(a,)),
    "backward to both": lambda m, a, b: b.sum().backward(inputs=(b, a)),
    "backward to an edge": lambda m, a, b: b.sum().backward(inputs=m.autograd.graph.get_gradient_edge(b)),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_backward_to_inputs_runs_their_nodes_pre_hooks_as_torch(call):
    """backward(inputs=(b,)) runs b's node with its pre-hooks (after retain_grad took b's gradient); grad() stops at
    the tensor hooks of a node it only captures from."""
    assert _log_of_hooks(bg, call) == _log_of_hooks(torch, call)


def _hook_counts(m, call):
    """How often tensor hooks, node pre-hooks and node hooks run on `c = (a * 2) * 2`, each on b = a * 2 and on
    a's AccumulateGrad node, for `call(m, a, b, c)` (torch's test of hooks under grad(), rephrased)."""
    counts = {"tensor": [], "pre": [], "post": []}
    a = m.tensor(1.0, requires_grad=True)
    b = a * 2
    c = b * 2
    accumulator = b.grad_fn.next_functions[0][0]
    for name, node in (("b", b.grad_fn), ("acc", accumulator)):
        node.register_prehook(lambda g, name=name: counts["pre"].append(name))
        node.register_hook(lambda gi, go, name=name: counts["post"].append(name))
    a.register_hook(lambda g: counts["tensor"].append("a"))
    b.register_hook(lambda g: counts["tensor"].append("b"))
    call(m, a, b, c)
    return counts, None if a.grad is None else a.grad.item()


COUNTED_CALLS = {
    "grad of b": lambda m, a, b, c: m.autograd.grad(c, b),
    "grad of a and b": lambda m, a, b, c: m.autograd.grad(c, (a, b)),
    "backward": lambda m, a, b, c: c.backward(),
    "backward to a and b": lambda m, a, b, c: c.backward(inputs=(a, b)),
    "backward to a": lambda m, a, b, c: c.backward(inputs=[a]),
    "backward to b": lambda m, a, b, c: c.backward(inputs=[b]),
}


@pytest.mark.parametrize("call", COUNTED_CALLS.values(), ids=COUNTED_CALLS.keys())
def test_backward_to_inputs_runs_accumulate_grad_hooks_as_torch(call):
    """backward(inputs=(a, b)) runs a's AccumulateGrad node with its pre-hooks and hooks, as a full backward does."""
    assert _hook_counts(bg, call) == _hook_counts(torch, call)


def test_backward_to_some_leaves_accumulates_only_theirs_in_every_tier(engine_tier):
    """backward(inputs=...) through a graph without hooks (which the fused tiers run) fills only the inputs'
    `.grad`, and their post-accumulate-grad hooks see it."""
    seen = []
    results = []
    for m in (bg, torch):
        w = m.tensor([1.0, 2.0], requires_grad=True)
        x = m.tensor([3.0, -1.0], requires_grad=True)
        w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
        for _ in range(3):  # a structure seen often enough to run fused
            ((w * x).tanh() * w).sum().backward(inputs=[w])
        results.append((w.grad.tolist(), x.grad))
    (bg_w, bg_x), (torch_w, torch_x) = results
    assert bg_x is None and torch_x is None
    np.testing.assert_allclose(bg_w, torch_w, rtol=1e-6)
    np.testing.assert_allclose(seen[:3], seen[3:], rtol=1e-6)


def _add_half_to_grad(leaf):
    leaf.grad.add_(0.5)


def _accumulation_log(m, make_loss, tensor_hook=None):
    """What AccumulateGrad's hook sees as its gradient, and the leaf's `.grad`, when a post-accumulate-grad hook
    adds 0.5 to `.grad` in place. `make_loss(x)` gives (the loss, its grad_output); `tensor_hook` goes on x."""
    x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen = []
    accumulator = x.view_as(x).grad_fn.next_functions[0][0]
    if tensor_hook is not None:
        x.register_hook(tensor_hook)
    x.register_post_accumulate_grad_hook(_add_half_to_grad)
    accumulator.register_hook(lambda grad_inputs, grad_outputs: seen.append(grad_outputs[0].tolist()))
    loss, grad_output = make_loss(x)
    loss.backward(grad_output)
    return seen, x.grad.tolist(), None if grad_output is None else grad_output.tolist()


def test_post_accumulate_grad_hooks_run_between_accumulate_grads_pre_hooks_and_hooks_as_torch():
    """torch's order: tensor hook, AccumulateGrad pre-hook, post-accumulate-grad hook, AccumulateGrad hook, with
    `.grad` the very gradient the pre-hook returned (torch's test: ((1 - 2) / 5 + 0.5) * 10 = 3)."""

    def scenario(m):
        x = m.rand(3, requires_grad=True)
        accumulator = x.view_as(x).grad_fn.next_functions[0][0]
        x.register_hook(lambda g: g.sub(2.0))
        accumulator.register_prehook(lambda gs: (gs[0].div(5.0),))
        x.register_post_accumulate_grad_hook(_add_half_to_grad)

        def hook(grad_inputs, grad_outputs):
            x.grad = grad_outputs[0].mul(10)

        accumulator.register_hook(hook)
        x.sum().backward()
        return x.grad.tolist()

    assert scenario(torch) == pytest.approx([3.0, 3.0, 3.0])
    assert scenario(bg) == pytest.approx([3.0, 3.0, 3.0])


def _stash(stashed):
    def hook(g):
        stashed.append(g)  # the user now holds the gradient: torch copies it into .grad

    return hook


LOSSES = {
    "from a node": (lambda m: lambda x: ((x * 2).sum(), None), None),
    "replaced by a tensor hook": (lambda m: lambda x: ((x * 2).sum(), None), lambda g: g * 3),
    "held by a tensor hook": (lambda m: lambda x: ((x * 2).sum(), None), "stash"),
    "the caller's grad_output": (lambda m: lambda x: (x, m.tensor([1.0, 1.0, 1.0])), None),
}


@pytest.mark.parametrize("loss, tensor_hook", LOSSES.values(), ids=LOSSES.keys())
def test_grad_takes_over_a_gradient_nobody_else_holds_as_torch(loss, tensor_hook):
    """`.grad` is the incoming gradient itself only where nothing else holds it: the caller's grad_output, or a
    gradient a hook kept, is copied (the in-place change of .grad does not reach them)."""
    logs = []
    for m in (bg, torch):
        stashed = []
        hook = _stash(stashed) if tensor_hook == "stash" else tensor_hook
        logs.append(_accumulation_log(m, loss(m), hook) + tuple(s.tolist() for s in stashed))
    assert logs[0] == logs[1]


RETURNS = {
    "a new tensor": lambda t: t.grad * 2,
    "its .grad": lambda t: t.grad.add_(1.0),
    "the leaf itself": lambda t: t,
    "a string": lambda t: "done",
}


@pytest.mark.parametrize("returned", RETURNS.values(), ids=RETURNS.keys())
def test_a_post_accumulate_grad_hook_returning_something_raises_as_torch(returned):
    """Such a hook must return None or the leaf it was given: torch refuses another Tensor with a RuntimeError once
    every hook has run (the next one is given that Tensor) and anything else with a TypeError at once."""
    outcomes = []
    for m in (bg, torch):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        given = []
        x.register_post_accumulate_grad_hook(returned)
        x.register_post_accumulate_grad_hook(lambda t, x=x: given.append(t is x))
        try:
            (x * 3).sum().backward()
            outcome = None
        except (RuntimeError, TypeError) as error:
            outcome = (type(error).__name__, str(error))
        outcomes.append((outcome, given, x.grad.tolist()))
    assert outcomes[0] == outcomes[1]
