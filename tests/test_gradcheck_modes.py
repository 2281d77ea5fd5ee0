"""gradcheck's modes against torch's: check_forward_ad (forward-mode Jacobians, slow and fast) and check_backward_ad
(False leaves out every backward check), their argument errors, custom Functions under forward mode, and the module
path batched_grad.autograd.gradcheck as torch.autograd.gradcheck."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck
from oracle import raises_like_torch


def _x(m, shape=(2, 3), seed=0):
    a = np.random.default_rng(seed).uniform(0.5, 1.5, shape)
    return m.tensor(a, dtype=m.float64, requires_grad=True)


def test_the_module_path_is_torchs():
    import batched_grad.autograd.gradcheck as by_import

    assert bg.autograd.gradcheck is gradcheck and by_import is gradcheck  # the function shadows its module, as torch
    assert bg.autograd.gradgradcheck is gradgradcheck and bg.autograd.GradcheckError is GradcheckError


FUNCTIONS = {
    "tanh_matmul": (lambda m, x, w: m.tanh(x @ w), lambda m: (_x(m), _x(m, (3, 2), 1))),
    "two_outputs_one_not_differentiable": (lambda m, x: (x.exp().sum(1), (x > 1).sum()), lambda m: (_x(m),)),
    "non_tensor_and_constant_inputs": (lambda m, x, k, c: (x * c).pow(k).log1p(), lambda m: (_x(m), 3, _x(m).detach())),
    "reduction_and_indexing": (lambda m, x: (x[:, 1:] ** 2).cumsum(1).max(), lambda m: (_x(m),)),
    "complex_output": (lambda m, x: (x * 1j).exp(), lambda m: (_x(m),)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("backward", [True, False])
def test_forward_ad_passes_where_torchs_passes(name, fast_mode, backward):
    fn, inputs = FUNCTIONS[name]
    for m in (bg, torch):
        assert m.autograd.gradcheck(
            lambda *a: fn(m, *a), inputs(m), check_forward_ad=True, check_backward_ad=backward, fast_mode=fast_mode
        )


@pytest.mark.parametrize("fast_mode", [False, True])
def test_forward_ad_skips_a_float_output_that_is_not_differentiable(fast_mode):
    """(torch 2.13's fast mode pairs the outputs wrongly here and fails with an IndexError)"""
    assert gradcheck(
        lambda x: (x.detach() * 2, x.exp().sum(1), x.detach()), (_x(bg),), check_forward_ad=True, fast_mode=fast_mode
    )


def _doubled_on_the_way_back(m, x):
    """sin(x) whose gradient a hook doubles: the backward is wrong, the forward mode right."""
    y = x.sin()
    if y.requires_grad:
        y.register_hook(lambda g: g * 2)
    return y


@pytest.mark.parametrize("fast_mode", [False, True])
def test_check_backward_ad_false_leaves_the_backward_unchecked(fast_mode):
    for m in (bg, torch):
        fn = lambda x, m=m: _doubled_on_the_way_back(m, x)  # noqa: E731
        assert m.autograd.gradcheck(fn, (_x(m),), check_forward_ad=True, check_backward_ad=False, fast_mode=fast_mode)
        assert (
            m.autograd.gradcheck(fn, (_x(m),), check_forward_ad=True, fast_mode=fast_mode, raise_exception=False)
            is False
        )
    got, want = raises_like_torch(
        lambda m: m.autograd.gradcheck(lambda x: _doubled_on_the_way_back(m, x), (_x(m),), fast_mode=fast_mode)
    )
    assert str(got).startswith("Jacobian mismatch for output 0 with respect to input 0,")


def _torch_wrong_jvp():
    class WrongJvp(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x.sin()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(*inputs)
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 2 * t * x.cos()

    return WrongJvp.apply


@jax.custom_jvp
def _sin_with_wrong_jvp(x):
    return jnp.sin(x)


@_sin_with_wrong_jvp.defjvp
def _wrong_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return jnp.sin(x), 2 * t * jnp.cos(x)


@pytest.mark.parametrize("fast_mode", [False, True])
def test_a_wrong_forward_derivative_fails_as_torchs(fast_mode):
    bg_fn, torch_fn = bg.jax_function(_sin_with_wrong_jvp), _torch_wrong_jvp()
    messages = []
    for m, fn in ((bg, bg_fn), (torch, torch_fn)):
        with pytest.raises(Exception) as caught:
            m.autograd.gradcheck(fn, (_x(m),), check_forward_ad=True, check_backward_ad=False, fast_mode=fast_mode)
        assert type(caught.value).__name__ == "GradcheckError"
        messages.append(str(caught.value).split("\n")[0])
        assert (
            m.autograd.gradcheck(
                fn, (_x(m),), check_forward_ad=True, check_backward_ad=False, fast_mode=fast_mode, raise_exception=False
            )
            is False
        )
    assert (
        messages[0] == messages[1] == "Jacobian computed with forward mode mismatch for output 0 with respect "
        "to input 0,"
    )


def test_a_custom_function_without_jvp_is_refused_by_forward_mode_as_torch():
    def square(m):
        class Square(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 2 * x * g

        return Square.apply

    got, want = raises_like_torch(lambda m: m.autograd.gradcheck(square(m), (_x(m),), check_forward_ad=True))
    assert isinstance(got, NotImplementedError) and str(got) == str(want)
    assert gradcheck(square(bg), (_x(bg),))  # the backward alone is fine


@pytest.mark.parametrize(
    "case",
    [
        lambda m: m.autograd.gradcheck(m.sin, (_x(m),), check_backward_ad=False),
        lambda m: m.autograd.gradcheck(
            m.sin, (_x(m),), check_forward_ad=True, check_backward_ad=False, check_batched_grad=True
        ),
    ],
)
def test_mode_argument_errors_match_torch(case):
    got, want = raises_like_torch(case)
    assert isinstance(got, AssertionError) and str(got) == str(want)


def test_forward_mode_limits_say_what_to_do_instead():
    z = bg.tensor([1 + 2j, 0.5 - 1j], dtype=bg.complex128, requires_grad=True)
    with pytest.raises(ValueError, match="real inputs only, and input 0 is complex"):
        gradcheck(lambda a: a * a, (z,), check_forward_ad=True)
    with pytest.raises(RuntimeError, match="reads values of its inputs.*check_backward_ad=True"):
        gradcheck(lambda a: a * 2 if a.sum().item() > 0 else a, (_x(bg),), check_forward_ad=True)
