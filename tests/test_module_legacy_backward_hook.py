"""Module.register_backward_hook, torch's deprecated non-full hook, against torch: the hook sees the grad_input and
grad_output of the node that made the result's first Tensor and may replace that grad_input; torch's
FutureWarnings for what it misses; it cannot be mixed with full backward hooks; its handle removes it."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


class _TwoOutputs:
    """A module returning (tanh(x W^T), x * 2): outputs made by different nodes."""

    @staticmethod
    def make(m):
        class TwoOutputs(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = m.nn.Linear(3, 2).double()

            def forward(self, x):
                return self.lin(x).tanh(), x * 2

        return TwoOutputs()


MODULES = {
    "linear": lambda m: m.nn.Linear(3, 2).double(),
    "sequential": lambda m: m.nn.Sequential(m.nn.Linear(3, 4), m.nn.Tanh(), m.nn.Linear(4, 2)).double(),
    "two_outputs": _TwoOutputs.make,
}


def _run(m, name, scale):
    m.manual_seed(0)
    module = MODULES[name](m)
    seen = []

    def hook(mod, grad_input, grad_output):
        assert mod is module
        seen.append([None if g is None else g.detach().numpy().copy() for g in (*grad_input, *grad_output)])
        return tuple(None if g is None else g * scale for g in grad_input)

    handle = module.register_backward_hook(hook)
    x = m.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = module(x)
    first = out[0] if isinstance(out, tuple) else out
    (first**2).sum().backward()
    grads = [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in module.parameters()]
    handle.remove()
    x.grad = None
    module(x)[0].sum().backward() if isinstance(out, tuple) else module(x).sum().backward()
    return seen, grads, [(w.category, str(w.message)) for w in caught], len(seen)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_hook_sees_and_replaces_the_result_nodes_gradients_like_torch(name):
    got, want = _run(bg, name, 3.0), _run(torch, name, 3.0)
    assert got[2] == want[2]  # the same FutureWarning, or none
    assert len(got[0]) == len(want[0]) == got[3] == 1  # once, and not after the handle is removed
    for ours, theirs in zip(got[0][0], want[0][0]):
        assert (ours is None) == (theirs is None)
        if theirs is not None:
            np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    for ours, theirs in zip(got[1], want[1]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "first, second",
    [
        ("register_backward_hook", "register_full_backward_hook"),
        ("register_full_backward_hook", "register_backward_hook"),
    ],
)
def test_regular_and_full_backward_hooks_cannot_be_mixed(first, second):
    def mixed(m):
        module = m.nn.Linear(2, 2)
        getattr(module, first)(lambda *a: None)
        getattr(module, second)(lambda *a: None)

    raises_like_torch(mixed)
