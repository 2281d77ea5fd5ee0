"""torch.func's forward-mode transforms: jvp, linearize, jacfwd, hessian (forward over reverse).

f is traced once into a jaxpr (its Tensors wrap JAX tracers, autograd.grad inside it included) and its JVP runs as
one op of the table, so the result is differentiable by the engine and batched by vmap.vmap like any op. A function
that reads concrete values cannot be traced: its JVP is then taken by reverse mode twice (the transpose of a VJP)."""

import functools

import jax
import jax.numpy as jnp
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

from vmap._pytree import flatten

from .. import _dual
from .._dtypes import float64
from .._factories import eye
from .._grad_mode import enable_grad, is_recording
from .._ops._core import Op, apply
from .._reads import output_reads
from .._sparsity._api import check_arguments
from .._tensor import Tensor
from .._transform_levels import grad_level
from .._vmap_levels import randomness_mode
from .._x64 import scoped
from ..autograd._functional_forward import Untraceable, _trace, _TracedFunction, constants, forward_jacobian
from ..autograd.forward_ad import check_dual_dtypes
from ._args import (
    check_argnums,
    check_aux,
    check_tensor_outputs,
    differentiable_inputs,
    reaches_outside,
    replaced,
    retire,
    selected,
    split_aux,
)
from ._reverse import _check_real, _detached_unless, _gradients, _jacobian_transform, jacrev, sparse_hessian_transform
from ._vmap import vmap

JVP = "jvp(f, primals, tangents)"


def _jvp_arrays(*arrays, traced, n_primals, n_tangents_out):
    """The outputs of the traced function at the primals, then the tangents of its first `n_tangents_out` outputs;
    `arrays` are the jaxpr's constants, the primals, then their tangents."""
    n_consts = len(traced.jaxpr.constvars)
    func = jaxpr_as_fun(ClosedJaxpr(traced.jaxpr, arrays[:n_consts]))
    primals, tangents = arrays[n_consts : n_consts + n_primals], arrays[n_consts + n_primals :]
    outs, out_tangents = jax.jvp(lambda *p: tuple(func(*p)), primals, tangents)
    out_tangents = [jnp.zeros_like(o) if t.dtype == jax.dtypes.float0 else t for o, t in zip(outs, out_tangents)]
    return tuple(outs) + tuple(out_tangents[:n_tangents_out])


_JVP_OP = Op("jvp", _jvp_arrays, multi=True)


def _check_pair(primals, tangents):
    flat_primals, primals_spec = flatten(primals)
    flat_tangents, tangents_spec = flatten(tangents)
    if repr(primals_spec) != repr(tangents_spec):
        raise RuntimeError(
            f"{JVP}: Expected primals and tangents to have the same python structure. For example, "
            "if primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
            f"{primals_spec} and tangents with structure {tangents_spec}"
        )
    for name, leaves in (("primals", flat_primals), ("tangents", flat_tangents)):
        if not leaves:
            raise RuntimeError(f"{JVP}: Expected {name} to contain at least one Tensor.")
        for x in leaves:
            if not isinstance(x, Tensor):
                raise RuntimeError(f"{JVP}: Expected {name} to only contain Tensors, got {type(x)}")
    for p, t in zip(flat_primals, flat_tangents):
        check_dual_dtypes(p, t)
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(
                "Trying to set a forward gradient that has a different size than that of the original "
                f"Tensor, this is not supported. Tensor is of size {list(p.shape)} while the given "
                f"forward gradient is of size {list(t.shape)}."
            )
    return flat_primals, primals_spec, [_in_dtype_of(p, t) for p, t in zip(flat_primals, flat_tangents)]


def _in_dtype_of(primal, tangent):
    """The tangent in its primal's dtype, as torch.func.jvp takes it (a float32 tangent of a float64 primal becomes
    float64; a complex tangent of a real primal its real part, with torch's warning)."""
    return tangent if tangent.dtype == primal.dtype else tangent.to(primal.dtype)


