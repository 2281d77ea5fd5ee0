"""Host forms derived from an op's JAX function: on the CPU backend an op without a hand-written host form
(Op.host), and a VJP without a hand-written one (Op.host_vjp), run on the host by evaluating the function's jaxpr
step by step (_numpy_program.py: NumPy rows, and XLA kernels compiled once per elementwise region NumPy would
round differently, run on chunks of a fixed size), so that a new size compiles nothing. They run on every call where
they apply, as the hand-written forms do: a value does not depend on how often it was computed.

A jaxpr is traced once per op, static parameters and *pattern* of operand shapes, not per size: every dimension of
two or more is a symbolic size (jax.export.symbolic_shape, constrained to be at least 2), equal sizes one symbol;
sizes 0 and 1 stay as they are (they change what broadcasting and squeezing do), and so do sizes a static param
names (a symbolic size would compare unequal to them). The sizes are bound when it runs. A function that depends
on a size in a way a symbolic trace cannot decide (a reshape to a fixed shape) raises while traced, or holds a
primitive without a row (a slice with open bounds is a gather), and is then traced with its concrete shapes, once
per shape; so is every op whose static params hold an opaque object (a traced function, with shapes inside it).
Deferred ops take their output shapes from the same jaxprs (_lazy.signature), without a trace for a new size.

A VJP of batched cotangents (is_grads_batched, a Jacobian's rows) is traced as jax.vmap of the VJP, the number of
rows one more symbolic size: every row runs in one NumPy program, and a new number of rows compiles nothing (rows
taken in chunks inside a program or split over devices run as kernels).

A jaxpr holding a primitive without a row, an array of another dtype (complex, float16) or an effect has no
derived form: the op runs as its kernel, and that answer is cached too. So do operands or intermediate arrays of
more than HOST_ELEMENTS elements (_host.py).

Values: exact operations give XLA's bits, transcendental functions and multiply-adds run as XLA's kernels (but for
those computed in float64 for narrower operands: _numpy_program.py), and sums
(reductions, matrix products) differ from XLA's by their order, within n eps of the scale of a sum of n terms, as
torch's own paths differ; XLA's algebraic rewrites (a division by a broadcast value computed as a multiplication
by its reciprocal) also make the kernel differ by an ulp there. tests/test_tier_agreement.py and
tests/test_numpy_eval.py check the agreement with the kernels and fused programs."""

import collections
import enum
import functools
import math
import operator
import threading

import jax
import numpy as np
from jax.export import is_symbolic_dim, symbolic_shape

from . import _host, _store
from ._float_errors import ignore as ignore_float_errors
from ._float_errors import restore as restore_float_errors
from ._numpy_loops import Body
from ._numpy_program import Program, Unsupported, dumps, flatten, loads, supported
from ._reads import traced
from ._x64 import scoped

MAX_PROGRAMS = 2048  # traced jaxprs kept, least recently used dropped
_CONCRETE = object()  # cached for a pattern whose symbolic trace failed: trace the concrete shapes
_MISSING = object()


# ---- tracing, once per pattern of shapes -------------------------------------------------------------------------
def _pattern(avals, fixed, apart=0):
    """(pattern, sizes): per aval its dtype and dims, each dim of 2 or more not in `fixed` (a set of sizes; None:
    all of them) as -1 - the index of its value in `sizes`, the distinct such values in order of appearance; but
    each dim of the last `apart` avals a size of its own, whatever its value (a number of rows, which no operand's
    size constrains: one trace serves the rows equal to an operand's size and those that differ)."""
    sizes, pattern = [], []
    first_apart = len(avals) - apart
    for position, (shape, dtype) in enumerate(avals):
        dims = []
        for n in shape:
            if n < 2 or fixed is None or n in fixed:
                dims.append(n)
                continue
            if position < first_apart and n in sizes:
                i = sizes.index(n)
            else:
                i = len(sizes)
                sizes.append(n)
            dims.append(-1 - i)
        pattern.append((tuple(dims), np.dtype(dtype)))
    return tuple(pattern), tuple(sizes)


