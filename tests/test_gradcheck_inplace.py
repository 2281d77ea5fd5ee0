"""gradcheck perturbs the input Tensors themselves, as torch 2.13 does (through `.data`): a function that reads an
input through a closure or through a view of it sees the perturbation, and the values come back afterwards."""

import numpy as np
import pytest
import torch

import batched_grad as bg


def leaf(lib, values, dtype):
    return lib.tensor(values, dtype=dtype, requires_grad=True)


def closure_checks(lib):
    """(func, inputs) pairs whose func reads its inputs through Python closures, not through its arguments."""
    x = leaf(lib, [0.3, -0.7, 1.2], lib.float64)
    y = leaf(lib, [0.5, 2.0], lib.float64)
    z = leaf(lib, [0.3 + 0.1j, -0.7j], lib.complex128)
    tail = x[1:]  # a view made before gradcheck: it shares x's values
    return {
        "closure": (lambda _: (x**2).sin(), (x,)),
        "view": (lambda _: tail.exp() * 2, (x,)),
        "one of two": (lambda a, b: a.sum() * y, (x, y)),
        "complex": (lambda _: (z * z).abs() * z.abs().sin(), (z,)),
        "the input itself": (lambda _: x, (x,)),  # read while perturbed, not after the values come back
    }


CASES = ["closure", "view", "one of two", "complex", "the input itself"]


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_function_reading_its_input_through_a_closure_passes_as_in_torch(case, fast_mode):
    for lib in (torch, bg):
        func, inputs = closure_checks(lib)[case]
        assert lib.autograd.gradcheck(func, inputs, fast_mode=fast_mode), lib.__name__


def test_wrong_gradient_read_through_a_closure_is_still_caught():
    class WrongSin(bg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a.sin()

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a.cos() * 2

    x = leaf(bg, [0.3, -0.7, 1.2], bg.float64)
    with pytest.raises(bg.autograd.GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0") as e:
        bg.autograd.gradcheck(lambda _: WrongSin.apply(x), (x,))
    numerical, analytical = str(e.value).split("numerical:")[1].split("analytical:")
    assert "0.9553" in numerical and "1.9107" in analytical  # cos(0.3), and twice it


def test_gradgradcheck_of_a_closure_passes_as_in_torch():
    for lib in (torch, bg):
        func, inputs = closure_checks(lib)["closure"]
        assert lib.autograd.gradgradcheck(func, inputs), lib.__name__


@pytest.mark.parametrize("fast_mode", [False, True])
def test_inputs_and_their_views_are_restored_and_keep_their_version(fast_mode):
    seen = []
    for lib in (torch, bg):
        x = leaf(lib, [0.3, -0.7, 1.2], lib.float64)
        tail = x[1:]
        versions = (x._version, tail._version)
        lib.autograd.gradcheck(lambda a: a * tail.sum(), (x,), fast_mode=fast_mode)
        seen.append(
            (x.detach().numpy().copy(), tail.detach().numpy().copy(), (x._version, tail._version), versions, x.grad)
        )
    (t_x, t_tail, t_after, t_before, t_grad), (x, tail, after, before, grad) = seen
    np.testing.assert_array_equal(x, [0.3, -0.7, 1.2])
    np.testing.assert_array_equal(tail, [-0.7, 1.2])
    np.testing.assert_array_equal(x, t_x)
    np.testing.assert_array_equal(tail, t_tail)
    assert after == before == t_after == t_before
    assert grad is None and t_grad is None


def test_values_are_restored_when_the_function_raises_while_perturbed():
    x = leaf(bg, [0.3, -0.7, 1.2], bg.float64)
    seen = []

    def fails_when_perturbed(_):
        seen.append(x.detach().numpy().copy())
        if len(seen) > 1:
            raise ValueError("perturbed")
        return x * 2

    with pytest.raises(ValueError, match="perturbed"):
        bg.autograd.gradcheck(fails_when_perturbed, (x,))
    np.testing.assert_array_equal(seen[1], [0.3 - 1e-6, -0.7, 1.2])  # the closure saw the perturbed values
    np.testing.assert_array_equal(x.detach().numpy(), [0.3, -0.7, 1.2])
