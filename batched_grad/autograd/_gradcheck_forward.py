"""gradcheck's forward-mode checks, as torch's: `check_forward_ad` and `check_batched_forward_grad`.

The function runs on dual tensors (forward_ad): every differentiable input is made a dual tensor of its detached
values (so the function sees inputs that do not require grad, and a custom Function's jvp staticmethod gives the
tangents), and the tangents of its float and complex outputs are compared with central differences. Slow mode
builds each input's Jacobian from one-hot tangents, one call of the function per element; fast mode gives each
input one random unit tangent u and compares J u. A complex input is checked as its real and its imaginary part,
each a real input of its own while the other part is held fixed. With `check_undefined_grad`, an input without a
tangent must give the outputs the tangents that a zero tangent gives. `check_batched_forward_grad` computes the
tangents for two random tangents of an input at once, by torch's prototype vmap, against two calls.
"""

import numpy as np

from .._factories import randn_like, zeros
from .._host import to_device
from .._ops import stack
from .._tensor import Tensor
from .._vmap_levels import prototype_vmap
from . import forward_ad
from ._gradcheck import (
    GradcheckError,
    _as_tuple,
    _check_zero_numerical,
    _differentiable,
    _differentiable_float_positions,
    _is_inexact,
    _numerical_jacobian,
    _numerical_jvp,
    _requires_grad,
    _show,
    _unit_vector,
    slow_mode_text,
)

FAILED_BATCHED_FORWARD_GRAD_MSG = (
    "gradcheck failed while testing batched gradient computation with forward-mode AD: the tangents computed for a "
    "batch of input tangents at once (vmap of the jvp) must equal the tangents computed for each of them in turn.\n"
    "A jvp that cannot run on a batch of tangents (a custom Function's jvp that draws random values, or reads "
    "values) fails here. To skip this check, call gradcheck with `check_batched_forward_grad=False`."
)


def _mismatch_msg(analytical, numerical, output_idx, input_idx, part):
    prefix = ""
    if part is not None and input_idx in part[1]:
        prefix = f"While considering the {part[0]} part of complex inputs only, "
    return (
        f"{prefix}Jacobian computed with forward mode mismatch for output {output_idx:d} with respect to input "
        f"{input_idx:d},\nnumerical:{_show(numerical)}\nanalytical:{_show(analytical)}\n"
    )


def _dual_tangents(func, inputs, tangents, check_grad_dtypes=False):
    """The tangents (flat arrays; zeros where one has none) of func's float and complex outputs, called with input i
    a dual tensor of tangent `tangents[i]` (an array) for each i in `tangents`; every other input as it is."""
    with forward_ad.dual_level():
        args = list(inputs)
        for i, t in tangents.items():
            args[i] = forward_ad.make_dual(inputs[i].detach(), Tensor._wrap(to_device(t)))
        result = []
        for out in _as_tuple(func(*args)):
            if not _is_inexact(out):
                continue
            primal, tangent = forward_ad.unpack_dual(out)
            if check_grad_dtypes and tangent is not None and primal.is_complex() != tangent.is_complex():
                raise GradcheckError("Forward AD gradient has dtype mismatch.")
            flat = np.zeros(out.numel(), out._v.dtype) if tangent is None else np.asarray(tangent._value).reshape(-1)
            result.append(flat)
        return result


def _zero_tangents(inputs, diff_idx):
    return {i: np.zeros(inputs[i].shape, inputs[i]._v.dtype) for i in diff_idx}


