"""torch's deprecated signatures with the scaling scalar first (`x.add_(alpha, other)`, `x.addcmul_(value, a, b)`,
`torch.addmm(beta, input, alpha, m1, m2)`, ...), still taken by torch 2.13 with a UserWarning: values, gradients,
the out= and in-place forms, and the warning's text, against torch."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

# each call as old code writes it; a, b vectors of 3, m a 2x2 matrix, v a vector of 2
CALLS = {
    "Tensor.add_(alpha, other)": lambda lib, a, b, m, v: a.clone().add_(-0.5, b),
    "Tensor.add(alpha, other)": lambda lib, a, b, m, v: a.add(2, b),
    "torch.add(input, alpha, other)": lambda lib, a, b, m, v: lib.add(a, 3, b),
    "Tensor.sub_(alpha, other)": lambda lib, a, b, m, v: a.clone().sub_(2, b),
    "torch.sub(input, alpha, other)": lambda lib, a, b, m, v: lib.sub(a, 0.25, b),
    "Tensor.addcmul_(value, t1, t2)": lambda lib, a, b, m, v: a.clone().addcmul_(0.1, b, b),
    "torch.addcmul(input, value, t1, t2)": lambda lib, a, b, m, v: lib.addcmul(a, 2, b, a),
    "Tensor.addcdiv_(value, t1, t2)": lambda lib, a, b, m, v: a.clone().addcdiv_(-0.01, b, a + 2),
    "torch.addcdiv(input, value, t1, t2)": lambda lib, a, b, m, v: lib.addcdiv(a, 2, b, a + 2),
    "torch.addmm(beta, input, alpha, m1, m2)": lambda lib, a, b, m, v: lib.addmm(2.0, m, 3.0, m, m.T),
    "torch.addmm(beta, input, m1, m2)": lambda lib, a, b, m, v: lib.addmm(0.5, m, m, m),
    "Tensor.addmm(beta, alpha, m1, m2)": lambda lib, a, b, m, v: m.addmm(2.0, -1.0, m, m),
    "Tensor.addmm_(beta, m1, m2)": lambda lib, a, b, m, v: m.clone().addmm_(2.0, m, m),
    "torch.addmv(beta, input, alpha, mat, vec)": lambda lib, a, b, m, v: lib.addmv(2.0, v, 3.0, m, v),
    "torch.addmv_(beta, input, alpha, mat, vec)": lambda lib, a, b, m, v: lib.addmv_(2.0, v.clone(), 3.0, m, v),
    "Tensor.addmv(beta, mat, vec)": lambda lib, a, b, m, v: v.addmv(0.5, m, v),
    "torch.addr(beta, input, alpha, v1, v2)": lambda lib, a, b, m, v: lib.addr(2.0, m, 3.0, v, v * 2),
    "Tensor.addr_(beta, alpha, v1, v2)": lambda lib, a, b, m, v: m.clone().addr_(2.0, 3.0, v, v),
    "torch.addbmm(beta, input, b1, b2)": lambda lib, a, b, m, v: lib.addbmm(2.0, m, m[None], m[None]),
    "torch.baddbmm(beta, input, alpha, b1, b2)": lambda lib, a, b, m, v: lib.baddbmm(
        2.0, m[None], 3.0, m[None], m[None]
    ),
    "Tensor.baddbmm_(beta, alpha, b1, b2)": lambda lib, a, b, m, v: (
        m[None].clone().baddbmm_(2.0, 3.0, m[None], m[None])
    ),
    "0-dim tensor scalar": lambda lib, a, b, m, v: a.clone().add_(lib.tensor(2.0), b),
    "a number as the other tensor": lambda lib, a, b, m, v: a.add(2, 3),
    "torch.add(input, alpha, other, out=)": lambda lib, a, b, m, v: lib.add(a, 3, b, out=lib.empty(3)),
}


def _operands(lib, requires_grad=False):
    a = lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64, requires_grad=requires_grad)
    b = lib.tensor([0.5, 4.0, -1.5], dtype=lib.float64, requires_grad=requires_grad)
    m = lib.tensor([[1.0, 2.0], [-3.0, 0.5]], dtype=lib.float64, requires_grad=requires_grad)
    v = lib.tensor([0.25, -1.0], dtype=lib.float64, requires_grad=requires_grad)
    return a, b, m, v


def _call_warning(lib, call, requires_grad=False):
    """(the result, the text of the warning it gave) with every deprecated call warning."""
    lib.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = call(lib, *_operands(lib, requires_grad))
    finally:
        lib.set_warn_always(False)
    (warning,) = [w for w in caught if "deprecated" in str(w.message)]
    return result, str(warning.message).split(" (Triggered internally")[0]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_values_and_warning_as_torch(name):
    ours, our_text = _call_warning(bg, CALLS[name])
    theirs, their_text = _call_warning(torch, CALLS[name])
    assert_same(ours, theirs)
    assert our_text == their_text


def test_gradients_flow_through_the_deprecated_forms():
    def loss(lib):
        a, b, m, v = _operands(lib, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            total = a.add(2.0, b).sum() + lib.addcmul(a, 0.5, b, a).pow(2).sum() + lib.addmm(2.0, m, 3.0, m, m).sum()
        return lib.autograd.grad(total, [a, b, m])

    assert_same(loss(bg), loss(torch))


def test_a_process_is_warned_once_for_all_deprecated_signatures():
    def count(lib):
        a, b, m, _ = _operands(lib)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a.clone().add_(2, b)
            a.clone().sub_(2, b)
            lib.addmm(2.0, m, m, m)
        return sum("deprecated" in str(w.message) for w in caught)

    count(torch), count(bg)  # the first deprecated call of the process may already have happened above
    assert count(bg) == count(torch) == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.ones(3).add(lib.ones(3), 2),  # the scalar after the tensor: no signature fits
        lambda lib: lib.ones(3).addcmul(lib.ones(3), 2, lib.ones(3)),  # the scalar between the tensors
        lambda lib: lib.ones(3).add_(2, lib.ones(3), alpha=2),  # the scalar twice
    ],
)
def test_calls_fitting_no_signature_still_raise(call):
    for lib in (torch, bg):
        with warnings.catch_warnings(), pytest.raises(TypeError):
            warnings.simplefilter("ignore")
            call(lib)


def test_the_in_place_form_updates_the_tensor_it_is_called_on():
    x = bg.tensor([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = x.add_(10, bg.tensor([1.0, 1.0]))
    assert y is x and np.array_equal(x.numpy(), [11.0, 12.0])


@pytest.mark.parametrize("name", ["Tensor.add_(alpha, other)", "torch.add(input, alpha, other)", "parameter.data"])
def test_the_warning_points_at_the_callers_line(name):
    """Old training loops write `p.data.add_(-lr, p.grad.data)`: the warning names the loop's line, whichever path
    (the lean in-place update of a parameter's data included) the call takes."""
    calls = {
        "Tensor.add_(alpha, other)": lambda lib, a, b: a.clone().add_(-0.5, b),
        "torch.add(input, alpha, other)": lambda lib, a, b: lib.add(a, 3, b),
        "parameter.data": lambda lib, a, b: lib.nn.Parameter(a.clone()).data.add_(-0.5, b),
    }
    bg.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            calls[name](bg, bg.ones(3, dtype=bg.float64), bg.ones(3, dtype=bg.float64))
    finally:
        bg.set_warn_always(False)
    (warning,) = [w for w in caught if "deprecated" in str(w.message)]
    assert warning.filename == __file__
