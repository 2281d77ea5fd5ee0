"""bg.compile: a step of an optimization loop recorded once per input signature and run as one XLA program.

The first call of a signature traces the function with JAX (its Tensors wrap tracers): the forward, grad() and
backward() (batched or not, create_graph or not), the functional API, batched_grad.func and vmap.vmap all run on
traced values, as they do inside vmap.vmap. What the function reads besides its arguments (parameters, an
optimizer's state, `.grad`) becomes an input of the program, found by identity among the live Tensors; what it
changes (in-place updates of parameters, `.grad` accumulated or reset) becomes an output, written back after every
call. Later calls check the signature and run the program: no Python of the function runs, no graph is recorded.

A Tensor the function creates and keeps outside it (an optimizer's state made at its first step) gets its value from
the program; its signature is traced again on the next call, which then reads that state. A function that keeps new
Tensors at every call (state replaced rather than updated in place) runs eagerly from then on, with a warning.

Reading a value inside (`.item()`, `float()`, `bool()`, `.numpy()`, a branch on a tensor) cannot be compiled: it
raises an error naming the read (fullgraph=True), or runs that signature eagerly with a warning (fullgraph=False)."""

import functools
import gc
import inspect
import threading
import traceback
import warnings
import weakref

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.interpreters import partial_eval as pe
from jax.extend.core import ClosedJaxpr

from vmap._pytree import flatten

from . import _compile_args
from ._grad_mode import is_recording
from ._host import is_shared
from ._lazy import Pending, computable, materialize
from ._tensor import Tensor
from ._tracing import ValueRead, compiling
from ._x64 import scoped
from .autograd._functional_forward import _jaxpr_of

# what JAX raises when traced code needs a concrete value (as ValueRead for a Tensor's own reads)
_CONCRETE = (
    ValueRead,
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerBoolConversionError,
    jax.errors.NonConcreteBooleanIndexError,
)


def compile(
    model=None,
    *,
    fullgraph=True,
    dynamic=None,
    backend=None,
    mode=None,
    options=None,
    name=None,
    disable=False,
    recompile_limit=None,
    isolate_recompiles=False,
    shapes_spec=None,
):
    """torch.compile: `model` (a function or an nn.Module; without it, a decorator) recorded on its first call per
    input signature (the arguments' pytree structure, each Tensor's shape, dtype and requires_grad, the other
    arguments by value, and grad mode) into one compiled XLA program, which later calls run without recording.

    fullgraph: True (the default here, where torch's is False) raises when a signature's function cannot be traced
        whole (it reads a tensor's value: `.item()`, a branch on a tensor), naming the read; False runs that
        signature eagerly, with a warning, where torch would break the graph: the same results.
    dynamic: a program is specialized to its input shapes (torch's dynamic=False); with None or True a new shape
        traces and compiles one more program, where torch might compile a shape-generic kernel instead: the
        results are the same, only the compile count differs.
    backend: None or "inductor" (torch's default) or "openxla" compile; "eager" and "aot_eager" run the function
        as it is (torch's debugging backends, whose results are eager); torch's other backends are refused by name,
        an unknown one raises torch's InvalidBackend.
    mode, options: inductor's kernel choices, autotuning and CUDA graphs (speed, not results): checked as torch
        does (an unknown mode raises its error; not both at once); XLA compiles the same program whatever they say.
    name: the compiled region's name in bg.compile's warnings and errors (the function's name otherwise).
    disable: True returns `model` itself, as torch's no-op.
    recompile_limit: at most this many programs (signatures); a further signature runs eagerly, or raises with
        fullgraph=True (torch's FailOnRecompileLimitHit); None: no limit.
    isolate_recompiles: each compile() call here has its own programs already (what torch's True asks for); sharing
        them (torch's False) changes which calls compile, not results.
    shapes_spec: torch's symbolic shapes; only None is accepted.

    A program's results carry no graph (the step is meant to be whole: forward, backward and update inside). A
    compiled module (compile(module), Module.compile) is a forward whose results a backward outside differentiates:
    its signatures whose results require grad run eagerly, with a warning (torch's results), and those under
    no_grad run the program. A compiled function's results do not record, so a backward through them raises."""
    keywords = dict(locals())  # the keyword arguments, as given
    del keywords["model"]
    settings = _settings(**keywords)
    if model is None:
        return functools.partial(_compile_model, settings=settings)
    return _compile_model(model, settings)


