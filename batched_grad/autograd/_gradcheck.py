"""gradcheck and gradgradcheck: central finite differences against the vector-Jacobian products of the graph,
with torch 2.13's checks, messages and defaults.

The numerical side perturbs each input in place, through `.data` as torch's does (so a function that reads an input
through a closure or a view sees the perturbation, and the input's version does not change), and puts the values
back afterwards; the analytical side is `grad` with one-hot cotangents (slow mode) or with one random projection
per output (fast mode). Complex outputs are checked as their real and imaginary parts; a complex input's numerical
derivative is the conjugate Wirtinger derivative d/dx + 1j d/dy, as torch's.
"""

import contextlib
import warnings

import jax.numpy as jnp
import numpy as np

from .._host import to_device
from .._ops._core import Op, apply
from .._tensor import Tensor
from ._api import grad
from .function import Function


class GradcheckError(RuntimeError):
    """Raised by gradcheck and gradgradcheck when the analytical and numerical gradients disagree."""


_REAL = Op("real", jnp.real, linear=True)
_IMAG = Op("imag", jnp.imag, linear=True)

FAILED_BATCHED_GRAD_MSG = (
    "gradcheck or gradgradcheck failed while testing batched gradient computation: grad(..., "
    "is_grads_batched=True) must equal the stacked unbatched grad calls, one per grad_output.\n"
    "A backward that cannot be vectorized runs once per row (see vmap.fallback_warnings()); a mismatch means "
    "a backward (or hook) computes something different when its grad_output is batched.\n"
    "To skip this check, call gradcheck/gradgradcheck with `check_batched_grad=False`."
)

FAST_FAIL_SLOW_OK_MSG = (
    "Fast gradcheck failed but element-wise differences are small. This means that the test might've passed in "
    "slow_mode!\nIf the function is correct, call gradcheck/gradgradcheck with `fast_mode=False`."
)


# ---- inputs, outputs, perturbations -------------------------------------------------------------------------


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    return tuple(x) if isinstance(x, list) else (x,)


def _requires_grad(x):
    return isinstance(x, Tensor) and x.requires_grad


def _is_inexact(x):
    return isinstance(x, Tensor) and (x.dtype.is_floating_point or x.dtype.is_complex)


def _check_requires_grad(inputs):
    if not any(_requires_grad(x) for x in inputs):
        types = ", ".join(type(x).__name__ for x in inputs)
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of them have "
            f"requires_grad=True.\nGot inputs of types ({types}); pass Tensors created with "
            "requires_grad=True (float64 for the default tolerances)."
        )


def _check_inputs(inputs):
    """torch's checks of each input that requires grad: a warning unless it is double precision, and an error where
    elements overlap (a dimension of stride 0, as expand makes), whose finite differences would move several
    elements at once."""
    for idx, x in enumerate(inputs):
        if not _requires_grad(x):
            continue
        if x.dtype.name not in ("float64", "complex128"):
            warnings.warn(
                f"Input #{idx} requires gradient and is not a double precision floating point or "
                "complex. This check will likely fail if all the inputs are not of double precision "
                "floating point or complex. ",
                UserWarning,
                stacklevel=4,
            )
        if not all(stride > 0 or size <= 1 for stride, size in zip(x.stride(), x.shape)):
            raise RuntimeError(
                f"The {idx}th input has a dimension with stride 0. gradcheck only supports inputs that are "
                "non-overlapping to be able to compute the numerical gradients correctly. You should call "
                ".contiguous on the input before passing it to gradcheck."
            )


def _call(func, inputs):
    """func(*inputs) as a tuple of Tensors, or a TypeError saying what func returned instead."""
    out = _as_tuple(func(*inputs))
    for i, o in enumerate(out):
        if not isinstance(o, Tensor):
            raise TypeError(
                f"gradcheck: func must return a Tensor or a tuple of Tensors, but output {i} is a {type(o).__name__}"
            )
    return out


def _differentiable(outputs):
    """The outputs that require grad; a sparse one is refused, as torch's gradcheck refuses it."""
    outputs = tuple(o for o in outputs if o.requires_grad)
    if any(o.is_sparse for o in outputs):
        raise ValueError(
            "Sparse output is not supported at gradcheck yet. "
            "Please call to_dense(masked_grad=...) on the output of fn for gradcheck."
        )
    return outputs


