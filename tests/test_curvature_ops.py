"""batched_grad.curvature's operators and estimators against curvlinops 3 (on torch) as the oracle: the same model,
data, probes and start vectors in float64 must give the same numbers (rtol 1e-8). curvlinops draws its probes from
torch's generator; the tests hand it ours, by replacing its sampling functions for the call."""

import importlib

import numpy as np
import pytest

import batched_grad as bg
from batched_grad import curvature
from batched_grad.curvature import _operators as operators

torch = pytest.importorskip("torch")
curvlinops = pytest.importorskip("curvlinops")

RTOL, ATOL = 1e-8, 1e-12
SIZES = (6, 5, 3)
BATCHES = (8, 8)  # one batch shape: one compiled program per product (test_unequal_batches has two)


def close(actual, expected, rtol=RTOL, atol=ATOL):
    a = np.asarray(actual.numpy() if hasattr(actual, "numpy") else actual)
    e = np.asarray(expected.detach().numpy() if hasattr(expected, "detach") else expected)
    assert a.shape == e.shape, (a.shape, e.shape)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol * max(1.0, np.abs(e).max()))


def mlp(lib, rng):
    model = lib.nn.Sequential(lib.nn.Linear(SIZES[0], SIZES[1]), lib.nn.Tanh(), lib.nn.Linear(SIZES[1], SIZES[2]))
    model = model.double()
    state = {
        k: lib.tensor(rng.uniform(-0.8, 0.8, tuple(v.shape))) for k, v in model.state_dict().items()
    }  # fmt: skip
    model.load_state_dict(state)
    return model


class Problem:
    """One model and data set in both libraries, with an operator of either for a given loss."""

    def __init__(self, loss_name, seed=0, batches=BATCHES):
        rng = np.random.default_rng(seed)
        self.models = {"bg": mlp(bg, np.random.default_rng(seed)), "torch": mlp(torch, np.random.default_rng(seed))}
        X = [rng.standard_normal((n, SIZES[0])) for n in batches]
        if loss_name == "CrossEntropyLoss":
            Y = [rng.integers(0, SIZES[2], n) for n in batches]
        elif loss_name == "BCEWithLogitsLoss":
            Y = [rng.integers(0, 2, (n, SIZES[2])).astype(np.float64) for n in batches]
        else:
            Y = [rng.standard_normal((n, SIZES[2])) for n in batches]
        self.data = {
            lib: [(m.tensor(x), m.tensor(y)) for x, y in zip(X, Y)] for lib, m in (("bg", bg), ("torch", torch))
        }
        self.loss_name = loss_name
        self.losses = {"bg": getattr(bg.nn, loss_name)(), "torch": getattr(torch.nn, loss_name)()}
        self.P = sum(p.numel() for p in self.models["torch"].parameters())

    def params(self, lib):
        return list(self.models[lib].parameters())

    def ours(self, name, **kw):
        return getattr(curvature, name)(self.models["bg"], self.losses["bg"], self.params("bg"), self.data["bg"], **kw)

    def theirs(self, name, **kw):
        lib = "torch"
        return getattr(curvlinops, name)(self.models[lib], self.losses[lib], self.params(lib), self.data[lib], **kw)


@pytest.fixture(scope="module")
def ce():
    return Problem("CrossEntropyLoss")


@pytest.fixture(scope="module")
def hessians(ce):
    return ce.ours("HessianLinearOperator"), ce.theirs("HessianLinearOperator")


def columns(rng, n, k):
    return rng.standard_normal((n, k))


@pytest.mark.parametrize("name", ["HessianLinearOperator", "GGNLinearOperator", "EFLinearOperator"])
def test_matrix_products_match_curvlinops(ce, name):
    A, B = ce.ours(name, check_deterministic=False), ce.theirs(name, check_deterministic=False)
    V = columns(np.random.default_rng(1), ce.P, 4)
    close(A @ bg.tensor(V), B @ torch.tensor(V))
    close(A @ bg.tensor(V[:, 0]), B @ torch.tensor(V[:, 0]))
    assert A.shape == B.shape and A.adjoint() is A and A.T is A


