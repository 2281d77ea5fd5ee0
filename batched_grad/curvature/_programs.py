"""What runs one data batch's product: a function of Tensors traced once per signature (the shapes of the batch and
of the columns) into one XLA program, whose K columns go through the backward as one batch of cotangents
(`is_grads_batched=True`). The model's parameters and buffers (and the loss module's) are the program's inputs,
read afresh at every call, so a product after a training step sees the new weights.

Columns run all at once when the compiled program fits `vmap.memory_budget()` (XLA's own memory analysis of it);
otherwise in the largest chunks that fit, each chunk a call of one program compiled for that many columns. A model
that reads values (`.item()`, a branch on a tensor), or a model_func that is not a Module holding the parameters,
is not traced: its products run through the engine eagerly, all columns in one batched backward.

Programs are kept per (kind, model, loss, parameters, options), so a new operator over the same model (one per
training step, say) reuses the compiled program."""

import collections
import threading
import time

import jax
import numpy as np

from vmap._memory import largest_chunk, lowerable, memory_budget, program_bytes
from vmap._pytree import flatten

from .. import _compile
from .._grad_mode import enable_grad
from .._tensor import Tensor
from .._tracing import compiling
from .._x64 import scoped
from ..autograd import grad
from ..func import functional_call
from ..nn import Module

_MAX_PROGRAMS = 64
_MAX_SIGNATURES = 16  # compiled executables kept per program
_programs = collections.OrderedDict()  # key -> (the objects the key names, _Program)
_lock = threading.Lock()
EAGER = "eager"
TUNE_FROM = 8  # columns: a product with this many or more is timed, all at once against in chunks of TUNE_CHUNKS
TUNE_CHUNKS = (1, 16)  # one column at a time (convolutions), or chunks whose intermediates stay in cache


class _Compiled:
    """One signature's executables: for all columns, and for a chunk of them where all do not fit the budget, or
    where chunks run faster (measured at the second call, the first having paid for first runs and fresh memory).
    XLA vectorizes some products poorly over columns: with the Hessian's backward of a backward, the CNN of
    benchmarks/curvature.py took 10 s for 64 columns at once against 3 s one at a time, and the MLP's 64 columns at
    once took longer than four chunks of 16 (270 ms against 4 x 29 ms)."""

    def __init__(self, jitted, positions, leaves, column_positions, alternatives=()):
        self.jitted, self.positions, self.column_positions = jitted, positions, column_positions
        self.alternatives = alternatives  # jitted functions of the same product, timed against it at the tuning
        arrays = [leaves[i]._value for i in positions]
        self.whole = self._compile(arrays)
        rows = leaves[column_positions[0]].shape[0] if column_positions else 0
        self.chunk, self.chunked = None, None
        self.untuned = 2 if rows >= TUNE_FROM else 0  # calls left until the timing (the first one warms up)
        if rows > 1 and program_bytes(self.whole) > memory_budget():
            self.untuned = 0
            self.chunk = largest_chunk(
                lambda c: self.whole if c is None else self._compile(self._sliced(arrays, c)), rows
            )
            self.chunked = self._compile(self._sliced(arrays, self.chunk))

    def _compile(self, arrays, jitted=None):
        compiling.name = "a curvature operator's product"
        try:
            return (jitted or self.jitted).lower(*lowerable(arrays)).compile()
        finally:
            compiling.name = None

    def _sliced(self, arrays, rows):
        columns = {self.positions.index(i) for i in self.column_positions}
        return [
            jax.ShapeDtypeStruct((rows, *a.shape[1:]), a.dtype) if j in columns else a for j, a in enumerate(arrays)
        ]

    def __call__(self, leaves):
        arrays = [leaves[i]._value for i in self.positions]
        if self.untuned == 1:
            return self._tune(arrays)
        self.untuned = max(self.untuned - 1, 0)
        if self.chunk is None:
            return [Tensor._wrap(a) for a in self.whole(*arrays)]
        return [Tensor._wrap(a) for a in self._in_chunks(arrays)]

    def _tune(self, arrays):
        """This call (the second) with all columns at once, timed against each alternative program with all
        columns (its first run untimed) and against chunks of TUNE_CHUNKS columns (those up to half the columns), each
        timed on one warm chunk; the fastest way, chunks by a margin for the noise of one measurement, runs the later
        calls."""
        self.untuned = 0
        start = time.perf_counter()
        outs = jax.block_until_ready(self.whole(*arrays))
        whole = time.perf_counter() - start
        for jitted in self.alternatives:
            try:
                compiled = self._compile(arrays, jitted)
                jax.block_until_ready(compiled(*arrays))
            except Exception:  # an alternative only competes: one that cannot compile or run is not taken
                continue
            start = time.perf_counter()
            jax.block_until_ready(compiled(*arrays))
            if time.perf_counter() - start < whole:
                whole, self.whole, self.jitted = time.perf_counter() - start, compiled, jitted
        best = 0.7 * whole
        rows = arrays[self.positions.index(self.column_positions[0])].shape[0]
        choice = (None, None)
        for chunk in [c for c in TUNE_CHUNKS if 2 * c <= rows]:
            self.chunk, self.chunked = chunk, self._compile(self._sliced(arrays, chunk))
            jax.block_until_ready(self._in_chunks(arrays, rows=chunk))  # its first run, untimed
            start = time.perf_counter()
            jax.block_until_ready(self._in_chunks(arrays, rows=chunk))
            estimate = (time.perf_counter() - start) / chunk * rows
            if estimate < best:
                best, choice = estimate, (chunk, self.chunked)
        self.chunk, self.chunked = choice
        return [Tensor._wrap(a) for a in outs]

    def _in_chunks(self, arrays, rows=None):
        """The product over the first `rows` columns (all by default), `self.chunk` columns per call."""
        import jax.numpy as jnp

        columns = [self.positions.index(i) for i in self.column_positions]
        rows, parts = rows or arrays[columns[0]].shape[0], []
        for start in range(0, rows, self.chunk):
            call = list(arrays)
            for j in columns:
                block = arrays[j][start : start + self.chunk]
                pad = self.chunk - block.shape[0]
                call[j] = jnp.pad(block, [(0, pad)] + [(0, 0)] * (block.ndim - 1)) if pad else block
            outs = self.chunked(*call)
            parts.append([o[: min(self.chunk, rows - start)] for o in outs])
        return [jnp.concatenate(pieces, axis=0) for pieces in zip(*parts)]


