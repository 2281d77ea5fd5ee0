"""Forward-mode Jacobians and forward-over-reverse Hessians for bg.autograd.functional.

The user's function of Tensors is traced once into a jaxpr (its Tensors wrap JAX tracers); the JVPs along
the standard basis of the inputs then run as one op of the table, whose static parameter is the jaxpr
compared by its structure (which fixes the computation and the avals) while the jaxpr's constants — values the
function closed over — are operands: a repeated call compiles nothing and never sees stale closed-over values.
"""

import functools
import weakref

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import ClosedJaxpr, DebugInfo, Jaxpr, Literal, jaxpr_as_fun

from vmap._fallback import UNVECTORIZABLE
from vmap._memory import AUTO, auto_chunk, lowerable
from vmap._rows import map_rows

from .. import _dual
from .._grad_mode import no_grad
from .._ops._core import Op, apply
from .._tensor import Tensor
from .._tracing import TRACING, forward_tracing
from .._transform_levels import REQUIRES_GRAD_INSIDE, in_forward_transform, in_transform
from .._vmap_levels import is_batched

try:  # the trace under jax.make_jaxpr, without the jit wrapper it makes for every new function
    from jax.extend.linear_util import wrap_init
    from jax.interpreters.partial_eval import trace_to_jaxpr_dynamic
except ImportError:  # pragma: no cover - depends on the JAX version
    trace_to_jaxpr_dynamic = None


class Untraceable(Exception):
    """The function cannot be traced with abstract values (it reads concrete values of its inputs)."""


class AppliesFunction(Exception):
    """A Hessian's function applies a custom Function, whose backward must give the inner gradient (as torch's):
    JAX's reverse mode of the trace would transpose its jvp instead."""


NESTED_FORWARD = "Nested forward mode AD is not supported at the moment"
MAKE_DUAL_UNDER_VMAP = (
    "Batching rule not implemented for aten::_make_dual; the fallback path doesn't work on out= or view ops."
)


def check_forward_mode(create_graph, strict, vectorize, inputs, hessian=False):
    """torch's refusals of autograd.functional's forward mode, in torch's order: its flags; then what torch's
    forward AD level meets where it runs: one already open (a dual level, or jvp/jacfwd running), inputs batched by
    a running vmap (whose make_dual has no batching rule), and for a Hessian, the inner gradient's requires_grad_()
    inside any function transform."""
    for flag, name, error in ((create_graph, "create_graph", NotImplementedError), (strict, "strict", RuntimeError)):
        if flag:
            raise error(
                f'torch.autograd.functional.jacobian: `{name}=True` and `strategy="forward-mode"` are not '
                f'supported together (yet). Please either set `{name}=False` or `strategy="reverse-mode"`.'
            )
    if not vectorize:
        raise NotImplementedError(
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
            "only implemented for `vectorize=True`."
        )
    if _dual.LEVELS.open is not None or in_forward_transform():
        raise RuntimeError(NESTED_FORWARD)
    if any(is_batched(x._v) for x in inputs):
        raise RuntimeError(MAKE_DUAL_UNDER_VMAP)
    if hessian and in_transform():
        raise RuntimeError(REQUIRES_GRAD_INSIDE)


def _check_primals(inputs):
    for x in inputs:
        if not (x.dtype.is_floating_point or x.dtype.is_complex):
            raise ValueError(f"Expected primal to be floating point or complex, but got: {x.dtype!r}")


def _trace(func, inputs, as_outputs):
    """The closed jaxpr of `func` at the inputs' avals, and `as_outputs(func's result)[0]` (is it a tuple)."""
    is_tuple = []

    def traced(*arrays):
        # nothing needs recording; the inputs keep requires_grad, which the function may read. A custom Function
        # applied in the trace ties its outputs to its jvp staticmethod (_function_jvp.py)
        with no_grad(), forward_tracing():
            result = func(*[Tensor._wrap(a, requires_grad=x.requires_grad) for a, x in zip(arrays, inputs)])
        flag, outputs = as_outputs(result)
        is_tuple.append(flag)
        return tuple(out._value for out in outputs)

    try:
        closed = _jaxpr_of(traced, [x._value for x in inputs])
    except UNVECTORIZABLE as error:
        raise Untraceable(type(error).__name__) from error
    return closed, is_tuple[0]


