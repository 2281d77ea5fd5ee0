"""curvlinops' documented examples (its basic-usage tutorials: matrix-vector products with the Hessian and GGN,
eigenvalues through SciPy, inverses by CG, trace and diagonal estimation, spectral densities), written again as
programs of `(torch, curvature)` and run twice: with torch and curvlinops, and with batched_grad and
batched_grad.curvature in their place. Weights and data come from NumPy; where an example draws random probes, the
program compares the estimate with the exact value instead, so that each run is checked against its own truth."""

import importlib

import numpy as np
import pytest
import torch as real_torch

import batched_grad

from ._harness import FLOAT64, assert_trees_close, load_state, mlp_state

curvlinops = pytest.importorskip("curvlinops")
pytest.importorskip("scipy")

SIZES = (5, 6, 3)


def run_both(program, *inputs):
    from batched_grad import curvature

    expected = program(real_torch, curvlinops, *inputs)
    actual = program(batched_grad, curvature, *inputs)
    assert_trees_close(actual, expected, program.__name__, FLOAT64)


def setup(torch, state, inputs, targets, loss_name):
    model = torch.nn.Sequential(torch.nn.Linear(SIZES[0], SIZES[1]), torch.nn.Tanh(), torch.nn.Linear(*SIZES[1:]))
    load_state(torch, model.double(), state)
    loss = getattr(torch.nn, loss_name)(reduction="sum")
    data = [(torch.tensor(x), torch.tensor(y)) for x, y in zip(np.split(inputs, 3), np.split(targets, 3))]
    return model, loss, [p for p in model.parameters() if p.requires_grad], data


def dense(torch, operator):
    """The operator's matrix, one product with the identity (as the tutorials build their ground truth)."""
    return operator @ torch.eye(operator.shape[1], dtype=torch.float64)


def matrix_products_program(torch, curvature, state, inputs, targets, vector):
    """The tutorial on matrix-vector products: the Hessian and the GGN of an MSE regression, multiplied with a
    vector, a matrix and a vector in parameter-list format; the GGN of a sum of squares equals 2 J^T J; the top
    eigenvalues through SciPy's eigsh on the exported operator."""
    from scipy.sparse.linalg import eigsh

    model, loss, params, data = setup(torch, state, inputs, targets, "MSELoss")
    H = curvature.HessianLinearOperator(model, loss, params, data)
    G = curvature.GGNLinearOperator(model, loss, params, data)
    J = curvature.JacobianLinearOperator(model, params, data)
    v = torch.tensor(vector)
    V = torch.stack([v, 2 * v, v * v], dim=1)
    as_list = [x.clone() for x in torch.split(v, [p.numel() for p in params])]
    as_list = [x.reshape(p.shape) for x, p in zip(as_list, params)]
    H_dense, G_dense, J_dense = dense(torch, H), dense(torch, G), dense(torch, J)
    top = eigsh(H.to_scipy(), k=3, which="LA", tol=1e-12, return_eigenvectors=False)
    return {
        "Hv": H @ v,
        "HV": H @ V,
        "Hv as list": H @ as_list,
        "symmetric": bool(torch.allclose(H_dense, H_dense.T)),
        "GGN = 2 J^T J": bool(torch.allclose(G_dense, 2 * J_dense.T @ J_dense)),
        "GV": G @ V,
        "top eigenvalues": torch.tensor(np.sort(top)),
    }