class _Program:
    """fn(state, data, columns) -> list of Tensors (each with the columns leading where there are columns), compiled
    per signature; `state` a dict of the model's (and loss's) Tensors, `data` a pytree of Tensors and constants,
    `columns` a list of `(K, ...)` Tensors."""

    def __init__(self, fns, traceable):
        fns = fns if isinstance(fns, list) else [fns]  # the product and alternative programs of it
        self._fn, self._alternatives, self._traceable = fns[0], fns[1:], traceable
        self._signatures = collections.OrderedDict()

    @scoped
    def __call__(self, state, data, columns):
        leaves, spec = flatten((state, data, list(columns)))
        compiled = EAGER if not self._traceable else self._compiled(leaves, spec, len(columns))
        if compiled is EAGER:
            with enable_grad():
                return [r.detach() for r in self._fn(state, data, list(columns))]
        return compiled(leaves)

    def _compiled(self, leaves, spec, num_columns):
        signature = (spec, tuple(_part(x) for x in leaves), memory_budget())  # the chunk depends on the budget
        compiled = self._signatures.get(signature)
        if compiled is None:
            compiled = self._trace(leaves, spec, num_columns)
            self._signatures[signature] = compiled
            while len(self._signatures) > _MAX_SIGNATURES:
                self._signatures.popitem(last=False)
        else:
            self._signatures.move_to_end(signature)
        return compiled

    def _trace(self, leaves, spec, num_columns):
        positions = [i for i, x in enumerate(leaves) if isinstance(x, Tensor)]
        column_positions = positions[len(positions) - num_columns :] if num_columns else []

        def on_arrays(fn):
            def run(*arrays):
                call = list(leaves)
                for i, a in zip(positions, arrays):
                    call[i] = Tensor._wrap(a)
                state, data, columns = spec.unflatten(call)
                with enable_grad():
                    return tuple(o._value for o in fn(state, data, columns))

            return jax.jit(run)

        alternatives = [on_arrays(f) for f in self._alternatives] if num_columns else []
        try:
            return _Compiled(on_arrays(self._fn), positions, leaves, column_positions, alternatives)
        except _compile._CONCRETE:
            return EAGER


def _part(x):
    if isinstance(x, Tensor):
        return (tuple(x.shape), x.dtype)
    return (type(x), x)


def program(kind, objects, options, build, traceable=True):
    """The cached _Program for `kind` over `objects` (model, loss, parameters: compared by identity) and hashable
    `options`; `build()` makes its function the first time."""
    key = (kind, tuple(id(o) for o in objects), options, traceable)
    with _lock:
        entry = _programs.get(key)
        if entry is not None and all(a is b for a, b in zip(entry[0], objects)):
            _programs.move_to_end(key)
            return entry[1]
        made = _Program(build(), traceable)
        _programs[key] = (tuple(objects), made)
        while len(_programs) > _MAX_PROGRAMS:
            _programs.popitem(last=False)
        return made


