"""torch.autograd.gradcheck's module: gradcheck and gradgradcheck (the backward's checks are in _gradcheck.py, the
forward mode's, on dual tensors, in _gradcheck_forward.py). `check_backward_ad=False` leaves out every check of the
backward."""

import warnings

import numpy as np

from .._dtypes import float32, float64
from .._factories import rand
from .._host import to_device
from .._lazy import unfused
from .._tensor import Tensor
from .._x64 import scoped
from ..sparse._autograd import any_sparse, on_values
from ._api import grad
from ._gradcheck import (
    GradcheckError,
    _as_tuple,
    _call,
    _check_backward_mul_by_grad_output,
    _check_batched_grad,
    _check_inputs,
    _check_jacobians,
    _check_requires_grad,
    _check_undefined_grad,
    _differentiable,
    _numerical_jacobian,
    _requires_grad,
)
from ._gradcheck_forward import check_batched_forward_grad as _check_batched_forward_grad
from ._gradcheck_forward import check_forward_ad as _check_forward_ad

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck", "get_numerical_jacobian", "get_analytical_jacobian"]


# ---- public API -------------------------------------------------------------------------------------------


def _run(check, raise_exception):
    with unfused():  # many calls of few one-off structures: per-op kernels, no program compiled per structure
        if raise_exception:
            return check()
        try:
            return check()
        except GradcheckError:
            return False


@scoped
def gradcheck(
    func,
    inputs,
    *,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    raise_exception=True,
    nondet_tol=0.0,
    check_undefined_grad=True,
    check_grad_dtypes=False,
    check_batched_grad=False,
    check_batched_forward_grad=False,
    check_forward_ad=False,
    check_backward_ad=True,
    fast_mode=False,
    masked=None,
):
    """Check the gradients of `func` at `inputs` against central finite differences (torch.autograd.gradcheck).

    `inputs` is a Tensor or a tuple of arguments; the Tensors with requires_grad=True (float64 for the default
    tolerances) are checked, for every differentiable output of `func`. Slow mode compares full Jacobians,
    `fast_mode=True` one random projection u^T J v per input and output. `check_backward_ad` checks the backward
    (vector-Jacobian products), `check_forward_ad` the forward mode (Jacobian-vector products, with func called on
    dual tensors); `check_batched_grad=True` also compares `grad(..., is_grads_batched=True)` with the loop of
    unbatched `grad` calls, and `check_batched_forward_grad=True` the forward-mode tangents of a batch of input
    tangents (vmap of the jvp) with those of each in turn. Returns True, or raises GradcheckError (returns False
    when `raise_exception=False`). For sparse COO inputs the derivatives with respect to their specified elements
    are checked: with `masked=True`, or under any `masked` where every element is specified.
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    if not callable(func):
        raise TypeError(f"gradcheck: func must be callable, but got {type(func).__name__}")
    opts = dict(
        eps=eps, atol=atol, rtol=rtol, nondet_tol=nondet_tol, check_grad_dtypes=check_grad_dtypes, fast_mode=fast_mode
    )
    inputs = _as_tuple(inputs)
    batched_func, batched_inputs = func, inputs  # the batched check differentiates sparse inputs themselves
    if any_sparse(inputs):
        func, inputs = on_values(func, inputs, masked, "gradcheck")
    _check_requires_grad(inputs)
    _check_inputs(inputs)

    def check():
        func_out = _call(func, inputs)
        outputs = _differentiable(func_out)
        if check_backward_ad:
            _check_jacobians(func, inputs, func_out, opts)
        if check_forward_ad:
            _check_forward_ad(func, inputs, func_out, opts, check_undefined_grad)
        if check_batched_forward_grad:
            _check_batched_forward_grad(func, inputs)
        if not check_backward_ad:
            return True
        diff_inputs = [x for x in inputs if _requires_grad(x)]
        if check_batched_grad:
            _check_batched_grads(batched_func, batched_inputs, outputs if batched_func is func else None)
        if outputs:
            _check_backward_mul_by_grad_output(outputs, diff_inputs)
        if check_undefined_grad:
            _check_undefined_grad(func, inputs, diff_inputs)
        return True

    return _run(check, raise_exception)


def _check_batched_grads(func, inputs, outputs):
    """The batched check of each differentiable output (of func at `inputs` where `outputs` is None): a sparse
    input's batched gradients are refused, as grad(..., is_grads_batched=True) refuses them."""
    outputs = _differentiable(_call(func, inputs)) if outputs is None else outputs
    diff_inputs, rng = [x for x in inputs if _requires_grad(x)], np.random.default_rng(0)
    for i, o in enumerate(outputs):
        _check_batched_grad(o, i, diff_inputs, rng)


def _random_grad_output(output):
    """Uniform in [-1, 1), shaped like `output`, requiring grad (float64 for a non-float output; real-valued for
    a complex one)."""
    d = output.dtype
    real = {"complex64": float32, "complex128": float64}.get(d.name, d if d.is_floating_point else float64)
    return (rand(tuple(output.shape), dtype=real) * 2 - 1).to(d if d.is_complex else real).requires_grad_()