@contextlib.contextmanager
def _perturbed(x, value):
    """`x` (and every view sharing its values) holds `value` inside the block, its own values again after."""
    original, alias = x._value, x.data
    alias.copy_(Tensor._wrap(to_device(value)))
    try:
        yield
    finally:
        alias.copy_(Tensor._wrap(original))


def _float_outputs_at(func, inputs, i, value):
    """The float and complex outputs of `func` while input i holds `value`, read before the values come back."""
    with _perturbed(inputs[i], value):
        return [Tensor._wrap(o._value) for o in _call(func, inputs) if _is_inexact(o)]


def _check_same_meta(a, b, eps, idx):
    on_index = f"on index {idx} " if idx is not None else ""
    for what, x, y in (("shape", a.shape, b.shape), ("dtype", a.dtype, b.dtype)):
        if x != y:
            raise AssertionError(
                f"Expected `func` to return outputs with the same {what} when inputs are "
                f"perturbed {on_index}by {eps}, but got: {what}s {x} and {y}."
            )


def _central_difference(func, inputs, i, delta, eps, idx=None):
    """(f(x + delta) - f(x - delta)) / (2 eps) for input i, flattened, for each float or complex output."""
    base = np.asarray(inputs[i]._value)
    before = _float_outputs_at(func, inputs, i, base - delta)
    after = _float_outputs_at(func, inputs, i, base + delta)
    for a, b in zip(before, after):
        _check_same_meta(a, b, eps, idx)
    return [((np.asarray(b._value) - np.asarray(a._value)) / (2 * eps)).reshape(-1) for a, b in zip(before, after)]


def _numerical_jvp(func, inputs, i, delta, eps, idx=None):
    """The directional derivatives of the outputs along `delta` (scaled by eps) of input i; for a complex input,
    the conjugate Wirtinger derivative ds/dx + 1j ds/dy."""
    jvps = _central_difference(func, inputs, i, delta, eps, idx)
    if inputs[i].is_complex():
        jvps = [dx + 1j * dy for dx, dy in zip(jvps, _central_difference(func, inputs, i, delta * 1j, eps, idx))]
    return jvps


def _numerical_jacobian(func, inputs, i, outputs, eps):
    """Numerical Jacobians of the float outputs w.r.t. input i, each (input numel, output numel)."""
    shape, dtype = inputs[i].shape, inputs[i]._v.dtype
    n = int(np.prod(shape, dtype=np.int64))
    floats = [o for o in outputs if _is_inexact(o)]
    jacobians = [np.zeros((n, o.numel()), dtype if inputs[i].is_complex() else o._v.dtype) for o in floats]
    for d in range(n):
        delta = np.zeros(shape, dtype)
        delta.flat[d] = eps
        for jac, column in zip(jacobians, _numerical_jvp(func, inputs, i, delta, eps, d)):
            jac[d] = column
    return jacobians


# ---- analytical vector-Jacobian products ------------------------------------------------------------------


def _vjps(output, diff_inputs, cotangents, check_grad_dtypes):
    """For each differentiable input, the stacked flat vjps of `output` (input numel, number of cotangents)."""
    columns = [[] for _ in diff_inputs]
    for c in cotangents:
        grads = grad(output, diff_inputs, Tensor._wrap(to_device(c)), retain_graph=True, allow_unused=True)
        for col, g, x in zip(columns, grads, diff_inputs):
            if g is None:
                col.append(np.zeros(x.numel(), x._v.dtype))
                continue
            if g.shape != x.shape:
                raise GradcheckError("Analytical gradient has incorrect size")
            if check_grad_dtypes and g.dtype != x.dtype:
                raise GradcheckError("Gradient has dtype mismatch")
            col.append(_dense_array(g).reshape(-1))
    return [
        np.stack(col, axis=1) if col else np.zeros((x.numel(), 0), x._v.dtype) for col, x in zip(columns, diff_inputs)
    ]