class FunctionalModel:
    """model_func and loss_func as functions of their state. A model_func that is a Module holding every parameter
    is called with its parameters and buffers given (torch.func.functional_call), those in `params` replaced by
    fresh leaves, so that its products can be traced with the state as inputs and frozen parameters and `.grad`
    are left alone. Any other callable is differentiated with respect to the parameters themselves, eagerly."""

    def __init__(self, model_func, loss_func, params):
        self.model_func, self.loss_func, self.params = model_func, loss_func, list(params)
        self.names = _parameter_names(model_func, self.params)
        self.traceable = self.names is not None
        if not self.traceable:
            frozen = [i for i, p in enumerate(self.params) if not p.requires_grad]
            if frozen:
                raise ValueError(
                    f"params[{frozen[0]}] does not require grad: a model_func that is not a Module holding the "
                    "parameters is differentiated with respect to them, so each must require grad"
                )

    def state(self):
        """{name: Tensor}: the model's parameters and buffers, and the loss module's (under 'loss.')."""
        if not self.traceable:
            return {}
        state = dict(self.model_func.named_parameters())
        state.update(self.model_func.named_buffers())
        if isinstance(self.loss_func, Module):
            state.update({f"loss.{k}": v for k, v in self.loss_func.named_parameters()})
            state.update({f"loss.{k}": v for k, v in self.loss_func.named_buffers()})
        return state

    def leaves(self, state):
        """The Tensors to differentiate with respect to, standing for `params`."""
        if not self.traceable:
            return self.params
        return [state[name].detach().requires_grad_() for name in self.names]

    def __call__(self, state, leaves, X):
        if not self.traceable:
            return self.model_func(X)
        model_state = {k: v for k, v in state.items() if not k.startswith("loss.")}
        model_state.update(zip(self.names, leaves))
        return functional_call(self.model_func, model_state, (X,))

    def loss(self, state, prediction, y):
        loss_state = {k[5:]: v for k, v in state.items() if k.startswith("loss.")}
        if loss_state:
            return functional_call(self.loss_func, loss_state, (prediction, y))
        return self.loss_func(prediction, y)


def _parameter_names(model_func, params):
    if not isinstance(model_func, Module):
        return None
    by_id = {}
    for name, p in model_func.named_parameters():
        by_id.setdefault(id(p), name)
    names = [by_id.get(id(p)) for p in params]
    return None if any(n is None for n in names) else names


def zeros_for(rows, shape, like):
    from .. import zeros

    return zeros(rows, *shape, dtype=like.dtype, device=like.device)


def batched_grad(outputs, inputs, columns, retain_graph=True):
    """The batch of vector-Jacobian products of `outputs` with the rows of `columns` (one batched backward), with
    respect to `inputs`; an input that nothing reaches gets zeros, and outputs that do not require grad (a constant
    gradient) contribute nothing."""
    pairs = [(o, c) for o, c in zip(outputs, columns) if isinstance(o, Tensor) and o.requires_grad]
    rows = columns[0].shape[0]
    if not pairs:
        return [zeros_for(rows, x.shape, x) for x in inputs]
    results = grad(
        [o for o, _ in pairs],
        inputs,
        [c for _, c in pairs],
        is_grads_batched=True,
        retain_graph=retain_graph,
        allow_unused=True,
    )
    return [zeros_for(rows, x.shape, x) if r is None else r for r, x in zip(results, inputs)]


def jacobian_columns(out, leaves, columns):
    """J @ columns, the model's Jacobian `out` w.r.t. `leaves` applied to each row of `columns` (a list of
    `(K, *leaf.shape)`): `(K, *out.shape)`, by the transpose of a transpose: J^T u is linear in a dummy `u`, and
    its batched VJP with the columns is J @ columns."""
    from .. import zeros_like

    u = zeros_like(out).requires_grad_()
    transposed = grad(out, leaves, u, create_graph=True, allow_unused=True)
    pairs = [(t, c) for t, c in zip(transposed, columns) if t is not None and t.requires_grad]
    if not pairs:
        return zeros_for(columns[0].shape[0], out.shape, out)
    (result,) = batched_grad([t for t, _ in pairs], [u], [c for _, c in pairs])
    return result


def traced(t):
    """Whether Tensor `t` is a value being traced into a program (not an eager one)."""
    return isinstance(t._value, jax.core.Tracer)


def loss_of_arrays(model, state, X, y, factor):
    """The batch's scaled loss as a function of the parameters' arrays (in `model.names`' order), for JAX's own
    transformations inside a traced program: the model runs on them without recording a graph."""
    from .. import no_grad

    def loss(arrays):
        with no_grad():
            leaves = [Tensor._wrap(a) for a in arrays]
            return (model.loss(state, model(state, leaves, X), y) * factor)._value

    return loss


def as_factor(value, like):
    """A batch's weight as a 0-d Tensor (an input of the program, so batches of other sizes share it)."""
    from .. import tensor

    return tensor(np.asarray(value, dtype=np.float64), dtype=like.dtype)
