"""`sparsity=` on autograd.functional.jacobian/hessian and func.jacrev/jacfwd/hessian: equal to the dense results
in float64, the pattern found once per structure, the colorings, the SparseMatrix record, user patterns and their
errors."""

import warnings

import numpy as np
import pytest

import batched_grad as bg
from batched_grad import func
from batched_grad._sparsity import _api, _pattern
from batched_grad.autograd.functional import (
    SparseMatrix,
    Sparsity,
    hessian,
    hessian_sparsity,
    jacobian,
    jacobian_sparsity,
)


def stencil(x):
    return (x[1:] - x[:-1]) ** 2


def bratu(u):
    """The 2-D Bratu residual on a k x k grid with zero boundary values: 5-point Laplacian + 0.1 exp(u)."""
    k = int(round(u.numel() ** 0.5))
    g = bg.nn.functional.pad(u.reshape(k, k), (1, 1, 1, 1))
    lap = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] - 4 * g[1:-1, 1:-1]
    return (lap + 0.1 * bg.exp(g[1:-1, 1:-1])).reshape(-1)


def rosenbrock(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def mlp_inputs(x, w1=None, w2=None):
    return bg.tanh(x @ w1) @ w2


def _dense(a):
    return a.to_dense() if isinstance(a, SparseMatrix) else a


def _assert_equal(sparse, dense, shape=None):
    got = _dense(sparse)
    got = got.reshape(dense.shape) if shape is None else got
    np.testing.assert_allclose(got.detach().numpy(), dense.detach().numpy(), rtol=0, atol=1e-12)


X = bg.tensor(np.random.default_rng(0).uniform(-1, 1, 40))


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_stencil_jacobian_equals_dense(strategy):
    J = jacobian(stencil, X, sparsity="auto", strategy=strategy)
    assert isinstance(J, SparseMatrix) and J.shape == (39, 40) and J.nnz == 78
    _assert_equal(J, jacobian(stencil, X, vectorize=True))
    dense = jacobian(stencil, X, sparsity="auto", output="dense", strategy=strategy)
    assert tuple(dense.shape) == (39, 40)
    _assert_equal(dense, jacobian(stencil, X, vectorize=True))


def test_bratu_jacobian_has_five_colors_and_equals_dense():
    u = bg.tensor(np.random.default_rng(1).uniform(0, 1, 64))
    pattern = jacobian_sparsity(bratu, u)
    assert pattern.nnz == 5 * 64 - 4 * 8 and pattern.n_colors == 5
    _assert_equal(jacobian(bratu, u, sparsity="auto"), jacobian(bratu, u, vectorize=True))


def test_rosenbrock_hessian_is_star_colored_with_three_colors():
    x = bg.tensor(np.random.default_rng(2).uniform(-1, 1, 30))
    pattern = hessian_sparsity(rosenbrock, x)
    assert pattern.mode == "symmetric" and pattern.n_colors == 3 and pattern.nnz == 30 + 2 * 29
    H = hessian(rosenbrock, x, sparsity="auto")
    _assert_equal(H, hessian(rosenbrock, x, vectorize=True))
    _assert_equal(func.hessian(rosenbrock, sparsity="auto")(x), hessian(rosenbrock, x, vectorize=True))


def test_block_diagonal_mlp_input_jacobian_takes_reverse_mode():
    rng = np.random.default_rng(3)
    w1, w2 = bg.tensor(rng.standard_normal((4, 6))), bg.tensor(rng.standard_normal((6, 2)))
    x = bg.tensor(rng.standard_normal((5, 4)))
    f = lambda x: mlp_inputs(x, w1, w2)
    pattern = jacobian_sparsity(f, x, strategy="forward-mode")
    assert pattern.mode == "reverse" and pattern.n_colors == 2  # rows: 2 per sample; columns would take 4
    _assert_equal(jacobian(f, x, sparsity="auto"), jacobian(f, x, vectorize=True))


def test_tuple_inputs_and_outputs_give_blocks_as_the_dense_jacobian():
    def f(a, b):
        return a * b.sum(), bg.sin(a[:3]) * b[0]

    a, b = bg.tensor([0.5, -1.0, 2.0, 0.3]), bg.tensor([1.5, 0.2, -0.7])
    sparse, dense = jacobian(f, (a, b), sparsity="auto"), jacobian(f, (a, b), vectorize=True)
    for i in range(2):
        for j in range(2):
            assert sparse[i][j].out_shape == tuple(dense[i][j].shape[:1])
            _assert_equal(sparse[i][j], dense[i][j])


def test_jacrev_and_jacfwd_with_argnums():
    def f(x, y):
        return stencil(x) * y

    y = bg.tensor(2.0)
    for transform in (func.jacrev, func.jacfwd):
        sparse = transform(f, argnums=(0, 1), sparsity="auto")(X, y)
        dense = transform(f, argnums=(0, 1))(X, y)
        assert isinstance(sparse, tuple) and len(sparse) == 2
        _assert_equal(sparse[0], dense[0])
        _assert_equal(sparse[1], dense[1].reshape(-1, 1), shape=True)


def test_create_graph_values_are_differentiable():
    x = X.clone().requires_grad_()
    J = jacobian(lambda x: stencil(x) * x[1:], x, sparsity="auto", create_graph=True)
    assert J.values.requires_grad
    (got,) = bg.autograd.grad((J.values**2).sum(), x)
    dense = jacobian(lambda x: stencil(x) * x[1:], x, create_graph=True, vectorize=True)
    (want,) = bg.autograd.grad((dense**2).sum(), x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)


def test_a_structure_seen_again_is_neither_detected_nor_colored_again():
    def f(x):
        return bg.cos(x[2:]) * x[:-2]

    detections, colorings = _api.COUNTS["detections"], _pattern.COUNTS["colorings"]
    for seed in range(4):
        x = bg.tensor(np.random.default_rng(seed).standard_normal(30))
        _assert_equal(jacobian(f, x, sparsity="auto"), jacobian(f, x, vectorize=True))
        if seed == 0:  # the first call detects and colors
            assert _api.COUNTS["detections"] == detections + 1
            colored = _pattern.COUNTS["colorings"]
            assert colored > colorings
    assert _api.COUNTS["detections"] == detections + 1
    assert _pattern.COUNTS["colorings"] == colored
    jacobian(f, bg.zeros(31), sparsity="auto")  # another shape: another structure
    assert _api.COUNTS["detections"] == detections + 2


def test_a_branch_that_records_another_graph_is_another_structure():
    def f(x):
        return x[1:] * x[:-1] if float(x.sum()) > 0 else bg.exp(x)

    pos, neg = bg.ones(6), -bg.ones(6)
    assert jacobian(f, pos, sparsity="auto").nnz == 10
    assert jacobian(f, neg, sparsity="auto").nnz == 6
    assert jacobian(f, pos, sparsity="auto").nnz == 10


def test_slices_at_other_offsets_are_other_patterns():
    a = jacobian(lambda x: x[2:] - x[:-2], bg.ones(8), sparsity="auto")
    b = jacobian(lambda x: x[1:-1] - x[:-2], bg.ones(8), sparsity="auto")  # same ops, shapes and dtypes
    assert sorted(zip(a.rows.tolist(), a.cols.tolist())) != sorted(zip(b.rows.tolist(), b.cols.tolist()))
    _assert_equal(b, jacobian(lambda x: x[1:-1] - x[:-2], bg.ones(8), vectorize=True))


def test_indexing_with_an_index_tensor_is_exact_for_its_values():
    idx = bg.tensor([3, 0, 3, 5])
    J = jacobian(lambda x: x[idx] * 2, bg.ones(6), sparsity="auto")
    assert J.rows.tolist() == [0, 1, 2, 3] and J.cols.tolist() == [3, 0, 3, 5]
    idx2 = bg.tensor([1, 1, 2, 4])
    J2 = jacobian(lambda x: x[idx2] * 2, bg.ones(6), sparsity="auto")
    assert J2.cols.tolist() == [1, 1, 2, 4]


# ---- the SparseMatrix record ----------------------------------------------------------------------------------
def test_sparse_matrix_products_and_conversions():
    J = jacobian(stencil, X, sparsity="auto")
    dense = jacobian(stencil, X, vectorize=True)
    v = bg.tensor(np.random.default_rng(4).standard_normal(40))
    np.testing.assert_allclose((J @ v).numpy(), (dense @ v).numpy(), atol=1e-12)
    V = bg.tensor(np.random.default_rng(5).standard_normal((40, 3)))
    np.testing.assert_allclose((J @ V).numpy(), (dense @ V).numpy(), atol=1e-12)
    u = bg.tensor(np.random.default_rng(6).standard_normal(39))
    np.testing.assert_allclose((J.T @ u).numpy(), (u @ dense).numpy(), atol=1e-12)
    np.testing.assert_allclose((u.numpy() @ J).numpy(), (u @ dense).numpy(), atol=1e-12)
    np.testing.assert_allclose(np.asarray(J.to_bcoo().todense()), dense.numpy(), atol=0)
    scipy = pytest.importorskip("scipy.sparse")
    csr, csc = J.tocsr(), J.tocsc()
    assert isinstance(csr, scipy.csr_matrix) and isinstance(csc, scipy.csc_matrix) and csr.nnz == J.nnz
    np.testing.assert_allclose(csr.toarray(), dense.numpy(), atol=0)
    np.testing.assert_allclose(csc.toarray(), dense.numpy(), atol=0)


def test_pattern_record_converts_and_reports_its_coloring():
    pattern = jacobian_sparsity(stencil, X)
    assert isinstance(pattern, Sparsity) and pattern.shape == (39, 40) and pattern.n_colors == 2
    colors = pattern.colors
    # no column holds two rows of one color: reverse mode's seeds are structurally orthogonal
    dense = pattern.to_dense()
    for c in range(pattern.n_colors):
        assert dense[colors == c].sum(axis=0).max() <= 1
    pytest.importorskip("scipy.sparse")
    assert (pattern.to_scipy().toarray() == dense).all()


# ---- a user's pattern -----------------------------------------------------------------------------------------
def _stencil_pattern():
    p = np.zeros((39, 40), bool)
    p[np.arange(39), np.arange(39)] = p[np.arange(39), np.arange(1, 40)] = True
    return p


def test_user_patterns_in_every_form():
    p = _stencil_pattern()
    rows, cols = np.nonzero(p)
    forms = [p, (rows, cols), jacobian_sparsity(stencil, X)]
    scipy = pytest.importorskip("scipy.sparse")
    forms.append(scipy.csr_matrix(p))
    for pattern in forms:
        _assert_equal(jacobian(stencil, X, sparsity=pattern), jacobian(stencil, X, vectorize=True))


def test_a_users_hessian_pattern_is_made_symmetric_and_checked():
    x = bg.tensor(np.random.default_rng(7).uniform(-1, 1, 30))  # the size of the test above: its compiles serve
    upper = np.eye(30, dtype=bool) | np.eye(30, k=1, dtype=bool)  # one triangle of the tridiagonal pattern
    _assert_equal(hessian(rosenbrock, x, sparsity=upper), hessian(rosenbrock, x, vectorize=True))
    with pytest.raises(ValueError, match="sparsity: the given pattern is missing entries"):
        hessian(rosenbrock, x, sparsity=np.eye(30, dtype=bool))


def test_bad_patterns_raise_errors_naming_the_argument():
    with pytest.raises(ValueError, match=r"sparsity: expected a boolean pattern of shape \(39, 40\)"):
        jacobian(stencil, X, sparsity=np.ones((40, 40), bool))
    with pytest.raises(TypeError, match="sparsity: .*got an array of dtype float64"):
        jacobian(stencil, X, sparsity=_stencil_pattern().astype(float))
    missing = _stencil_pattern()
    missing[np.arange(39), np.arange(1, 40)] = False
    with pytest.raises(ValueError, match="sparsity: the given pattern is missing entries"):
        jacobian(stencil, X, sparsity=missing)
    with pytest.raises(ValueError, match="sparsity: coordinates outside"):
        jacobian(stencil, X, sparsity=(np.array([0]), np.array([40])))
    with pytest.raises(ValueError, match='sparsity: expected None, "auto" or a pattern'):
        jacobian(stencil, X, sparsity="dense")
    with pytest.raises(ValueError, match="output: expected 'sparse' or 'dense'"):
        jacobian(stencil, X, sparsity="auto", output="coo")
    with pytest.raises(RuntimeError, match="`strict=True` and `sparsity`"):
        jacobian(stencil, X, sparsity="auto", strict=True)
    with pytest.raises(ValueError, match="output='sparse' needs a pattern"):
        jacobian(stencil, X, output="sparse")
    _assert_equal(jacobian(stencil, X, output="dense"), jacobian(stencil, X, vectorize=True))  # dense either way


def test_a_primitive_without_a_rule_is_dense_with_one_warning(monkeypatch):
    from batched_grad._sparsity import _propagate, _rules

    rules = dict(_propagate.RULES)
    del rules["cumsum"]
    monkeypatch.setattr(_propagate, "RULES", rules)
    monkeypatch.setattr(_propagate, "_warned", set())
    monkeypatch.setattr(_api, "_detected", type(_api._detected)())
    with pytest.warns(UserWarning, match="no rule for the JAX primitive 'cumsum'"):
        J = jacobian(lambda x: bg.cumsum(x, 0) * 2, bg.ones(5), sparsity="auto")
    assert J.nnz == 25
    _assert_equal(J, jacobian(lambda x: bg.cumsum(x, 0) * 2, bg.ones(5), vectorize=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jacobian(lambda x: bg.cumsum(x, 0) * 3, bg.ones(6), sparsity="auto")  # warned once
    assert _rules.RULES["cumsum"] is not None


def test_a_stencil_written_as_a_convolution_takes_the_kernels_zeros():
    kernel = bg.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]], dtype=bg.float64).reshape(1, 1, 3, 3)

    def f(u):
        grid = u.reshape(1, 1, 8, 8)
        return (bg.nn.functional.conv2d(grid, kernel, padding=1) + 0.1 * bg.exp(grid)).reshape(-1)

    u = bg.tensor(np.random.default_rng(8).uniform(0, 1, 64))
    pattern = jacobian_sparsity(f, u)
    assert pattern.nnz == 5 * 64 - 4 * 8 and pattern.n_colors == 5
    _assert_equal(jacobian(f, u, sparsity="auto"), jacobian(f, u, vectorize=True))
    kernel.fill_(1.0)  # another kernel: the pattern depends on its zeros, so it is found again
    assert jacobian_sparsity(f, u).nnz == 9 * 64 - 4 * 3 * 8 + 4
    _assert_equal(jacobian(f, u, sparsity="auto"), jacobian(f, u, vectorize=True))


