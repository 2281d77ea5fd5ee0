"""optim.AdamW against torch's over several steps under each option; Optimizer.state as torch's defaultdict(dict),
so that optimizers written in torch's style (a subclass of Optimizer whose step reads self.state[p]) run unchanged
and match torch."""

import copy
from collections import defaultdict

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch
from test_optim import assert_steps_like_torch


def _problem(m, dtype):
    rng = np.random.default_rng(0)
    w = m.tensor(rng.standard_normal((3, 4)), dtype=dtype, requires_grad=True)
    b = m.tensor(rng.standard_normal(3), dtype=dtype, requires_grad=True)
    x = m.tensor(rng.standard_normal((5, 4)), dtype=dtype)
    return [w, b], lambda: (m.tanh(x @ w.T + b) ** 2).sum() + (w**3).mean()


def _train(m, make, dtype, steps=8):
    params, loss_fn = _problem(m, dtype)
    opt = make(m, params)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
    return params, opt


ADAMW = {
    "defaults": lambda m, p: m.optim.AdamW(p),
    "lr_decay": lambda m, p: m.optim.AdamW(p, lr=0.05, weight_decay=0.3),
    "amsgrad": lambda m, p: m.optim.AdamW(p, lr=0.05, betas=(0.7, 0.95), weight_decay=0.1, amsgrad=True),
    "maximize": lambda m, p: m.optim.AdamW(p, lr=0.02, eps=1e-4, maximize=True),
    "amsgrad_maximize": lambda m, p: m.optim.AdamW(p, lr=0.02, weight_decay=0.5, amsgrad=True, maximize=True),
    "groups": lambda m, p: m.optim.AdamW(
        [{"params": [p[0]], "weight_decay": 0.0}, {"params": [p[1]], "lr": 0.1, "amsgrad": True}], lr=0.01
    ),
}


@pytest.mark.parametrize("name", sorted(ADAMW))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_adamw_steps_match_torch(name, dtype):
    opt, t_opt = assert_steps_like_torch(_train, ADAMW[name], dtype, steps=8)
    assert repr(opt) == repr(t_opt)
    assert opt.defaults == t_opt.defaults


def test_adamw_differs_from_adam_with_l2_and_resumes_from_its_state_dict():
    params, opt = _train(bg, lambda m, p: m.optim.AdamW(p, lr=0.05, weight_decay=0.2), bg.float64, steps=3)
    coupled, _ = _train(bg, lambda m, p: m.optim.Adam(p, lr=0.05, weight_decay=0.2), bg.float64, steps=3)
    assert not np.allclose(params[0].detach().numpy(), coupled[0].detach().numpy())
    resumed_params, _ = _problem(bg, bg.float64)
    for p, q in zip(resumed_params, params):
        p.data = q.detach().clone()
    resumed = bg.optim.AdamW(resumed_params, lr=0.5)
    resumed.load_state_dict(copy.deepcopy(opt.state_dict()))  # as saved and loaded: torch's shares the tensors
    assert type(resumed.state) is defaultdict and resumed.param_groups[0]["lr"] == 0.05
    for optimizer, ps in ((opt, params), (resumed, resumed_params)):
        optimizer.zero_grad()
        (bg.tanh(ps[0]).sum() + ps[1].sum()).backward()
        optimizer.step()
    assert_same([p.detach() for p in resumed_params], [p.detach() for p in params], 0, 0)


@pytest.mark.parametrize(
    "case",
    [
        lambda m: m.optim.AdamW([m.zeros(2, requires_grad=True)], lr=-0.1),
        lambda m: m.optim.AdamW([m.zeros(2, requires_grad=True)], betas=(0.9, 1.0)),
        lambda m: m.optim.AdamW([m.zeros(2, requires_grad=True)], weight_decay=-1),
        lambda m: m.optim.AdamW([m.zeros(2, requires_grad=True)], decoupled_weight_decay=False),
        lambda m: m.optim.AdamW([]),
    ],
)
def test_adamw_argument_errors_match_torch(case):
    raises_like_torch(case)


def test_state_is_a_defaultdict_of_dicts_as_torchs():
    p = bg.zeros(2, requires_grad=True)
    for opt in (bg.optim.SGD([p], lr=0.1), bg.optim.Adam([p]), bg.optim.AdamW([p])):
        assert type(opt.state) is defaultdict and opt.state[p] == {} and p in opt.state
        assert opt.state_dict()["state"] == {0: {}}  # torch lists a parameter whose state was read, empty
    t_p = torch.zeros(2, requires_grad=True)
    t_opt = torch.optim.SGD([t_p], lr=0.1)
    assert t_opt.state[t_p] == {} and t_opt.state_dict()["state"] == {0: {}}


def _momentum_sgd(m):
    """An optimizer written as torch's documentation teaches, against module `m`."""

    class MomentumSGD(m.optim.Optimizer):
        def __init__(self, params, lr=0.1, momentum=0.9, weight_decay=0.0):
            super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay))

        @m.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with m.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad.add(p, alpha=group["weight_decay"]) if group["weight_decay"] else p.grad
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = grad.clone().detach()
                        state["step"] = 0
                    else:
                        state["momentum_buffer"].mul_(group["momentum"]).add_(grad)
                    state["step"] += 1
                    p.add_(state["momentum_buffer"], alpha=-group["lr"])
            return loss

    return MomentumSGD


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_torch_style_custom_optimizer_runs_unchanged_and_matches_torch(dtype):
    def make(m, params):
        return _momentum_sgd(m)([{"params": [params[0]], "weight_decay": 0.1}, {"params": [params[1]]}], lr=0.05)

    opt, t_opt = assert_steps_like_torch(_train, make, dtype, steps=8)
    assert [s["step"] for s in opt.state.values()] == [s["step"] for s in t_opt.state.values()] == [8, 8]
    assert repr(opt) == repr(t_opt)
    state, t_state = opt.state_dict(), t_opt.state_dict()
    assert state["param_groups"] == t_state["param_groups"] and sorted(state["state"]) == sorted(t_state["state"])


def test_a_custom_optimizer_step_with_a_closure():
    params, loss_fn = _problem(bg, bg.float64)
    opt = _momentum_sgd(bg)(params, lr=0.01)

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(5)]
    assert losses == sorted(losses, reverse=True)