class _Outputs:
    """What f returned while traced, kept as structures: its outputs' and aux's specs and leaf counts; with
    `written`, the primals it wrote into in place are outputs too, after its own."""

    def __init__(self, has_aux):
        self.has_aux = has_aux
        self.written, self.written_values = [], []

    def __call__(self, result):
        output, aux = split_aux(result, self.has_aux, JVP)
        self.flat_output, self.spec = flatten(output)
        check_tensor_outputs(self.flat_output, JVP)
        aux_leaves, self.aux_spec = flatten(check_aux(aux) if self.has_aux else ())
        tensors = tuple(self.flat_output) + tuple(self.written_values)
        return True, tensors + tuple(aux_leaves)

    def noting_writes(self, func):
        """`func` of the primals, noting which of them it writes into in place (by their version counters)."""

        def run(*xs):
            versions = [x._counter.value for x in xs]
            result = func(*xs)
            self.written = [k for k, (x, v) in enumerate(zip(xs, versions)) if x._counter.value != v]
            self.written_values = [xs[k] for k in self.written]
            return result

        return run

    def aux(self, tensors):
        return self.aux_spec.unflatten(list(tensors))


class _CapturesGrad(Exception):
    """f's result depends on a captured tensor that requires grad, with grad mode on: the forward-mode op, which
    takes captured values as constants, would not be differentiable with respect to it."""


def _traced(func, inputs, outputs):
    """func traced into a jaxpr (as _functional_forward._trace) while its ops are recorded, so that a result that
    reaches a captured tensor requiring grad raises _CapturesGrad (when grad mode is on outside)."""
    grad_outside = is_recording()

    def recorded(*xs):
        with enable_grad():
            result = func(*xs)
        if grad_outside and reaches_outside([x for x in flatten(result)[0] if isinstance(x, Tensor)], xs):
            raise _CapturesGrad
        return result

    return _trace(recorded, inputs, outputs)