def test_inside_bg_compile_the_sparse_jacobian_is_one_program():
    step = bg.compile(lambda x: jacobian(stencil, x, sparsity="auto").values)
    for seed in range(3):
        x = bg.tensor(np.random.default_rng(seed).uniform(-1, 1, 40))
        np.testing.assert_allclose(step(x).numpy(), jacobian(stencil, x, sparsity="auto").values.numpy(), atol=0)
    assert step.compiles == 1


@pytest.mark.slow
def test_a_custom_function_is_dense_for_its_operands_with_a_warning():
    class Cube(bg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a**3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 3 * a**2 * g

    def f(x):
        return Cube.apply(x[1:]) + x[:-1]

    with pytest.warns(UserWarning, match="cannot see inside the recorded node 'CubeBackward'"):
        J = jacobian(f, X, sparsity="auto")
    _assert_equal(J, jacobian(f, X, vectorize=True))
    assert J.nnz > 2 * 39  # a superset: the Function's outputs depend on all it reads


W1, W2 = bg.tensor(np.linspace(-1, 1, 12).reshape(3, 4)), bg.tensor(np.linspace(-1, 1, 8).reshape(4, 2))


def _programs():
    """The compiled sparse programs kept on the detected patterns."""
    return [
        p
        for entry in _api._detected.values()
        for pattern in entry.found.values()
        for key, p in pattern._plans.items()
        if key[0] == "program" and p
    ]


@pytest.mark.parametrize(
    "f, x, compute",
    [
        (stencil, X, jacobian),
        (bratu, bg.tensor(np.random.default_rng(1).uniform(0, 1, 36)), jacobian),
        (rosenbrock, X, hessian),
        (
            lambda x: bg.tanh(x @ W1) @ W2,
            bg.tensor(np.arange(12.0).reshape(4, 3) / 9),
            jacobian,
        ),
    ],
    ids=["stencil", "bratu", "rosenbrock", "mlp"],
)
def test_warm_calls_run_one_program_per_structure_equal_to_dense(f, x, compute):
    _api._detected.clear()
    dense = compute(f, x, vectorize=True)
    for call in range(4):  # the first sighting runs the engine's path, the later ones the structure's program
        _assert_equal(compute(f, x, sparsity="auto"), dense)
        assert len(_programs()) == (call > 0)
    _assert_equal(compute(f, x, sparsity="auto", output="dense"), dense)


def test_warm_calls_with_tuple_inputs_and_outputs_give_the_dense_blocks():
    def f(a, b):
        return a[1:] * b[:-1], bg.exp(a) + b.sum()

    a, b = bg.tensor(np.linspace(-1, 1, 6)), bg.tensor(np.linspace(0, 2, 6))
    dense = jacobian(f, (a, b), vectorize=True)
    for _ in range(3):
        sparse = jacobian(f, (a, b), sparsity="auto")
        for i in range(2):
            for j in range(2):
                _assert_equal(sparse[i][j], dense[i][j])


def test_a_hook_inside_the_function_is_honoured_on_warm_calls():
    def f(x):
        y = x[1:] * x[:-1]
        y.register_hook(lambda g: 2 * g)
        return bg.sin(y)

    dense = jacobian(f, X, vectorize=True)
    for _ in range(3):
        _assert_equal(jacobian(f, X, sparsity="auto"), dense)


def test_warm_calls_follow_new_values_of_the_inputs_and_of_captured_tensors():
    w = bg.tensor(np.random.default_rng(2).standard_normal((3, 2)))

    def f(x):
        return bg.tanh(x @ w)

    for seed in range(4):
        x = bg.tensor(np.random.default_rng(seed).standard_normal((5, 3)))
        w.data = bg.tensor(np.random.default_rng(10 + seed).standard_normal((3, 2)))
        _assert_equal(jacobian(f, x, sparsity="auto"), jacobian(f, x, vectorize=True))


def test_a_square_symmetric_pattern_computes_its_compiled_program_in_forward_mode():
    pattern = jacobian_sparsity(bratu, bg.tensor(np.random.default_rng(3).uniform(0, 1, 49)))
    assert pattern.mode == "reverse"  # the strategy's mode on a tie of colors
    assert pattern.program_mode("reverse") == "forward"  # JVPs need no transposed ops
    assert pattern.coloring("forward") is pattern.coloring("reverse")  # the row coloring, not colored again


def test_a_complex_modulus_couples_its_real_and_imaginary_parts_in_the_hessian():
    # |re + i im| is the root of a sum of squares, not piecewise linear as a real abs: its parts interact
    def modulus(x):
        return bg.complex(x[0::2], x[1::2]).abs().sum()

    x = bg.tensor(np.random.default_rng(4).uniform(0.5, 1.5, 8))
    pattern = hessian_sparsity(modulus, x).to_dense()
    dense = hessian(modulus, x, vectorize=True).numpy() != 0
    assert not np.any(dense & ~pattern)
    _assert_equal(hessian(modulus, x, sparsity="auto"), hessian(modulus, x, vectorize=True))
