"""LBFGS against torch.optim.LBFGS: several steps with a fixed step and with the strong-Wolfe line search (short
histories, evaluation limits, tolerances, float64 to round-off, float32 closely, complex parameters), the losses the
steps return, the closure evaluations, the state torch keeps, and argument errors."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def _least_squares(m, dtype):
    """A small nonlinear least-squares fit of two parameters (w, b): the parameters and the loss of them."""
    rng = np.random.default_rng(0)
    w = m.tensor(rng.standard_normal((3, 4)), dtype=dtype, requires_grad=True)
    b = m.tensor(rng.standard_normal(3), dtype=dtype, requires_grad=True)
    x = m.tensor(rng.standard_normal((6, 4)), dtype=dtype)
    y = m.tensor(rng.standard_normal((6, 3)), dtype=dtype)
    return [w, b], lambda w, b: ((m.tanh(x @ w.T + b) - y) ** 2).sum() + 0.1 * (w**2).sum()


def _linear_least_squares(m, dtype):
    """A convex quadratic fit, where float32 trajectories stay close."""
    rng = np.random.default_rng(1)
    w = m.tensor(rng.standard_normal((3, 4)), dtype=dtype, requires_grad=True)
    x = m.tensor(rng.standard_normal((8, 4)), dtype=dtype)
    y = m.tensor(rng.standard_normal((8, 3)), dtype=dtype)
    return [w], lambda w: ((x @ w.T - y) ** 2).sum()


def _rosenbrock(m, dtype):
    xy = m.tensor([-1.5, 2.0], dtype=dtype, requires_grad=True)
    return [xy], lambda xy: (1 - xy[0]) ** 2 + 100 * (xy[1] - xy[0] ** 2) ** 2


def _closure(opt, loss_fn, params, calls):
    def closure():
        opt.zero_grad()
        loss = loss_fn(*params)
        loss.backward()
        calls.append(float(loss.detach()))
        return loss

    return closure


def _run(m, problem, options, dtype, steps):
    """`steps` LBFGS steps: the parameters, the optimizer, the losses the steps returned, the closure's losses."""
    params, loss_fn = problem(m, dtype)
    opt = m.optim.LBFGS(params, **options)
    calls = []
    closure = _closure(opt, loss_fn, params, calls)
    returned = [opt.step(closure).item() for _ in range(steps)]
    return params, opt, returned, calls


CASES = {
    "fixed-step": (_least_squares, {}, 3),
    "fixed-step-lr": (_least_squares, {"lr": 0.5, "max_iter": 7}, 4),
    "short-history": (_rosenbrock, {"history_size": 2, "max_iter": 15}, 3),
    "strong-wolfe": (_rosenbrock, {"line_search_fn": "strong_wolfe"}, 3),
    "strong-wolfe-least-squares": (_least_squares, {"line_search_fn": "strong_wolfe", "history_size": 3}, 3),
    "strong-wolfe-max-eval": (_rosenbrock, {"line_search_fn": "strong_wolfe", "max_iter": 10, "max_eval": 12}, 4),
    "tolerances": (_least_squares, {"tolerance_grad": 1e-3, "tolerance_change": 1e-4, "max_iter": 50}, 3),
}