_DEBUG_INFO = DebugInfo("a forward-mode transform", "f", None, None)  # what JAX's errors name


def constants(closed):
    """The constants of a closed jaxpr as the operands of an op: a host array JAX holds as its own NumPy subclass (a
    value the function closed over) as a plain NumPy array, which the op's host form can read."""
    return [np.asarray(c) if isinstance(c, np.ndarray) else c for c in closed.consts]


def _jaxpr_of(fn, arrays):
    """The closed jaxpr of `fn` (arrays -> a tuple of arrays) at the avals of `arrays`, as jax.make_jaxpr gives it.
    Traced directly: make_jaxpr wraps the function in a fresh jax.jit and prepares it for compiling, 0.1-0.2 ms a
    call here, more than tracing a small function takes."""
    if trace_to_jaxpr_dynamic is None:  # pragma: no cover - depends on the JAX version
        return jax.make_jaxpr(fn)(*arrays)
    jaxpr, _, consts = trace_to_jaxpr_dynamic(wrap_init(fn, debug_info=_DEBUG_INFO), [jax.typeof(a) for a in arrays])
    return ClosedJaxpr(jaxpr, consts)


_TEXTS = weakref.WeakKeyDictionary()  # a jaxpr inside the traced one -> its text


def _text(jaxpr):
    """The text of a jaxpr found in a parameter (a jit call's), printed once per object: each traced call of the
    same kernel or fused program holds the same jaxpr object, and printing them all took longer than the Hessian."""
    text = _TEXTS.get(jaxpr)
    if text is None:
        text = _TEXTS[jaxpr] = str(jaxpr)
    return text


def _param(value):
    if isinstance(value, (Jaxpr, ClosedJaxpr)):
        return _text(value)
    if isinstance(value, (tuple, list)):
        return tuple(_param(v) for v in value)
    return str(value)


def _structure(jaxpr):
    """What the text of `jaxpr` says, as a tuple: each equation's primitive, where its inputs come from (an earlier
    variable's number, or a literal's aval and bytes), its parameters as printed, its outputs' avals."""
    numbers = {}

    def define(var):
        numbers[var] = len(numbers)
        return var.aval

    def use(var):
        if isinstance(var, Literal):
            return var.aval, np.asarray(var.val).tobytes()
        return numbers[var]

    head = tuple(define(v) for v in jaxpr.constvars), tuple(define(v) for v in jaxpr.invars)
    eqns = tuple(
        (
            e.primitive,
            tuple(use(v) for v in e.invars),
            tuple((k, _param(v)) for k, v in e.params.items()),
            tuple(define(v) for v in e.outvars),
        )
        for e in jaxpr.eqns
    )
    return head, eqns, tuple(use(v) for v in jaxpr.outvars)


class _TracedFunction:
    """A jaxpr as a static op parameter, equal (and hashed) by its structure, which fixes the computation and the
    avals: equal computations share a kernel."""

    __slots__ = ("jaxpr", "structure", "_hash")

    def __init__(self, jaxpr):
        self.jaxpr, self.structure = jaxpr, _structure(jaxpr)
        self._hash = hash(self.structure)

    def __eq__(self, other):
        return isinstance(other, _TracedFunction) and self.structure == other.structure

    def __hash__(self):
        return self._hash


def _identity_tangents(numels, dtypes):
    """One (total, numel_i) block per primal: together the rows are the identity of the flattened primals."""
    total, offset, blocks = sum(numels), 0, []
    for n, dtype in zip(numels, dtypes):
        blocks.append(jnp.eye(total, n, k=-offset, dtype=dtype))
        offset += n
    return tuple(blocks)