def forward_jacobians(func, inputs, diff_idx, check_grad_dtypes=False):
    """[input][float output]: the forward-mode Jacobian (input numel, output numel) of each float output with respect
    to each differentiable input, one call of func per input element (every differentiable input dual)."""
    jacobians = []
    for i in diff_idx:
        columns, tangents = [], _zero_tangents(inputs, diff_idx)
        for d in range(inputs[i].numel()):
            tangents[i] = np.zeros(inputs[i].shape, inputs[i]._v.dtype)
            tangents[i].flat[d] = 1
            columns.append(_dual_tangents(func, inputs, tangents, check_grad_dtypes))
        if not columns:  # an input without elements: Jacobians without rows, one per float output
            flats = _dual_tangents(func, inputs, tangents, check_grad_dtypes)
            jacobians.append([np.zeros((0, flat.size), flat.dtype) for flat in flats])
            continue
        jacobians.append([np.stack([c[k] for c in columns]) for k in range(len(columns[0]))])
    return jacobians


def _slow(func, inputs, func_out, diff_idx, opts, part):
    numerical = [_numerical_jacobian(func, inputs, i, func_out, opts["eps"]) for i in diff_idx]
    if not _differentiable(func_out):
        for per_input in numerical:
            _check_zero_numerical(per_input)
        return
    keep = _differentiable_float_positions(func_out)
    analytical = forward_jacobians(func, inputs, diff_idx, opts["check_grad_dtypes"])
    for n, i in enumerate(diff_idx):
        for j, k in enumerate(keep):
            a, num = analytical[n][k], numerical[n][k]
            if not np.allclose(a, num, opts["rtol"], opts["atol"]):
                raise GradcheckError(_mismatch_msg(a, num, j, i, part))


def _fast(func, inputs, func_out, diff_idx, opts, part):
    """J u against the central difference along u, for one random unit vector u per input, with torch's atol
    scaled by sum(u)."""
    rng, eps = np.random.default_rng(0), opts["eps"]
    all_u = [_unit_vector(rng, inputs[i].numel(), inputs[i]._v.dtype).reshape(inputs[i].shape) for i in diff_idx]
    numerical = [_numerical_jvp(func, inputs, i, u * eps, eps) for i, u in zip(diff_idx, all_u)]
    if not _differentiable(func_out):
        for per_input in numerical:
            _check_zero_numerical(per_input, opts["nondet_tol"])
        return
    keep = _differentiable_float_positions(func_out)
    for n, (i, u) in enumerate(zip(diff_idx, all_u)):
        tangents = _zero_tangents(inputs, diff_idx)
        tangents[i] = u
        analytical = _dual_tangents(func, inputs, tangents, opts["check_grad_dtypes"])
        for j, k in enumerate(keep):
            a, num = analytical[k], numerical[n][k]
            if not np.allclose(a, num, opts["rtol"], opts["atol"] * float(u.sum())):
                slow_numerical = _numerical_jacobian(func, inputs, i, func_out, eps)[k]
                slow_analytical = forward_jacobians(func, inputs, [i])[0][k]
                raise GradcheckError(
                    _mismatch_msg(a, num, j, i, part) + slow_mode_text(slow_numerical, slow_analytical, opts)
                )


def _undefined_tangents(func, inputs):
    """torch's check of undefined input tangents: with every differentiable input given a random tangent, each in
    turn is given a zero tangent, then none (a plain tensor); the outputs' tangents must agree."""
    diff_idx = [i for i, x in enumerate(inputs) if _requires_grad(x)]
    rng = np.random.default_rng(0)
    with forward_ad.dual_level():
        duals = list(inputs)
        for i in diff_idx:
            u = _unit_vector(rng, inputs[i].numel(), inputs[i]._v.dtype).reshape(inputs[i].shape)
            duals[i] = forward_ad.make_dual(inputs[i].detach(), Tensor._wrap(to_device(u)))
        for i in diff_idx:
            zero_tangent, no_tangent = list(duals), list(duals)
            zero_tangent[i] = forward_ad.make_dual(inputs[i].detach(), zeros(inputs[i].shape, dtype=inputs[i].dtype))
            no_tangent[i] = inputs[i].detach()
            first = [o for o in _as_tuple(func(*zero_tangent)) if _is_inexact(o)]
            second = [o for o in _as_tuple(func(*no_tangent)) if _is_inexact(o)]
            for k, (o1, o2) in enumerate(zip(first, second)):
                t1, t2 = forward_ad.unpack_dual(o1).tangent, forward_ad.unpack_dual(o2).tangent
                if t1 is not None and t2 is not None and not np.allclose(np.asarray(t1._value), np.asarray(t2._value)):
                    raise GradcheckError(
                        f"Mismatch in tangent values for output with index: {k} when input {i} has an undefined "
                        f"tangent value. Got: {t1!r} but expected: {t2!r}"
                    )