@pytest.mark.slow
@pytest.mark.parametrize("loss_name", ["MSELoss", "BCEWithLogitsLoss"])
def test_other_losses_and_sum_reduction(loss_name):
    problem = Problem(loss_name, seed=3)
    for lib in ("bg", "torch"):
        problem.losses[lib].reduction = "sum"
    V = columns(np.random.default_rng(2), problem.P, 3)
    for name in ("GGNLinearOperator", "EFLinearOperator"):
        A, B = problem.ours(name, check_deterministic=False), problem.theirs(name, check_deterministic=False)
        close(A @ bg.tensor(V), B @ torch.tensor(V))


def test_check_deterministic_and_gradient_and_loss(ce):
    A, B = ce.ours("HessianLinearOperator"), ce.theirs("HessianLinearOperator")  # both run their checks
    (grad_a, loss_a), (grad_b, loss_b) = A.gradient_and_loss(), B.gradient_and_loss()
    close(loss_a, loss_b)
    for a, b in zip(grad_a, grad_b):
        close(a, b)


def test_columns_in_chunks_under_a_small_memory_budget(hessians, ce):
    import vmap

    A, B = hessians
    V = columns(np.random.default_rng(15), ce.P, 5)
    vmap.set_memory_budget(1)  # nothing fits: one column at a time
    try:
        close(A @ bg.tensor(V), B @ torch.tensor(V))
    finally:
        vmap.set_memory_budget(None)


def test_an_alternative_order_that_fails_is_not_taken(ce, monkeypatch):
    """Many-column Hessian products time the reverse order against forward-over-reverse at their second call; an
    order that cannot be compiled or run leaves the product on the other one."""
    plain = operators._hessian_columns

    def reverse_fails(model, state, data, M, blocks, order):
        if order == "reverse":
            raise RuntimeError("this order cannot run")
        return plain(model, state, data, M, blocks, order)

    monkeypatch.setattr(operators, "_hessian_columns", reverse_fails)
    A, B = ce.ours("HessianLinearOperator", check_deterministic=False), ce.theirs("HessianLinearOperator")
    V = columns(np.random.default_rng(4), ce.P, 8)
    for _ in range(3):  # the second call times the orders
        close(A @ bg.tensor(V), B @ torch.tensor(V))


