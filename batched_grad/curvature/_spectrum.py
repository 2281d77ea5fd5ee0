"""Spectral densities by Lanczos quadrature (Papyan, 2020; curvlinops 3's lanczos_approximate_spectrum and its log
form, the density PyHessian plots): `num_repeats` Lanczos runs without reorthogonalization, their start vectors
drawn together and advanced together, so each of the `ncv` steps is one batched product with `num_repeats`
columns; each run's tridiagonal matrix gives nodes and weights of Gaussian bumps on a grid."""

import math

import numpy as np

from ._eigen import top_eigenvalues
from ._probes import draw_probes, product, result, square_size


def fast_lanczos(A, ncv, num_repeats=1, *, generator=None):
    """`num_repeats` Lanczos runs of `ncv` steps from normalized Gaussian start vectors (Papyan's algorithm 2, no
    reorthogonalization), advanced together. Returns [(eigenvalues `(ncv,)`, eigenvectors `(ncv, ncv)`)] of each
    run's tridiagonal matrix, as float64 arrays."""
    dim = square_size(A)
    if isinstance(ncv, bool) or not isinstance(ncv, int) or not 2 <= ncv <= dim:
        raise ValueError(f"ncv must be an int in [2, {dim}], but got {ncv!r}")
    v = draw_probes(dim, num_repeats, "normal", generator=generator)
    v = v / np.linalg.norm(v, axis=0)
    alphas, betas = np.zeros((ncv, num_repeats)), np.zeros((ncv - 1, num_repeats))
    v_prev = np.zeros_like(v)
    for m in range(ncv):
        w = product(A, v)
        if m > 0:
            w = w - betas[m - 1] * v_prev
        alphas[m] = (w * v).sum(0)
        if m == ncv - 1:
            break
        w = w - alphas[m] * v
        betas[m] = np.linalg.norm(w, axis=0)
        v_prev, v = v, w / betas[m]
    runs = []
    for r in range(num_repeats):
        T = np.diag(alphas[:, r]) + np.diag(betas[:, r], 1) + np.diag(betas[:, r], -1)
        runs.append(np.linalg.eigh(T))
    return runs


def approximate_boundaries(A, tol=1e-2, boundaries=None):
    """(smallest, largest) eigenvalue of A, each found by top_eigenvalues to relative accuracy `tol` unless given in
    `boundaries` (a pair whose None entries are estimated)."""
    low, high = (None, None) if boundaries is None else boundaries
    if low is None:
        low = float(top_eigenvalues(A, 1, "SA", tol=tol)[0][0])
    if high is None:
        high = float(top_eigenvalues(A, 1, "LA", tol=tol)[0][0])
    return low, high


def approximate_boundaries_abs(A, tol=1e-2, boundaries=None):
    """(smallest, largest) eigenvalue of |A| (magnitudes), as approximate_boundaries."""
    low, high = (None, None) if boundaries is None else boundaries
    if high is None:
        high = float(top_eigenvalues(A, 1, "LM", tol=tol)[0][0])
    if low is None:
        low = float(top_eigenvalues(A, 1, "SM", tol=tol)[0][0])
    return abs(low), abs(high)


def _bumps(nodes, weights, grid, ncv, kappa):
    """sum_i weights_i N(grid; nodes_i, sigma) with sigma the bump width Papyan gives for kappa on [-1, 1]."""
    sigma = 2 / (ncv - 1) / math.sqrt(8 * math.log(kappa))
    z = (grid[None, :] - nodes[:, None]) / sigma
    return (weights[:, None] * np.exp(-0.5 * z**2) / (sigma * math.sqrt(2 * math.pi))).sum(0)


def spectrum_from_lanczos(run, boundaries, num_points, kappa, margin):
    """(grid, density) of one Lanczos run, on the spectrum's interval widened by `margin` and mapped to [-1, 1]."""
    low, high = boundaries
    padding = margin * (high - low)
    low, high = low - padding, high + padding
    center, half = (high + low) / 2, (high - low) / 2
    evals, evecs = run
    density = _bumps(
        (evals - center) / half, evecs[0, :] ** 2 / half, np.linspace(-1, 1, num_points), len(evals), kappa
    )
    return np.linspace(low, high, num_points), density