@scoped
def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), the JVP along `tangents`[, aux]), as torch.func.jvp."""
    # tangents: jvp itself writes what f wrote into a primal into its tangent
    with grad_level(primals, tangents, forward=True), _dual.switched_on():
        return _jvp(func, primals, tangents, strict, has_aux)


def _jvp(func, primals, tangents, strict, has_aux):
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{JVP}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals).")
    flat_primals, spec, flat_tangents = _check_pair(primals, tangents)
    outputs = _Outputs(has_aux)
    try:
        closed, _ = _traced(outputs.noting_writes(lambda *xs: func(*spec.unflatten(xs))), flat_primals, outputs)
    except (Untraceable, _CapturesGrad):  # f reads values, or must stay differentiable: by reverse mode, recorded
        return _jvp_by_reverse_mode(func, primals, flat_tangents, strict, has_aux)
    n_out, n_written = len(outputs.flat_output), len(outputs.written)
    if strict:
        _check_strict(closed, len(flat_primals), n_out)
    n_tangents = n_out + n_written
    results = apply(
        _JVP_OP,
        constants(closed) + list(flat_primals) + list(flat_tangents),
        traced=_TracedFunction(closed.jaxpr),
        n_primals=len(flat_primals),
        n_tangents_out=n_tangents,
    )
    values, aux_values, out_tangents = results[:n_out], results[n_tangents:-n_tangents], results[-n_tangents:]
    _write_back(outputs.written, flat_primals, flat_tangents, results[n_out:n_tangents], out_tangents[n_out:])
    result = (outputs.spec.unflatten(values), outputs.spec.unflatten(out_tangents[:n_out]))
    return result + (outputs.aux(aux_values),) if has_aux else result


def _write_back(written, primals, tangents, values, value_tangents):
    """As torch.func's jvp, whose primals are the caller's tensors made dual: what f wrote into a primal in place
    is written into the caller's tensor, and its tangent into the caller's tangent (unless that is the primal itself,
    as linearize passes it)."""
    for k, value, tangent in zip(written, values, value_tangents):
        primals[k].copy_(value)
        if tangents[k] is not primals[k]:
            tangents[k].copy_(tangent)


def _check_strict(closed, n_primals, n_out):
    avals = [(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    reads = output_reads(jaxpr_as_fun(closed), avals)
    if any(r & ((1 << n_primals) - 1) == 0 for r in reads[:n_out]):
        raise RuntimeError(
            f"{JVP[:-1]}, strict=True): The output of f is independent of the inputs. This is not "
            "allowed with strict=True."
        )


def _jvp_by_reverse_mode(func, primals, flat_tangents, strict, has_aux):
    """The JVP by reverse mode, for a function that reads values or whose results must stay differentiable with
    respect to captured tensors: the VJP is linear in its cotangent u, so the JVP along t is the gradient, with
    respect to u, of <VJP(u), t>; recorded where the results must stay differentiable outside."""
    grad_outside = is_recording()
    with enable_grad():
        inputs, spec = differentiable_inputs(primals)
        output, aux = split_aux(func(*spec.unflatten(inputs)), has_aux, JVP)
        flat_output, out_spec = flatten(output)
        check_tensor_outputs(flat_output, JVP)
        if has_aux:
            check_aux(aux)
        if strict and not any(o.requires_grad for o in flat_output):
            raise RuntimeError(
                f"{JVP[:-1]}, strict=True): The output of f is independent of the inputs. This is "
                "not allowed with strict=True."
            )
        keep = grad_outside and reaches_outside(flat_output, inputs)
        probes = [Tensor._wrap(jnp.zeros(tuple(o.shape), o.dtype.np), requires_grad=True) for o in flat_output]
        vjps = _gradients(flat_output, inputs, probes, create_graph=True)
        inner = sum((v * t).sum() for v, t in zip(vjps, flat_tangents))
        out_tangents = _gradients([inner], probes, [None], create_graph=keep)
    retire(inputs + probes)
    result = (out_spec.unflatten(_detached_unless(flat_output, keep)), out_spec.unflatten(out_tangents))
    return result + (_detached_unless(aux, keep),) if has_aux else result


@scoped
def linearize(func, *primals):
    """(func(*primals), jvp_fn): jvp_fn(*tangents) is the JVP of func at `primals` along `tangents`, which must
    have the primals' structure, shapes, devices and dtypes (torch's checks, in its words)."""
    output, _ = jvp(func, primals, primals)
    flat_primals, primals_spec = flatten(primals)
    expected = [(p.shape, p.device, p.dtype) for p in flat_primals]

    @scoped
    def jvp_fn(*tangents):
        _check_linearized_tangents(tangents, primals_spec, expected)
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn


def _check_linearized_tangents(tangents, primals_spec, expected):
    flat_tangents, tangents_spec = flatten(tangents)
    if repr(tangents_spec) != repr(primals_spec):
        raise RuntimeError(
            f"Expected the tangents {tangents_spec} to have the same argspec as the primals {primals_spec}"
        )
    for i, (t, properties) in enumerate(zip(flat_tangents, expected)):
        for name, got, wanted in zip(("shape", "device", "dtype"), (t.shape, t.device, t.dtype), properties):
            if got != wanted:
                raise RuntimeError(
                    f"tangent:{i} with {name} {got} in flattened pytree doesn't match the {name} {wanted} "
                    "of the corresponding primal."
                )


_RANDOMNESS = ("error", "same", "different")


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error", sparsity=None, output=None):
    """A function returning the Jacobian of func w.r.t. args[argnums] by forward mode, structured as jacrev's.
    `sparsity` ("auto" or a pattern) and `output` as in jacrev; forward mode is taken on a tie of colors."""
    if check_arguments(sparsity, output):
        return _jacobian_transform(func, argnums, has_aux, None, sparsity, output, "forward")

    @functools.wraps(func)
    @scoped
    def wrapper(*args, **kwargs):
        _check_real(args, "jacfwd", "inputs")
        if randomness not in _RANDOMNESS:
            raise RuntimeError(
                f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}"
            )
        argnums_ = check_argnums(argnums, len(args))
        with grad_level(args, kwargs, forward=True), _dual.switched_on():
            return _jacfwd(_with_real_outputs(func, has_aux), args, kwargs, argnums_, has_aux, randomness)

    return wrapper


def _with_real_outputs(func, has_aux):
    """`func`, refusing complex outputs as torch.func.jacfwd does (aux may be complex)."""

    @functools.wraps(func)
    def checked(*args, **kwargs):
        result = func(*args, **kwargs)
        output = result[0] if has_aux and isinstance(result, tuple) and len(result) == 2 else result
        _check_real(output, "jacfwd", "outputs")
        return result

    return checked


def _jacfwd(func, args, kwargs, argnums, has_aux, randomness):
    """jacfwd(func, argnums, has_aux, randomness=randomness)(*args, **kwargs), `argnums` checked."""
    leaves, spec = flatten(selected(args, argnums))
    outputs = _Outputs(has_aux)

    def flat_func(*xs):
        return func(*replaced(args, argnums, spec.unflatten(xs)), **kwargs)

    if randomness == "different":
        return _jacfwd_by_columns(flat_func, leaves, spec, has_aux)

    try:
        with randomness_mode(randomness):
            blocks, _ = forward_jacobian(flat_func, leaves, outputs, trace=_traced, recorded=is_recording())
    except (Untraceable, _CapturesGrad):  # f reads values, or must stay differentiable: by reverse mode
        return jacrev(func, argnums, has_aux=has_aux)(*args, **kwargs)
    n_out = len(outputs.flat_output)
    jacobian = outputs.spec.unflatten([spec.unflatten(list(row)) for row in blocks[:n_out]])
    if has_aux:  # aux from one more call of f (the traced call's aux values are tracers)
        return jacobian, split_aux(flat_func(*leaves), has_aux, JVP)[1]
    return jacobian


def _jacfwd_by_columns(flat_func, leaves, spec, has_aux):
    """jacfwd with randomness="different", as torch.func's: the JVPs along the standard basis under
    vmap.vmap(randomness="different"), so that f runs once per column and each column draws its own random values
    (the single traced run of forward_jacobian would share them); aux as the first column's."""
    sizes = [x.numel() for x in leaves]
    identity = eye(sum(sizes), dtype=float64)
    basis = [
        column.reshape((-1,) + tuple(x.shape)).to(x.dtype) for x, column in zip(leaves, identity.split(sizes, dim=1))
    ]

    def jvp_along(*tangents):
        result = jvp(flat_func, tuple(leaves), tangents, has_aux=has_aux)
        return result[1:] if has_aux else result[1]

    result = vmap(jvp_along, randomness="different")(*basis)
    tangents, aux = result if has_aux else (result, None)
    flat_tangents, out_spec = flatten(tangents)
    jacobian = out_spec.unflatten(
        [
            spec.unflatten(
                [
                    block.movedim(0, -1).reshape(tuple(t.shape[1:]) + tuple(x.shape))
                    for x, block in zip(leaves, t.split(sizes, dim=0))
                ]
            )
            for t in flat_tangents
        ]
    )
    if not has_aux:
        return jacobian
    flat_aux, aux_spec = flatten(aux)
    return jacobian, aux_spec.unflatten([a[0] if isinstance(a, Tensor) else a for a in flat_aux])


def hessian(func, argnums=0, *, sparsity=None, output=None):
    """A function returning the Hessian of func's scalar output w.r.t. args[argnums]: jacfwd of jacrev. With
    `sparsity` ("auto" or a pattern), from one batched Hessian-vector product per color of a star coloring, each
    block a SparseMatrix (or dense with output="dense")."""
    if check_arguments(sparsity, output):
        return sparse_hessian_transform(func, argnums, sparsity, output)
    return jacfwd(jacrev(func, argnums), argnums)