def _reentrant_vjps(output, diff_inputs, cotangents, nondet_tol, check_grad_dtypes):
    """_vjps computed twice: a backward must give the same values for the same grad_output (within nondet_tol)."""
    first = _vjps(output, diff_inputs, cotangents, check_grad_dtypes)
    second = _vjps(output, diff_inputs, cotangents, check_grad_dtypes)
    for a, b in zip(first, second):
        if a.size and np.abs(a - b).max() > nondet_tol:
            raise GradcheckError(
                "Backward is not reentrant, i.e., running backward with same input and grad_output multiple times "
                "gives different values, although analytical gradient matches numerical gradient."
                f"The tolerance for nondeterminism was {nondet_tol}."
            )
    return first


def _analytical_jacobian(output, diff_inputs, nondet_tol, check_grad_dtypes):
    """Analytical Jacobians of `output` w.r.t. each differentiable input, (input numel, output numel): one vjp
    per one-hot cotangent."""
    n = output.numel()
    basis = np.eye(n, dtype=output._v.dtype).reshape((n,) + tuple(output.shape))
    return _reentrant_vjps(output, diff_inputs, basis, nondet_tol, check_grad_dtypes)


def _mismatch_msg(analytical, numerical, output_idx, input_idx, part):
    prefix = f"While considering the {part[0]} part of complex outputs only, " if output_idx in part[1] else ""
    return (
        f"{prefix}Jacobian mismatch for output {output_idx:d} with respect to input {input_idx:d},\n"
        f"numerical:{_show(numerical)}\nanalytical:{_show(analytical)}\n"
    )


def _show(array):
    return repr(Tensor._wrap(to_device(array)))


# ---- slow and fast mode ---------------------------------------------------------------------------------


def _check_zero_numerical(jacobians, nondet_tol=0.0):
    for jac in jacobians:
        if jac.size and np.abs(jac).max() > nondet_tol:
            raise GradcheckError("Numerical gradient for function expected to be zero")


def _differentiable_float_positions(func_out):
    """Where each differentiable output sits among the float outputs (the numerical side covers all of them)."""
    return [k for k, o in enumerate([o for o in func_out if _is_inexact(o)]) if o.requires_grad]


def _slow_gradcheck(func, inputs, func_out, diff_idx, opts, part):
    """Compare the full numerical and analytical Jacobians of every differentiable output and input."""
    outputs = _differentiable(func_out)
    numerical = [_numerical_jacobian(func, inputs, i, func_out, opts["eps"]) for i in diff_idx]
    if not outputs:
        for per_input in numerical:
            _check_zero_numerical(per_input)
        return
    keep = _differentiable_float_positions(func_out)
    diff_inputs = [inputs[i] for i in diff_idx]
    for j, out in enumerate(outputs):
        analytical = _analytical_jacobian(out, diff_inputs, opts["nondet_tol"], opts["check_grad_dtypes"])
        for i, a in enumerate(analytical):
            n = numerical[i][keep[j]]
            if not np.allclose(a, n, opts["rtol"], opts["atol"]):
                raise GradcheckError(_mismatch_msg(a, n, j, i, part))


def _unit_vector(rng, numel, dtype):
    v = rng.random(numel)
    return (v / np.linalg.norm(v)).astype(np.finfo(dtype).dtype)


def fast_probes(func, inputs, func_out, diff_idx, opts):
    """Fast mode's random unit vectors u (per differentiable input) and v (per differentiable output), and the
    numerical JVPs along each u; None when no output is differentiable (the JVPs are then checked to be zero)."""
    rng = np.random.default_rng(0)
    eps, outputs = opts["eps"], _differentiable(func_out)
    all_u = [_unit_vector(rng, inputs[i].numel(), inputs[i]._v.dtype) for i in diff_idx]
    all_v = [_unit_vector(rng, o.numel(), o._v.dtype) for o in outputs]
    jvps = [_numerical_jvp(func, inputs, i, u.reshape(inputs[i].shape) * eps, eps) for i, u in zip(diff_idx, all_u)]
    if not outputs:
        for per_input in jvps:
            _check_zero_numerical(per_input, opts["nondet_tol"])
        return None
    return all_u, all_v, jvps