def log_spectrum_from_lanczos(run, boundaries, num_points, kappa, margin, epsilon):
    """(grid, density) of log(|A| + epsilon I) from one Lanczos run (Papyan's section C.7)."""
    low, high = (math.log(b + epsilon) for b in boundaries)
    padding = margin * (high - low)
    low, high = low - padding, high + padding
    center, half = (high + low) / 2, (high - low) / 2
    grid = np.linspace(-1, 1, num_points)
    grid_out = np.exp(grid * half + center)
    evals, evecs = run
    nodes = (np.log(np.abs(evals) + epsilon) - center) / half
    density = _bumps(nodes, evecs[0, :] ** 2, grid, len(evals), kappa) / (half * grid_out)
    return grid_out, density


def _averaged(spectra, A):
    grid = spectra[0][0]
    return result(grid, A), result(np.mean([d for _, d in spectra], axis=0), A)


def lanczos_approximate_spectrum(
    A, ncv, num_points=1024, num_repeats=1, kappa=3.0, boundaries=None, margin=0.05, boundaries_tol=1e-2
):
    """(grid, density): the spectral density (1/d) sum_i delta(t - t_i) of the symmetric A, Gaussian bumps of
    width `kappa` (> 1) on [-1, 1], averaged over `num_repeats` Lanczos runs of `ncv` steps (one batched product
    per step). `boundaries` (smallest, largest eigenvalue; None entries estimated to `boundaries_tol`)."""
    boundaries = approximate_boundaries(A, boundaries_tol, boundaries)
    runs = fast_lanczos(A, ncv, num_repeats)
    return _averaged([spectrum_from_lanczos(r, boundaries, num_points, kappa, margin) for r in runs], A)


def lanczos_approximate_log_spectrum(
    A,
    ncv,
    num_points=1024,
    num_repeats=1,
    kappa=1.04,
    boundaries=None,
    margin=0.05,
    boundaries_tol=1e-2,
    epsilon=1e-5,
):
    """(grid, density) of log(|A| + epsilon I)'s spectrum, as lanczos_approximate_spectrum; `boundaries` are |A|'s."""
    boundaries = approximate_boundaries_abs(A, boundaries_tol, boundaries)
    runs = fast_lanczos(A, ncv, num_repeats)
    return _averaged([log_spectrum_from_lanczos(r, boundaries, num_points, kappa, margin, epsilon) for r in runs], A)


class _LanczosSpectrumCached:
    """Lanczos runs kept, so that densities with other bump widths or grids cost no new products; further runs are
    made (together) only when more repeats are asked for."""

    def __init__(self, A, ncv):
        self._A, self._ncv, self._runs = A, ncv, []

    def _get_lanczos_iters(self, num_iters):
        missing = num_iters - len(self._runs)
        if missing > 0:
            self._runs += fast_lanczos(self._A, self._ncv, missing)
        return self._runs[:num_iters]


class LanczosApproximateSpectrumCached(_LanczosSpectrumCached):
    """lanczos_approximate_spectrum with its Lanczos runs and boundaries kept between calls."""

    def __init__(self, A, ncv, boundaries=None, boundaries_tol=1e-2):
        super().__init__(A, ncv)
        self._boundaries = approximate_boundaries(A, boundaries_tol, boundaries)

    def approximate_spectrum(self, num_repeats=1, num_points=1024, kappa=3.0, margin=0.05):
        """(grid, density) from the first `num_repeats` kept Lanczos runs (made now if missing)."""
        runs = self._get_lanczos_iters(num_repeats)
        return _averaged([spectrum_from_lanczos(r, self._boundaries, num_points, kappa, margin) for r in runs], self._A)


class LanczosApproximateLogSpectrumCached(_LanczosSpectrumCached):
    """lanczos_approximate_log_spectrum with its Lanczos runs and boundaries kept between calls."""

    def __init__(self, A, ncv, boundaries=None, boundaries_tol=1e-2):
        super().__init__(A, ncv)
        self._boundaries = approximate_boundaries_abs(A, boundaries_tol, boundaries)

    def approximate_log_spectrum(self, num_repeats=1, num_points=1024, kappa=3.0, margin=0.05, epsilon=1e-5):
        """(grid, density) of log(|A| + epsilon I) from the first `num_repeats` kept Lanczos runs."""
        runs = self._get_lanczos_iters(num_repeats)
        spectra = [log_spectrum_from_lanczos(r, self._boundaries, num_points, kappa, margin, epsilon) for r in runs]
        return _averaged(spectra, self._A)
