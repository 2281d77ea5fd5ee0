"""Anomaly mode's warnings and errors, and gradcheck's check of undefined output gradients, against torch 2.13."""

import contextlib
import io
import sys
import warnings

import pytest
import torch

import batched_grad as bg

LIBS = [bg, torch]
MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace operation"


@contextlib.contextmanager
def stderr_captured():
    """sys.stderr swapped for a buffer; the buffer is yielded."""
    original, sys.stderr = sys.stderr, io.StringIO()
    try:
        yield sys.stderr
    finally:
        sys.stderr = original


def square_then_modify(lib):
    """A graph whose PowBackward0 reads a value changed in place after it was saved."""
    x = lib.ones(3, requires_grad=True)
    shifted = x + 1
    squared = shifted**2
    shifted += 1
    return x, squared


@pytest.mark.parametrize("lib", LIBS)
def test_detect_anomaly_warns_once_made_then_names_the_failing_node(lib):
    with pytest.raises(RuntimeError, match=MODIFIED + r".*Good luck!"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with lib.autograd.detect_anomaly():
                x, squared = square_then_modify(lib)
                lib.autograd.grad(squared.sum(), x)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and all(w.category is UserWarning for w in caught)
    assert messages[0].startswith("Anomaly Detection has been enabled. This mode will increase the runtime")
    assert messages[1].startswith("Error detected in PowBackward0. Traceback of forward call that caused the error:")
    assert "squared = shifted**2" in messages[1]
    x, squared = square_then_modify(lib)  # out of anomaly mode the hint suggests it
    with pytest.raises(RuntimeError, match=r"Hint: enable anomaly detection to find the operation"):
        lib.autograd.grad(squared.sum(), x)


@pytest.mark.parametrize("lib", LIBS)
def test_forward_traceback_goes_to_stderr_when_warnings_are_errors(lib):
    with pytest.raises(RuntimeError, match=MODIFIED):  # the backward's own error, not the warning, propagates
        with warnings.catch_warnings(record=True) as caught:
            with lib.autograd.detect_anomaly():
                warnings.simplefilter("error")
                with stderr_captured() as err:
                    x, squared = square_then_modify(lib)
                    lib.autograd.grad(squared.sum(), x)
    assert len(caught) == 1 and "Anomaly Detection has been enabled" in str(caught[0].message)
    assert err.getvalue().startswith("UserWarning: Error detected in PowBackward0. Traceback of forward call")


def nan_making_functions(lib, size):
    """Outer's backward applies Inner, whose backward puts a nan in gradient `nan_at` (0 or 1)."""

    class Inner(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, nan_at):
            ctx.nan_at = nan_at
            return a * 2.0 + b

        @staticmethod
        def backward(ctx, g):
            grads = [g * 1.0, g * 1.0]
            grads[ctx.nan_at] = grads[ctx.nan_at] * lib.tensor(float("nan"))
            return grads[0], grads[1], None

    class Outer(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, nan_at):
            ctx.nan_at = nan_at
            ctx.save_for_backward(x)
            return x.sum(0, keepdim=True)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            spread = g.expand(size)
            return Inner.apply(spread * x, spread + x, ctx.nan_at), None

    return Outer


def second_backward(lib, outer, nan_at, size=4):
    x = lib.rand(size, requires_grad=True)
    (gx,) = lib.autograd.grad(outer.apply(x, nan_at), x, create_graph=True)
    gx.sum().backward()


@pytest.mark.parametrize("lib", LIBS)
def test_nan_in_a_node_made_outside_anomaly_mode_has_no_forward_information(lib):
    outer = nan_making_functions(lib, 4)
    x = lib.rand(4, requires_grad=True)
    (gx,) = lib.autograd.grad(outer.apply(x, 0), x, create_graph=True)
    total = gx.sum()
    total.backward(retain_graph=True)  # without anomaly mode the nan passes silently
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=r"Function 'InnerBackward' returned nan values in its 0th output\."):
            with lib.autograd.detect_anomaly():
                total.backward()
    assert len(caught) == 2
    assert str(caught[1].message).startswith(
        "Error detected in InnerBackward. No forward pass information available. Enable detect anomaly during "
        "forward pass for more information."
    )