def _fast_gradcheck(func, inputs, func_out, diff_idx, opts, part):
    """Compare v^T J u (analytical: a vjp with v, dotted with u) with v . (J u) (numerical: a central difference
    along u), for random unit vectors u per input and v per output, with torch's atol scaled by sum(u) sum(v)."""
    probes = fast_probes(func, inputs, func_out, diff_idx, opts)
    if probes is None:
        return
    all_u, all_v, jvps = probes
    outputs, diff_inputs = _differentiable(func_out), [inputs[i] for i in diff_idx]
    keep = _differentiable_float_positions(func_out)
    for j, (out, v) in enumerate(zip(outputs, all_v)):
        vjs = _reentrant_vjps(
            out, diff_inputs, v.reshape((1,) + tuple(out.shape)), opts["nondet_tol"], opts["check_grad_dtypes"]
        )
        for i, (vj, u) in enumerate(zip(vjs, all_u)):
            a, n = vj[:, 0] @ u, v @ jvps[i][keep[j]]
            atol = opts["atol"] * float(u.sum()) * float(v.sum())
            if not np.allclose(a, n, opts["rtol"], atol):
                raise GradcheckError(
                    _mismatch_msg(a, n, j, i, part)
                    + _slow_mode_report(func, inputs, func_out, diff_idx[i], keep[j], out, opts)
                )


def _slow_mode_report(func, inputs, func_out, input_idx, float_output_idx, output, opts):
    """torch's appendix to a fast-mode failure: the full Jacobians of the failing pair, for a readable report."""
    numerical = _numerical_jacobian(func, inputs, input_idx, func_out, opts["eps"])[float_output_idx]
    (analytical,) = _analytical_jacobian(output, [inputs[input_idx]], float("inf"), False)
    return slow_mode_text(numerical, analytical, opts)


def slow_mode_text(numerical, analytical, opts):
    """The slow-mode Jacobians of a fast-mode failure, as torch reports them."""
    msg = (
        "\nThe above quantities relating the numerical and analytical jacobians are computed \n"
        "in fast mode. Below, we recompute numerical and analytical jacobians in slow mode:\n\n"
        f"Numerical:\n {_show(numerical)}\nAnalytical:\n{_show(analytical)}\n\n"
        f"The max per-element difference (slow mode) is: {np.abs(numerical - analytical).max()}.\n"
    )
    if np.allclose(analytical, numerical, opts["rtol"], opts["atol"]):
        msg += FAST_FAIL_SLOW_OK_MSG
    return msg


def _part_of_complex_outputs(func, op):
    def part(*inputs):
        return tuple(apply(op, [o]) if o.is_complex() else o for o in _call(func, inputs))

    return part


def _check_jacobians(func, inputs, func_out, opts):
    """Slow or fast mode (fast mode is for real inputs; complex ones take the slow path); complex outputs are
    checked as their imaginary, then real parts (torch's order)."""
    diff_idx = [i for i, x in enumerate(inputs) if _requires_grad(x)]
    fast = opts["fast_mode"] and not any(inputs[i].is_complex() for i in diff_idx)
    check = _fast_gradcheck if fast else _slow_gradcheck
    complex_idx = {j for j, o in enumerate(_differentiable(func_out)) if o.is_complex()}
    if not any(o.is_complex() for o in func_out):
        return check(func, inputs, func_out, diff_idx, opts, (None, ()))
    for op, part in ((_IMAG, "imaginary"), (_REAL, "real")):
        part_func = _part_of_complex_outputs(func, op)
        check(part_func, inputs, part_func(*inputs), diff_idx, opts, (part, complex_idx))


# ---- batched, zero and undefined grad_outputs ---------------------------------------------------------------


def _dense_array(g):
    """A gradient's values as a NumPy array (a sparse gradient's dense form)."""
    return np.asarray((g.to_dense() if g.is_sparse else g)._value)


def _zeros_for_none(grads, inputs):
    return [np.zeros(x.shape, x._v.dtype) if g is None else _dense_array(g) for g, x in zip(grads, inputs)]


