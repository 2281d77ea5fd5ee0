"""torch.optim.swa_utils against torch 2.13: a small model trained a few SGD steps both ways while AveragedModel
averages it (the running mean, EMA per tensor and over lists, a custom avg_fn, use_buffers), SWALR's schedule,
update_bn's recomputed statistics, and torch's errors."""

import numpy as np
import pytest
import torch
import torch.optim.swa_utils

import batched_grad as bg
from batched_grad.optim.swa_utils import AveragedModel as ImportedAveragedModel
from oracle import assert_same, raises_like_torch

TOL = dict(rtol=1e-5, atol=1e-6)
X = np.linspace(-1.0, 1.0, 24).reshape(6, 4)


def _model(m):
    model = m.nn.Sequential(m.nn.Linear(4, 3), m.nn.BatchNorm1d(3), m.nn.Tanh(), m.nn.Linear(3, 1))
    with m.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(m.tensor(np.linspace(-0.5, 0.5 + i / 10, p.numel()).reshape(tuple(p.shape)), dtype=m.float32))
    return model


def _averaging(m, kind, use_buffers=False):
    swa_utils = m.optim.swa_utils
    model = _model(m)
    averaging = {
        "mean": {},
        "ema": {"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(0.9)},
        "ema_per_tensor": {"avg_fn": swa_utils.get_ema_avg_fn(0.8)},
        "swa_multi": {"multi_avg_fn": swa_utils.get_swa_multi_avg_fn()},
        "custom": {"avg_fn": lambda avg, cur, n: 0.5 * avg + 0.5 * cur},
    }[kind]
    averaged = swa_utils.AveragedModel(model, use_buffers=use_buffers, **averaging)
    opt = m.optim.SGD(model.parameters(), lr=0.1)
    x = m.tensor(X, dtype=m.float32)
    for _ in range(4):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        averaged.update_parameters(model)
    averaged.eval()
    return int(averaged.n_averaged), averaged(x), [t.detach() for t in averaged.state_dict().values()]


@pytest.mark.parametrize("kind", ["mean", "ema", "ema_per_tensor", "swa_multi", "custom"])
@pytest.mark.parametrize("use_buffers", [False, True], ids=["params", "buffers"])
def test_averaged_model_matches_torch(kind, use_buffers):
    if kind == "swa_multi" and use_buffers:  # torch's list form divides num_batches_tracked (int) by an int: refused
        raises_like_torch(lambda m: _averaging(m, kind, use_buffers))
        return
    ours, theirs = _averaging(bg, kind, use_buffers), _averaging(torch, kind, use_buffers)
    assert ours[0] == theirs[0]
    assert_same(ours[1:], theirs[1:], **TOL)


def _schedule(m, strategy, anneal_epochs):
    opt = m.optim.SGD([m.nn.Parameter(m.zeros(2))], lr=0.5)
    opt.add_param_group({"params": [m.nn.Parameter(m.zeros(1))], "lr": 0.2})
    scheduler = m.optim.swa_utils.SWALR(opt, swa_lr=[0.05, 0.01], anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    lrs = [scheduler.get_last_lr()]
    for _ in range(6):
        opt.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr())
    state = scheduler.state_dict()
    return lrs, sorted(state)


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 3])
def test_swalr_schedule_matches_torch(strategy, anneal_epochs):
    ours, theirs = _schedule(bg, strategy, anneal_epochs), _schedule(torch, strategy, anneal_epochs)
    np.testing.assert_allclose(np.array(ours[0]), np.array(theirs[0]), rtol=1e-12)
    assert ours[1] == theirs[1]


def _update_bn(m):
    model = _model(m)
    model[1].momentum = 0.3
    loader = [(m.tensor(X[:3], dtype=m.float32), 0), (m.tensor(X[3:] * 2, dtype=m.float32), 1)]
    model.eval()
    m.optim.swa_utils.update_bn(loader, model)
    bn = model[1]
    return model.training, bn.momentum, int(bn.num_batches_tracked), bn.running_mean, bn.running_var


def test_update_bn_matches_torch():
    ours, theirs = _update_bn(bg), _update_bn(torch)
    assert ours[:3] == theirs[:3]
    assert_same(ours[3:], theirs[3:], **TOL)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.optim.swa_utils.get_ema_avg_fn(1.5),
        lambda m: m.optim.swa_utils.get_ema_multi_avg_fn(-0.1),
        lambda m: m.optim.swa_utils.AveragedModel(m.nn.Linear(1, 1), avg_fn=max, multi_avg_fn=max),
        lambda m: m.optim.swa_utils.SWALR(m.optim.SGD([m.nn.Parameter(m.zeros(1))], lr=1), 0.1, anneal_strategy="x"),
        lambda m: m.optim.swa_utils.SWALR(m.optim.SGD([m.nn.Parameter(m.zeros(1))], lr=1), 0.1, anneal_epochs=-1),
        lambda m: m.optim.swa_utils.SWALR(m.optim.SGD([m.nn.Parameter(m.zeros(1))], lr=1), [0.1, 0.2]),
    ],
    ids=["ema_decay", "ema_multi_decay", "both_fns", "strategy", "anneal_epochs", "swa_lr_length"],
)
def test_errors_match_torch(call):
    raises_like_torch(call)


def test_import_forms():
    assert ImportedAveragedModel is bg.optim.swa_utils.AveragedModel