@pytest.mark.parametrize("lib", LIBS)
def test_node_made_by_a_backward_names_the_node_that_induced_it(lib):
    outer = nan_making_functions(lib, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=r"Function 'InnerBackward' returned nan values in its 1th output\."):
            with lib.autograd.detect_anomaly():
                second_backward(lib, outer, nan_at=1)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3
    assert messages[1].startswith("Error detected in InnerBackward. Traceback of forward call that caused the error")
    assert "Inner.apply(spread * x" in messages[1]  # made inside Outer's backward
    assert messages[2].startswith(
        "\n\nPrevious calculation was induced by OuterBackward. Traceback of forward call that induced the "
        "previous calculation:\n"
    )
    assert "outer.apply(x, nan_at)" in messages[2]


@pytest.mark.parametrize("lib", LIBS)
def test_nested_detect_anomaly_warns_for_each_and_restores_the_outer_check_nan(lib):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with lib.autograd.detect_anomaly(check_nan=False):
            with lib.autograd.detect_anomaly():
                assert lib.is_anomaly_enabled() and lib.is_anomaly_check_nan_enabled()
            assert lib.is_anomaly_enabled() and not lib.is_anomaly_check_nan_enabled()
            second_backward(lib, nan_making_functions(lib, 4), nan_at=0)  # nan not checked: no error
        assert not lib.is_anomaly_enabled() and lib.is_anomaly_check_nan_enabled()
    assert [str(w.message)[:35] for w in caught] == ["Anomaly Detection has been enabled."] * 2


UNDEFINED_NOT_HANDLED = "Expected backward function to handle undefined output grads"
CHECK_IS_NEW = "Backwards compatibility: New undefined gradient support checking feature"


def clone_with_hook_failing_on_none(x):
    def refuse_none(g):
        if g is None:
            raise RuntimeError("this hook needs a gradient")

    y = x.clone()
    y.register_hook(refuse_none)
    return y


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_fails_a_single_output_whose_hook_refuses_an_undefined_grad(lib, fast_mode):
    x = lib.ones(2, dtype=lib.float64, requires_grad=True)
    with pytest.warns(UserWarning, match=CHECK_IS_NEW):
        with pytest.raises(RuntimeError, match=UNDEFINED_NOT_HANDLED) as failure:
            lib.autograd.gradcheck(clone_with_hook_failing_on_none, (x,), fast_mode=fast_mode)
    assert type(failure.value).__name__ == "GradcheckError"
    assert str(failure.value.__cause__) == "this hook needs a gradient"
    with pytest.warns(UserWarning, match=CHECK_IS_NEW):
        assert lib.autograd.gradcheck(clone_with_hook_failing_on_none, (x,), raise_exception=False) is False
    assert lib.autograd.gradcheck(clone_with_hook_failing_on_none, (x,), check_undefined_grad=False)


def unmaterialized_pair(lib, backward):
    class Pair(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

    Pair.backward = staticmethod(backward)
    return Pair


@pytest.mark.parametrize("lib", LIBS)
def test_gradcheck_fails_a_backward_returning_a_number_for_all_grads_undefined(lib):
    def backward(ctx, a, b):
        present = [g * k for g, k in ((a, 2), (b, 3)) if g is not None]
        return sum(present) if present else 0.0  # a float, not a Tensor: the engine refuses it

    pair = unmaterialized_pair(lib, backward)
    with pytest.warns(UserWarning, match=CHECK_IS_NEW):
        with pytest.raises(RuntimeError, match=UNDEFINED_NOT_HANDLED) as failure:
            lib.autograd.gradcheck(pair.apply, (lib.ones(2, dtype=lib.float64, requires_grad=True),))
    assert str(failure.value.__cause__) == "expected Variable or None (got float)"


@pytest.mark.parametrize("lib", LIBS)
def test_custom_backward_gradients_are_checked_as_torch_checks_them(lib):
    cases = [
        (lambda g: (2.0, None, None), r"expected Variable or None \(got float\)"),
        (lambda g: (g, lib.ones(1), None), "returned a gradient different than None at position 2, but the corresp"),
        (lambda g: (g, None, "grad"), r"expected Variable or None \(got str\)"),  # an input not requiring grad
    ]
    for gradients, message in cases:

        class Shifted(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, factor, other):
                return x * factor + other

            @staticmethod
            def backward(ctx, g, gradients=gradients):
                return gradients(g)

        out = Shifted.apply(lib.ones(2, requires_grad=True), 2.0, lib.zeros(2))
        with pytest.raises(RuntimeError, match=message):
            out.sum().backward()