@scoped
def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    gen_non_contig_grad_outputs=False,
    raise_exception=True,
    nondet_tol=0.0,
    check_undefined_grad=True,
    check_grad_dtypes=False,
    check_batched_grad=False,
    fast_mode=False,
    masked=False,
):
    """Check the second derivatives of `func` (torch.autograd.gradgradcheck): gradcheck of the function
    (inputs, grad_outputs) -> grad(func(inputs), inputs, grad_outputs, create_graph=True). Sparse COO inputs as in
    gradcheck.

    `grad_outputs` default to random Tensors in [-1, 1) shaped like the differentiable outputs, requiring grad.
    `gen_non_contig_grad_outputs` is accepted for compatibility; Tensors have no strides here.
    """
    if not callable(func):
        raise TypeError(f"gradgradcheck: func must be callable, but got {type(func).__name__}")
    inputs = _as_tuple(inputs)
    if any_sparse(inputs):
        func, inputs = on_values(func, inputs, masked, "gradgradcheck")
    _check_requires_grad(inputs)
    if grad_outputs is None:
        grad_outputs = tuple(_random_grad_output(o) for o in _differentiable(_call(func, inputs)))
    grad_outputs = _as_tuple(grad_outputs)
    n_inputs = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if _requires_grad(x)]

    def first_derivative(*args):
        outputs = _differentiable(_call(func, args[:n_inputs]))
        grads = grad(outputs, [args[i] for i in diff_idx], args[n_inputs:], create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(
        first_derivative,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        check_batched_grad=check_batched_grad,
        fast_mode=fast_mode,
    )


# ---- torch's deprecated Jacobian helpers ------------------------------------------------------------------


def _deprecated(name):
    warnings.warn(
        f"`{name}` was part of PyTorch's private API and not meant to be exposed. We are deprecating it and it will "
        "be removed in a future version of PyTorch. If you have a specific use for this or feature request for this "
        "to be a stable API, please file us an issue at https://github.com/pytorch/pytorch/issues/new",
        FutureWarning,
        stacklevel=3,
    )


def _check_grad_out(grad_out, name):
    if grad_out != 1.0:  # kept in the signature for old callers only
        raise ValueError(f"Expected grad_out to be 1.0. {name} no longer supports values of grad_out != 1.0.")


def _no_complex_output(outputs, name):
    if any(o.is_complex() for o in outputs):
        raise ValueError(
            f"Expected output to be non-complex. {name} no longer supports functions that return complex outputs."
        )


def get_numerical_jacobian(fn, inputs, target=None, eps=1e-3, grad_out=1.0):
    """Deprecated, as torch's: the central-difference Jacobians of the first output of `fn(inputs)` (fn takes the
    tuple of inputs) with respect to each tensor of `target` (default: `inputs`) that requires grad, each of shape
    (its numel, the output's numel). The target tensors are perturbed in place."""
    _deprecated("get_numerical_jacobian")
    _check_grad_out(grad_out, "get_numerical_jacobian")
    inputs = _as_tuple(inputs)
    outputs = _call(lambda *xs: fn(xs), inputs)
    _no_complex_output(outputs, "get_numerical_jacobian")
    targets = tuple(x for x in (inputs if target is None else _as_tuple(target)) if _requires_grad(x))
    call = lambda *_: fn(inputs)  # noqa: E731  (the targets are read through `inputs`, which share their values)
    return tuple(
        Tensor._wrap(to_device(_numerical_jacobian(call, targets, k, outputs, eps)[0])) for k in range(len(targets))
    )


def _jacobian_rows(output, diff_inputs):
    """The analytical Jacobians (input numel, output numel) of `output` by one vjp per one-hot cotangent, and
    whether every gradient had its input's size, and its dtype."""
    n, sizes_ok, types_ok = output.numel(), True, True
    jacobians = [np.zeros((x.numel(), n), x._v.dtype) for x in diff_inputs]
    for j, c in enumerate(np.eye(n, dtype=output._v.dtype).reshape((n,) + tuple(output.shape))):
        grads = grad(output, diff_inputs, Tensor._wrap(to_device(c)), retain_graph=True, allow_unused=True)
        for jacobian, g, x in zip(jacobians, grads, diff_inputs):
            if g is None:
                continue
            if g.shape != x.shape:
                sizes_ok = False
            elif g.dtype != x.dtype:
                types_ok = False
            if g.numel() == x.numel():
                jacobian[:, j] = np.asarray(g._value).reshape(-1)
    return jacobians, sizes_ok, types_ok


def get_analytical_jacobian(inputs, output, nondet_tol=0.0, grad_out=1.0):
    """Deprecated, as torch's: (the backward's Jacobians of `output` with respect to each tensor of `inputs` that
    requires grad, each of shape (its numel, the output's numel); whether a second computation gave the same values
    within `nondet_tol`; whether the gradients had their inputs' sizes; and their dtypes)."""
    _deprecated("get_analytical_jacobian")
    _check_grad_out(grad_out, "get_analytical_jacobian")
    _no_complex_output((output,), "get_analytical_jacobian")
    diff_inputs = [x for x in _as_tuple(inputs) if _requires_grad(x)]
    first, sizes_ok, types_ok = _jacobian_rows(output, diff_inputs)
    second, _, _ = _jacobian_rows(output, diff_inputs)
    reentrant = all(a.size == 0 or np.abs(a - b).max() <= nondet_tol for a, b in zip(first, second))
    return tuple(Tensor._wrap(to_device(a)) for a in first), reentrant, sizes_ok, types_ok