_PLAIN = (type(None), bool, float, complex, str, bytes, type, np.dtype, enum.Enum, type(Ellipsis))


def _ints(value, found):
    """Add the ints in a static param to `found`; False where it holds an object whose sizes cannot be seen."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        found.add(int(value))
        return True
    if isinstance(value, _PLAIN) or isinstance(value, np.floating):
        return True
    if isinstance(value, slice):
        value = (value.start, value.stop, value.step)
    if isinstance(value, (tuple, list, frozenset)):
        return all([_ints(v, found) for v in value])
    return False


@functools.lru_cache(maxsize=4096)
def _fixed_sizes(static):
    """The sizes a static param names (a reshape's shape, a split's sizes), which stay concrete in a symbolic trace:
    a symbolic size equal to one would compare unequal to it. None where some param is an opaque object (a traced
    function, whose shapes are fixed inside it): then every size stays concrete."""
    found = set()
    return frozenset(found) if _ints(static, found) else None


def _structs(pattern, count):
    """ShapeDtypeStructs of `pattern` with `count` symbolic sizes, and the symbols' names."""
    names = tuple([f"n{i}" for i in range(count)])
    dims = symbolic_shape(", ".join(names), constraints=[f"{n} >= 2" for n in names]) if count else ()
    return [jax.ShapeDtypeStruct(tuple([dims[-1 - d] if d < 0 else d for d in s]), t) for s, t in pattern], names


@scoped
def _trace(build, pattern, count, multi):
    """The Program of the function `build(structs)` gives (with its argument structs), traced on `pattern`; None
    where it has no derived form; _CONCRETE where a symbolic trace failed or holds what has no row (a slice whose
    bounds a symbolic size leaves open is a gather): the concrete shapes may do."""
    # Traced in a generator's frame, whose callers are not linked to the frames it leaves: a symbolic trace leaves
    # exceptions in reference cycles with their frames (JAX keeps the TypeError of operator.index on a symbolic
    # size), and each such frame kept would keep its callers' frames, and the Tensors of `apply`, until the cycle
    # collector runs.
    return next(_tracing(build, pattern, count, multi))


def _tracing(build, pattern, count, multi):
    failed = _CONCRETE if count else None
    try:
        structs, names = _structs(pattern, count)
        fn, args = build(structs)
        if count:
            closed, out = jax.make_jaxpr(fn, return_shape=True)(*args)
        else:  # concrete shapes: the trace a recorded VJP's walks made (_reads.traced), where they ran first
            closed, out = traced(fn, [(a.shape, a.dtype) for a in args])
    except Exception:  # a size the trace cannot decide, or an error the kernel raises in its own words
        yield failed
        return
    leaves, tree = jax.tree_util.tree_flatten(out)
    if not multi and len(leaves) != 1 or tree != jax.tree_util.tree_structure(tuple(leaves) if multi else leaves[0]):
        yield None  # not a single array, or a flat tuple of them for a multi-output op
        return
    try:
        yield flatten(closed, names)
    except Unsupported:
        yield failed


_programs = collections.OrderedDict()
_lock = threading.Lock()


def _traced(key, build, pattern, count, multi):
    with _lock:
        program = _programs.get((key, pattern), _MISSING)
        if program is not _MISSING:
            _programs.move_to_end((key, pattern))
            return program
    program = _store.remembered(
        "host form", (key, pattern, count, multi), lambda: _trace(build, pattern, count, multi), _encode, _decode
    )
    with _lock:
        _programs[(key, pattern)] = program
        while len(_programs) > MAX_PROGRAMS:
            _programs.popitem(last=False)
    return program


def _encode(program):
    """A traced result's bytes in the store: a Program, None (no derived form) or _CONCRETE."""
    if program is None or program is _CONCRETE:
        return b"none" if program is None else b"concrete"
    return b"program" + dumps(program)


def _decode(data):
    if data in (b"none", b"concrete"):
        return None if data == b"none" else _CONCRETE
    if not data.startswith(b"program"):
        raise ValueError("not a traced result")
    return loads(data[len(b"program") :])


