"""A Levenberg-Marquardt fit of y = a exp(-b x) + c to noisy samples: the Jacobian of the model with respect to a
dict of parameters comes from torch.func.vmap(torch.func.jacrev(model), in_dims=(None, 0)) over the sample points;
each iteration solves the damped normal equations with torch.linalg.solve and accepts or rejects the step, raising
or lowering the damping. The samples come from NumPy."""

import numpy as np

from ._harness import run_both


def levenberg_marquardt_program(torch, nn, F, optim, data, xs, ys, initial):
    from_func = torch.func
    names = list(initial)

    def model(params, x):
        return params["a"] * torch.exp(-params["b"] * x) + params["c"]

    jacobian_rows = from_func.vmap(from_func.jacrev(model), in_dims=(None, 0))
    x, y = torch.tensor(xs), torch.tensor(ys)
    params = {name: torch.tensor(value) for name, value in initial.items()}
    damping, costs, dampings = 1e-2, [], []

    def cost_of(params):
        return 0.5 * ((model(params, x) - y) ** 2).sum()

    for _iteration in range(
        6
    ):  # by then the cost has converged to its last digits, where a step's acceptance is a rounding
        residual = model(params, x) - y
        rows = jacobian_rows(params, x)
        jacobian = torch.stack([rows[name] for name in names], dim=1)
        normal = jacobian.T @ jacobian
        damped = normal + damping * torch.diag(torch.diagonal(normal))
        step = torch.linalg.solve(damped, -(jacobian.T @ residual))
        candidate = {name: params[name] + step[i] for i, name in enumerate(names)}
        if cost_of(candidate) < cost_of(params):
            params, damping = candidate, damping / 3
        else:
            damping = damping * 2
        costs.append(cost_of(params))
        dampings.append(damping)
    return {"costs": torch.stack(costs), "dampings": torch.tensor(dampings), "params": params, "jacobian": jacobian}


def test_levenberg_marquardt_curve_fit_matches_torch():
    rng = np.random.default_rng(5)
    xs = np.linspace(0, 4, 30)
    ys = 2.5 * np.exp(-1.3 * xs) + 0.4 + 0.02 * rng.normal(size=xs.shape)
    initial = {"a": np.float64(1.0), "b": np.float64(0.5), "c": np.float64(0.0)}
    expected, _ = run_both(levenberg_marquardt_program, xs, ys, initial)
    np.testing.assert_allclose(float(expected["params"]["b"]), 1.3, atol=0.1)
