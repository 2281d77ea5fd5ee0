"""The ops real torch code reaches for, against torch 2.13 (float32 and float64; values, dtypes, shapes, errors, first
and second derivatives): var_mean, std_mean, diag_embed, diagflat, addcmul, addcdiv, inverse, linalg.eig,
linalg.eigvals, unique, real, imag, conj."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import FLOAT_PARAMS, FLOATS, assert_same, check_both, check_op, raises_like_torch, rand, to_torch


def leaves(dtype, *shapes, low=-1.0, high=1.0):
    return [rand(*s, dtype=FLOATS[dtype][0], low=low, high=high, seed=i + 11) for i, s in enumerate(shapes)]


def check(fn, inputs, dtype, **kw):
    check_both(fn, inputs, **FLOATS[dtype][1], **kw)


# ---- var_mean / std_mean --------------------------------------------------------------------------------
MOMENTS = {
    "all": lambda m, f, x: f(x),
    "dim": lambda m, f, x: f(x, 1),
    "dim-keepdim": lambda m, f, x: f(x, 1, keepdim=True),
    "dims": lambda m, f, x: f(x, (0, 2)),
    "correction": lambda m, f, x: f(x, dim=0, correction=0),
    "unbiased": lambda m, f, x: f(x, 2, False),
    "unbiased-positional": lambda m, f, x: f(x, False),
}


@pytest.mark.parametrize("dtype", FLOAT_PARAMS)
@pytest.mark.parametrize("fn", ["var_mean", "std_mean"])
@pytest.mark.parametrize("call", MOMENTS)
def test_var_mean_std_mean(fn, call, dtype):
    (x,) = leaves(dtype, (3, 4, 2))
    check(lambda m, x: MOMENTS[call](m, getattr(m, fn), x), [x], dtype, batched=call == "dim")


def test_var_mean_node_names_and_outputs():
    x = bg.ones(3, 2, requires_grad=True)
    for fn, name in (("var_mean", "VarMeanBackward0"), ("std_mean", "StdMeanBackward0")):
        out = getattr(bg, fn)(x, 0)
        assert type(out) is tuple and [o.grad_fn.name() for o in out] == [name, name]
        assert out[1].output_nr == 1
        # dims [] reduce over every dim (torch's derivative of that is inf: values only)
        assert_same(getattr(bg, fn)(x, []), getattr(torch, fn)(to_torch(x), []))
    z = bg.tensor([[1 + 2j, 3 - 1j], [0.5j, 2.0]])
    assert_same(bg.var_mean(z, 1), torch.var_mean(to_torch(z), 1))


def test_var_mean_errors_and_warnings():
    raises_like_torch(lambda m: m.var_mean(m.ones(3, dtype=m.int64)))
    raises_like_torch(lambda m: m.std_mean(m.ones(3, dtype=m.int64)))
    for fn in ("var_mean", "std_mean"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = getattr(bg, fn)(bg.ones(1))
        assert_same(result, getattr(torch, fn)(torch.ones(1)))
        assert str(caught[0].message).startswith(f"{fn}(): degrees of freedom is <= 0.")


# ---- diag_embed / diagflat ------------------------------------------------------------------------------
DIAGONALS = {
    "embed": lambda m, x: m.diag_embed(x),
    "embed-offset": lambda m, x: m.diag_embed(x, 1),
    "embed-negative-offset": lambda m, x: m.diag_embed(x, -2),
    "embed-dims": lambda m, x: m.diag_embed(x, 1, 0, 2),
    "embed-dims-reversed": lambda m, x: m.diag_embed(x, -1, 2, 0),
    "embed-method": lambda m, x: x.diag_embed(dim1=0),
    "flat": lambda m, x: m.diagflat(x),
    "flat-offset": lambda m, x: m.diagflat(x, 2),
    "flat-negative": lambda m, x: m.diagflat(x[0], -1),
    "flat-method": lambda m, x: x.diagflat(-3),
}


@pytest.mark.parametrize("dtype", FLOAT_PARAMS)
@pytest.mark.parametrize("call", DIAGONALS)
def test_diag_embed_and_diagflat(call, dtype):
    (x,) = leaves(dtype, (2, 3))
    check(DIAGONALS[call], [x], dtype, batched=call == "embed")


def test_diagonals_of_other_shapes_and_dtypes():
    s = rand()
    check_both(lambda m, s: m.diagflat(s), [s])
    for x in (bg.tensor([1, 2, 3]), bg.tensor([True, False]), bg.tensor([[1 + 1j, 2j]])):
        assert_same(bg.diag_embed(x), torch.diag_embed(to_torch(x)))
        assert_same(bg.diagflat(x, 1), torch.diagflat(to_torch(x), 1))
    assert bg.diag_embed(bg.ones(2, 3, requires_grad=True)).grad_fn.name() == "DiagEmbedBackward0"
    assert bg.diagflat(bg.ones(2, 3, requires_grad=True)).grad_fn.name() == "DiagEmbedBackward0"


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.diag_embed(m.ones(2, 3), 0, 1, 1),
        lambda m: m.diag_embed(m.ones(2, 3), 0, 5, 1),
        lambda m: m.diag_embed(m.tensor(1.0)),
    ],
    ids=["same-dims", "dim-out-of-range", "0-dim"],
)
def test_diag_embed_errors(call):
    raises_like_torch(call)


# ---- addcmul / addcdiv ---------------------------------------------------------------------------------
ADDC = {
    "plain": lambda m, f, a, b, c: f(a, b, c),
    "value": lambda m, f, a, b, c: f(a, b, c, value=-0.5),
    "broadcast": lambda m, f, a, b, c: f(a[:, :1], b, c[0]),
    "method": lambda m, f, a, b, c: getattr(a, f.__name__)(b, c, value=2),
    "value-tensor": lambda m, f, a, b, c: f(a, b, c, value=m.tensor(1.5)),
}


@pytest.mark.parametrize("dtype", FLOAT_PARAMS)
@pytest.mark.parametrize("fn", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("call", ADDC)
def test_addcmul_addcdiv(fn, call, dtype):
    a, b, c = leaves(dtype, (3, 4), (3, 4), (3, 4), low=0.5, high=1.5)
    check(lambda m, a, b, c: ADDC[call](m, getattr(m, fn), a, b, c), [a, b, c], dtype, batched=call == "plain")


@pytest.mark.parametrize("fn", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv_in_place_and_names(fn):
    a, b, c = leaves("float64", (3, 4), (3, 4), (4,), low=0.5, high=1.5)

    def inplace(m, a, b, c):
        y = a * 1
        getattr(y, f"{fn}_")(b, c, value=0.25)
        return y

    check_both(inplace, [a, b, c])
    assert getattr(bg, fn)(a, b, c).grad_fn.name() == getattr(torch, fn)(*to_torch([a, b, c])).grad_fn.name()
    raises_like_torch(lambda m: getattr(m.ones(2), f"{fn}_")(m.ones(3, 2), m.ones(2)))


@pytest.mark.parametrize(
    "types",
    [
        ("int64", "int64", "int64"),
        ("int64", "float32", "float64"),
        ("bool", "float32", "float32"),
        ("int32", "int64", "int16"),
    ],
)
def test_addc_promotion(types):
    a, b, c = (bg.tensor([[1, 2], [3, 4]]).to(getattr(bg, t)) for t in types)
    for fn in ("addcmul", "addcdiv"):
        try:
            want = getattr(torch, fn)(*to_torch([a, b, c]), value=2)
        except Exception:
            raises_like_torch(
                lambda m: getattr(m, fn)(*[m.tensor([[1, 2], [3, 4]]).to(getattr(m, t)) for t in types], value=2)
            )
            continue
        assert_same(getattr(bg, fn)(a, b, c, value=2), want)
    if types[0] == "int64":  # an integer result truncates a float value, as torch
        assert_same(bg.addcmul(a, b, c, value=0.5), torch.addcmul(*to_torch([a, b, c]), value=0.5))


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.addcmul(m.ones(2), 2, m.ones(2)),
        lambda m: m.addcdiv(2, m.ones(2), m.ones(2)),
        lambda m: m.addcmul(m.ones(2, dtype=m.bool), m.ones(2, dtype=m.bool), m.ones(2, dtype=m.bool)),
        lambda m: m.addcdiv(m.ones(2), m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64)),
        lambda m: m.addcmul(m.ones(2), m.ones(3), m.ones(2)),
    ],
    ids=["number-tensor1", "number-input", "bool", "integer-division", "shapes"],
)
def test_addc_errors(call):
    raises_like_torch(call)


# ---- inverse ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_PARAMS)
def test_inverse(dtype):
    (a,) = leaves(dtype, (2, 3, 3))
    a = (a + 3 * bg.eye(3, dtype=a.dtype)).detach().requires_grad_()
    check(lambda m, a: m.inverse(a), [a], dtype)
    check(lambda m, a: a.inverse() @ a[0], [a], dtype, gradgrad=False)
    assert bg.inverse(a).grad_fn.name() == "LinalgInvExBackward0"


def test_inverse_errors():
    raises_like_torch(lambda m: m.inverse(m.zeros(2, 2)))
    raises_like_torch(lambda m: m.inverse(m.zeros(2)))
    raises_like_torch(lambda m: m.zeros(2, 3).inverse())


# ---- linalg.eig / eigvals ---------------------------------------------------------------------------------
def _general(dtype, *shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return bg.tensor(a, dtype=FLOATS[dtype][0], requires_grad=True)


# losses that do not depend on the eigenvectors' phases (torch's backward requires that)
EIG_LOSSES = {
    "eigenvalues": lambda m, a: m.linalg.eigvals(a).real * 2 + m.linalg.eigvals(a).imag ** 2,
    "eig-values": lambda m, a: m.real(m.linalg.eig(a).eigenvalues) * m.imag(m.linalg.eig(a)[0]),
    "vector-moduli": lambda m, a: m.linalg.eig(a).eigenvectors.abs(),
    "both": lambda m, a: m.linalg.eig(a)[1].abs() ** 2 * m.linalg.eig(a)[0].abs(),
    "projector": lambda m, a: (lambda v: (v * v.conj()).real)(m.linalg.eig(a)[1]),
}


@pytest.mark.parametrize("dtype", FLOAT_PARAMS)
@pytest.mark.parametrize("loss", EIG_LOSSES)
def test_eig_values_and_derivatives(loss, dtype):
    a = _general(dtype, 4, 4)
    tol = FLOATS[dtype][1] if dtype == "float64" else dict(rtol=2e-3, atol=2e-3)
    check_op(
        lambda a: EIG_LOSSES[loss](bg, a), lambda a: EIG_LOSSES[loss](torch, a), [a], batched=loss == "both", **tol
    )


@pytest.mark.parametrize("dtype", FLOAT_PARAMS)
def test_eig_outputs(dtype):
    a = _general(dtype, 2, 3, 3, seed=1)
    got, want = bg.linalg.eig(a), torch.linalg.eig(to_torch(a))
    tol = FLOATS[dtype][1] if dtype == "float64" else dict(rtol=1e-4, atol=1e-5)
    assert_same(tuple(got), tuple(want), **tol)
    assert type(got).__name__ == "linalg_eig" and got.eigenvalues is got[0] and got.eigenvectors is got[1]
    assert [o.grad_fn.name() for o in got] == ["LinalgEigBackward0"] * 2
    assert bg.linalg.eigvals(a).grad_fn.name() == "LinalgEigBackward0"
    assert_same(bg.linalg.eigvals(a), torch.linalg.eigvals(to_torch(a)), **tol)


def test_eig_of_complex_matrices():
    a = np.random.default_rng(3).standard_normal((3, 3)) + 1j * np.random.default_rng(4).standard_normal((3, 3))
    x = bg.tensor(a, requires_grad=True)
    check_op(
        lambda x: bg.linalg.eig(x)[1].abs() + bg.linalg.eig(x)[0].abs(),
        lambda x: torch.linalg.eig(x)[1].abs() + torch.linalg.eig(x)[0].abs(),
        [x],
        batched=False,
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.linalg.eig(m.ones(2, 2, dtype=m.int64)),
        lambda m: m.linalg.eig(m.ones(2, 3)),
        lambda m: m.linalg.eig(m.ones(3)),
        lambda m: m.linalg.eigvals(m.ones(2, 3)),
    ],
    ids=["int", "not-square", "1-dim", "eigvals-not-square"],
)
def test_eig_errors(call):
    raises_like_torch(call)


# ---- unique ---------------------------------------------------------------------------------------------
UNIQUE_INPUTS = {
    "ints": [3, 1, 3, 2, 7, 1, 5],
    "floats": [2.5, -1.0, 2.5, 0.0, -0.0, 9.0],
    "nan": [float("nan"), 1.0, float("nan")],
    "matrix": [[1, 2], [1, 2], [0, 1]],
    "bool": [True, False, True],
    "scalar": 3.0,
    "empty": [],
}
UNIQUE_CALLS = {
    "plain": lambda m, x: m.unique(x),
    "inverse": lambda m, x: m.unique(x, return_inverse=True),
    "counts": lambda m, x: m.unique(x, return_counts=True),
    "all": lambda m, x: m.unique(x, sorted=True, return_inverse=True, return_counts=True),
    "unsorted": lambda m, x: m.unique(x, sorted=False, return_counts=True),
    "method": lambda m, x: x.unique(return_inverse=True),
}


@pytest.mark.parametrize("call", UNIQUE_CALLS)
@pytest.mark.parametrize("data", UNIQUE_INPUTS)
def test_unique(data, call):
    x = bg.tensor(UNIQUE_INPUTS[data])
    got, want = UNIQUE_CALLS[call](bg, x), UNIQUE_CALLS[call](torch, to_torch(x))
    assert isinstance(got, tuple) is isinstance(want, tuple)
    assert_same(got, want)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_along_a_dim(dim):
    x = bg.tensor([[1, 2, 1], [1, 2, 1], [0, 1, 0]])
    assert_same(
        bg.unique(x, dim=dim, return_inverse=True, return_counts=True),
        torch.unique(to_torch(x), dim=dim, return_inverse=True, return_counts=True),
    )
    raises_like_torch(lambda m: m.unique(m.tensor(3.0), dim=0))


def test_unique_is_not_differentiable():
    x = bg.tensor([3.0, 1.0, 3.0], requires_grad=True)
    for dim, _name in ((None, "_unique2"), (0, "unique_dim")):
        u = bg.unique(x, dim=dim)
        tu = torch.unique(to_torch(x), dim=dim)
        assert u.requires_grad and u.grad_fn.name() == tu.grad_fn.name()
        assert_same(u, tu)
        raises_like_torch(
            lambda m: (m.unique(m.tensor([3.0, 1.0, 3.0], requires_grad=True), dim=dim) * 2).sum().backward()
        )
    inverse = bg.unique(x, return_inverse=True)[1]
    assert not inverse.requires_grad and inverse.dtype is bg.int64
    with bg.no_grad():
        assert not bg.unique(x).requires_grad


def test_unique_errors():
    raises_like_torch(lambda m: m.unique(m.tensor([1 + 1j])))


# ---- real / imag / conj ---------------------------------------------------------------------------------
def test_complex_parts():
    z = bg.tensor(np.array([[1 + 2j, -3 + 0.5j], [0.25j, 2.0]]), requires_grad=True)
    for f in (
        lambda m, z: m.real(z) * m.imag(z),
        lambda m, z: z.real**2 + z.imag,
        lambda m, z: (z * z.conj()).real,
        lambda m, z: m.conj(z).abs(),
    ):
        check_both(f, [z])
    r = bg.ones(2, requires_grad=True)
    assert bg.real(r) is r and r.real is r and r.conj() is r
    assert z.real.grad_fn.name() == to_torch(z).real.grad_fn.name()
    raises_like_torch(lambda m: m.ones(2).imag)
