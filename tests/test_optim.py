"""bg.optim against torch.optim: ten steps of SGD and Adam under each option, closures, state, zero_grad and
argument errors; the update compiles once per group structure, not per step."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_float32_as_accurate, assert_same, raises_like_torch


def _problem(m, dtype):
    rng = np.random.default_rng(0)
    w = m.tensor(rng.standard_normal((3, 4)), dtype=dtype, requires_grad=True)
    b = m.tensor(rng.standard_normal(3), dtype=dtype, requires_grad=True)
    x = m.tensor(rng.standard_normal((5, 4)), dtype=dtype)
    return [w, b], lambda: (m.tanh(x @ w.T + b) ** 2).sum() + (w**2).mean()


def _run(m, make, dtype, steps=10):
    params, loss_fn = _problem(m, dtype)
    opt = make(m)(params)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
    return params, opt


def assert_steps_like_torch(run, make, dtype, steps):
    """`run(m, make, dtype)` -> (params, optimizer) after `steps` steps, for bg and for torch: the parameters and every
    state entry, in float64 to round-off, in float32 as accurate as torch's float32 (checked against float64)."""
    got, opt = run(bg, make, getattr(bg, dtype))
    want, t_opt = run(torch, make, getattr(torch, dtype))
    truth, truth_opt = run(torch, make, torch.float64) if dtype == "float32" else (want, t_opt)

    def check(actual, expected, exact):
        if isinstance(expected, (int, float)):  # a step count kept as a number
            assert actual == expected, (actual, expected)
        elif dtype == "float64":
            assert_same(actual, expected, 1e-11, 1e-13)
        else:
            assert_float32_as_accurate(actual, expected, exact, roundings=steps)

    check(*([p.detach() for p in ps] for ps in (got, want, truth)))
    for p, q, r in zip(got, want, truth):
        state, t_state, exact_state = opt.state[p], t_opt.state[q], truth_opt.state[r]
        assert list(state) == list(t_state), (list(state), list(t_state))
        for key in state:
            check(state[key], t_state[key], exact_state[key])
    return opt, t_opt


OPTIMIZERS = {
    "sgd": lambda m: lambda p: m.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda m: lambda p: m.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "sgd_nesterov": lambda m: lambda p: m.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1),
    "sgd_maximize": lambda m: lambda p: m.optim.SGD(p, lr=0.01, momentum=0.5, maximize=True),
    "adam": lambda m: lambda p: m.optim.Adam(p, lr=0.05),
    "adam_amsgrad": lambda m: lambda p: m.optim.Adam(p, lr=0.05, betas=(0.8, 0.99), amsgrad=True),
    "adam_weight_decay": lambda m: lambda p: m.optim.Adam(p, lr=0.02, weight_decay=0.1, eps=1e-6),
    "adam_amsgrad_decay_maximize": lambda m: (
        lambda p: m.optim.Adam(p, lr=0.02, weight_decay=0.1, amsgrad=True, maximize=True)
    ),
    "adamw_style": lambda m: lambda p: m.optim.Adam(p, lr=0.02, weight_decay=0.1, decoupled_weight_decay=True),
    "groups": lambda m: lambda p: m.optim.Adam([{"params": [p[0]]}, {"params": p[1], "lr": 0.1}], lr=0.01),
}


@pytest.mark.parametrize(
    "name, dtype",
    [(name, "float64") for name in sorted(OPTIMIZERS)]
    + [("sgd_nesterov", "float32"), ("adam_amsgrad_decay_maximize", "float32")],
)
def test_ten_steps_match_torch(name, dtype):
    assert_steps_like_torch(_run, OPTIMIZERS[name], dtype, steps=10)


def test_closure_state_dict_and_zero_grad():
    params, loss_fn = _problem(bg, bg.float64)
    t_params, t_loss_fn = _problem(torch, torch.float64)
    opts = bg.optim.Adam(params, lr=0.1, amsgrad=True), torch.optim.Adam(t_params, lr=0.1, amsgrad=True)
    for opt, fn in zip(opts, (loss_fn, t_loss_fn)):

        def closure(opt=opt, fn=fn):
            opt.zero_grad()
            loss = fn()
            loss.backward()
            return loss

        for _ in range(3):
            loss = opt.step(closure)
        assert isinstance(loss, (bg.Tensor, torch.Tensor))
    assert_same([p.detach() for p in params], [p.detach() for p in t_params], 1e-12, 1e-14)
    state, t_state = opts[0].state_dict(), opts[1].state_dict()
    assert state["param_groups"][0].keys() == t_state["param_groups"][0].keys()
    assert state["param_groups"][0]["params"] == [0, 1]
    assert sorted(state["state"][0]) == sorted(t_state["state"][0])
    assert_same(state["state"][1]["exp_avg"], t_state["state"][1]["exp_avg"], 1e-12, 1e-14)
    assert_same(state["state"][1]["step"], t_state["state"][1]["step"])

    restored = bg.optim.Adam(params, lr=0.5)
    restored.load_state_dict(state)
    assert restored.param_groups[0]["lr"] == 0.1 and restored.state[params[0]]["step"].item() == 3
    opts[0].zero_grad(set_to_none=False)
    assert (params[0].grad.numpy() == 0).all()
    opts[0].zero_grad()
    assert params[0].grad is None


