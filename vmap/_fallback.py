"""Run one node's Python-level backward (a Function.backward or a hook) over a batch of cotangents:
vectorized with jax.vmap when it is traceable, else in an explicit per-row loop (with FallbackWarning)."""
import functools
import warnings
import weakref

import jax
import numpy as np

from . import FallbackError, FallbackWarning, _state, fallback_warnings_enabled

# what JAX raises when Python code cannot be traced under vmap (value-dependent control flow, NumPy,
# .item(), dynamic shapes) or a primitive has no batching rule
UNVECTORIZABLE = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                  jax.errors.TracerIntegerConversionError, jax.errors.NonConcreteBooleanIndexError,
                  jax.errors.TracerBoolConversionError, NotImplementedError)
_known_unvectorizable = weakref.WeakKeyDictionary()  # Function classes and hooks that need rows
row_loops = [0]  # how many per-row loops ran (tests count them)


def run_batched(name, fn, cotangents, batch, *, vectorize=True, key=None):
    """fn(list of per-row cotangent Tensors or None) -> list of Tensors or None, applied to every row.

    `cotangents` carry a leading axis of `batch.padded` rows, of which the first `batch.size` are real.
    """
    reason = _known_unvectorizable.get(key) if key is not None else None
    if not vectorize:
        reason = "create_graph=True"
    elif reason is None:
        try:
            with jax.checking_leaks():  # a side effect that keeps a traced value must see real rows instead
                return _vectorized(fn, cotangents)
        except UNVECTORIZABLE as error:
            reason = type(error).__name__
        except Exception as error:
            if not _is_tracer_leak(error):
                raise
            reason = "a side effect kept a traced value (leaked tracer)"
        if key is not None:
            _known_unvectorizable[key] = reason
    return _per_row(name, fn, cotangents, batch, reason)


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


def _vectorized(fn, cotangents):
    from batched_grad._tensor import Tensor

    present = [i for i, c in enumerate(cotangents) if c is not None]
    defined = []

    def row(*arrays):
        cts = [None] * len(cotangents)
        for i, a in zip(present, arrays):
            cts[i] = Tensor._wrap(a)
        outs = fn(cts)
        defined[:] = [o is not None for o in outs]
        return tuple(o._value for o in outs if o is not None)

    results = iter(jax.vmap(row)(*[cotangents[i]._value for i in present]))
    return [Tensor._wrap(next(results)) if d else None for d in defined]


def _per_row(name, fn, cotangents, batch, reason):
    if not _state["enabled"]:
        raise FallbackError(f"{name} could not be vectorized ({reason}) and the per-row fallback is disabled "
                            "(vmap.set_fallback_enabled(False)).")
    if fallback_warnings_enabled():
        warnings.warn(f"{name} could not be vectorized ({reason}); its backward ran once per row for "
                      f"{batch.whole} rows.", FallbackWarning, stacklevel=4)
    row_loops[0] += 1
    n_rows = max(batch.size, 1)  # a batch of 0 still runs one (padding) row to learn the result shapes
    per_row = [_rows(c, n_rows) for c in cotangents]
    rows = [fn([cts[b] for cts in per_row]) for b in range(n_rows)]
    return [_stacked(parts, batch.padded) for parts in zip(*rows)]


def _rows(cotangent, n_rows):
    """The first `n_rows` rows of a cotangent as Tensors: NumPy views of it where its values are on the host (no
    kernel), else one unbind (one kernel per shape, rather than c[b]: one kernel per row index)."""
    import batched_grad as bg

    if cotangent is None:
        return [None] * n_rows
    host = _host_value(cotangent)
    if host is None:
        return bg.unbind(cotangent)[:n_rows]
    return [bg.Tensor._wrap(row) for row in host[:n_rows]]


def _stacked(parts, padded):
    """The rows' results (Tensors or None) stacked, zero rows where a row gave None and below the `padded` rows'
    real ones: on the host where every part's values are there, of one shape and dtype (no kernel)."""
    import batched_grad as bg

    if all(p is None for p in parts):
        return None
    like = next(p for p in parts if p is not None)
    host = [None if p is None else _host_value(p) for p in parts]
    shape, dtype = tuple(like.shape), like._v.dtype
    if all(h is not None and h.shape == shape and h.dtype == dtype for h, p in zip(host, parts) if p is not None):
        stacked = np.zeros((padded,) + shape, dtype)
        for b, h in enumerate(host):
            if h is not None:
                stacked[b] = h
        return bg.Tensor._wrap(stacked)
    stacked = bg.stack([bg.zeros_like(like) if p is None else p for p in parts])
    if padded > len(parts):
        stacked = bg.cat([stacked, bg.zeros((padded - len(parts),) + shape, dtype=like.dtype)])
    return stacked


def _host_value(tensor):
    """A Tensor's values as a NumPy array (sharing memory with a concrete array on the CPU backend, a copy of
    memory shared with the user), or None where they are not on the host: recorded (the rows must be recorded
    ops), traced, deferred rows of vmap.vmap, meta, or on another device."""
    from batched_grad._host import host_arrays, unshared
    from batched_grad._lazy import Pending

    v = tensor._v
    if tensor.requires_grad or (type(v) is Pending and v.call.mapped):
        return None
    if type(v) is np.ndarray:
        return unshared(v)
    host = host_arrays([tensor._value])
    return None if host is None else host[0]