def compile_forward(forward, **kwargs):
    """compile(forward, **kwargs) for a module's call (Module.compile, compile(module)): a signature whose results
    require grad runs eagerly, since a backward outside the call differentiates them."""
    return _compile_model(forward, _settings(**kwargs), forward=True)


def _settings(**given):
    """compile()'s keyword arguments (its defaults where not given) checked, as a dict (those with no effect past
    the check left out)."""
    unknown = sorted(set(given) - set(_DEFAULTS))
    if unknown:
        raise TypeError(f"compile() got an unexpected keyword argument '{unknown[0]}'")
    arguments = {**_DEFAULTS, **given}
    _compile_args.check(**{k: v for k, v in arguments.items() if k != "backend"})
    return {k: arguments[k] for k in ("fullgraph", "backend", "name", "disable", "recompile_limit")}


# compile()'s keyword arguments and their defaults, read from its signature (one place for both)
_DEFAULTS = {k: p.default for k, p in inspect.signature(compile).parameters.items() if k != "model"}


def _compile_model(model, settings, forward=False):
    if model is None:
        raise RuntimeError("Model can't be None")
    if not callable(model):
        raise TypeError(f"compile(): argument 'model' must be callable, but got {type(model).__name__}")
    eager = _compile_args.eager_backend(settings["backend"])
    if settings["disable"]:
        return model
    from .nn.module import Module

    if isinstance(model, Module):
        from .nn._compiled_module import OptimizedModule

        return OptimizedModule(model, _compile_model(model.__call__, settings, forward=True))
    if eager:
        return model
    compiled = CompiledFunction(model, settings["fullgraph"], settings["name"], settings["recompile_limit"], forward)
    return functools.wraps(model)(compiled)


class CompiledFunction:
    """The function bg.compile returns; `compiles` counts its traces (each compiled into one program)."""

    def __init__(self, fn, fullgraph, name=None, recompile_limit=None, forward=False):
        self.fn, self.fullgraph, self.recompile_limit, self.forward = fn, fullgraph, recompile_limit, forward
        self.name = name or _name(fn)
        self._steps = {}  # signature -> _Step, or EAGER
        self._lock = threading.Lock()
        self.compiles = 0

    @scoped
    def __call__(self, *args, **kwargs):
        if compiling.name is not None:  # inside another compiled function's trace: part of its program
            return self.fn(*args, **kwargs)
        leaves, spec = flatten((args, kwargs))
        signature = _signature(leaves, spec)
        step = self._steps.get(signature)
        if step is EAGER:
            return self.fn(*args, **kwargs)
        if step is not None and not step.retrace:
            outs = step.run(leaves)
            if outs is not None:
                return outs
        with self._lock:
            return self._record(signature, leaves, spec)

    def _record(self, signature, leaves, spec):
        previous = self._steps.get(signature)
        if previous is None and self.recompile_limit is not None and self.compiles >= self.recompile_limit:
            return self._over_the_limit(signature, leaves, spec)
        try:
            step = _Step.trace(self.fn, leaves, spec, self.forward)
        except ResultsNeedGraph:
            warnings.warn(
                f"bg.compile({self.name}): the function's results require grad (a backward outside it would run "
                "through them), and a compiled program returns values without a graph; these calls run eagerly",
                UserWarning,
                stacklevel=4,
            )
            return self._eager(signature, leaves, spec)
        except _CONCRETE as error:
            if self.fullgraph:
                raise RuntimeError(
                    f"bg.compile({self.name}): {_read_message(error)}; compile a function that "
                    "does not read values, or pass fullgraph=False to run such calls eagerly"
                ) from error
            warnings.warn(
                f"bg.compile({self.name}): {_read_message(error)}; these calls run eagerly (fullgraph=False)",
                UserWarning,
                stacklevel=4,
            )
            return self._eager(signature, leaves, spec)
        self.compiles += 1
        if step.created and previous is not None:  # new state again: not kept between calls
            warnings.warn(
                f"bg.compile({self.name}): the function keeps new tensors at every call (state "
                "replaced rather than updated in place), which a compiled program cannot read back; "
                "these calls run eagerly",
                UserWarning,
                stacklevel=4,
            )
            self._steps[signature] = EAGER
        else:
            step.retrace = bool(step.created)  # state made now: the next call traces the function reading it
            self._steps[signature] = step
        return step.run(leaves)

    def _over_the_limit(self, signature, leaves, spec):
        message = f"bg.compile({self.name}): a new input signature past recompile_limit={self.recompile_limit}"
        if self.fullgraph:
            raise RuntimeError(f"{message} (torch's FailOnRecompileLimitHit with fullgraph=True)")
        warnings.warn(f"{message}: these calls run eagerly", UserWarning, stacklevel=4)
        return self._eager(signature, leaves, spec)

    def _eager(self, signature, leaves, spec):
        self._steps[signature] = EAGER
        args, kwargs = spec.unflatten(leaves)
        return self.fn(*args, **kwargs)