def _with_complex_inputs(func, complex_idx, inputs, rebuild):
    """func of real inputs in place of the complex ones: input i becomes rebuild(given, original input i)."""

    def part_func(*args):
        args = list(args)
        for i in complex_idx:
            args[i] = rebuild(args[i], inputs[i])
        return _as_tuple(func(*args))

    return part_func


_PARTS = (
    ("imaginary", lambda x: x.imag, lambda given, original: original.real + given * 1j),
    ("real", lambda x: x.real, lambda given, original: given + original.imag * 1j),
)


def check_forward_ad(func, inputs, func_out, opts, check_undefined_grad):
    """The forward-mode Jacobians against central differences (fast or slow mode), then undefined tangents."""
    check = _fast if opts["fast_mode"] else _slow
    complex_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.is_complex()]
    if not complex_idx:
        check(func, inputs, func_out, [i for i, x in enumerate(inputs) if _requires_grad(x)], opts, None)
        if check_undefined_grad:
            _undefined_tangents(func, inputs)
        return
    parts = []
    for name, take, rebuild in _PARTS:
        part_inputs = tuple(take(x) if i in complex_idx else x for i, x in enumerate(inputs))
        part_func = _with_complex_inputs(func, complex_idx, inputs, rebuild)
        diff_idx = [i for i, x in enumerate(part_inputs) if _requires_grad(x)]
        check(part_func, part_inputs, part_func(*part_inputs), diff_idx, opts, (name, complex_idx))
        parts.append((part_func, part_inputs))
    if check_undefined_grad:
        for part_func, part_inputs in parts:
            _undefined_tangents(part_func, part_inputs)


def _jvp_of_input(func, inputs, i):
    """tangent -> the tangents of func's outputs (zeros where one has none) with input i a dual tensor of that
    tangent and every other input detached."""

    def jvp(tangent):
        with forward_ad.dual_level():
            args = [x.detach() if isinstance(x, Tensor) else x for x in inputs]
            args[i] = forward_ad.make_dual(inputs[i].detach(), tangent)
            result = []
            for out in _as_tuple(func(*args)):
                if out is None:
                    continue
                primal, tangent_out = forward_ad.unpack_dual(out)
                result.append(tangent_out if tangent_out is not None else zeros(primal.shape, dtype=primal.dtype))
            return tuple(result)

    return jvp


def check_batched_forward_grad(func, inputs):
    """For each differentiable input: the output tangents of two random input tangents, computed at once by vmap of
    the jvp, equal the two computed in turn."""
    for i, x in enumerate(inputs):
        if not (_requires_grad(x) and _is_inexact(x)):
            continue
        jvp = _jvp_of_input(func, inputs, i)
        tangents = [randn_like(x.detach()) for _ in range(2)]
        expected = [stack(rows) for rows in zip(*[jvp(t) for t in tangents])]
        try:
            result = prototype_vmap(jvp)(stack(tangents))
        except RuntimeError as ex:
            raise GradcheckError(
                f"While computing batched gradients, got: {ex}\n\n{FAILED_BATCHED_FORWARD_GRAD_MSG}"
            ) from ex
        for k, (got, want) in enumerate(zip(result, expected)):
            if not np.allclose(np.asarray(got._value), np.asarray(want._value)):
                raise GradcheckError(
                    f"For output {k} and input {i}:\n\n{FAILED_BATCHED_FORWARD_GRAD_MSG}\n\nGot:\n{got!r}\n\n"
                    f"Expected:\n{want!r}"
                )