def inverse_and_estimators_program(torch, curvature, state, inputs, targets, rhs):
    """The tutorials on inverses and on trace and diagonal estimation: the damped GGN's inverse by CG against a dense
    solve, and Hutchinson, Hutch++ and XTrace estimates against the exact trace and diagonal (each library's own
    probes: the program reports the errors, small for many probes)."""
    model, loss, params, data = setup(torch, state, inputs, targets, "CrossEntropyLoss")
    G = curvature.GGNLinearOperator(model, loss, params, data)
    P = G.shape[0]
    damped = dense(torch, G) + 0.1 * torch.eye(P, dtype=torch.float64)
    G_inverse = curvature.CGInverseLinearOperator(_damped(curvature, G, 0.1), tolerance=1e-10, eps=1e-30)
    b = torch.tensor(rhs)
    exact_trace = torch.trace(damped) - 0.1 * P
    diagonal = torch.diagonal(damped) - 0.1
    relative = lambda estimate: float(abs(estimate - exact_trace) / abs(exact_trace))  # noqa: E731
    diagonal_error = float((curvature.hutchinson_diag(G, P - 1) - diagonal).norm() / diagonal.norm())
    return {
        "CG solve": G_inverse @ b,
        "CG matches the dense solve": bool(torch.allclose(G_inverse @ b, torch.linalg.solve(damped, b), rtol=1e-6)),
        "exact trace": exact_trace,
        "Hutchinson within 50%": relative(curvature.hutchinson_trace(G, P - 1)) < 0.5,
        "Hutch++ within 20%": relative(curvature.hutchpp_trace(G, 3 * ((P - 1) // 3))) < 0.2,
        "XTrace within 5%": relative(curvature.xtrace(G, 2 * ((P - 1) // 2))) < 0.05,
        "diagonal within 100%": diagonal_error < 1.0,
    }


def _damped(curvature, G, damping):
    """G + damping * I, with the libraries' operator algebra and an identity operator of each library's base class."""
    if curvature is curvlinops:
        base = importlib.import_module("curvlinops._torch_base").PyTorchLinearOperator
    else:
        base = curvature.LinearOperator

    class Identity(base):
        SELF_ADJOINT = True
        dtype, device = G.dtype, G.device

        def _matmat(self, M):
            return list(M)

    return G + damping * Identity(G._in_shape, G._out_shape)


def spectral_density_program(torch, curvature, state, inputs, targets):
    """The tutorial on spectral densities: Lanczos densities of the Hessian on a grid between the extreme
    eigenvalues (found by eigsh), with the cached variant for other bump widths. The grid is exact; the density
    (random start vectors) is checked to integrate to about 1 and to put its mass inside the spectrum."""
    from scipy.sparse.linalg import eigsh

    model, loss, params, data = setup(torch, state, inputs, targets, "CrossEntropyLoss")
    H = curvature.HessianLinearOperator(model, loss, params, data)
    low, high = (float(x) for x in np.sort(eigsh(H.to_scipy(), k=2, which="BE", tol=1e-12)[0]))
    grid, density = curvature.lanczos_approximate_spectrum(H, 20, num_points=400, num_repeats=2, boundaries=(low, high))
    cached = curvature.LanczosApproximateSpectrumCached(H, 20, boundaries=(low, high))
    _, wide = cached.approximate_spectrum(num_repeats=2, num_points=400, kappa=10.0)
    spacing = float(grid[1] - grid[0])
    inside = (grid >= low) & (grid <= high)
    return {
        "grid": grid,
        "integral about 1": abs(float(density.sum()) * spacing - 1) < 0.05,
        "mass inside the spectrum": float(density[inside].sum() / density.sum()) > 0.9,
        "wider bumps integrate too": abs(float(wide.sum()) * spacing - 1) < 0.05,
    }


@pytest.fixture
def problem():
    rng = np.random.default_rng(21)
    state = mlp_state(rng, SIZES)
    inputs = rng.standard_normal((12, SIZES[0]))
    P = sum(a.size for a in state.values())
    return rng, state, inputs, P


def test_matrix_vector_products_and_eigenvalues(problem):
    rng, state, inputs, P = problem
    run_both(matrix_products_program, state, inputs, rng.standard_normal((12, SIZES[2])), rng.standard_normal(P))


def test_inverse_and_estimators(problem):
    rng, state, inputs, P = problem
    run_both(inverse_and_estimators_program, state, inputs, rng.integers(0, SIZES[2], 12), rng.standard_normal(P))


def test_spectral_density(problem):
    rng, state, inputs, _ = problem
    run_both(spectral_density_program, state, inputs, rng.integers(0, SIZES[2], 12))
