"""Values that outlive a trace. Tensor code runs inside JAX traces (vmap.vmap's, forward-mode Jacobians, backward
programs, a user's jax.jit), where an array computed even from concrete arrays alone is a tracer of that trace.
Whatever is kept after the code that computed it (a Tensor's value, a deferred call's result, a cached constant)
must not be such a tracer: where nothing it depends on is traced, it is computed outside the trace, eagerly."""

import contextlib
import threading

import jax

try:  # JAX has no public test for "a trace is active"; without this one, every such value is computed eagerly
    from jax._src.core import trace_state_clean as _outside_every_trace
except ImportError:  # pragma: no cover - depends on the JAX version

    def _outside_every_trace():
        return False


try:  # trace_state_clean's test read directly: it costs four Python calls, on every op
    from jax._src.core import axis_env_state, eval_trace, top_axis_env, trace_state_strong_ref

    if _outside_every_trace() and trace_state_strong_ref.value is eval_trace and axis_env_state.value is top_axis_env:

        def _outside_every_trace():
            return trace_state_strong_ref.value is eval_trace and axis_env_state.value is top_axis_env

except ImportError:  # pragma: no cover - depends on the JAX version
    pass


def tracing():
    """Whether a JAX transformation is tracing now."""
    return not _outside_every_trace()


def is_tracer(a):
    return isinstance(a, jax.core.Tracer)


class ValueRead(RuntimeError):
    """A Tensor's value was read (`.item()`, `bool()`, `.numpy()`, ...) while bg.compile traces a function."""


class _Compiling(threading.local):
    """In this thread: the name of the function bg.compile is tracing (None when none is), and the copies of memory
    shared with NumPy read meanwhile, {id(copy): the Tensor} (each read copies it, so the trace's constant is found
    by this)."""

    def __init__(self):
        self.name, self.copies = None, {}


compiling = _Compiling()


def eagerly():
    """A context in which JAX computes from concrete arrays now, even inside a trace: concrete results."""
    return jax.ensure_compile_time_eval() if tracing() else contextlib.nullcontext()


class _Tracing(threading.local):
    depth = 0  # the forward-mode traces running in this thread (_functional_forward._trace)
    ties = 0  # the Function applications tied to their jvp in this thread, ever


TRACING = _Tracing()


class forward_tracing:
    """Within it, Tensor code is being traced into a jaxpr whose JVP will be taken: a Function.apply on traced values
    ties its outputs to its jvp."""

    __slots__ = ()

    def __enter__(self):
        TRACING.depth += 1

    def __exit__(self, *exc):
        TRACING.depth -= 1
        return False