def _check_batched_grad(output, output_idx, diff_inputs, rng):
    """grad(..., is_grads_batched=True) over two random grad_outputs equals the two unbatched grad calls."""
    cotangents = rng.standard_normal((2,) + tuple(output.shape)).astype(output._v.dtype)
    rows = [
        _zeros_for_none(
            grad(output, diff_inputs, Tensor._wrap(to_device(c)), retain_graph=True, allow_unused=True), diff_inputs
        )
        for c in cotangents
    ]
    try:
        batched = grad(
            output,
            diff_inputs,
            Tensor._wrap(to_device(cotangents)),
            retain_graph=True,
            allow_unused=True,
            is_grads_batched=True,
        )
    except RuntimeError as ex:
        raise GradcheckError(f"While computing batched gradients, got: {ex}\n\n{FAILED_BATCHED_GRAD_MSG}") from ex
    for input_idx, (got, x) in enumerate(zip(batched, diff_inputs)):
        res = np.zeros((2,) + tuple(x.shape), x._v.dtype) if got is None else _dense_array(got)
        exp = np.stack([r[input_idx] for r in rows])
        if not np.allclose(res, exp, rtol=1e-5, atol=1e-8):
            raise GradcheckError(
                f"For output {output_idx} and input {input_idx}:\n\n{FAILED_BATCHED_GRAD_MSG}\n\n"
                f"Got:\n{_show(res)}\n\nExpected:\n{_show(exp)}"
            )


def _zero_grad_outputs(outputs):
    return [Tensor._wrap(to_device(np.zeros(o.shape, o._v.dtype))) for o in outputs]  # no eager kernel


def _check_backward_mul_by_grad_output(outputs, diff_inputs):
    """Zero grad_outputs give zero (or no) gradients of the right dtype and size."""
    grads = grad(outputs, diff_inputs, _zero_grad_outputs(outputs), allow_unused=True)
    for g, x in zip(grads, diff_inputs):
        if g is None:
            continue
        if g.is_sparse:
            _check_sparse_layout(g, x)
        if np.any(_dense_array(g) != 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if g.dtype != x.dtype:
            raise GradcheckError("grad is incorrect type")
        if g.shape != x.shape:
            raise GradcheckError("grad is incorrect size")


def _check_sparse_layout(g, x):
    """A sparse gradient's layout and dimensions are its input's, as torch's gradcheck requires."""
    if g.layout != x.layout:
        raise GradcheckError(f"grad is incorrect layout ({g.layout} is not {x.layout})")
    for what, got, expected in (
        ("sparse_dim", g.sparse_dim(), x.sparse_dim()),
        ("dense_dim", g.dense_dim(), x.dense_dim()),
    ):
        if got != expected:
            raise GradcheckError(f"grad is sparse tensor, but has incorrect {what} {got}, expected {expected}")


def _check_undefined_grad(func, inputs, diff_inputs):
    """torch's check of undefined output gradients: the nodes that made func's outputs receive None for all of
    them, then (with several outputs) for each in turn while the others get zeros; backward must neither fail
    nor produce nonzero input gradients."""
    outputs = _differentiable(_call(func, inputs))
    cases = [[_UndefinedGrad.apply(o) for o in outputs]]
    for undefined in range(len(outputs) if len(outputs) > 1 else 0):
        fresh = _differentiable(_call(func, inputs))
        cases.append([_UndefinedGrad.apply(o) if i == undefined else o for i, o in enumerate(fresh)])
    for case in cases:
        _check_undefined_grad_case(case, diff_inputs)


def _check_undefined_grad_case(outputs, diff_inputs):
    try:
        grads = grad(outputs, diff_inputs, _zero_grad_outputs(outputs), allow_unused=True)
    except RuntimeError as e:  # as torch's, another exception type is the function's own failure
        _warn_undefined_grad_check_is_new()
        raise GradcheckError(
            "Expected backward function to handle undefined output grads. Please look at "
            '"Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"'
        ) from e
    if any(g is not None and np.any(_dense_array(g) != 0) for g in grads):
        _warn_undefined_grad_check_is_new()
        raise GradcheckError(
            "Expected all input grads to be undefined or zero when all output grads are undefined or zero. Please "
            'look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"'
        )


def _warn_undefined_grad_check_is_new():
    warnings.warn(
        "Backwards compatibility: New undefined gradient support checking feature is enabled by default, but it "
        "may break existing callers of this function. If this is true for you, you can call this function with "
        '"check_undefined_grad=False" to disable the feature',
        UserWarning,
        stacklevel=3,
    )


class _UndefinedGrad(Function):
    """An identity whose backward leaves its input's gradient undefined (torch._C._functions.UndefinedGrad): the
    node that made the input receives None, as when an output of it is unused."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return None
