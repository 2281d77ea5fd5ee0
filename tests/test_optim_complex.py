"""Complex parameters under the elementwise optimizers: torch steps a complex parameter, its gradient and its state
as pairs of reals (view_as_real), so each real and imaginary part gets its own moments, its own Rprop step size
(both parts start at lr) and so on; the state stays complex. Compared with torch over a few steps of a loss whose
gradient mixes the parts."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

START = np.array([1.0 + 2.0j, -0.5 + 0.3j, 0.2 - 1.1j])
TARGET = np.array([0.3 - 0.4j, 1.2 + 0.8j, -0.7 + 0.1j])

CASES = [
    ("Adam", {"lr": 0.1}),
    ("Adam", {"lr": 0.1, "amsgrad": True, "weight_decay": 0.1}),
    ("AdamW", {"lr": 0.1, "maximize": True}),
    ("Adamax", {"lr": 0.1, "weight_decay": 0.05}),
    ("NAdam", {"lr": 0.1}),
    ("RAdam", {"lr": 0.1}),
    ("RMSprop", {"lr": 0.05, "centered": True, "momentum": 0.5}),
    ("Adagrad", {"lr": 0.2, "initial_accumulator_value": 0.1}),
    ("Adadelta", {"lr": 1.0}),
    ("ASGD", {"lr": 0.05, "t0": 1}),
    ("Rprop", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
]


def _steps(lib, name, options, dtype):
    weight = lib.tensor(START, dtype=dtype, requires_grad=True)
    optimizer = getattr(lib.optim, name)([weight], **options)
    for _ in range(4):
        optimizer.zero_grad()
        loss = ((weight - lib.tensor(TARGET, dtype=dtype)).abs() ** 2).sum() + (weight**3).real.sum()
        loss.backward()
        optimizer.step()
    arrays = {k: v for k, v in optimizer.state[weight].items() if k != "step" and v.dim() > 0}
    return weight.detach(), arrays


@pytest.mark.parametrize("name, options", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_complex_parameter_steps_as_real_pairs(name, options):
    weight, state = _steps(bg, name, options, bg.complex128)
    expected_weight, expected_state = _steps(torch, name, options, torch.complex128)
    assert_same(weight, expected_weight, rtol=1e-12, atol=1e-14)
    assert sorted(state) == sorted(expected_state)
    for key in expected_state:
        assert_same(state[key], expected_state[key], rtol=1e-12, atol=1e-14)


def test_complex64_parameter_keeps_its_dtype():
    weight, state = _steps(bg, "Adam", {"lr": 0.1}, bg.complex64)
    expected_weight, expected_state = _steps(torch, "Adam", {"lr": 0.1}, torch.complex64)
    assert_same(weight, expected_weight, rtol=1e-5, atol=1e-6)
    assert_same(state["exp_avg_sq"], expected_state["exp_avg_sq"], rtol=1e-5, atol=1e-6)