@pytest.mark.parametrize("name", CASES)
def test_steps_match_torch(name):
    problem, options, steps = CASES[name]
    params, opt, returned, calls = _run(bg, problem, options, bg.float64, steps)
    t_params, t_opt, t_returned, t_calls = _run(torch, problem, options, torch.float64, steps)
    assert len(calls) == len(t_calls)  # the same iterations, searches and stops
    np.testing.assert_allclose(calls[:12], t_calls[:12], rtol=1e-10)
    # later, round-off differences grow along the nonlinear trajectories: those of the reductions, and those of the
    # closure's forward and backward compiled as one program (XLA fuses a multiply and an add where torch rounds
    # twice); Rosenbrock's narrow valley, with two curvature pairs, amplifies them to about 1e-6 by the 45th call
    np.testing.assert_allclose(calls, t_calls, rtol=3e-6)
    np.testing.assert_allclose(returned, t_returned, rtol=1e-6)
    assert_same([p.detach() for p in params], [p.detach() for p in t_params], rtol=1e-5, atol=1e-7)
    state, t_state = opt.state[params[0]], t_opt.state[t_params[0]]
    assert sorted(state) == sorted(t_state)
    for key in ("func_evals", "n_iter"):
        assert state[key] == t_state[key]
    for key in ("d", "prev_flat_grad"):
        assert_same(state[key], t_state[key], rtol=1e-4, atol=1e-6)
    # a searched step is the minimum of a cubic through nearly flat losses: sensitive to their last digits
    np.testing.assert_allclose(float(state["t"]), float(t_state["t"]), rtol=1e-2)
    np.testing.assert_allclose(float(state["H_diag"]), float(t_state["H_diag"]), rtol=1e-3)
    assert len(state["old_dirs"]) == len(t_state["old_dirs"]) <= options.get("history_size", 100)
    assert_same(state["old_stps"], t_state["old_stps"], rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_float32_matches_torch_closely(line_search_fn):
    options = {"line_search_fn": line_search_fn, "max_iter": 8}
    params, _, returned, _ = _run(bg, _linear_least_squares, options, bg.float32, 2)
    t_params, _, t_returned, _ = _run(torch, _linear_least_squares, options, torch.float32, 2)
    np.testing.assert_allclose(returned, t_returned, rtol=1e-4)
    assert_same([p.detach() for p in params], [p.detach() for p in t_params], rtol=1e-3, atol=1e-4)


def _complex_fit(m, dtype):
    z = m.tensor([0.5 + 1.0j, -1.0 + 0.25j], requires_grad=True)
    target = m.tensor([1.0 - 2.0j, 0.5 + 0.5j])
    return [z], lambda z: ((z - target).abs() ** 2).sum() + (z * z).real.sum() * 0.1


def test_complex_parameters_match_torch():
    params, _, returned, _ = _run(bg, _complex_fit, {"max_iter": 5}, None, 2)
    t_params, _, t_returned, _ = _run(torch, _complex_fit, {"max_iter": 5}, None, 2)
    np.testing.assert_allclose(returned, t_returned, rtol=1e-5)
    assert_same(params[0].detach(), t_params[0].detach(), rtol=1e-5, atol=1e-6)


def test_converged_parameters_stop_after_one_evaluation():
    for m in (bg, torch):
        params, loss_fn = _rosenbrock(m, m.float64)
        with m.no_grad():
            params[0].fill_(1.0)  # the minimum
        opt, calls = m.optim.LBFGS(params), []
        assert opt.step(_closure(opt, loss_fn, params, calls)).item() == 0.0
        assert dict(opt.state[params[0]]) == {"func_evals": 1, "n_iter": 0} and calls == [0.0]


def test_rosenbrock_is_solved():
    params, _, _, _ = _run(bg, _rosenbrock, {"line_search_fn": "strong_wolfe", "max_iter": 100}, bg.float64, 2)
    np.testing.assert_allclose(params[0].detach().numpy(), [1.0, 1.0], atol=1e-5)


def test_state_dict_round_trip_continues_as_torch():
    """A new optimizer loading the state dict continues the history where the first left it."""
    results = []
    for m in (bg, torch):
        params, opt, _, _ = _run(m, _least_squares, {"max_iter": 4}, m.float64, 1)
        fresh = m.optim.LBFGS(params, max_iter=4)
        fresh.load_state_dict(opt.state_dict())
        fresh.step(_closure(fresh, _least_squares(m, m.float64)[1], params, []))
        results.append((params, fresh.state[params[0]]))
    (params, state), (t_params, t_state) = results
    assert_same([p.detach() for p in params], [p.detach() for p in t_params], rtol=1e-8, atol=1e-10)
    assert state["n_iter"] == t_state["n_iter"] == 8 and state["func_evals"] == t_state["func_evals"]


def test_argument_errors_match_torch():
    raises_like_torch(lambda m: m.optim.LBFGS([m.zeros(2, requires_grad=True)], lr=-1.0))
    raises_like_torch(
        lambda m: m.optim.LBFGS(
            [{"params": [m.zeros(2, requires_grad=True)]}, {"params": [m.zeros(2, requires_grad=True)]}]
        )
    )
    raises_like_torch(lambda m: m.optim.LBFGS([m.zeros(2, requires_grad=True)], lr=m.tensor([1.0, 2.0])))

    def unknown_search(m):
        params, loss_fn = _rosenbrock(m, m.float64)
        opt = m.optim.LBFGS(params, line_search_fn="backtracking")
        opt.step(_closure(opt, loss_fn, params, []))

    raises_like_torch(unknown_search)
    assert repr(bg.optim.LBFGS([bg.zeros(2, requires_grad=True)])) == repr(
        torch.optim.LBFGS([torch.zeros(2, requires_grad=True)])
    )