EAGER = "eager"  # a signature whose calls run the function as it is


class ResultsNeedGraph(Exception):
    """Raised in a trace whose results require grad: the program's results have no graph to differentiate."""


def _name(fn):
    return getattr(fn, "__qualname__", None) or repr(fn)


def _signature(leaves, spec):
    parts = []
    for x in leaves:
        if isinstance(x, Tensor):
            parts.append((Tensor, tuple(x.shape), x.dtype, x.requires_grad))
        else:
            try:
                hash(x)
            except TypeError:
                raise TypeError(
                    f"bg.compile: a non-Tensor argument must be hashable (it is part of the signature), "
                    f"but got {type(x).__name__}"
                ) from None
            parts.append((type(x), x))
    return spec, tuple(parts), is_recording()


def _read_message(error):
    """What was read, and where in the user's code: the innermost frame outside batched_grad and JAX."""
    what = str(error) if isinstance(error, ValueRead) else f"a traced value was needed ({type(error).__name__})"
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if "batched_grad" not in f.filename and "/jax/" not in f.filename and "/jax_" not in f.filename
    ]
    where = f" at {frames[-1].filename}:{frames[-1].lineno} ({frames[-1].line})" if frames else ""
    return f"the function reads a tensor's value while it is compiled: {what}{where}"


class _Source:
    """Where a program input comes from at each call: a Tensor's value, or the value of a Tensor's .grad."""

    __slots__ = ("tensor", "grad")

    def __init__(self, tensor, grad):
        self.tensor, self.grad = tensor, grad

    def read(self):
        t = self.tensor()
        if t is None:
            return None
        t = t._grad if self.grad else t
        return None if t is None else t._value


