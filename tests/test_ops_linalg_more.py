"""Products and linear algebra beyond the core against torch 2.13: addmm/addmv/addbmm/baddbmm/addr, inner, vdot,
multi_dot, vecdot, matrix_power, matrix_exp, LU (factor, unpack, solve), triangular and Cholesky solves, the *_ex
forms, svdvals, eigvalsh, pinv, lstsq, cond, matrix_rank, tensorinv, tensorsolve, linalg.vander,
householder_product and torch's deprecated forms (values, first and second derivatives, node names, errors)."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import FLOAT_TIERS, assert_same, check_both, raises_like_torch, to_torch

FLOATS = {"float64": (bg.float64, dict(rtol=1e-6, atol=1e-8)), "float32": (bg.float32, dict(rtol=2e-4, atol=2e-5))}
pytestmark = pytest.mark.filterwarnings("ignore:torch.*is deprecated", "ignore:.*deprecated in favor of")


def data(dtype, seed=0):
    rng = np.random.default_rng(seed)
    d = FLOATS[dtype][0]
    leaf = lambda a: bg.tensor(a, dtype=d, requires_grad=True)  # noqa: E731
    g = rng.standard_normal((3, 3))
    spd = g @ g.T + 3 * np.eye(3)
    return {
        "A": leaf(rng.standard_normal((3, 3)) + 2 * np.eye(3)),
        "S": leaf(spd),
        "L": leaf(np.linalg.cholesky(spd)),
        "B": leaf(rng.standard_normal((3, 2))),
        "v": leaf(rng.standard_normal(3)),
        "w": leaf(rng.standard_normal(2)),
        "T": leaf(rng.standard_normal((2, 3, 3))),
        "R": leaf(rng.standard_normal((4, 3))),
        "C": leaf(rng.standard_normal((2, 3, 2))),
    }


CALLS = {
    "addmm": lambda m, i: m.addmm(i["A"], i["A"], i["B"][:, :1].expand(3, 3) * 1),
    "addmm-scaled": lambda m, i: m.addmm(i["v"], i["A"], i["A"], beta=0.5, alpha=-2),
    "addmm-beta0": lambda m, i: i["A"].addmm(i["A"], i["S"], beta=0),
    "addmv": lambda m, i: m.addmv(i["v"], i["A"], i["v"], alpha=3),
    "addbmm": lambda m, i: m.addbmm(i["B"], i["T"], i["C"], beta=2),
    "baddbmm": lambda m, i: m.baddbmm(i["C"], i["T"], i["C"]),
    "addr": lambda m, i: m.addr(i["B"], i["v"], i["w"], beta=-1),
    "inner": lambda m, i: m.inner(i["A"], i["B"].T),
    "inner-vectors": lambda m, i: m.inner(i["v"], i["v"]),
    "vdot": lambda m, i: m.vdot(i["v"], i["A"][0]),
    "ger": lambda m, i: m.ger(i["v"], i["w"]),
    "multi_dot": lambda m, i: m.linalg.multi_dot([i["v"], i["A"], i["B"]]),
    "multi_dot-matrices": lambda m, i: m.linalg.multi_dot([i["A"], i["S"], i["B"], i["w"]]),
    "vecdot": lambda m, i: m.linalg.vecdot(i["A"], i["S"], dim=0),
    "matrix_power": lambda m, i: m.matrix_power(i["A"], 3),
    "matrix_power-negative": lambda m, i: m.linalg.matrix_power(i["A"], -2),
    "matrix_power-one": lambda m, i: i["A"].matrix_power(1),
    "matrix_exp": lambda m, i: m.matrix_exp(i["A"] * 0.5),
    "linalg.matrix_exp": lambda m, i: m.linalg.matrix_exp(i["T"]),
    "det": lambda m, i: m.det(i["A"]),
    "slogdet": lambda m, i: m.slogdet(i["T"])[1],
    "lu_factor": lambda m, i: m.linalg.lu_factor(i["A"]).LU,
    "lu": lambda m, i: m.linalg.lu(i["R"])[1],
    "lu-U": lambda m, i: m.linalg.lu(i["A"]).U,
    "lu_unpack": lambda m, i: m.lu_unpack(*m.linalg.lu_factor(i["A"]))[2],
    "lu_solve": lambda m, i: m.linalg.lu_solve(*m.linalg.lu_factor(i["A"]), i["B"]),
    "lu_solve-left": lambda m, i: m.linalg.lu_solve(*m.linalg.lu_factor(i["A"]), i["B"].T, left=False),
    "lu_solve-adjoint": lambda m, i: m.linalg.lu_solve(*m.linalg.lu_factor(i["A"]), i["B"], adjoint=True),
    "torch.lu_solve": lambda m, i: m.lu_solve(i["B"], *m.linalg.lu_factor(i["A"])),
    "solve_triangular": lambda m, i: m.linalg.solve_triangular(i["A"], i["B"], upper=True),
    "solve_triangular-lower": lambda m, i: m.linalg.solve_triangular(i["A"], i["B"].T, upper=False, left=False),
    "solve_triangular-unit": lambda m, i: m.linalg.solve_triangular(i["T"], i["C"], upper=False, unitriangular=True),
    "triangular_solve": lambda m, i: m.triangular_solve(i["B"], i["A"], upper=False)[0],
    "triangular_solve-transpose": lambda m, i: i["B"].triangular_solve(i["A"], transpose=True).solution,
    "cholesky_solve": lambda m, i: m.cholesky_solve(i["B"], i["L"]),
    "cholesky_solve-upper": lambda m, i: m.cholesky_solve(i["B"], i["L"].mT, upper=True),
    "cholesky_inverse": lambda m, i: m.cholesky_inverse(i["L"]),
    "cholesky": lambda m, i: m.cholesky(i["S"]),
    "cholesky-upper": lambda m, i: i["S"].cholesky(upper=True),
    "cholesky_ex": lambda m, i: m.linalg.cholesky_ex(i["S"]).L,
    "inv_ex": lambda m, i: m.linalg.inv_ex(i["A"])[0],
    "solve_ex": lambda m, i: m.linalg.solve_ex(i["A"], i["B"]).result,
    "svdvals": lambda m, i: m.linalg.svdvals(i["R"]),
    "eigvalsh": lambda m, i: m.linalg.eigvalsh(i["S"]),
    "eigvalsh-upper": lambda m, i: m.linalg.eigvalsh(i["A"], "U"),
    "pinv": lambda m, i: m.linalg.pinv(i["R"]),
    "pinv-hermitian": lambda m, i: m.linalg.pinv(i["S"], hermitian=True),
    "pinverse": lambda m, i: m.pinverse(i["B"]),
    "lstsq": lambda m, i: m.linalg.lstsq(i["R"], i["R"][:, :2] * 2 + 1).solution,
    "lstsq-vector": lambda m, i: m.linalg.lstsq(i["A"], i["v"]).solution,
    "cond": lambda m, i: m.linalg.cond(i["A"]),
    "cond-minus2": lambda m, i: m.linalg.cond(i["R"], -2),
    "tensorinv": lambda m, i: m.linalg.tensorinv(i["A"], 1),
    "tensorsolve": lambda m, i: m.linalg.tensorsolve(i["A"], i["v"]),
    "vander": lambda m, i: m.linalg.vander(i["v"]),
    "vander-N": lambda m, i: m.linalg.vander(i["B"], N=4),
    "householder_product": lambda m, i: m.linalg.householder_product(i["R"], i["v"][:2]),
    "diagonal": lambda m, i: m.linalg.diagonal(i["T"], offset=1),
    "qr": lambda m, i: m.qr(i["R"])[1],
    "svd": lambda m, i: m.svd(i["R"]).S,
    "svd-V": lambda m, i: m.svd(i["S"]).V.abs(),
}


@pytest.mark.parametrize(("dtype", "batched"), FLOAT_TIERS)
@pytest.mark.parametrize("name", CALLS)
def test_values_and_derivatives(name, dtype, batched):
    inputs = data(dtype)
    keys = sorted(inputs)
    check_both(
        lambda m, *xs: CALLS[name](m, dict(zip(keys, xs))),
        [inputs[k] for k in keys],
        batched=batched,
        gradgrad=name not in ("lstsq", "householder_product"),
        **FLOATS[dtype][1],
    )


def test_cond_in_other_norms():
    # torch 2.13's backward of cond in a norm other than 2 raises (an in-place write into inv's saved result):
    # values are checked against it, derivatives against its formula norm(A) * norm(inv(A))
    i = data("float64")
    for p in ("fro", "nuc", 1, -1, float("inf"), -float("inf")):
        assert_same(bg.linalg.cond(i["A"], p), torch.linalg.cond(to_torch(i["A"]), p))
        check_both(
            lambda m, a: (
                m.linalg.cond(a, p)
                if m is bg
                else m.linalg.matrix_norm(a, p) * m.linalg.matrix_norm(m.linalg.inv(a), p)
            ),
            [i["A"]],
        )


# composed in torch from other ops than here: cond (a nan_to_num or a squeeze last), tensorinv (a reshape alias)
@pytest.mark.parametrize("name", [name for name in CALLS if not name.startswith(("cond", "tensorinv"))])
def test_node_names(name):
    inputs = data("float64")
    got = CALLS[name](bg, inputs)
    want = CALLS[name](torch, {k: to_torch(v) for k, v in inputs.items()})
    assert got.grad_fn.name() == want.grad_fn.name()


def test_integer_outputs_and_results():
    i = data("float64")
    t = {k: to_torch(v) for k, v in i.items()}
    assert_same(bg.linalg.lu_factor(i["A"]).pivots, torch.linalg.lu_factor(t["A"]).pivots)
    assert_same(bg.linalg.lu(i["R"]).P, torch.linalg.lu(t["R"]).P)
    assert bg.linalg.lu(i["A"]).P.grad_fn is None
    assert_same(
        tuple(bg.lu_unpack(*bg.linalg.lu_factor(i["A"]), True, False)),
        tuple(torch.lu_unpack(*torch.linalg.lu_factor(t["A"]), True, False)),
    )
    a = bg.tensor([[0.0, 1.0, 2.0], [2.0, 3.0, 1.0], [1.0, 1.0, 5.0]])
    assert_same(tuple(bg.linalg.lu_factor_ex(a)), tuple(torch.linalg.lu_factor_ex(to_torch(a))))
    singular, indefinite = bg.tensor([[1.0, 2.0], [2.0, 4.0]]), bg.tensor([[1.0, 2.0], [2.0, 1.0]])
    assert_same(bg.linalg.inv_ex(singular).info, torch.linalg.inv_ex(to_torch(singular)).info)
    assert_same(
        bg.linalg.solve_ex(singular, bg.ones(2)).info, torch.linalg.solve_ex(to_torch(singular), torch.ones(2)).info
    )
    assert_same(bg.linalg.cholesky_ex(indefinite).info, torch.linalg.cholesky_ex(to_torch(indefinite)).info)
    assert_same(bg.linalg.cholesky_ex(i["S"]).info, torch.linalg.cholesky_ex(t["S"]).info)
    assert_same(bg.linalg.matrix_rank(bg.ones(3, 4)), torch.linalg.matrix_rank(torch.ones(3, 4)))
    assert_same(bg.linalg.matrix_rank(i["T"], atol=0.5), torch.linalg.matrix_rank(t["T"], atol=0.5))
    for driver in ("gelsy", "gelsd", "gelss", "gels"):
        got = bg.linalg.lstsq(i["R"], i["R"][:, :2] + 1, driver=driver)
        want = torch.linalg.lstsq(t["R"], t["R"][:, :2] + 1, driver=driver)
        assert_same(tuple(got), tuple(want), rtol=1e-6, atol=1e-8)
    assert_same(tuple(bg.svd(i["R"], compute_uv=False)), tuple(torch.svd(t["R"], compute_uv=False)))
    assert_same(bg.svd(i["R"], some=False).U.abs(), torch.svd(t["R"], some=False).U.abs())
    assert type(bg.linalg.lu_factor(i["A"])).__name__ == "linalg_lu_factor"


def test_deprecation_warnings():
    i = data("float64")
    for call, text in (
        (lambda m: m.chain_matmul(i["A"], i["A"]), "torch.chain_matmul is deprecated"),
        (lambda m: m.cholesky(i["S"]), "torch.cholesky is deprecated"),
        (lambda m: m.qr(i["A"]), "torch.qr is deprecated"),
        (lambda m: m.triangular_solve(i["B"], i["A"]), "torch.triangular_solve is deprecated"),
        (lambda m: m.lu_solve(i["B"], *m.linalg.lu_factor(i["A"])), "torch.lu_solve is deprecated"),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(bg)
        assert any(str(w.message).startswith(text) for w in caught), text


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.addmm(m.ones(2, 2), m.ones(2, 3), m.ones(2, 2)),
        lambda m: m.addmm(m.ones(3, 3), m.ones(2, 3), m.ones(3, 2)),
        lambda m: m.addmv(m.ones(3), m.ones(2, 3), m.ones(3)),
        lambda m: m.baddbmm(m.ones(2, 2, 2), m.ones(3, 2, 3), m.ones(3, 3, 2)),
        lambda m: m.addr(m.ones(2, 2), m.ones(3), m.ones(2)),
        lambda m: m.vdot(m.ones(2), m.ones(3)),
        lambda m: m.inner(m.ones(2, 3), m.ones(2)),
        lambda m: m.linalg.multi_dot([m.ones(2, 2)]),
        lambda m: m.linalg.multi_dot([m.ones(2, 2), m.ones(3, 2)]),
        lambda m: m.matrix_power(m.ones(2, 3), 2),
        lambda m: m.linalg.matrix_exp(m.ones(2, 3)),
        lambda m: m.linalg.solve_triangular(m.ones(2, 2), m.ones(3, 1), upper=True),
        lambda m: m.linalg.eigvalsh(m.ones(2, 2), "X"),
        lambda m: m.linalg.lstsq(m.ones(2, 2), m.ones(2, 2), driver="x"),
        lambda m: m.linalg.tensorinv(m.ones(2, 3), 1),
        lambda m: m.linalg.vander(m.ones(2), N=1),
        lambda m: m.linalg.lu_factor(m.tensor([[0.0, 0.0], [0.0, 0.0]])),
        lambda m: m.linalg.householder_product(m.ones(2, 3), m.ones(2)),
    ],
    ids=[
        "addmm-shapes",
        "addmm-input",
        "addmv-sizes",
        "baddbmm-input",
        "addr-input",
        "vdot-sizes",
        "inner-sizes",
        "multi_dot-one",
        "multi_dot-shapes",
        "matrix_power-square",
        "matrix_exp-square",
        "solve_triangular-shapes",
        "eigvalsh-uplo",
        "lstsq-driver",
        "tensorinv-shape",
        "vander-N",
        "lu_factor-singular",
        "householder-shape",
    ],
)
def test_errors(call):
    raises_like_torch(call)
