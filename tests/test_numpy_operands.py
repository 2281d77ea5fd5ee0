"""A NumPy array as the other operand of a Tensor's operators, compared with torch: the Tensor's operator defers to
NumPy (which computes on the tensor's values in NumPy's dtypes and hands back a Tensor), an operator NumPy defers
back raises Python's TypeError, and np.asarray of a tensor refuses what Tensor.numpy() refuses."""

import numpy as np
import pytest
import torch

import batched_grad as bg

EXPRESSIONS = [
    "t - a",
    "a - t",
    "t + a64",
    "a64 * t",
    "t / a",
    "a / t",
    "t ** a",
    "a ** t",
    "t // i",
    "t % a",
    "t < a",
    "a >= t",
    "t == a",
    "t != a",
    "t @ a.T",
    "a.T @ t",
    "t + np.array(2.0)",
    "t * np.float64(2.0)",
    "np.float32(3.0) - t",
    "t.long() & i",
    "i | t.long()",
    "t.long() << i",
]


def _outcome(m, expression, requires_grad):
    t = m.ones(3, 1, requires_grad=requires_grad)
    a, a64, i = np.full((3, 1), 2, np.float32), np.full((3, 1), 2.0), np.full((3, 1), 2)
    try:
        r = eval(expression, {"np": np}, {"t": t, "a": a, "a64": a64, "i": i})
    except (TypeError, RuntimeError) as e:
        return type(e).__name__, str(e)
    if not hasattr(r, "requires_grad"):
        return type(r).__name__, r
    return str(r.dtype), r.tolist(), r.requires_grad


@pytest.mark.filterwarnings("ignore:__array_wrap__ must accept context:DeprecationWarning")
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_operator_with_an_ndarray(expression, requires_grad):
    assert _outcome(bg, expression, requires_grad) == _outcome(torch, expression, requires_grad)


@pytest.mark.filterwarnings("ignore:__array_wrap__ must accept context:DeprecationWarning")
def test_in_place_operator_with_an_ndarray_rebinds_to_numpys_result():
    for m in (torch, bg):
        t = m.ones(3)
        before = t
        t -= np.full(3, 0.5)
        assert t is not before and str(t.dtype) == "torch.float64" and t.tolist() == [0.5] * 3
        assert before.tolist() == [1.0] * 3


@pytest.mark.parametrize(
    "make", ["m.ones(2, requires_grad=True)", "m.tensor([1 + 2j]).conj()", "m.tensor([1 + 2j]).conj().imag"]
)
def test_asarray_refuses_what_numpy_refuses(make):
    outcomes = []
    for m in (torch, bg):
        try:
            outcomes.append(np.asarray(eval(make, {"m": m})).tolist())
        except RuntimeError as e:
            outcomes.append(str(e))
    assert outcomes[1] == outcomes[0]


def test_asarray_of_a_tensor_requiring_grad_under_no_grad():
    for m in (torch, bg):
        w = m.ones(2, requires_grad=True)
        with m.no_grad():
            assert np.asarray(w).tolist() == [1.0, 1.0]
