"""vmap.vmap: vectorize a function of Tensors over a batch axis of its arguments (jax.vmap underneath),
composing with batched_grad.autograd.grad inside it (the per-sample-gradient idiom)."""
import functools

import jax
import numpy as np

from batched_grad._lazy import NeedsTracing, evaluate_mapped, mapped_input, materialize

from ._fallback import UNVECTORIZABLE
from ._rows import map_rows

_RANDOMNESS = ("error", "same", "different")
_active = []  # randomness modes of the vmap calls being traced (innermost last)


def in_vmap_randomness():
    """The randomness mode of the innermost vmap being traced, or None outside vmap."""
    return _active[-1] if _active else None


def _as_tuple(dims, n, name, what):
    if isinstance(dims, (tuple, list)):
        if len(dims) != n:
            raise ValueError(f"vmap: {name} has {len(dims)} entries but there are {n} {what}; pass one entry per "
                             f"{what[:-1]} (None for an unmapped one).")
        return tuple(dims)
    return (dims,) * n


def vmap(func, in_dims=0, out_dims=0, *, chunk_size=None, randomness="error"):
    from batched_grad._tensor import Tensor

    if randomness not in _RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {_RANDOMNESS}, but got {randomness!r}")
    if randomness == "different":
        raise ValueError("vmap: randomness='different' is not supported; draw the random values outside vmap "
                         "and pass them in as a mapped argument.")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, but got {chunk_size!r}")

    @functools.wraps(func)
    def vectorized(*args):
        dims = _as_tuple(in_dims, len(args), "in_dims", "positional arguments")
        sizes = set()
        for i, (a, d) in enumerate(zip(args, dims)):
            if d is None:
                continue
            if not isinstance(a, Tensor):
                raise ValueError(f"vmap: in_dims[{i}]={d} maps argument {i}, but it is a {type(a).__name__}, not "
                                 "a Tensor; use None as its in_dim.")
            if not -a.ndim <= d < a.ndim:
                raise ValueError(f"vmap: in_dims[{i}]={d} is out of range for argument {i} of shape "
                                 f"{tuple(a.shape)}.")
            sizes.add(a.shape[d])
        if not sizes:
            raise ValueError("vmap: at least one argument must be mapped (an in_dim that is not None).")
        if len(sizes) > 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got "
                             f"sizes {sorted(sizes)} for the mapped dimension")
        mapped = [i for i, d in enumerate(dims) if d is not None]
        arrays = [args[i]._value if dims[i] in (0, -args[i].ndim) else jax.numpy.moveaxis(args[i]._value, dims[i], 0)
                  for i in mapped]
        try:
            outs, tree = _deferred(func, args, mapped, arrays, randomness, chunk_size)
        except NeedsTracing:  # func reads values: trace it, every op dispatched under jax.vmap
            outs, tree = _traced(func, args, mapped, arrays, randomness, chunk_size)
        out_axes = _as_tuple(out_dims, len(outs), "out_dims", "outputs")
        for o, d in zip(outs, out_axes):
            if d is not None and not -o.ndim <= d < o.ndim:
                raise IndexError(f"Dimension out of range (expected to be in range of [{-o.ndim}, {o.ndim - 1}], but "
                                 f"got {d})")
        outs = [Tensor._wrap(jax.numpy.moveaxis(o, 0, d) if d else o) for o, d in zip(outs, out_axes)]
        return jax.tree_util.tree_unflatten(tree, outs)

    return vectorized


def _call(func, args, mapped, values, randomness):
    """func(*args) with the mapped arguments replaced by Tensors of `values`: its result's leaves (values of
    Tensors) and structure."""
    from batched_grad._tensor import Tensor

    call = list(args)
    for i, v in zip(mapped, values):
        call[i] = Tensor._wrap(v)
    _active.append(randomness)
    try:
        out = func(*call)
    finally:
        _active.pop()
    leaves, tree = jax.tree_util.tree_flatten(out, is_leaf=lambda x: isinstance(x, Tensor))
    return [x._v if isinstance(x, Tensor) else np.asarray(x) for x in leaves], tree


def _deferred(func, args, mapped, arrays, randomness, chunk_size):
    """Run func once on placeholders for one row: its ops are recorded, not run, and the whole function runs
    as one compiled program over the rows (cached by structure). Raises NeedsTracing if func reads a value."""
    rows = [mapped_input(a.shape[1:], a.dtype) for a in arrays]
    leaves, tree = _call(func, args, mapped, rows, randomness)
    return evaluate_mapped(leaves, {r.call: a for r, a in zip(rows, arrays)}, chunk_size), tree


def _traced(func, args, mapped, arrays, randomness, chunk_size):
    """Run func under jax.vmap (or lax.map in chunks) on traced rows."""
    structure = []

    def row(*values):
        leaves, tree = _call(func, args, mapped, values, randomness)
        structure[:] = [tree]
        return tuple(materialize(x) for x in leaves)

    try:
        return map_rows(row, tuple(arrays), chunk_size), structure[0]
    except UNVECTORIZABLE as error:
        raise RuntimeError(f"vmap: {getattr(func, '__qualname__', func)} could not be vectorized "
                           f"({type(error).__name__}: it leaves JAX, e.g. NumPy, .item() or a branch on "
                           "values). Write it with Tensor ops, or give the custom autograd.Function inside it a "
                           "vmap staticmethod (a batching rule).") from error