def program_for(key, build, avals, multi, static=(), apart=0):
    """(Program, sizes) for the function identified by `key` that `build` traces, on operands of `avals` (the
    pattern's shapes and dtypes) with static params `static`, the sizes of the last `apart` avals symbols of their
    own (_pattern); None where it has no derived form."""
    fixed = _fixed_sizes(static)
    pattern, sizes = _pattern(avals, fixed, apart)
    program = _traced(key, build, pattern, len(sizes), multi)
    if program is _CONCRETE:
        pattern, sizes = _pattern(avals, None)
        program = _traced(key, build, pattern, 0, multi)
    return None if program is None else (program, sizes)


# ---- evaluation ---------------------------------------------------------------------------------------------------
def _resolve(value, env, memo):
    """`value` (a param or a shape) with its symbolic sizes bound by `env` (name -> size); `memo` keeps the value
    of each symbolic expression met."""
    if type(value) is int:
        return value
    if is_symbolic_dim(value):
        found = memo.get(value)
        if found is None:
            found = memo[value] = _size_of(value, env)
        return found
    if isinstance(value, (tuple, list)):
        items = [_resolve(v, env, memo) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # a NamedTuple's fields
    if type(value) is Program:  # a loop's body, whose symbolic sizes are the program's holding it
        steps, _, _, outs = _bound(value, tuple([env[name] for name in value.names]))
        return Body(_runner(value, steps), outs)
    return value


_SIZE_FUNCTIONS = {
    "__builtins__": {},
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "max": max,
    "min": min,
    "non_negative": lambda n: max(n, 0),
}
_size_code = {}  # symbolic size -> its text compiled, or None where that does not evaluate as JAX does


def _size_of(expr, env):
    """The value of the symbolic size `expr` with its symbols bound by `env`: its text compiled as Python (about 1 us,
    against 20-50 us for JAX's own evaluation, which every new size would pay per size of the program), checked
    against JAX's on its first use."""
    code = _size_code.get(expr, _MISSING)
    if code is _MISSING:
        exact = int(expr._evaluate(env))
        try:
            code = compile(str(expr).replace("^", "**"), "<size>", "eval")
            if eval(code, _SIZE_FUNCTIONS, dict(env)) != exact:
                code = None
        except Exception:  # a text that is no Python expression of these functions
            code = None
        _size_code[expr] = code
        return exact
    return int(expr._evaluate(env)) if code is None else eval(code, _SIZE_FUNCTIONS, env)


def _holds_symbolic(value):
    if isinstance(value, (tuple, list)):
        return any([_holds_symbolic(v) for v in value])
    return is_symbolic_dim(value) or type(value) is Program


@functools.lru_cache(maxsize=4096)
def _symbolic_params(program):
    """Per step of `program`, the names of its params that are bound to a call's sizes: those holding symbolic
    sizes, and loop bodies (sub-Programs), which are bound even where there are no symbols (most hold none)."""
    return [tuple([k for k, v in params.items() if _holds_symbolic(v)]) for _, _, _, params, _, _ in program.steps]


@functools.lru_cache(maxsize=4096)
def _bound(program, sizes):
    """(steps, largest array's size, argument shapes, output (shape, dtype) pairs) of `program` with its symbols
    bound to `sizes`."""
    resolve = functools.partial(_resolve, env=dict(zip(program.names, sizes)), memo={})
    steps = program.steps
    if any(_symbolic_params(program)):
        steps = [
            (fn, ins, outs, {**params, **{k: resolve(params[k]) for k in names}} if names else params, dtypes, multi)
            for (fn, ins, outs, params, dtypes, multi), names in zip(steps, _symbolic_params(program))
        ]
    largest = max([math.prod(resolve(s)) for s in program.shapes], default=0)
    outs = [(resolve(s), d) for s, d in program.out_avals]
    return steps, largest, [resolve(s) for s in program.in_shapes], outs


def evaluate(program, sizes, arrays):
    """The outputs (a list of NumPy arrays) of `program` on `arrays`; None where an array is too large. Inf and nan
    come as XLA gives them, without NumPy's warnings."""
    steps, largest, in_shapes, _ = _bound(program, sizes)
    if largest > _host.HOST_ELEMENTS or [a.shape for a in arrays] != in_shapes:
        return None
    token = ignore_float_errors()
    try:
        return _run(program, steps, arrays)
    finally:
        restore_float_errors(token)


def _run(program, steps, arrays):
    """The outputs of `program`, its `steps` bound to the sizes of `arrays`, on `arrays` (float errors as the caller
    handles them)."""
    registers = program.registers.copy()
    for slot, a in zip(program.in_slots, arrays):
        registers[slot] = a
    for fn, ins, outs, params, dtypes, multi in steps:
        out = fn(*map(registers.__getitem__, ins), **params)
        for slot, value, dtype in zip(outs, out if multi else (out,), dtypes):
            if type(value) is not np.ndarray or value.dtype != dtype:
                value = np.asarray(value, dtype)
            registers[slot] = value
    return list(map(registers.__getitem__, program.out_slots))


def _runner(program, steps):
    """A function of the arrays giving the outputs of `program` (its `steps` bound to their sizes): a program of one
    step on its arguments in order (one primitive: most ops) calls that step's function directly."""
    if len(steps) == 1:
        fn, ins, outs, params, dtypes, multi = steps[0]
        if not multi and len(dtypes) == 1 and ins == program.in_slots and outs == program.out_slots:
            (dtype,) = dtypes

            def run(arrays):
                out = fn(*arrays, **params)
                return [out if type(out) is np.ndarray and out.dtype == dtype else np.asarray(out, dtype)]

            return run
    return functools.partial(_run, program, steps)


def _forward(op, static, avals):
    """(Program, sizes) of `op.fn(*operands, **static)` on operands of `avals`; None where it has no derived form."""
    if op.whole_backward:
        return None  # a backward program: a kernel compiled once per structure
    for _, dtype in avals:
        if not supported(np.dtype(dtype)):
            return None
    build = lambda structs: (functools.partial(op.fn, **dict(static)), structs)
    return program_for((op, static), build, avals, op.multi, static)


def _vjp(vjp_fn, spec, rows=None):
    """(Program, sizes) of a node's VJP, `vjp_fn(*saved operands, *cotangents, spec=spec)` (_ops/_core.py); None
    where it has no derived form. Traced once per pattern of the op's operand shapes: the VJP of the op on symbolic
    operands of that pattern, its cotangents of the shapes its outputs have there. Batched cotangents (`spec.batch`,
    whose `rows` lead each cotangent) are mapped over by jax.vmap in the trace, their number of rows one more size of
    the pattern: every row runs in one NumPy program, which compiles nothing for a new number of rows. Rows taken in
    chunks or split over devices have no derived form (a kernel maps them)."""
    sig, batch = spec.sig, spec.batch
    if batch is not None and (batch.chunk_size is not None or batch.shards is not None):
        return None
    for _, dtype in sig.avals:
        if not supported(np.dtype(dtype)):
            return None
    # the number of rows enters the pattern as the shape of one more (unread) operand
    avals = sig.avals if batch is None else sig.avals + (((rows,), _ROWS),)

    def build(structs):
        from ._lazy import Signature

        lead = () if batch is None else structs.pop().shape
        out = jax.eval_shape(functools.partial(sig.op.fn, **dict(sig.static)), *structs)
        outs = tuple(out) if sig.op.multi else (out,)
        symbolic = Signature(
            sig.op, sig.static, tuple([(s.shape, s.dtype) for s in structs]), tuple([(o.shape, o.dtype) for o in outs])
        )
        if symbolic.avals == sig.avals and symbolic.out_avals == sig.out_avals:
            symbolic = sig  # concrete shapes: the node's own spec, the function _reads.traced knows
        saved = [s for s, m in zip(structs, spec.saved_mask) if m]
        cotangents = [
            jax.ShapeDtypeStruct(lead + outs[k].shape, outs[k].dtype)
            for k, m in zip(symbolic.diff_outs, spec.ct_mask)
            if m
        ]
        return functools.partial(vjp_fn, spec=spec._replace(sig=symbolic)), saved + cotangents

    key = (vjp_fn, sig.op, sig.static, spec.saved_mask, spec.want, spec.ct_mask, batch is not None)
    return program_for(key, build, avals, True, sig.static, apart=0 if batch is None else 1)


_ROWS = np.dtype(np.int32)  # the dtype of the pseudo-operand whose shape is the number of rows


def _rows(spec, shapes):
    """The number of rows of a batched VJP's cotangents (the shape of its first one among `shapes`, the VJP's
    operands' shapes), or None unbatched."""
    return None if spec.batch is None else shapes[sum(spec.saved_mask)][0]


_found = {}  # (op, static, operand avals) -> the runner of its derived form on them (_runner), or None if it has none


def derived(op, arrays, static):
    """What `op.fn(*arrays, **static)` gives (a tuple for a multi-output op), with NumPy; None where the op has no
    derived form on these operands (NumPy arrays). `static`: the op's static params, a dict. Float errors as the
    caller handles them (computed_on_host ignores them)."""
    for a in arrays:  # an operand above the bound: a kernel, without tracing a program only to find it too large
        if a.size > _host.HOST_ELEMENTS:
            return None
    # static params in the order given (the sorted items key the traced programs); one operand's aval flat
    if len(arrays) == 1:
        key = (op, tuple(static.items()), arrays[0].shape, arrays[0].dtype)
    else:
        key = (op, tuple(static.items()), tuple([(a.shape, a.dtype) for a in arrays]))
    found = _found.get(key, _MISSING)
    if found is _MISSING:
        found = _bound_forward(op, tuple(sorted(static.items())), tuple([(a.shape, a.dtype) for a in arrays]))
        if len(_found) >= MAX_PROGRAMS:
            _found.clear()
        _found[key] = found
    if found is None:
        return None
    outs = found(arrays)
    return tuple(outs) if op.multi else outs[0]


def _bound_forward(op, static, avals):
    """The runner of op's derived form on operands of `avals`; None where it has none, or one of its arrays is too
    large for the host."""
    forward = _forward(op, static, avals)
    if forward is None:
        return None
    program, sizes = forward
    steps, largest, in_shapes, _ = _bound(program, sizes)
    if largest > _host.HOST_ELEMENTS or [shape for shape, _ in avals] != in_shapes:
        return None
    return _runner(program, steps)


def derived_vjp(vjp_fn, spec, arrays):
    """The gradients (a tuple) that a node's VJP `vjp_fn(*arrays, spec=spec)` gives, with NumPy; None where it has
    no derived form."""
    found = _vjp(vjp_fn, spec, _rows(spec, [a.shape for a in arrays]))
    outs = None if found is None else evaluate(*found, arrays)
    return None if outs is None else tuple(outs)


def derived_function(key, fn, arrays, weak=frozenset()):
    """The flat outputs (a list) of `fn(*arrays)`, a function of arrays giving a tuple of arrays, computed with NumPy
    from its jaxpr, traced once per pattern of shapes under `key` (a hashable name of `fn` and its settings); the
    arrays at the positions in `weak` are traced as weakly typed scalars (the Python numbers a jitted `fn` would
    get). None where it has no derived form on these NumPy arrays, or one of them is too large."""
    for a in arrays:
        if a.size > _host.HOST_ELEMENTS:
            return None

    def build(structs):
        return fn, [
            jax.ShapeDtypeStruct((), struct.dtype, weak_type=True) if i in weak else struct
            for i, struct in enumerate(structs)
        ]

    found = program_for((key, weak), build, tuple([(a.shape, a.dtype) for a in arrays]), True)
    return None if found is None else evaluate(*found, arrays)


def out_avals(op, static, avals):
    """ShapeDtypeStructs of the outputs of `op` on operands of `avals`, from its derived program: no trace for a
    new size (a deferred op's Signature); None where it has none."""
    found = _forward(op, static, avals)
    return None if found is None else [jax.ShapeDtypeStruct(s, d) for s, d in _bound(*found)[3]]


def clear():
    """Forget the traced jaxprs."""
    with _lock:
        _programs.clear()
        _found.clear()
        _size_code.clear()
    _bound.cache_clear()
    _symbolic_params.cache_clear()
