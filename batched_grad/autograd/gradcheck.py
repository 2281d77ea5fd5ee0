"""torch.autograd.gradcheck's module: gradcheck and gradgradcheck (the checks themselves are in _gradcheck.py), and
the forward-mode checks of `check_forward_ad=True`, whose Jacobians come from JAX's forward mode on a trace of the
function (autograd/_functional_forward.py). `check_backward_ad=False` leaves out every check of the backward."""

import numpy as np

from .._dtypes import float32, float64
from .._factories import rand
from .._lazy import unfused
from .._x64 import scoped
from ._api import grad
from ._functional_forward import Untraceable, forward_jacobian
from ._gradcheck import (
    GradcheckError,
    _as_tuple,
    _call,
    _check_backward_mul_by_grad_output,
    _check_batched_grad,
    _check_jacobians,
    _check_requires_grad,
    _check_undefined_grad,
    _check_zero_numerical,
    _differentiable,
    _differentiable_float_positions,
    _numerical_jacobian,
    _requires_grad,
    _show,
    _warn_non_double,
    fast_probes,
    slow_mode_text,
)

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


# ---- forward mode ----------------------------------------------------------------------------------------------


def _forward_mismatch_msg(analytical, numerical, output_idx, input_idx):
    return (
        f"Jacobian computed with forward mode mismatch for output {output_idx:d} with respect to input "
        f"{input_idx:d},\nnumerical:{_show(numerical)}\nanalytical:{_show(analytical)}\n"
    )


def _forward_jacobians(func, inputs, diff_idx, func_out):
    """[input][output]: the forward-mode Jacobian (input numel, output numel) of each differentiable output with
    respect to each differentiable input, the other arguments held fixed."""
    out_idx = [k for k, o in enumerate(func_out) if o.requires_grad]

    def of_differentiable(*xs):
        args = list(inputs)
        for i, x in zip(diff_idx, xs):
            args[i] = x
        return func(*args)

    def as_outputs(result):
        outputs = _as_tuple(result)
        return True, tuple(outputs[k] for k in out_idx)

    try:  # a custom Function's jvp staticmethod gives its tangents (torch's error where it has none)
        blocks, _ = forward_jacobian(of_differentiable, [inputs[i] for i in diff_idx], as_outputs)
    except Untraceable as error:
        raise RuntimeError(
            f"gradcheck(check_forward_ad=True) takes forward-mode derivatives on a JAX trace of func, "
            f"but func reads values of its inputs ({error}): .item(), NumPy or a branch on values "
            "cannot be traced. Check it with check_backward_ad=True instead."
        ) from None
    return [
        [
            np.asarray(blocks[j][n]._value).reshape(func_out[k].numel(), inputs[i].numel()).T
            for j, k in enumerate(out_idx)
        ]
        for n, i in enumerate(diff_idx)
    ]


def _check_forward_jacobians(func, inputs, func_out, opts):
    """The forward-mode Jacobians against central differences: in full (slow mode), or projected on random unit
    vectors u (inputs) and v (outputs) as the backward's fast mode does."""
    diff_idx = [i for i, x in enumerate(inputs) if _requires_grad(x)]
    for i in diff_idx:
        if inputs[i].is_complex():
            raise ValueError(
                f"gradcheck(check_forward_ad=True) checks real inputs only, and input {i} is complex: "
                "check it with check_backward_ad=True instead."
            )
    (_fast_forward if opts["fast_mode"] else _slow_forward)(func, inputs, func_out, diff_idx, opts)


def _slow_forward(func, inputs, func_out, diff_idx, opts):
    numerical = [_numerical_jacobian(func, inputs, i, func_out, opts["eps"]) for i in diff_idx]
    if not _differentiable(func_out):
        for per_input in numerical:
            _check_zero_numerical(per_input)
        return
    keep = _differentiable_float_positions(func_out)
    for i, per_input in enumerate(_forward_jacobians(func, inputs, diff_idx, func_out)):
        for j, a in enumerate(per_input):
            n = numerical[i][keep[j]]
            if not np.allclose(a, n, opts["rtol"], opts["atol"]):
                raise GradcheckError(_forward_mismatch_msg(a, n, j, i))


def _fast_forward(func, inputs, func_out, diff_idx, opts):
    probes = fast_probes(func, inputs, func_out, diff_idx, opts)
    if probes is None:
        return
    all_u, all_v, jvps = probes
    eps, keep = opts["eps"], _differentiable_float_positions(func_out)
    for i, per_input in enumerate(_forward_jacobians(func, inputs, diff_idx, func_out)):
        for j, jacobian in enumerate(per_input):
            u, v = all_u[i], all_v[j]
            a, n = v @ (u @ jacobian), v @ jvps[i][keep[j]]
            if not np.allclose(a, n, opts["rtol"], opts["atol"] * float(u.sum()) * float(v.sum())):
                slow = _numerical_jacobian(func, inputs, diff_idx[i], func_out, eps)[keep[j]]
                raise GradcheckError(_forward_mismatch_msg(a, n, j, i) + slow_mode_text(slow, jacobian, opts))


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
    check_forward_ad=False,
    check_backward_ad=True,
    fast_mode=False,
):
    """Check the gradients of `func` at `inputs` against central finite differences (torch.autograd.gradcheck).

    `inputs` is a Tensor or a tuple of arguments; the Tensors with requires_grad=True (float64 for the default
    tolerances) are checked, for every differentiable output of `func`. Slow mode compares full Jacobians,
    `fast_mode=True` one random projection u^T J v per input and output. `check_backward_ad` checks the backward
    (vector-Jacobian products), `check_forward_ad` the forward mode (Jacobian-vector products, on a JAX trace of
    func; real inputs); `check_batched_grad=True` also compares `grad(..., is_grads_batched=True)` with the loop
    of unbatched `grad` calls. Returns True, or raises GradcheckError (returns False when
    `raise_exception=False`).
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if not callable(func):
        raise TypeError(f"gradcheck: func must be callable, but got {type(func).__name__}")
    opts = dict(
        eps=eps, atol=atol, rtol=rtol, nondet_tol=nondet_tol, check_grad_dtypes=check_grad_dtypes, fast_mode=fast_mode
    )
    inputs = _as_tuple(inputs)
    _check_requires_grad(inputs)
    _warn_non_double(inputs)

    def check():
        func_out = _call(func, inputs)
        outputs = _differentiable(func_out)
        if check_backward_ad:
            _check_jacobians(func, inputs, func_out, opts)
        if check_forward_ad:
            _check_forward_jacobians(func, inputs, func_out, opts)
        if not check_backward_ad:
            return True
        diff_inputs = [x for x in inputs if _requires_grad(x)]
        rng = np.random.default_rng(0)
        for i, o in enumerate(outputs if check_batched_grad else ()):
            _check_batched_grad(o, i, diff_inputs, rng)
        if outputs:
            _check_backward_mul_by_grad_output(outputs, diff_inputs)
        if check_undefined_grad:
            _check_undefined_grad(func, inputs, diff_inputs)
        return True

    return _run(check, raise_exception)


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
):
    """Check the second derivatives of `func` (torch.autograd.gradgradcheck): gradcheck of the function
    (inputs, grad_outputs) -> grad(func(inputs), inputs, grad_outputs, create_graph=True).

    `grad_outputs` default to random Tensors in [-1, 1) shaped like the differentiable outputs, requiring grad.
    `gen_non_contig_grad_outputs` is accepted for compatibility; Tensors have no strides here.
    """
    if not callable(func):
        raise TypeError(f"gradgradcheck: func must be callable, but got {type(func).__name__}")
    inputs = _as_tuple(inputs)
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