def test_step_updates_in_place_and_compiles_once_per_structure():
    params, loss_fn = _problem(bg, bg.float32)
    opt = bg.optim.SGD(params, lr=0.1, momentum=0.9)
    version = params[0]._version
    for i in range(6):
        opt.param_groups[0]["lr"] = 0.1 / (i + 1)  # a schedule changes lr: the compiled update is reused
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
        # the graph's fused program compiles at its third call; the update with momentum buffers (from the second
        # step on) runs parameter by parameter twice, then as one program
        if i == 3:
            compiles = bg.compile_count()
    assert bg.compile_count() == compiles
    assert params[0]._version == version + 6
    no_grad = bg.optim.SGD([bg.zeros(2, requires_grad=True)])
    no_grad.step()  # parameters without .grad are skipped, as in torch


@pytest.mark.parametrize(
    "case",
    [
        lambda m: m.optim.SGD([m.zeros(2, requires_grad=True)], lr=-1),
        lambda m: m.optim.SGD([m.zeros(2, requires_grad=True)], lr=0.1, nesterov=True),
        lambda m: m.optim.SGD([m.zeros(2, requires_grad=True)], lr=0.1, momentum=-1),
        lambda m: m.optim.Adam([m.zeros(2, requires_grad=True)], betas=(1.0, 0.9)),
        lambda m: m.optim.Adam([m.zeros(2, requires_grad=True)], eps=-1),
        lambda m: m.optim.Adam([]),
        lambda m: m.optim.Adam(m.zeros(2, requires_grad=True)),
        lambda m: m.optim.Adam([m.zeros(2, requires_grad=True) * 2]),
        lambda m: m.optim.SGD([{"params": {m.zeros(2, requires_grad=True)}}]),
    ],
)
def test_bad_arguments_raise_like_torch(case):
    raises_like_torch(case)


def test_load_state_dict_makes_new_groups_as_torch():
    def after_load(m):
        p = m.nn.Parameter(m.ones(2))
        opt = m.optim.SGD([p], lr=0.1, momentum=0.9)
        p.grad = m.ones(2)
        opt.step()
        old_list, old_group = opt.param_groups, opt.param_groups[0]
        opt.load_state_dict(opt.state_dict())
        group = opt.param_groups[0]
        return opt.param_groups is old_list, group is old_group, group["params"][0] is p, group["lr"]

    assert after_load(bg) == after_load(torch)


def _many_parameters(m, shapes=((6, 5), (5,), (6, 5), (4, 6), (4,), (5,), (1, 4))):
    rng = np.random.default_rng(1)
    return [m.tensor(rng.standard_normal(s), dtype=m.float32, requires_grad=True) for s in shapes]


def _steps(m, params, make, steps=4):
    opt = make(m)(params)
    for i in range(steps):
        for k, p in enumerate(params):
            p.grad = m.tensor(np.sin(p.detach().numpy() * (i + 1) + k))
        opt.step()
    return [p.detach().clone() for p in params]


@pytest.mark.parametrize(
    "make",
    [
        lambda m: lambda p: m.optim.Adam(p, lr=0.05, weight_decay=0.01, amsgrad=True),
        lambda m: lambda p: m.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
        lambda m: lambda p: m.optim.RMSprop(p, lr=0.01, momentum=0.5),
        lambda m: lambda p: m.optim.AdamW(p, lr=0.01, weight_decay=0.1),
        lambda m: lambda p: m.optim.Adagrad(p, lr=0.1, lr_decay=0.01),
        lambda m: lambda p: m.optim.Adamax(p, lr=0.02),
        lambda m: lambda p: m.optim.NAdam(p, lr=0.02),
        lambda m: lambda p: m.optim.RAdam(p, lr=0.02),
        lambda m: lambda p: m.optim.Adadelta(p, lr=0.5),
        lambda m: lambda p: m.optim.Rprop(p, lr=0.01),
        lambda m: lambda p: m.optim.ASGD(p, lr=0.01),
    ],
    ids=["Adam", "SGD", "RMSprop", "AdamW", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "Rprop", "ASGD"],
)
def test_an_update_parameter_by_parameter_equals_the_whole_program(make, monkeypatch):
    """Until a group's whole update pays for its compile (XLA's compile of one program over n parameters grows with
    n), the update runs parameter by parameter on the host, from its jaxpr traced once per pattern of shapes: new
    shapes compile nothing. The values are the same bits as the whole program's, and torch's."""
    from batched_grad import _lazy

    monkeypatch.setattr(_lazy, "FUSE_AFTER", 10**9)
    by_parameter = _steps(bg, _many_parameters(bg), make)
    before = bg.compile_count()
    _steps(bg, _many_parameters(bg, ((7, 3), (9,), (2, 2), (3, 8))), make)
    assert bg.compile_count() == before
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)
    whole = _steps(bg, _many_parameters(bg), make)
    for a, b, t in zip(by_parameter, whole, _steps(torch, _many_parameters(torch), make)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)
