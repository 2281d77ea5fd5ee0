"""Linear algebra ops against torch: values, first and second derivatives, namedtuples and error messages."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, check_op, raises_like_torch, rand


def _matrix(n, batch=(), spd=False, seed=0):
    """A well-conditioned float64 leaf: diagonally dominant, or symmetric positive-definite."""
    a = np.random.default_rng(seed + n).uniform(-1, 1, batch + (n, n))
    a = a @ np.swapaxes(a, -1, -2) if spd else a
    return lambda: bg.tensor(a + n * np.eye(n), dtype=bg.float64, requires_grad=True)


def _inputs(specs):
    return [spec() if callable(spec) else rand(*spec) for spec in specs]


def _eigh_squares(m, a, uplo="L"):
    # eigenvector signs are arbitrary: their squares are not
    r = m.linalg.eigh(a, UPLO=uplo)
    return r.eigenvalues, r.eigenvectors**2


def _svd_invariants(m, a, full=False):
    # singular vectors' signs are arbitrary (and so are the extra columns of full U / rows of full Vh): squares aren't
    U, S, Vh = m.linalg.svd(a) if full is None else m.linalg.svd(a, full_matrices=full)
    if full is False:
        return S, U**2, Vh**2
    k = S.shape[-1]
    return S, U[..., :k] ** 2, Vh[..., :k, :] ** 2


SPD, SPD_B, WELL, WELL_B = _matrix(3, spd=True), _matrix(3, (2,), spd=True), _matrix(3), _matrix(3, (2,))

# check_op options: every case checks values and first derivatives against torch; second derivatives (a compile
# each, slow for decompositions) are checked in one case per op and skipped by its variants (NO_GRADGRAD);
# BATCHED cases also check is_grads_batched=True against the per-row loop (each vmapped kernel compiles too).
FULL = {"batched": False}
NO_GRADGRAD = {"batched": False, "gradgrad": False}
BATCHED = {"gradgrad": False}
# torch's double backward of a piecewise-linear norm is a ZeroTensor, which tests/oracle.py cannot read
PIECEWISE = NO_GRADGRAD

# (id, fn(m, *inputs) where m is bg or torch, input specs: shapes of random leaves or factories[, options])
CASES = [
    ("matmul_1d_1d", lambda m, a, b: m.matmul(a, b), [(4,), (4,)], NO_GRADGRAD),
    ("matmul_2d_1d", lambda m, a, b: m.matmul(a, b), [(3, 4), (4,)], NO_GRADGRAD),
    ("matmul_1d_2d", lambda m, a, b: m.matmul(a, b), [(3,), (3, 4)], NO_GRADGRAD),
    ("matmul_3d_1d", lambda m, a, b: m.matmul(a, b), [(2, 3, 4), (4,)], NO_GRADGRAD),
    ("matmul_1d_3d", lambda m, a, b: m.matmul(a, b), [(3,), (2, 3, 4)], NO_GRADGRAD),
    ("matmul_3d_2d", lambda m, a, b: m.matmul(a, b), [(2, 3, 4), (4, 2)], NO_GRADGRAD),
    ("matmul_broadcast_batch", lambda m, a, b: m.matmul(a, b), [(2, 1, 3, 4), (3, 4, 2)], BATCHED),
    ("matmul_operator_views", lambda m, a, b: a.mT @ b[:, ::2], [(4, 3), (4, 4)]),
    ("mm_transposed_views", lambda m, a, b: m.mm(a.t(), b.T), [(4, 3), (2, 4)]),
    ("bmm_view", lambda m, a, b: m.bmm(a, b.transpose(1, 2)), [(2, 3, 4), (2, 2, 4)]),
    ("mv_method_views", lambda m, a, b: a[:, 1:].mv(b[::2]), [(3, 3), (4,)]),
    ("dot_strided", lambda m, a, b: m.dot(a[::2], b[1]), [(8,), (3, 4)]),
    ("outer_method", lambda m, a, b: a.outer(b.flip(0)), [(3,), (4,)]),
    ("einsum_implicit_ellipsis", lambda m, a, b: m.einsum("...ij,...jk", a, b), [(2, 3, 4), (4, 2)], NO_GRADGRAD),
    ("einsum_diagonal", lambda m, a: m.einsum("ii->i", a), [(3, 3)], NO_GRADGRAD),
    ("einsum_list_operands", lambda m, a, b: m.einsum("i,j->ij", [a, b]), [(3,), (4,)], NO_GRADGRAD),
    ("einsum_sublist", lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2], [0, 2]), [(3, 4), (4, 2)], NO_GRADGRAD),
    ("einsum_broadcast_size1", lambda m, a, b: m.einsum("ij,ij->i", a, b), [(3, 1), (3, 4)], BATCHED),
    ("einsum_three_spaces", lambda m, a, b, c: m.einsum("ij, jk ,kl -> il", a, b, c), [(3, 4), (4, 2), (2, 3)]),
    ("einsum_product_of_self", lambda m, a: m.einsum("ij,ij->", a, a), [(3, 4)], NO_GRADGRAD),
    ("tensordot_default", lambda m, a, b: m.tensordot(a, b), [(2, 3, 4), (3, 4, 2)]),
    ("tensordot_lists", lambda m, a, b: m.tensordot(a, b, dims=([1, 0], [0, 2])), [(3, 2, 4), (2, 4, 3)], NO_GRADGRAD),
    ("trace_view", lambda m, a: m.trace(a.t()), [(3, 4)]),
    ("diag_embed_offset", lambda m, a: m.diag(a, -1), [(3,)]),
    ("diag_extract_offset", lambda m, a: a.diag(1), [(3, 4)]),
    ("diagonal_dims_reversed", lambda m, a: m.diagonal(a, 1, 2, 0), [(2, 3, 4)], BATCHED),
    ("diagonal_method_negative", lambda m, a: a.diagonal(-1, -1, -2), [(2, 3, 4)]),
    ("diagonal_default", lambda m, a: m.diagonal(a), [(3, 4)]),
    ("tril_batched_offset", lambda m, a: m.tril(a, -1), [(2, 3, 4)]),
    ("triu_method_view", lambda m, a: a.mT.triu(1), [(2, 4, 3)]),
    ("norm_default_flattens", lambda m, a: m.linalg.norm(a), [(2, 3, 4)]),
    ("norm_vector_ord", lambda m, a: m.linalg.norm(a, 3), [(4,)]),
    ("norm_vector_inf", lambda m, a: m.linalg.norm(a, float("inf"), dim=-1), [(3, 4)], PIECEWISE),
    ("norm_fro", lambda m, a: m.linalg.norm(a, "fro"), [(3, 4)]),
    ("norm_matrix_1", lambda m, a: m.linalg.norm(a, 1), [(3, 4)], PIECEWISE),
    ("norm_matrix_2_dims", lambda m, a: m.linalg.norm(a, 2, dim=(0, 2)), [(3, 2, 4)], NO_GRADGRAD),
    ("solve_vector", lambda m, a, b: m.linalg.solve(a, b), [WELL, (3,)]),
    ("solve_batched_vectors", lambda m, a, b: m.linalg.solve(a, b), [WELL_B, (2, 3)], NO_GRADGRAD),
    ("solve_left_false_broadcast", lambda m, a, b: m.linalg.solve(a, b, left=False), [WELL_B, (4, 3)], NO_GRADGRAD),
    ("inv_view", lambda m, a: m.linalg.inv(a.mT), [WELL]),
    ("det", lambda m, a: m.linalg.det(a), [WELL]),
    ("slogdet", lambda m, a: m.linalg.slogdet(a), [(3, 3)]),
    ("cholesky", lambda m, a: m.linalg.cholesky(a), [SPD]),
    ("cholesky_upper", lambda m, a: m.linalg.cholesky(a, upper=True), [SPD], NO_GRADGRAD),
    ("cholesky_batched_reads_lower", lambda m, a, b: m.linalg.cholesky(a + b.triu(1)), [SPD_B, (2, 3, 3)], NO_GRADGRAD),
    (
        "cholesky_upper_reads_upper",
        lambda m, a, b: m.linalg.cholesky(a + b.tril(-1), upper=True),
        [SPD, (3, 3)],
        NO_GRADGRAD,
    ),
    ("eigh", _eigh_squares, [SPD]),
    ("eigh_upper", lambda m, a: _eigh_squares(m, a, "U"), [SPD], BATCHED),
    (
        "eigh_batched_nonsymmetric_input",
        lambda m, a, b: _eigh_squares(m, a + b.triu(1)),
        [SPD_B, (2, 3, 3)],
        NO_GRADGRAD,
    ),
    ("svd_reduced", lambda m, a: _svd_invariants(m, a), [(4, 3)]),
    ("svd_default_full_wide_batched", lambda m, a: _svd_invariants(m, a, None), [(2, 3, 4)], NO_GRADGRAD),
    ("qr", lambda m, a: m.linalg.qr(a), [(4, 3)]),
    ("qr_wide", lambda m, a: m.linalg.qr(a), [(3, 4)], NO_GRADGRAD),
    ("qr_complete_wide", lambda m, a: m.linalg.qr(a, mode="complete"), [(3, 4)], NO_GRADGRAD),
]


@pytest.mark.parametrize(
    "fn, specs, options", [(c[1], c[2], c[3] if len(c) > 3 else FULL) for c in CASES], ids=[c[0] for c in CASES]
)
def test_against_torch(fn, specs, options):
    check_op(lambda *xs: fn(bg, *xs), lambda *xs: fn(torch, *xs), _inputs(specs), **options)


def test_integer_products_keep_dtype():
    a = np.arange(12).reshape(3, 4)
    for f in (
        lambda m, x: m.matmul(x, x.T),
        lambda m, x: m.mv(x, x[0]),
        lambda m, x: m.trace(x.int()),
        lambda m, x: m.einsum("ij->j", x),
        lambda m, x: m.tensordot(x, x, ([0], [0])),
    ):
        assert_same(f(bg, bg.tensor(a)), f(torch, torch.tensor(a)))


RESULTS = [
    ("slogdet", lambda m, a: m.linalg.slogdet(a)),
    ("eigh", lambda m, a: m.linalg.eigh(a)),
    ("svd", lambda m, a: m.linalg.svd(a)),
    ("qr", lambda m, a: m.linalg.qr(a)),
    ("qr_r", lambda m, a: m.linalg.qr(a, mode="r")),
]


@pytest.mark.parametrize("fn", [r[1] for r in RESULTS], ids=[r[0] for r in RESULTS])
def test_namedtuple_results(fn):
    a = SPD()
    got, want = fn(bg, a), fn(torch, torch.tensor(a.detach().numpy()))
    assert type(got).__name__ == type(want).__name__ and got._fields == type(want).__match_args__
    for field in got._fields:
        assert getattr(got, field).shape == getattr(want, field).shape
    assert repr(got).startswith(f"torch.return_types.{type(want).__name__}(\n{got._fields[0]}=tensor(")


def T(m, *shape, dtype=None):
    return m.ones(*shape, dtype=dtype or m.float64)


ERRORS = [
    ("mm_vector", lambda m: m.mm(T(m, 3), T(m, 3, 3))),
    ("mm_second_vector", lambda m: m.mm(T(m, 3, 4), T(m, 4))),
    ("mm_shapes", lambda m: m.mm(T(m, 3, 4), T(m, 5, 2))),
    ("mm_dtypes", lambda m: m.mm(T(m, 3, 4), T(m, 4, 2, dtype=m.float32))),
    ("bmm_matrix", lambda m: m.bmm(T(m, 3, 4), T(m, 4, 2))),
    ("bmm_second_matrix", lambda m: m.bmm(T(m, 2, 3, 4), T(m, 4, 2))),
    ("bmm_batch_sizes", lambda m: m.bmm(T(m, 2, 3, 4), T(m, 3, 4, 2))),
    ("bmm_inner_sizes", lambda m: m.bmm(T(m, 2, 3, 4), T(m, 2, 5, 2))),
    ("bmm_dtypes", lambda m: m.bmm(T(m, 2, 3, 4, dtype=m.float32), T(m, 2, 4, 2))),
    ("mv_matrix_vector", lambda m: m.mv(T(m, 3, 4), T(m, 4, 1))),
    ("mv_sizes", lambda m: m.mv(T(m, 3, 4), T(m, 5))),
    ("mv_dtypes", lambda m: m.mv(T(m, 3, 4), T(m, 4, dtype=m.float32))),
    ("dot_matrix", lambda m: m.dot(T(m, 3, 4), T(m, 4))),
    ("dot_sizes", lambda m: m.dot(T(m, 3), T(m, 4))),
    ("dot_dtypes", lambda m: m.dot(T(m, 3), T(m, 3, dtype=m.int64))),
    ("matmul_scalar", lambda m: m.matmul(T(m, 3), T(m))),
    ("matmul_shapes", lambda m: m.matmul(T(m, 3, 4), T(m, 5, 2))),
    ("matmul_folded_shapes", lambda m: m.matmul(T(m, 2, 3, 4), T(m, 5, 2))),
    ("matmul_vector_sizes", lambda m: m.matmul(T(m, 3), T(m, 4))),
    ("matmul_batch_broadcast", lambda m: m.matmul(T(m, 2, 3, 4), T(m, 3, 4, 2))),
    ("matmul_batched_inner", lambda m: m.matmul(T(m, 2, 3, 4), T(m, 2, 2, 5, 2))),
    ("matmul_dtypes", lambda m: m.matmul(T(m, 3, 4), T(m, 4, 2, dtype=m.float32))),
    ("outer_matrix", lambda m: m.outer(T(m, 3, 4), T(m, 4))),
    ("einsum_operand_count", lambda m: m.einsum("ij,jk->ik", T(m, 3, 4))),
    ("einsum_subscript", lambda m: m.einsum("i1,jk", T(m, 3, 4), T(m, 4, 2))),
    ("einsum_ndim", lambda m: m.einsum("ij,jk", T(m, 3, 4, 1), T(m, 4, 2))),
    ("einsum_sizes", lambda m: m.einsum("ij,jk->ik", T(m, 3, 4), T(m, 5, 2))),
    ("einsum_output_subscript", lambda m: m.einsum("ij->ik", T(m, 2, 3))),
    ("einsum_repeated_output", lambda m: m.einsum("ij->ii", T(m, 2, 3))),
    ("einsum_dtypes", lambda m: m.einsum("i,i->", T(m, 3), T(m, 3, dtype=m.float32))),
    ("tensordot_negative", lambda m: m.tensordot(T(m, 3, 4), T(m, 4, 2), -1)),
    ("tensordot_too_many", lambda m: m.tensordot(T(m, 3, 4), T(m, 4, 2), 3)),
    ("tensordot_list_lengths", lambda m: m.tensordot(T(m, 3, 4), T(m, 4, 2), ([1], [0, 1]))),
    ("tensordot_sizes", lambda m: m.tensordot(T(m, 3, 4), T(m, 5, 2), 1)),
    ("tensordot_dtypes", lambda m: m.tensordot(T(m, 3, 4), T(m, 4, 2, dtype=m.float32), 1)),
    ("trace_3d", lambda m: m.trace(T(m, 2, 3, 4))),
    ("diag_3d", lambda m: m.diag(T(m, 2, 3, 4))),
    ("diagonal_same_dims", lambda m: m.diagonal(T(m, 3, 3), 0, 1, -1)),
    ("tril_vector", lambda m: m.tril(T(m, 3))),
    ("triu_vector", lambda m: m.triu(T(m, 3))),
    ("inv_vector", lambda m: m.linalg.inv(T(m, 3))),
    ("inv_nonsquare", lambda m: m.linalg.inv(T(m, 3, 4))),
    ("inv_integer", lambda m: m.linalg.inv(m.eye(3, dtype=m.int64))),
    ("det_nonsquare", lambda m: m.linalg.det(T(m, 2, 3, 4))),
    ("slogdet_vector", lambda m: m.linalg.slogdet(T(m, 3))),
    ("cholesky_nonsquare", lambda m: m.linalg.cholesky(T(m, 3, 4))),
    ("eigh_nonsquare", lambda m: m.linalg.eigh(T(m, 3, 4))),
    ("eigh_uplo", lambda m: m.linalg.eigh(T(m, 3, 3), UPLO="X")),
    ("svd_vector", lambda m: m.linalg.svd(T(m, 3))),
    ("qr_mode", lambda m: m.linalg.qr(T(m, 3, 3), mode="x")),
    ("qr_integer", lambda m: m.linalg.qr(m.eye(3, dtype=m.int64))),
    ("solve_nonsquare", lambda m: m.linalg.solve(T(m, 3, 4), T(m, 3))),
    ("solve_vector_size", lambda m: m.linalg.solve(T(m, 3, 3), T(m, 4))),
    ("solve_matrix_size", lambda m: m.linalg.solve(T(m, 3, 3), T(m, 4, 2))),
    ("solve_right_vector", lambda m: m.linalg.solve(T(m, 3, 3), T(m, 3), left=False)),
    ("solve_dtypes", lambda m: m.linalg.solve(T(m, 3, 3), T(m, 3, dtype=m.float32))),
    ("norm_dims", lambda m: m.linalg.norm(T(m, 2, 3, 4), dim=(0, 1, 2))),
    ("norm_ord_needs_2d", lambda m: m.linalg.norm(T(m, 2, 3, 4), 2)),
    ("norm_fro_of_vector", lambda m: m.linalg.norm(T(m, 3), "fro")),
    ("norm_string_ord_one_dim", lambda m: m.linalg.norm(T(m, 3, 4), "fro", dim=1)),
    ("norm_integer", lambda m: m.linalg.norm(m.ones(3, dtype=m.int64))),
    ("inv_singular", lambda m: m.linalg.inv(m.zeros(3, 3, dtype=m.float64))),
    ("inv_singular_batch_element", lambda m: m.linalg.inv(m.stack([m.eye(2, dtype=m.float64), m.ones(2, 2).double()]))),
    ("solve_singular", lambda m: m.linalg.solve(m.ones(3, 3, dtype=m.float64), T(m, 3))),
    ("cholesky_not_positive_definite", lambda m: m.linalg.cholesky(m.diag(m.tensor([1.0, -1.0, 1.0])))),
]


@pytest.mark.parametrize("fn", [e[1] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_like_torch(fn):
    got, want = raises_like_torch(fn)
    assert isinstance(got, bg.linalg.LinAlgError) == isinstance(want, torch.linalg.LinAlgError)


BACKWARD_ERRORS = [
    ("qr_complete_tall", lambda m, a: m.linalg.qr(a, mode="complete").R),
    ("qr_r_only", lambda m, a: m.linalg.qr(a, mode="r").R),
]


@pytest.mark.parametrize("fn", [e[1] for e in BACKWARD_ERRORS], ids=[e[0] for e in BACKWARD_ERRORS])
def test_backward_errors_like_torch(fn):
    raises_like_torch(lambda m: fn(m, m.ones(4, 3, dtype=m.float64, requires_grad=True)).sum().backward())