class _Step:
    """A traced signature: its compiled program, where its captured inputs come from, and where its outputs go."""

    __slots__ = (
        "program",
        "sources",
        "fixed",
        "out_spec",
        "results",
        "writes",
        "had_grad",
        "created",
        "retrace",
        "pinned",
    )

    @classmethod
    def trace(cls, fn, leaves, spec, forward=False):
        before = _live_tensors()
        positions = [i for i, x in enumerate(leaves) if isinstance(x, Tensor)]
        captured = _captured(before, leaves)
        found = {}

        def traced(*arrays):
            lifted = {t: _lifted(t) for t in captured}
            call = list(leaves)
            for i, a in zip(positions, arrays):
                call[i] = Tensor._wrap(a, requires_grad=leaves[i].requires_grad)
            args, kwargs = spec.unflatten(call)
            outs, found["spec"] = flatten(fn(*args, **kwargs))
            found["results"] = [_TENSOR if isinstance(o, Tensor) else _constant_result(fn, o) for o in outs]
            results = [o._value for o in outs if isinstance(o, Tensor)]
            needs_graph = any(isinstance(o, Tensor) and o.requires_grad for o in outs)
            del outs, args, kwargs  # what only the results' graphs hold is not state the function keeps
            found["writes"], found["created"] = writes, created = _changes(before, lifted, call)
            if forward and needs_graph and not writes:
                raise ResultsNeedGraph  # a module's results, which a backward outside the call will need
            return tuple(results + [v for _, kind, v in writes if kind != "no grad"] + [t._v for t in created])

        compiling.name = _name(fn)
        # copies noted by a trace that stopped at a value read are stale: their ids may now be this trace's constants
        compiling.copies.clear()
        try:
            closed = _jaxpr_of(traced, [leaves[i]._value for i in positions])
        finally:
            compiling.name = None
            for t, (v, grad) in before.items():  # the function's changes are the program's outputs, not the trace's
                if t._v is not v or t._grad is not grad:
                    t._v, t._grad = v, grad
        step = cls()
        step.out_spec, step.results = found["spec"], found["results"]
        step.writes = [(weakref.ref(t), kind) for t, kind, _ in found["writes"]]
        # a .grad the step sets was there or not: the trace accumulated into it or made it (checked at every call)
        step.had_grad = [(ref, before[ref()][1] is not None) for ref, kind in step.writes if kind != "value"]
        step.created, step.retrace = found["created"], False
        closed = _without_unread_constants(closed)
        step.sources = _sources(closed.consts, before)
        # the tensors read, alive until the first run, which computes this call: one the function replaced (state
        # it keeps anew) is gone after it
        step.pinned = [source.tensor() for _, source in step.sources]
        step.fixed = list(closed.consts)
        for i, _ in step.sources:  # read afresh at every call: the trace's value is not kept alive
            step.fixed[i] = None
        jaxpr = closed.jaxpr
        step.program = jax.jit(lambda consts, args: jax.core.eval_jaxpr(jaxpr, consts, *args))
        return step

    def run(self, leaves):
        """The function's result for these arguments, from the program; None where a captured tensor is gone, or a
        .grad it reads or sets is there where it was not when traced, or gone (the signature is traced again)."""
        for ref, had in self.had_grad:
            t = ref()
            if t is None or (t._grad is not None) != had:
                return None
        consts = list(self.fixed)
        for i, source in self.sources:
            value = source.read()
            if value is None:
                return None
            consts[i] = value
        outs = iter(self.program(consts, [x._value for x in leaves if isinstance(x, Tensor)]))
        result = [Tensor._wrap(next(outs)) if r is _TENSOR else r for r in self.results]
        for ref, kind in self.writes:
            t, value = ref(), None if kind == "no grad" else next(outs)
            if t is not None:
                _write(t, kind, value)
        for t in self.created:  # state the function made: its value now (the next call traces it as an input)
            t._v = next(outs)
        self.created, self.pinned = [], []
        return self.out_spec.unflatten(result)


_TENSOR = object()  # in _Step.results: a Tensor result, computed by the program


def _constant_result(fn, value):
    """A result that is not a Tensor: kept as it is (a number, a string, None), unless it is a traced array."""
    if isinstance(value, jax.Array):
        raise TypeError(
            f"bg.compile({_name(fn)}): the function must return Tensors or constants, but returned a "
            f"JAX array of shape {value.shape}"
        )
    return value


def _write(t, kind, value):
    if kind == "value":
        t._value = value
        t._counter.value += 1
    elif kind == "grad":
        t._grad = Tensor._wrap(value)
    else:  # "no grad": the function reset .grad to None
        t._grad = None


def _live_tensors():
    """Every live Tensor, with its value and .grad as they are now."""
    return {o: (o._v, o._grad) for o in gc.get_objects() if issubclass(type(o), Tensor)}


