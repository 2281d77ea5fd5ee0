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


def _scaled_tangent(m, x, scale):
    """x, whose forward-mode tangent (inside a dual level) is scaled: a wrong forward derivative."""
    if m.autograd.forward_ad._current_level >= 0:
        primal, tangent = m.autograd.forward_ad.unpack_dual(x)
        if tangent is not None:
            x = m.autograd.forward_ad.make_dual(primal, tangent * scale)
    return x


@pytest.mark.parametrize("fast_mode", [False, True])
def test_forward_mode_calls_func_on_dual_tensors_and_checks_complex_inputs_as_torch(fast_mode):
    """Complex inputs are checked as their real and imaginary parts; func may read values (it runs eagerly)."""
    z = [2 * m.rand(2, dtype=m.complex128) - 1 for m in (bg, torch)]

    def check(m, fn, scale=1.0):
        x = z[m is torch].clone().requires_grad_()
        return m.autograd.gradcheck(
            lambda a: fn(m, _scaled_tangent(m, a, scale)), (x,), check_forward_ad=True, fast_mode=fast_mode
        )

    for m in (bg, torch):
        assert check(m, lambda m, a: a * a.conj() + a.exp())
        assert check(m, lambda m, a: a * 2 if a.abs().sum().item() > 0 else a)
    got, want = raises_like_torch(lambda m: check(m, lambda m, a: a * a, scale=1j))
    assert type(got).__name__ == "GradcheckError"
    assert (
        str(got).split("\n")[0]
        == str(want).split("\n")[0]
        == (
            "While considering the imaginary part of complex inputs only, Jacobian computed with forward mode "
            "mismatch for output 0 with respect to input 0,"
        )
    )


def test_forward_ad_current_level():
    for m in (bg, torch):
        assert m.autograd.forward_ad._current_level == -1
        with m.autograd.forward_ad.dual_level():
            assert m.autograd.forward_ad._current_level == 0
        assert m.autograd.forward_ad._current_level == -1


def _passing_jvp(m, calls, check_inputs=False):
    """A Function of two inputs whose jvp passes the tangents through, counting its calls; with `check_inputs`,
    its forward asserts that, inside a dual level, its inputs do not require grad."""

    class PassTwo(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            if check_inputs and m.autograd.forward_ad._current_level >= 0:
                assert not x.requires_grad and not y.requires_grad
            return x.clone(), y.clone()

        @staticmethod
        def jvp(ctx, x_t, y_t):
            calls.append(1)
            return x_t, y_t

    return PassTwo.apply


@pytest.mark.parametrize("numel", [1, 2])
def test_forward_mode_calls_the_jvp_as_often_as_torch(numel):
    """One call per input element (slow mode), two per input for undefined tangents (one where that input is the
    only dual one), three per input for batched forward grads (a batch of two, then each)."""
    counts = []
    for m in (bg, torch):
        calls, per_setting = [], []
        for y_requires_grad, undefined, batched in [
            (True, False, False),
            (True, True, False),
            (True, True, True),
            (False, True, True),
        ]:
            calls.clear()
            x = m.rand(numel, dtype=m.float64, requires_grad=True)
            y = m.rand(numel, dtype=m.float64, requires_grad=y_requires_grad)
            assert m.autograd.gradcheck(
                _passing_jvp(m, calls, check_inputs=True),
                (x, y),
                check_forward_ad=True,
                check_backward_ad=False,
                check_undefined_grad=undefined,
                check_batched_forward_grad=batched,
            )
            per_setting.append(len(calls))
        counts.append(per_setting)
    assert counts[0] == counts[1]


def test_batched_forward_grad_checks_functions_and_plain_code():
    for m in (bg, torch):
        x = m.rand(3, dtype=m.float64, requires_grad=True)
        for fn, inputs in [
            (lambda a, k: (a.clone(), (a + k).sin()), (x, 2)),
            (lambda a, c: a * 3, (x, x.detach().clone())),  # c has no tangent
        ]:
            assert m.autograd.gradcheck(
                fn, inputs, check_forward_ad=True, check_backward_ad=False, check_batched_forward_grad=True
            )


def test_batched_forward_grad_refuses_a_random_draw_in_a_jvp_as_torch():
    def noisy(m):
        class Noisy(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def vjp(ctx, g):
                return g * 2

            @staticmethod
            def jvp(ctx, t):
                m.randn_like(t)
                return t * 2

        return Noisy.apply

    got, want = raises_like_torch(
        lambda m: m.autograd.gradcheck(noisy(m), (_x(m),), check_forward_ad=True, check_batched_forward_grad=True)
    )
    assert type(got).__name__ == "GradcheckError"
    assert "vmap: We do not yet support calling random operations inside of vmap" in str(got)
    assert str(got).startswith("While computing batched gradients, got: vmap: We do not yet support")


def test_batched_forward_grad_needs_forward_ad_as_torch():
    got, want = raises_like_torch(lambda m: m.autograd.gradcheck(m.sin, (_x(m),), check_batched_forward_grad=True))
    assert isinstance(got, AssertionError) and str(got) == str(want)


def test_batched_forward_grad_catches_a_jvp_that_differs_on_a_batch():
    """A jvp that is wrong on its sixth call: three calls for the slow-mode Jacobian of a 3-element input, two for
    the tangents one at a time, then the batch of two, whose result then differs."""

    def wrong_once_batched(m):
        calls = []

        class Drifting(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def vjp(ctx, g):
                return g * 2

            @staticmethod
            def jvp(ctx, t):
                calls.append(1)
                return t * (3 if len(calls) == 6 else 2)

        return Drifting.apply

    got, want = raises_like_torch(
        lambda m: m.autograd.gradcheck(
            wrong_once_batched(m),
            (m.rand(3, dtype=m.float64, requires_grad=True),),
            check_forward_ad=True,
            check_backward_ad=False,
            check_undefined_grad=False,
            check_batched_forward_grad=True,
        )
    )
    assert type(got).__name__ == type(want).__name__ == "GradcheckError"
    assert str(got).startswith("For output 0 and input 0:") and str(want).startswith("For output 0 and input 0:")


ELEMENTLESS = {
    "diagonal": lambda m, x: m.diagonal(x, offset=0),
    "sum": lambda m, x: x.sum(),
    "two_outputs": lambda m, x: (x * 2, x.exp()),
}


@pytest.mark.parametrize("name", sorted(ELEMENTLESS))
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_forward_ad_check_of_an_input_without_elements(name, dtype):
    def check(m):
        x = m.rand(0, 1, dtype=getattr(m, dtype), requires_grad=True)
        return m.autograd.gradcheck(lambda t: ELEMENTLESS[name](m, t), (x,), check_forward_ad=True)

    assert check(bg) is check(torch) is True
