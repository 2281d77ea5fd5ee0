"""NumPy host forms of common float ops (_ops/_host_forms.py): on the CPU backend a new shape compiles no forward
kernel for them, their results match torch's, and what they do not cover (other dtypes, large operands) still
runs as a kernel with the same results."""

import warnings

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _host
from oracle import assert_same

CPU = jax.default_backend() == "cpu"


def _layer(lib, x, w, b):
    return lib.tanh(x @ w + b) * 0.5 - x / 3 + (-x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_new_shape_compiles_no_forward_kernel_and_matches_torch(dtype):
    rng = np.random.default_rng(0)
    x, w, b = (
        rng.standard_normal(37).astype(dtype),
        rng.standard_normal((37, 37)).astype(dtype),
        rng.standard_normal(37).astype(dtype),
    )
    before = bg.compile_count()
    with bg.no_grad():
        got = _layer(bg, *map(bg.tensor, (x, w, b)))
    if CPU:
        assert bg.compile_count() == before  # add, sub, mul, div, neg, tanh and matmul on the host
    assert_same(got, _layer(torch, *map(torch.tensor, (x, w, b))), rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_gradients_through_host_forms_match_torch():
    rng = np.random.default_rng(1)
    values = rng.standard_normal(29), rng.standard_normal((29, 29)), rng.standard_normal(29)
    ours = [bg.tensor(v, requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    assert_same(
        bg.autograd.grad(_layer(bg, *ours), ours, bg.ones(29)),
        torch.autograd.grad(_layer(torch, *theirs), theirs, torch.ones(29)),
        rtol=1e-12,
    )


def test_inf_and_nan_without_numpy_warnings():
    a, b = np.array([1.0, -1.0, 0.0, np.inf], np.float32), np.array([0.0, 0.0, 0.0, np.inf], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [bg.tensor(a) / bg.tensor(b), bg.tensor(a) - bg.tensor(b), bg.tensor(a) * bg.tensor(b)]
    expected = [torch.tensor(a) / torch.tensor(b), torch.tensor(a) - torch.tensor(b), torch.tensor(a) * torch.tensor(b)]
    assert_same(got, expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.tensor([3, -7, 2]) * lib.tensor([2, 5, -1]),  # integers: a kernel
        lambda lib: lib.tensor([1, 2, 3]) / 2,  # an int tensor divided: a float32 result, on the host
        lambda lib: lib.tensor([1.5, -2.0], dtype=lib.float16) + 1,  # float16: a kernel
        lambda lib: lib.tensor([1 + 2j, 3 - 1j]) * lib.tensor([2 - 1j, 1j]),  # complex: a kernel
        lambda lib: lib.tensor([1.0, 2.0], dtype=lib.float64) + lib.tensor([0.5, 0.25]),  # promoted to float64
        lambda lib: -lib.tensor([True, False]).int(),
    ],
)
def test_other_dtypes_as_torch(make):
    assert_same(make(bg), make(torch))


def test_large_operands_run_as_kernels(monkeypatch):
    monkeypatch.setattr(_host, "HOST_ELEMENTS", 8)
    x = np.linspace(-2.0, 2.0, 11).astype(np.float32)
    before = bg.compile_count()
    got = bg.tanh(bg.tensor(x) * 3)
    if CPU:
        assert bg.compile_count() > before
    assert_same(got, torch.tanh(torch.tensor(x) * 3))


def test_a_recorded_result_computed_on_the_host_reads_as_a_jax_array():
    x = bg.tensor(np.linspace(0.0, 1.0, 5), requires_grad=True)
    y = bg.tanh(x * 2)
    assert isinstance(y.jax(), jax.Array)
    np.testing.assert_allclose(np.asarray(y.jax()), np.tanh(np.linspace(0.0, 2.0, 5)), rtol=1e-12)


def _broadcasting(lib, x, row, column):
    """Every arithmetic host form with a gradient, broadcasting operands and numbers."""
    y = (x * row + column) / (row * row + 1) - (2.5 - x) * 0.5
    return lib.tanh(-y / 3) * column


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradients_on_the_host_through_broadcasts_and_numbers_match_torch(dtype):
    rng = np.random.default_rng(2)
    values = [rng.standard_normal(s).astype(dtype) for s in ((4, 5), (5,), (4, 1))]
    ours = [bg.tensor(v, requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    ct = rng.standard_normal((4, 5)).astype(dtype)
    assert_same(
        bg.autograd.grad(_broadcasting(bg, *ours), ours, bg.tensor(ct)),
        torch.autograd.grad(_broadcasting(torch, *theirs), theirs, torch.tensor(ct)),
        rtol=1e-5 if dtype == np.float32 else 1e-12,
    )


def test_a_new_shape_compiles_no_gradient_kernel_for_arithmetic():
    rng = np.random.default_rng(3)
    for n in (11, 12, 13):
        x = bg.tensor(rng.standard_normal(n), requires_grad=True)
        before = bg.compile_count()
        (g,) = bg.autograd.grad((bg.tanh(x * 2 + 1) / 3 - x).sum(), x)
        if CPU:
            assert bg.compile_count() == before  # the forward and its VJPs on the host
        xt = torch.tensor(x.detach().numpy(), requires_grad=True)
        (expected,) = torch.autograd.grad((torch.tanh(xt * 2 + 1) / 3 - xt).sum(), xt)
        assert_same(g, expected, rtol=1e-12)
