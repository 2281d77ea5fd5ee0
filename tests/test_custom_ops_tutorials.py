"""PyTorch's custom-operator tutorials (Functional, Mutable, and Adding Training to Python Custom Operators),
retold as functions of the library module: each runs once with torch and once with batched_grad (the same seed), and
every value they compute is compared. Parts that need explicit strides (empty_strided, which batched_grad does not
have) are left out."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same


def functional_tutorial(torch):
    Tensor = torch.Tensor
    seen = {}

    def numpy_sin_impl(x: Tensor) -> Tensor:
        result = torch.empty_like(x)
        np.sin(x.detach().numpy(), out=result.numpy())
        return result

    x = torch.randn(5)
    torch.testing.assert_close(numpy_sin_impl(x), x.sin())

    @torch.library.custom_op("tutorial_functional::numpy_sin", mutates_args=(), device_types="cpu")
    def numpy_sin(x: Tensor) -> Tensor:
        return numpy_sin_impl(x)  # the tutorial repeats the body above here

    @numpy_sin.register_fake
    def _(x):
        return torch.empty_like(x)

    @torch.compile(fullgraph=True)
    def f(x):
        return numpy_sin(x)

    result = f(x)
    torch.testing.assert_close(result, x.sin())
    seen["x"], seen["compiled"] = x, result

    examples = [
        (torch.randn(5),),
        (torch.randn(0, 3),),
        (torch.randn(2, 3, dtype=torch.double),),
        (torch.randn(2, 3).t(),),
        (torch.randn(8)[1:],),
    ]
    seen["opcheck"] = [torch.library.opcheck(numpy_sin, example, test_utils=CHECKS) for example in examples]
    seen["outputs"] = [numpy_sin(*example) for example in examples]
    return seen


def mutable_tutorial(torch):
    Tensor = torch.Tensor
    seen = {}

    @torch.library.custom_op("tutorial_mutable::numpy_sin_out", mutates_args={"out"}, device_types="cpu")
    def numpy_sin_out(x: Tensor, out: Tensor) -> None:
        if x.shape != out.shape:
            raise RuntimeError("x and out must have the same shape")
        if x.dtype != out.dtype:
            raise RuntimeError("x and out must have the same dtype")
        if x.device != out.device:
            raise RuntimeError("x and out must be on the same device")
        np.sin(x.detach().numpy(), out=out.numpy())

    x = torch.randn(5)
    out = torch.empty_like(x)
    numpy_sin_out(x, out)
    torch.testing.assert_close(out, x.sin())
    seen["x"], seen["out"] = x, out

    @torch.compile(fullgraph=True)
    def compiled_numpy_sin_out(x):
        out = torch.empty_like(x)
        numpy_sin_out(x, out)
        return out

    seen["compiled"] = compiled_numpy_sin_out(x)
    torch.testing.assert_close(seen["compiled"], x.sin())

    examples = [
        (torch.randn(5), torch.empty(5)),
        (torch.randn(0, 3), torch.empty(0, 3)),
        (torch.randn(2, 3, dtype=torch.double), torch.empty(2, 3, dtype=torch.double)),
    ]
    seen["opcheck"] = [torch.library.opcheck(numpy_sin_out, example, test_utils=CHECKS) for example in examples]
    for example in examples:
        numpy_sin_out(*example)
    seen["written"] = [example[1] for example in examples]
    seen["shape_error"] = _error(lambda: numpy_sin_out(torch.randn(3), torch.empty(4)))
    return seen


def registrations_tutorial(torch):
    Tensor = torch.Tensor
    seen = {}

    @torch.library.custom_op("tutorial_training::numpy_sin", mutates_args=(), device_types="cpu")
    def numpy_sin(x: Tensor) -> Tensor:
        result = torch.empty_like(x)
        np.sin(x.detach().numpy(), out=result.numpy())
        return result

    @numpy_sin.register_fake
    def _(x):
        return torch.empty_like(x)

    def numpy_sin_setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    def numpy_sin_backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * x.cos()

    numpy_sin.register_autograd(numpy_sin_backward, setup_context=numpy_sin_setup_context)

    x = torch.randn(5, requires_grad=True)
    y = numpy_sin(x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, x.detach().cos())
    seen["y"], seen["grad"] = y, x.grad

    gradcheck_input = torch.randn(3, dtype=torch.double, requires_grad=True)
    seen["gradcheck"] = torch.autograd.gradcheck(numpy_sin, (gradcheck_input,))

    examples = [
        (torch.randn(5),),
        (torch.randn(0, 3),),
        (torch.randn(4, requires_grad=True),),
        (torch.randn(2, dtype=torch.double, requires_grad=True),),
        (torch.randn(2, 3).t(),),
        (torch.randn(8)[1:],),
    ]
    seen["opcheck"] = [torch.library.opcheck(numpy_sin, example, test_utils=CHECKS) for example in examples]
    return seen


# torch's default checks also compile the operator with AOTAutograd (test_aot_dispatch_dynamic), which has no
# counterpart in batched_grad; the tutorials' opcheck calls run the three checks both libraries have
CHECKS = ("test_schema", "test_autograd_registration", "test_faketensor")


def _error(call):
    try:
        call()
    except RuntimeError as e:
        return str(e)
    raise AssertionError("expected an error")


@pytest.mark.parametrize("tutorial", [functional_tutorial, mutable_tutorial, registrations_tutorial])
def test_tutorial_matches_torch(tutorial):
    torch.manual_seed(0)
    expected = tutorial(torch)
    bg.manual_seed(0)
    actual = tutorial(bg)
    assert actual.keys() == expected.keys()
    for key in expected:
        if isinstance(expected[key], (str, bool)) or key == "opcheck":
            assert actual[key] == expected[key], key
        else:
            assert_same(actual[key], expected[key], rtol=1e-6, atol=1e-7)