def _captured(before, leaves):
    """The live tensors other than the arguments whose values the trace reads as its inputs: each holding a dense
    value (a deferred one computed now, before the trace, unless it reads a transform's traced values)."""
    arguments = {id(x) for x in leaves}
    for t, (v, grad) in before.items():
        if type(v) is Pending and computable(v):
            t._v = materialize(v)
            before[t] = (t._v, grad)  # the value the trace reads, restored after it
    return [t for t in before if id(t) not in arguments and _dense(t._v)]


def _dense(value):
    return type(value) is np.ndarray or (isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer))


def _lifted(tensor):
    """Inside the trace: a captured tensor's value made a value of the trace (a constant of the program, read from
    the tensor at every call), so that what is computed from it is computed by the program at every call, not once
    now (it would otherwise be computed eagerly: it reads no tracer)."""
    value = tensor._v
    if type(value) is not np.ndarray or is_shared(value):  # host data stays where it is (a constant viewing it)
        value = tensor._value
    tensor._v = lifted = jnp.array(value, copy=True)
    return lifted


def _without_unread_constants(closed):
    """`closed` without the constants (captured tensors' values) that nothing it returns reads."""
    jaxpr, n = pe.convert_constvars_jaxpr(closed.jaxpr), len(closed.consts)
    arguments = len(jaxpr.invars) - n
    jaxpr, used = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=[False] * n + [True] * arguments)
    kept = sum(used[:n])
    jaxpr = jaxpr.replace(constvars=jaxpr.invars[:kept], invars=jaxpr.invars[kept:])
    return ClosedJaxpr(jaxpr, [c for c, u in zip(closed.consts, used) if u])


def _changes(before, lifted, held):
    """Inside the trace, after the function ran: (writes, created). writes: (tensor, kind, traced value or None) for
    each Tensor that existed before and whose value or .grad the function changed ("value", "grad", "no grad");
    created: each new Tensor holding a traced value that outlives the call (state the function keeps), other than
    `held` (its arguments) and the new .grad of a tensor."""
    writes, grads = [], set()
    for t, (v, grad) in before.items():
        if t._v is not v and t._v is not lifted.get(t) and isinstance(t._value, jax.core.Tracer):
            writes.append((t, "value", t._v))
        if t._grad is not grad:
            if t._grad is None:
                writes.append((t, "no grad", None))
            else:
                grads.add(id(t._grad))
                writes.append((t, "grad", t._grad._value))
    kept = {id(o) for o in held}
    gc.collect()
    created = [
        o
        for o in gc.get_objects()
        if issubclass(type(o), Tensor)
        and o not in before
        and id(o) not in kept
        and id(o) not in grads
        and isinstance(o._v, jax.core.Tracer)
    ]
    return writes, created


def _window(array):
    """The memory a NumPy array shows: its first element's address, shape, strides and dtype. Host arrays are often
    views (slices, broadcasts) whose `base` is another tensor's array, so a view is known by its window."""
    return array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str


def _sources(consts, before):
    """(index, _Source) for each constant of the trace that is a live Tensor's value or .grad (matched by identity),
    read afresh at each call; the others are arrays nothing else holds, passed as they are."""
    owners, windows = {}, {}
    for t, (v, grad) in before.items():
        for value in (v, t._v):  # its value before the call, or the one a first read moved to the device
            owners.setdefault(id(value), (t, False))
            if type(value) is np.ndarray:
                windows.setdefault(_window(value), (t, False))
        if grad is not None:
            owners[id(grad._v)] = (t, True)  # a tensor's .grad is read through the tensor: it may be replaced
    # host data of a tensor that existed before the call, moved to the device (or copied) while the trace read it
    owners.update({k: (t, False) for k, t in compiling.copies.items() if t in before})
    compiling.copies.clear()
    sources = []
    for i, c in enumerate(consts):
        owner = owners.get(id(c))
        if owner is None and isinstance(c, np.ndarray):  # JAX holds a NumPy constant as a view of it
            owner = windows.get(_window(c)) or owners.get(id(c.base))
        if owner is not None:
            sources.append((i, _Source(weakref.ref(owner[0]), owner[1])))
    return sources