def test_list_format(hessians, ce):
    A, B = hessians
    rng = np.random.default_rng(4)
    shapes = [tuple(p.shape) for p in ce.params("torch")]
    vector = [rng.standard_normal(s) for s in shapes]
    matrix = [rng.standard_normal(s + (2,)) for s in shapes]
    for X in (vector, matrix):
        ours, theirs = A @ [bg.tensor(x) for x in X], B @ [torch.tensor(x) for x in X]
        assert isinstance(ours, list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            close(a, b)


def test_block_diagonal_hessian(ce):
    A = ce.ours("HessianLinearOperator", block_sizes=[2, 2], check_deterministic=False)
    B = ce.theirs("HessianLinearOperator", block_sizes=[2, 2], check_deterministic=False)
    V = columns(np.random.default_rng(5), ce.P, 3)
    close(A @ bg.tensor(V), B @ torch.tensor(V))
    assert A.block_sizes == [2, 2]


def test_jacobians_and_their_adjoints(ce):
    J = curvature.JacobianLinearOperator(ce.models["bg"], ce.params("bg"), ce.data["bg"])
    K = curvlinops.JacobianLinearOperator(ce.models["torch"], ce.params("torch"), ce.data["torch"])
    rng = np.random.default_rng(6)
    V, W = columns(rng, ce.P, 3), columns(rng, J.shape[0], 2)
    assert J.shape == K.shape == (sum(BATCHES) * SIZES[2], ce.P)
    close(J @ bg.tensor(V), K @ torch.tensor(V))
    close(J.T @ bg.tensor(W), K.adjoint() @ torch.tensor(W))
    transposed = curvature.TransposedJacobianLinearOperator(ce.models["bg"], ce.params("bg"), ce.data["bg"])
    close(transposed @ bg.tensor(W), J.adjoint() @ bg.tensor(W))
    close(transposed.T @ bg.tensor(V), J @ bg.tensor(V))


@pytest.mark.slow
def test_ggn_is_jacobian_transpose_times_loss_hessian_times_jacobian(ce):
    """For cross-entropy the GGN is J^T H J with H the loss's Hessian in the outputs: check against dense forms."""
    G = ce.ours("GGNLinearOperator", check_deterministic=False)
    J = curvature.JacobianLinearOperator(ce.models["bg"], ce.params("bg"), ce.data["bg"], check_deterministic=False)
    eye = bg.eye(ce.P, dtype=bg.float64)
    dense_J = np.asarray((J @ eye).numpy())
    outputs = np.asarray(ce.models["bg"](bg.cat([x for x, _ in ce.data["bg"]])).detach().numpy())
    p = np.exp(outputs - outputs.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    blocks = [np.diag(q) - np.outer(q, q) for q in p]
    H = np.zeros((dense_J.shape[0],) * 2)
    for n, block in enumerate(blocks):
        H[n * SIZES[2] : (n + 1) * SIZES[2], n * SIZES[2] : (n + 1) * SIZES[2]] = block / sum(BATCHES)
    close(G @ eye, dense_J.T @ H @ dense_J)


@pytest.mark.parametrize(
    "loss_name",
    [
        "CrossEntropyLoss",
        pytest.param("MSELoss", marks=pytest.mark.slow),
        pytest.param("BCEWithLogitsLoss", marks=pytest.mark.slow),
    ],
)
def test_mc_fisher_with_the_same_samples(loss_name, monkeypatch):
    problem = Problem(loss_name, seed=8)
    A = problem.ours("FisherMCLinearOperator", mc_samples=3, seed=11, check_deterministic=False)
    # the would-be gradients our operator samples for each batch, computed by its own rule from the same noise
    generator = bg.Generator().manual_seed(11)
    samples = []
    for X, y in problem.data["bg"]:
        flat = operators._flatten(A._functional(A._functional.state(), A._params, X).detach(), A._loss_func)
        noise = A._draw_noise(generator, tuple(flat.shape), y)
        samples.append(torch.tensor(np.array(operators.sample_output_gradients(A._loss_func, flat, noise).numpy())))
    calls = iter(samples * 10)
    monkeypatch.setattr(
        importlib.import_module("curvlinops.fisher"),
        "make_grad_output_sampler",
        lambda loss_func: lambda output, num_samples, y, generator: next(calls),
    )
    B = problem.theirs("FisherMCLinearOperator", mc_samples=3, seed=11, check_deterministic=False)
    V = columns(np.random.default_rng(9), problem.P, 2)
    close(A @ bg.tensor(V), B @ torch.tensor(V))
    close(A @ bg.tensor(V), A @ bg.tensor(V))  # reseeded at every product: one fixed matrix


def test_cg_inverse(hessians, ce):
    A = ce.ours("GGNLinearOperator", check_deterministic=False) + 0.5 * _Identity(hessians[0])
    B = ce.theirs("GGNLinearOperator", check_deterministic=False)
    rhs = columns(np.random.default_rng(10), ce.P, 3)
    options = {"tolerance": 1e-10, "eps": 1e-30, "max_iter": 60}
    solution = curvature.CGInverseLinearOperator(A, **options) @ bg.tensor(rhs)
    theirs = curvlinops.CGInverseLinearOperator(B + _torch_identity(B, 0.5), **options) @ torch.tensor(rhs)
    close(solution, theirs, rtol=1e-7)
    dense = np.asarray((A @ bg.eye(ce.P, dtype=bg.float64)).numpy())
    close(solution, np.linalg.solve(dense, rhs), rtol=1e-7)


class _Identity(curvature.LinearOperator):
    SELF_ADJOINT = True

    def __init__(self, A):
        super().__init__(A._in_shape, A._out_shape)
        self._dtype = A.dtype

    dtype = property(lambda self: self._dtype)
    device = property(lambda self: None)

    def _matmat(self, M):
        return list(M)


def _torch_identity(B, scale):
    from curvlinops._torch_base import PyTorchLinearOperator

    class Identity(PyTorchLinearOperator):
        SELF_ADJOINT = True
        dtype, device = B.dtype, B.device

        def _matmat(self, X):
            return [scale * x for x in X]

    return Identity(B._in_shape, B._out_shape)


@pytest.mark.slow
def test_unequal_batches_are_weighted_by_their_share():
    problem = Problem("CrossEntropyLoss", seed=4, batches=(7, 5))
    V = columns(np.random.default_rng(3), problem.P, 2)
    for name in ("HessianLinearOperator", "EFLinearOperator"):
        A, B = problem.ours(name, check_deterministic=False), problem.theirs(name, check_deterministic=False)
        close(A @ bg.tensor(V), B @ torch.tensor(V))


# -- estimators: the same probes (ours, drawn by draw_probes) handed to curvlinops ---------------------------------


def feed_probes(monkeypatch, module, probes):
    """Make curvlinops' `module` draw the columns of `probes`, in order."""
    queue = iter(list(probes.T))
    monkeypatch.setattr(
        importlib.import_module(module),
        "random_vector",
        lambda dim, distribution, device, dtype: torch.tensor(next(queue)),
    )


ESTIMATORS = {  # name: (curvlinops module, num_matvecs, probes drawn, extra arguments)
    "hutchinson_trace": ("curvlinops.trace.hutchinson", 12, 12, ("normal",)),
    "hutchinson_diag": ("curvlinops.diagonal.hutchinson", 12, 12, ("rademacher",)),
    "hutchpp_trace": ("curvlinops.trace.meyer2020hutch", 12, 8, ("rademacher",)),
    "xtrace": ("curvlinops.trace.epperly2024xtrace", 12, 6, ("normal",)),
    "xdiag": ("curvlinops.diagonal.epperly2024xtrace", 12, 6, ()),
}


@pytest.fixture(scope="module")
def symmetric_matrix():
    rng = np.random.default_rng(12)
    M = rng.standard_normal((40, 40))
    return M + M.T + 10 * np.diag(rng.uniform(size=40))


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_estimators_with_the_same_probes(name, symmetric_matrix, monkeypatch):
    module, num_matvecs, drawn, extra = ESTIMATORS[name]
    distribution = extra[0] if extra else "rademacher"
    feed_probes(
        monkeypatch, module, curvature.draw_probes(40, drawn, distribution, generator=bg.Generator().manual_seed(3))
    )
    theirs = getattr(curvlinops, name)(torch.tensor(symmetric_matrix), num_matvecs, *extra)
    ours = getattr(curvature, name)(
        bg.tensor(symmetric_matrix), num_matvecs, *extra, generator=bg.Generator().manual_seed(3)
    )
    close(ours, theirs)


def test_estimators_on_an_operator_draw_one_batch(hessians, monkeypatch):
    """Hutchinson's trace and diagonal of the Hessian operator: one batched product for all probes."""
    A, B = hessians
    for name in ("hutchinson_trace", "hutchinson_diag"):
        module = ESTIMATORS[name][0]
        feed_probes(monkeypatch, module, curvature.draw_probes(A.shape[0], 3, generator=bg.Generator().manual_seed(5)))
        close(getattr(curvature, name)(A, 3, generator=bg.Generator().manual_seed(5)), getattr(curvlinops, name)(B, 3))
    products = []
    monkeypatch.setattr(A, "_matmat_rows", lambda R, inner=A._matmat_rows: products.append(R.shape[0]) or inner(R))
    curvature.hutchinson_trace(A, 3)
    assert products == [3]


def test_estimator_arguments(symmetric_matrix):
    A = bg.tensor(symmetric_matrix)
    with pytest.raises(ValueError, match="must be less than"):
        curvature.hutchinson_trace(A, 40)
    with pytest.raises(ValueError, match="divisible by 3"):
        curvature.hutchpp_trace(A, 10)
    with pytest.raises(ValueError, match="distribution must be one of"):
        curvature.hutchinson_diag(A, 4, "uniform")
    with pytest.raises(ValueError, match="must be square"):
        curvature.hutchinson_trace(bg.zeros(3, 4), 2)


# -- spectra and eigenvalues ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("log", [False, True])
def test_lanczos_spectrum_with_the_same_start_vectors(log, symmetric_matrix, monkeypatch):
    spectrum_module = importlib.import_module("curvlinops.papyan2020traces.spectrum")
    starts = iter(list(curvature.draw_probes(40, 3, "normal", generator=bg.Generator().manual_seed(8)).T))
    monkeypatch.setattr(spectrum_module, "randn", lambda dim, device=None, dtype=None: torch.tensor(next(starts)))
    monkeypatch.setattr(
        importlib.import_module("batched_grad.curvature._spectrum"),
        "draw_probes",
        lambda dim, num, distribution, generator=None: curvature.draw_probes(
            dim, num, distribution, generator=bg.Generator().manual_seed(8)
        ),
    )
    eigenvalues = np.linalg.eigvalsh(symmetric_matrix)
    if log:
        bounds = (np.abs(eigenvalues).min(), np.abs(eigenvalues).max())
        fn, ours_fn = curvlinops.lanczos_approximate_log_spectrum, curvature.lanczos_approximate_log_spectrum
    else:
        bounds = (eigenvalues[0], eigenvalues[-1])
        fn, ours_fn = curvlinops.lanczos_approximate_spectrum, curvature.lanczos_approximate_spectrum
    kw = dict(num_points=64, num_repeats=3, boundaries=bounds)
    theirs = fn(_MatrixOperator(torch.tensor(symmetric_matrix)), 12, **kw)
    ours = ours_fn(bg.tensor(symmetric_matrix), 12, **kw)
    close(ours[0], theirs[0])
    close(ours[1], theirs[1])


class _MatrixOperator:
    """A dense matrix as curvlinops' spectrum functions expect an operator (device, dtype, shape, @)."""

    def __init__(self, matrix):
        self.matrix, self.shape, self.device, self.dtype = matrix, tuple(matrix.shape), matrix.device, matrix.dtype

    def __matmul__(self, v):
        return self.matrix @ v

    def to_scipy(self):
        from scipy.sparse.linalg import aslinearoperator

        return aslinearoperator(self.matrix.numpy())


@pytest.mark.parametrize("which", ["LA", "SA", "LM", "BE"])
def test_top_eigenvalues_match_a_dense_solve(which, symmetric_matrix):
    exact = np.linalg.eigvalsh(symmetric_matrix)
    order = {"LA": exact[::-1], "SA": exact, "LM": exact[np.argsort(-np.abs(exact))]}
    expected = order.get(which, np.array([exact[-1], exact[0], exact[-2]]))[:3]
    for seed in range(8):  # restarts and a basis that fills the whole space, from several start blocks
        generator = bg.Generator().manual_seed(seed)
        values, vectors = curvature.top_eigenvalues(
            bg.tensor(symmetric_matrix), 3, which, tol=1e-10, generator=generator
        )
        close(values, expected, rtol=1e-9)
        V = np.asarray(vectors.numpy())
        close(symmetric_matrix @ V, V * np.asarray(values.numpy()), rtol=1e-7, atol=1e-8)


def test_top_eigenvalues_of_the_hessian_and_scipy_export(hessians, ce):
    A, _ = hessians
    dense = np.asarray((A @ bg.eye(ce.P, dtype=bg.float64)).numpy())
    values, _ = curvature.top_eigenvalues(A, 2, tol=1e-9)
    close(values, np.linalg.eigvalsh(dense)[::-1][:2], rtol=1e-8)
    scipy_linalg = pytest.importorskip("scipy.sparse.linalg")
    operator = A.to_scipy()
    x = np.random.default_rng(13).standard_normal(ce.P)
    close(operator @ x, dense @ x)
    close(operator.rmatvec(x), dense.T @ x)
    close(np.sort(scipy_linalg.eigsh(operator, k=2, which="LA", tol=1e-10)[0]), np.sort(np.linalg.eigvalsh(dense))[-2:])


# -- algebra and arguments ------------------------------------------------------------------------------------------


def test_operator_algebra(hessians, ce):
    A, _ = hessians
    G = ce.ours("GGNLinearOperator", check_deterministic=False)
    V = columns(np.random.default_rng(14), ce.P, 3)
    AV, GV = (np.asarray((op @ bg.tensor(V)).numpy()) for op in (A, G))
    close((A + G) @ bg.tensor(V), AV + GV)
    close((A - 2.0 * G) @ bg.tensor(V), AV - 2 * GV)
    close((A @ G) @ bg.tensor(V), np.asarray((A @ bg.tensor(GV)).numpy()))
    close((-A).T @ bg.tensor(V), -AV)


def test_argument_errors(ce, hessians):
    A, _ = hessians
    with pytest.raises(ValueError, match=r"must have shape \(\d+,\) or \(\d+, K\)"):
        A @ bg.zeros(3)
    with pytest.raises(ValueError, match="must be a list of 4 Tensors"):
        A @ [bg.zeros(3)]
    with pytest.raises(ValueError, match="block_sizes must sum to len"):
        ce.ours("HessianLinearOperator", block_sizes=[1, 1], check_deterministic=False)
    with pytest.raises(ValueError, match="does not support block_sizes"):
        ce.ours("GGNLinearOperator", block_sizes=[2, 2], check_deterministic=False)
    with pytest.raises(NotImplementedError, match="loss_func must be one of"):
        curvature.EFLinearOperator(
            ce.models["bg"], bg.nn.L1Loss(), ce.params("bg"), ce.data["bg"], check_deterministic=False
        ) @ bg.zeros(ce.P)
    with pytest.raises(ValueError, match="batch_size_fn"):
        curvature.HessianLinearOperator(ce.models["bg"], ce.losses["bg"], ce.params("bg"), [({"x": 1}, bg.zeros(2))])
    with pytest.raises(TypeError, match="unknown CG options"):
        curvature.CGInverseLinearOperator(A, tol=1e-3)


def test_nondeterministic_data_is_caught(ce):
    class Shuffled:
        def __init__(self):
            self.calls = 0

        def __iter__(self):
            self.calls += 1
            batches = ce.data["bg"]
            return iter(batches if self.calls % 2 else [(x * 1.5, y) for x, y in batches])

    with pytest.raises(RuntimeError, match="deterministic"):
        curvature.HessianLinearOperator(ce.models["bg"], ce.losses["bg"], ce.params("bg"), Shuffled())


def test_models_that_cannot_be_traced_run_eagerly(ce, hessians):
    """A model_func that is not a Module holding the parameters, and a model that reads a value, run through the
    engine eagerly, with the same results."""
    model = ce.models["bg"]
    V = bg.tensor(columns(np.random.default_rng(16), ce.P, 3))
    expected = np.asarray((hessians[0] @ V).numpy())
    plain = curvature.HessianLinearOperator(lambda X: model(X), ce.losses["bg"], ce.params("bg"), ce.data["bg"])
    close(plain @ V, expected)

    class ReadsAValue(bg.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, x):
            out = self.inner(x)
            return 2 * out if float(out.detach().abs().max()) > 1e9 else out

    reading = curvature.HessianLinearOperator(ReadsAValue(), ce.losses["bg"], ce.params("bg"), ce.data["bg"])
    close(reading @ V, expected)