def _jacobian_blocks(*arrays, traced, hessian, chunk_size):
    """The flattened blocks [i][j] = d out_i / d primal_j, each shaped out_i.shape + primal_j.shape, by JVPs
    along the basis; `arrays` are the jaxpr's constants, then the primals."""
    n_consts = len(traced.jaxpr.constvars)
    func = jaxpr_as_fun(ClosedJaxpr(traced.jaxpr, arrays[:n_consts]))
    primals = arrays[n_consts:]
    if hessian:  # the outer Jacobian is taken of the gradient of the (single-element) output
        scalar = func
        func = jax.grad(lambda *a: scalar(*a)[0].reshape(()), argnums=tuple(range(len(primals))))
    numels = [p.size for p in primals]

    def column(*basis_rows):
        tangents = tuple(t.reshape(p.shape) for t, p in zip(basis_rows, primals))
        outs, out_tangents = jax.jvp(lambda *a: tuple(func(*a)), primals, tangents)
        # an integer output has float0 tangents; its Jacobian is zeros of its own dtype, as torch's
        return tuple(jnp.zeros_like(o) if t.dtype == jax.dtypes.float0 else t for o, t in zip(outs, out_tangents))

    columns = map_rows(column, _identity_tangents(numels, [p.dtype for p in primals]), chunk_size)
    splits = np.cumsum(numels)[:-1].tolist()
    return tuple(
        jnp.moveaxis(piece, 0, -1).reshape(col.shape[1:] + p.shape)
        for col in columns
        for piece, p in zip(jnp.split(col, splits), primals)
    )


_JACOBIAN = Op("forward_jacobian", _jacobian_blocks, multi=True)


def _auto_chunk(traced, hessian, arrays):
    """chunk_size="auto" for the forward-mode Jacobian of `traced` at `arrays` (constants, then primals): the
    largest chunk of basis columns whose compiled program fits the memory budget, chosen once per structure."""
    key = ("forward_jacobian", traced, hessian, tuple([(jnp.shape(a), jnp.result_type(a)) for a in arrays]))
    columns = sum([int(np.size(a)) for a in arrays[len(traced.jaxpr.constvars) :]])
    return auto_chunk(
        key,
        lambda k: (
            jax.jit(functools.partial(_jacobian_blocks, traced=traced, hessian=hessian, chunk_size=k))
            .lower(*lowerable(arrays))
            .compile()
        ),
        columns,
    )


def forward_jacobian(func, inputs, as_outputs, *, hessian=False, chunk_size=None, trace=None, recorded=False):
    """Jacobian blocks (a tuple over outputs of tuples over inputs) of `func` at `inputs` by forward mode,
    and whether func returned a tuple. With `hessian`, `func` returns one single-element Tensor and the
    blocks are the Hessian (forward over reverse; AppliesFunction where func applies a custom Function). Raises
    Untraceable when func cannot be traced. `trace(func,
    inputs, as_outputs)` gives the closed jaxpr (default: _trace's); `recorded`: the blocks are differentiable with
    respect to the inputs (torch.func's jacfwd), not cut from the graph (autograd.functional's)."""
    _check_primals(inputs)
    ties = TRACING.ties
    closed, is_outputs_tuple = (trace or _trace)(func, inputs, as_outputs)
    if hessian and TRACING.ties != ties:
        raise AppliesFunction
    primals = inputs if recorded else [Tensor._wrap(x._v) for x in inputs]  # a cut traced value keeps its tangent
    traced = _TracedFunction(closed.jaxpr)
    if chunk_size == AUTO:
        chunk_size = _auto_chunk(traced, hessian, constants(closed) + [x._value for x in inputs])
    blocks = apply(_JACOBIAN, constants(closed) + primals, traced=traced, hessian=hessian, chunk_size=chunk_size)
    n = len(inputs)
    return tuple(blocks[i : i + n] for i in range(0, len(blocks), n)), is_outputs_tuple
