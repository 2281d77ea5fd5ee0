"""Optimizer hooks against torch's: step pre/post hooks per optimizer and global (a pre hook may replace the
arguments), hooks on a subclass's own step, state_dict and load_state_dict pre/post hooks (replacing the dict,
prepend ordering), and handles that remove them."""

import importlib

import pytest
import torch

import batched_grad as bg
from oracle import assert_same


def hooked_training(m):
    m.manual_seed(0)
    model = m.nn.Linear(3, 2)
    opt = m.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    calls = []
    pre = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(("pre", len(args), o is opt)))
    opt.register_step_post_hook(lambda o, args, kwargs: calls.append(("post", o.param_groups[0]["lr"])))
    optimizer_module = importlib.import_module(m.__name__ + ".optim.optimizer")
    everywhere = optimizer_module.register_optimizer_step_post_hook(lambda o, a, k: calls.append(("global",)))
    x = m.randn(4, 3)
    for step in range(3):
        opt.zero_grad()
        model(x).square().sum().backward()
        opt.step()
        if step == 1:
            pre.remove()
            everywhere.remove()

    class Clipped(m.optim.Adam):
        def step(self, closure=None):
            calls.append(("subclass step", closure is None))
            return super().step(closure)

    m.optim.Adam(
        model.parameters()
    )  # Adam's own step is wrapped now too: Clipped's super().step() runs the hooks again
    adam = Clipped(model.parameters(), lr=0.01)
    adam.register_step_pre_hook(lambda o, args, kwargs: (args[:1], {"closure": None}))
    adam.register_step_post_hook(lambda o, args, kwargs: calls.append(("adam post", kwargs)))
    model(x).sum().backward()
    adam.step()
    adam.register_state_dict_pre_hook(lambda o: calls.append(("sd pre",)))
    adam.register_state_dict_post_hook(lambda o, sd: {**sd, "note": 1})
    adam.register_state_dict_post_hook(lambda o, sd: calls.append(("first", sorted(sd))), prepend=True)
    state = adam.state_dict()
    adam.register_load_state_dict_pre_hook(lambda o, sd: {k: v for k, v in sd.items() if k != "note"})
    adam.register_load_state_dict_post_hook(lambda o: calls.append(("loaded", o.param_groups[0]["lr"])))
    adam.load_state_dict(state)
    return calls, sorted(state), model.weight.detach()


def test_optimizer_hooks_as_torch():
    ours, theirs = hooked_training(bg), hooked_training(torch)
    assert ours[:2] == theirs[:2]
    assert_same(ours[2], theirs[2])


def test_a_pre_hook_returning_something_else_is_refused_as_by_torch():
    for lib in (torch, bg):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=0.1)
        opt.register_step_pre_hook(lambda o, args, kwargs: 3)
        with pytest.raises(RuntimeError, match=r"must return None or a tuple of \(new_args, new_kwargs\), but got 3"):
            opt.step()
