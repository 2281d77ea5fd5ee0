"""Run a step written in Python (a function of the arrays of one row) over a batch: vectorized with jax.vmap when it
is traceable, else in an explicit loop over the rows, announced by a FallbackWarning (or refused, in strict mode)."""

import functools
import warnings
import weakref

import jax
import jax.numpy as jnp
import numpy as np

from . import FallbackError, FallbackWarning, _state, fallback_warnings_enabled

# what JAX raises when Python code cannot be traced under vmap (value-dependent control flow, NumPy,
# .item(), dynamic shapes) or a primitive has no batching rule
UNVECTORIZABLE = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.NonConcreteBooleanIndexError,
    jax.errors.TracerBoolConversionError,
    NotImplementedError,
)
_known_unvectorizable = weakref.WeakKeyDictionary()  # the keys (functions, classes) of steps that need rows
row_loops = [0]  # how many per-row loops ran (tests count them)


def run_batched(name, fn, cotangents, batch, *, key=None):
    """fn(list of one row's arrays, or None where a cotangent is None) -> list of arrays or None, applied to every
    row of `cotangents` (arrays with a leading axis of `batch.padded` rows, of which the first `batch.size` are
    real). `key` remembers a step that could not be vectorized, so that it goes straight to the rows next time."""
    reason = _known_unvectorizable.get(key) if key is not None else None
    if reason is None:
        traced = []  # which outputs were defined, once fn has returned in the trace
        try:
            with jax.checking_leaks():  # a side effect that keeps a traced value must see real rows instead
                return _vectorized(fn, cotangents, traced)
        except UNVECTORIZABLE as error:
            reason = type(error).__name__
        except Exception as error:
            # JAX's report of a leak fails for some chains of referrers (a closure cell: IndexError)
            if not (_is_tracer_leak(error) or (traced and isinstance(error, IndexError))):
                raise
            reason = "a side effect kept a traced value (leaked tracer)"
        if key is not None:
            _known_unvectorizable[key] = reason
    announce_rows(name, reason, batch)
    n_rows = batch.looped
    per_row = [split_rows(c, n_rows) for c in cotangents]
    rows = [fn([cts[b] for cts in per_row]) for b in range(n_rows)]
    return [stack_rows(parts, batch.padded) for parts in zip(*rows)]


def announce_rows(name, reason, batch):
    """Before a per-row loop of the step `name`: FallbackError if the fallback is disabled, else a FallbackWarning
    when warnings are on; counted in `row_loops`."""
    if not _state["enabled"]:
        raise FallbackError(
            f"{name} could not be vectorized ({reason}) and the per-row fallback is disabled "
            "(vmap.set_fallback_enabled(False))."
        )
    if fallback_warnings_enabled():
        warnings.warn(
            f"{name} could not be vectorized ({reason}); its backward ran once per row for {batch.whole} rows.",
            FallbackWarning,
            stacklevel=5,
        )
    row_loops[0] += 1


@functools.cache
def _tracer_leak_kind():
    """The type and first word of what jax.checking_leaks raises for a kept tracer, learned once from JAX itself
    (it raises a plain Exception, told apart only by its text), or None if it raises nothing."""
    kept = []
    try:
        with jax.checking_leaks():
            jax.vmap(lambda x: kept.append(x) or x)(np.zeros(1, np.float32))
    except Exception as error:
        return type(error), str(error).split(" ", 1)[0]
    return None


def _is_tracer_leak(error):
    kind = _tracer_leak_kind()
    return kind is not None and type(error) is kind[0] and str(error).startswith(kind[1])


def _vectorized(fn, cotangents, defined):
    present = [i for i, c in enumerate(cotangents) if c is not None]

    def row(*arrays):
        cts = [None] * len(cotangents)
        for i, a in zip(present, arrays):
            cts[i] = a
        outs = fn(cts)
        defined[:] = [o is not None for o in outs]
        return tuple(o for o in outs if o is not None)

    results = iter(jax.vmap(row)(*[cotangents[i] for i in present]))
    return [next(results) if d else None for d in defined]


def host_view(array):
    """`array` as a NumPy array sharing its memory where its values are on the host (a NumPy array, or a concrete
    JAX array on one CPU device), else None (traced, or on an accelerator or several devices)."""
    if type(array) is np.ndarray:
        return array
    if (
        isinstance(array, jax.Array)
        and not isinstance(array, jax.core.Tracer)
        and len(array.devices()) == 1
        and next(iter(array.devices())).platform == "cpu"
    ):
        return np.asarray(array)
    return None


def split_rows(array, n_rows):
    """The first `n_rows` rows of `array` (or Nones for None): NumPy views where its values are on the host (no
    kernel), else one unstacking (one kernel per shape, rather than one per row index)."""
    if array is None:
        return [None] * n_rows
    host = host_view(array)
    return list(host[:n_rows]) if host is not None else list(jnp.unstack(array[:n_rows]))


def stack_rows(parts, padded):
    """Rows' results (arrays or None) stacked into `padded` rows, zeros where a row gave None and below the real
    rows: on the host where every part is there, of one shape and dtype (no kernel)."""
    if all(p is None for p in parts):
        return None
    like = next(p for p in parts if p is not None)
    shape, dtype = like.shape, like.dtype
    host = [None if p is None else host_view(p) for p in parts]
    if all(h is not None and h.shape == shape and h.dtype == dtype for h, p in zip(host, parts) if p is not None):
        stacked = np.zeros((padded,) + shape, dtype)
        for b, h in enumerate(host):
            if h is not None:
                stacked[b] = h
        return stacked
    zeros = jnp.zeros(shape, dtype)
    rows = [zeros if p is None else p for p in parts] + [zeros] * (padded - len(parts))
    return jnp.stack(rows)
