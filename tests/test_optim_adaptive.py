"""RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, Rprop and ASGD against torch.optim: ten steps under each
option (float64 to round-off, float32 closely), their state's names and values, state_dict round trips, reprs
and argument errors."""

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch
from test_optim import _problem, _run, assert_steps_like_torch

OPTIMIZERS = {
    "rmsprop": lambda m: lambda p: m.optim.RMSprop(p, lr=0.01),
    "rmsprop-all": lambda m: (
        lambda p: m.optim.RMSprop(
            p, lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1, momentum=0.5, centered=True, maximize=True
        )
    ),
    "adagrad": lambda m: lambda p: m.optim.Adagrad(p, lr=0.1),
    "adagrad-all": lambda m: (
        lambda p: m.optim.Adagrad(
            p, lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3, eps=1e-6, maximize=True
        )
    ),
    "adadelta": lambda m: lambda p: m.optim.Adadelta(p),
    "adadelta-all": lambda m: lambda p: m.optim.Adadelta(p, lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True),
    "adamax": lambda m: lambda p: m.optim.Adamax(p, lr=0.05),
    "adamax-all": lambda m: (
        lambda p: m.optim.Adamax(p, lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, maximize=True)
    ),
    "nadam": lambda m: lambda p: m.optim.NAdam(p, lr=0.05),
    "nadam-all": lambda m: (
        lambda p: m.optim.NAdam(p, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=0.01, maximize=True)
    ),
    "nadam-decoupled": lambda m: lambda p: m.optim.NAdam(p, lr=0.05, weight_decay=0.1, decoupled_weight_decay=True),
    "radam": lambda m: lambda p: m.optim.RAdam(p, lr=0.05),
    "radam-all": lambda m: lambda p: m.optim.RAdam(p, lr=0.05, betas=(0.5, 0.6), weight_decay=0.1, maximize=True),
    "radam-decoupled": lambda m: (
        lambda p: m.optim.RAdam(p, lr=0.05, betas=(0.5, 0.6), weight_decay=0.1, decoupled_weight_decay=True)
    ),
    "rprop": lambda m: lambda p: m.optim.Rprop(p, lr=0.01),
    "rprop-all": lambda m: lambda p: m.optim.Rprop(p, lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.1), maximize=True),
    "asgd": lambda m: lambda p: m.optim.ASGD(p, lr=0.05),
    "asgd-averaging": lambda m: (
        lambda p: m.optim.ASGD(p, lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1, maximize=True)
    ),
    "groups": lambda m: (
        lambda p: m.optim.RMSprop([{"params": [p[0]]}, {"params": p[1], "lr": 0.1, "momentum": 0.3}], lr=0.01)
    ),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_ten_steps_match_torch(name, dtype):
    assert_steps_like_torch(_run, OPTIMIZERS[name], dtype, steps=10)


@pytest.mark.parametrize("name", ["rmsprop-all", "adagrad", "nadam", "asgd-averaging", "rprop"])
def test_state_dict_round_trip_continues_like_torch(name):
    params, loss_fn = _problem(bg, bg.float64)
    opt = OPTIMIZERS[name](bg)(params)
    t_params, t_loss_fn = _problem(torch, torch.float64)
    t_opt = OPTIMIZERS[name](torch)(t_params)
    for _ in range(3):
        for o, fn in ((opt, loss_fn), (t_opt, t_loss_fn)):
            o.zero_grad()
            fn().backward()
            o.step()
    fresh = OPTIMIZERS[name](bg)(params)
    fresh.load_state_dict(opt.state_dict())
    for _ in range(3):
        for o, fn in ((fresh, loss_fn), (t_opt, t_loss_fn)):
            o.zero_grad()
            fn().backward()
            o.step()
    assert_same([p.detach() for p in params], [p.detach() for p in t_params], 1e-11, 1e-13)


def test_reprs_defaults_and_eager_adagrad_state():
    for name in ("RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD"):
        p, tp = bg.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
        ours, theirs = getattr(bg.optim, name)([p]), getattr(torch.optim, name)([tp])
        assert repr(ours) == repr(theirs)
        assert ours.defaults == theirs.defaults
    p, tp = bg.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    ours, theirs = (
        bg.optim.Adagrad([p], initial_accumulator_value=0.5),
        torch.optim.Adagrad([tp], initial_accumulator_value=0.5),
    )
    assert list(ours.state[p]) == list(theirs.state[tp])
    assert_same(ours.state[p]["sum"], theirs.state[tp]["sum"])


@pytest.mark.parametrize(
    "call",
    [
        lambda m, p: m.optim.RMSprop(p, lr=-1),
        lambda m, p: m.optim.RMSprop(p, alpha=-0.1),
        lambda m, p: m.optim.Adagrad(p, lr_decay=-1),
        lambda m, p: m.optim.Adadelta(p, rho=1.5),
        lambda m, p: m.optim.Adamax(p, betas=(1.0, 0.9)),
        lambda m, p: m.optim.NAdam(p, momentum_decay=-1),
        lambda m, p: m.optim.RAdam(p, eps=-1),
        lambda m, p: m.optim.Rprop(p, etas=(1.5, 1.2)),
        lambda m, p: m.optim.ASGD(p, weight_decay=-1),
    ],
    ids=[
        "rmsprop-lr",
        "rmsprop-alpha",
        "adagrad-decay",
        "adadelta-rho",
        "adamax-beta",
        "nadam-decay",
        "radam-eps",
        "rprop-etas",
        "asgd-decay",
    ],
)
def test_argument_errors(call):
    raises_like_torch(lambda m: call(m, [m.ones(2, requires_grad=True)]))
