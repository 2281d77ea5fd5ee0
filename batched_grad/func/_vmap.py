"""vmap.vmap: vectorize a function of Tensors over a batch axis of its arguments (jax.vmap underneath),
composing with batched_grad.autograd.grad inside it (the per-sample-gradient idiom). Arguments, results and
their dims are torch's pytrees (vmap/_pytree.py); checks and messages are torch.func.vmap's."""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from vmap._batching import check_chunk_size
from vmap._fallback import UNVECTORIZABLE
from vmap._memory import AUTO
from vmap._pytree import LEAF, broadcast_prefix, flatten
from vmap._rows import map_rows
from vmap._shards import first_shards, split_as

from .._generator import default_generator
from .._grad_mode import is_recording, no_grad
from .._graph import sequence_mark
from .._layout import note_row
from .._lazy import MAPPED, NeedsTracing, Pending, evaluate_mapped, mapped_input
from .._meta import VMAP_OVER_META, is_meta
from .._tensor import Tensor
from .._vmap_levels import Level, rewind_draws, running, varies_across_rows
from .._x64 import scoped
from ..autograd._function_jvp import NO_JVP
from ._vmap_node import VmapCall, VmapNode, outside_edges
from ._vmap_views import row_views, view_of_argument

_RANDOMNESS = ("error", "same", "different")


def vmap(func, in_dims=0, out_dims=0, *, chunk_size=None, randomness="error"):
    """Vectorize `func` (a function of Tensors) over axis `in_dims` of its arguments, as torch.func.vmap: the
    results carry the batch at `out_dims`; `chunk_size` rows run at a time; `randomness` ("error", "same",
    "different") says what a random draw inside does. grad() inside it gives per-sample gradients."""
    if randomness not in _RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {_RANDOMNESS}, but got {randomness!r}")
    if isinstance(chunk_size, (int, float)) and not chunk_size > 0:
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    chunk_size = check_chunk_size(chunk_size)

    @functools.wraps(func)
    @scoped
    def vectorized(*args, **kwargs):
        _check_out_dims(func, out_dims)
        size, dims_in, flat_args, args_spec = _batched_inputs(func, in_dims, args)
        mapped = [i for i, d in enumerate(dims_in) if d is not None]
        if any([is_meta(flat_args[i]) for i in mapped]):
            raise NotImplementedError(VMAP_OVER_META)
        arrays = [
            flat_args[i]._value if dims_in[i] == 0 else jnp.moveaxis(flat_args[i]._value, dims_in[i], 0) for i in mapped
        ]
        # the mapped arguments as given, with their in_dims: where traced rows keep them (as torch's BatchedTensors
        # do; a Function's vmap staticmethod sees them there)
        in_place = ([flat_args[i]._value for i in mapped], [dims_in[i] for i in mapped])
        if randomness == "different":  # the rows' indices, mapped too: a row's draws are its row of (size, ...) ones
            rows_index = np.arange(size, dtype=np.int32)
            arrays.append(rows_index)
            in_place = (in_place[0] + [rows_index], in_place[1] + [0])
        shards = first_shards(arrays)  # each device maps its own rows of every mapped array
        if shards is not None:
            arrays = [split_as(a, shards) for a in arrays]

        start, recorded, written, returned, draws = sequence_mark(), [], [], {}, []
        rng_state = default_generator.get_state() if randomness != "error" else None  # for a backward's rerun
        # mapped arguments that require grad: their rows are leaves that require grad, so that the results say
        # whether they depend on them
        differentiable = [i for i in mapped if is_recording() and flat_args[i].requires_grad]

        def run(rows, trace=None):
            """func on Tensors of `rows` in place of the mapped arguments: its result's leaves, then the rows that
            it wrote into in place (`written`), and its result's structure; notes where they reach the graph made
            before the call and which of them require grad."""
            call = list(flat_args)
            for i, r in zip(mapped, rows):
                call[i] = Tensor._wrap(r, requires_grad=i in differentiable)
                note_row(call[i], flat_args[i], dims_in[i])
            row_index = Tensor._wrap(rows[-1]) if randomness == "different" else None
            given = {id(call[i]): flat_args[i] for i in mapped}
            level = Level(randomness, trace, size, row_index, given, draws, {id(call[i]): dims_in[i] for i in mapped})
            with running(level):
                leaves, spec = flatten(func(*args_spec.unflatten(call), **kwargs))
                written[:] = [i for i in mapped if call[i]._counter.value]
                returned.clear()  # result k: (i, chain), the view `chain` of mapped argument i's row (() for the row)
                returned.update(row_views(leaves, {id(call[i]): i for i in mapped}))
                leaves = leaves + [call[i] for i in written]
                if is_recording():
                    placeholders = None if trace is not None else {r.call for r in rows}
                    varies = functools.partial(varies_across_rows, trace=trace, placeholders=placeholders)
                    recorded[:] = [
                        outside_edges(leaves, start, varies),
                        [isinstance(x, Tensor) and x.requires_grad for x in leaves],
                    ]
                return leaves, spec

        try:
            leaves, spec = _deferred(run, arrays, chunk_size, shards)
        except NeedsTracing:  # func reads values: trace it, every op dispatched under jax.vmap
            rewind_draws(draws)  # its random draws are drawn again, as one run's
            leaves, spec = _traced(func, run, arrays, size, chunk_size, shards, in_place, draws)
        n_results = len(leaves) - len(written)
        dims = _flat_out_dims(func, out_dims, spec, leaves[:n_results]) + [dims_in[i] for i in written]
        placed = _place(func, leaves, dims, size)
        if recorded and (any(recorded[0]) or differentiable):  # recorded[0]: (edges, through), outside_edges
            inputs = [(i, flat_args[i], dims_in[i]) for i in differentiable]
            seen = _as_seen(args, args_spec, flat_args, written)
            call = VmapCall(vmap, func, seen, kwargs, in_dims, randomness, rng_state, tuple(written))
            _record(placed, leaves, recorded, inputs, call)
        _moved(placed, leaves, dims)
        for i, value in zip(written, placed[n_results:]):  # as torch's: the caller's tensor holds what func wrote
            flat_args[i].copy_(value)
        if chunk_size is None:  # torch joins chunks' results into new tensors
            for k, (i, chain) in returned.items():
                if k < n_results:
                    out_dim = _out_dim(dims[k], placed[k].ndim)
                    placed[k] = view_of_argument(flat_args[i], dims_in[i], out_dim, chain)
        return spec.unflatten(placed[:n_results])

    return vectorized


class _Rows:
    """A result that varies across the rows: its array, rows on axis 0."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array


class _Through:
    """A Tensor result of a traced row that leaves the trace through the map: at `k` of its stacked results;
    `mine`: it varies across the rows; `tensor`: the result itself when its value is concrete."""

    __slots__ = ("k", "mine", "tensor")

    def __init__(self, k, mine, tensor):
        self.k, self.mine, self.tensor = k, mine, tensor


class _Traced:
    """A result that is not a Tensor but a traced value: it cannot leave the trace."""

    __slots__ = ("kind",)

    def __init__(self, kind):
        self.kind = kind


def _deferred(run, arrays, chunk_size, shards):
    """Run func once on placeholders for one row: its ops are recorded, not run, and the results that depend on
    the rows are computed by one compiled program over the rows (cached by structure). Raises NeedsTracing if func
    reads a value that depends on them."""
    rows = [mapped_input(a.shape[1:], a.dtype) for a in arrays]
    leaves, spec = run(rows)
    ours = {r.call for r in rows}
    # an outer vmap's row returned as it is does not vary across ours: it is expanded like any unbatched result
    batched = [
        i
        for i, x in enumerate(leaves)
        if isinstance(x, Tensor)
        and type(x._v) is Pending
        and x._v.call.mapped
        and (x._v.call.op is not MAPPED or x._v.call in ours)
    ]
    if batched:
        values = evaluate_mapped(
            [leaves[i]._v for i in batched], {r.call: a for r, a in zip(rows, arrays)}, chunk_size, shards
        )
        for i, v in zip(batched, values):
            leaves[i] = _Rows(v)
    return leaves, spec


def _traced(func, run, arrays, size, chunk_size, shards, in_place, draws):
    """Run func under jax.vmap (or lax.map in chunks, on each device's rows with `shards`) on traced rows: of
    `arrays` (rows on axis 0), or under jax.vmap of the arrays of `in_place` where their in_dims put the rows.
    Results traced by the vmap leave it stacked; the others are kept as they are (a Tensor of concrete values, or
    of an enclosing trace's) or, in chunks or shards, where they are traced by lax.map's loop or shard_map, leave
    it stacked too and come back as their first row. Where func runs more than once (lax.map traces the rows that
    do not fill a chunk again), each run draws what the first drew (`draws`: the generators' states to go back to)."""
    chunk_size = chunk_size if size else None  # no rows: nothing to chunk
    if chunk_size == AUTO:  # running func again for each chunk size tried would repeat its side effects
        warnings.warn(
            f'vmap: chunk_size="auto": {_name(func)} reads values, so it runs traced, not as a program '
            "whose memory can be measured; its rows run all at once. Give chunk_size a number to bound "
            "them.",
            UserWarning,
            stacklevel=4,
        )
        chunk_size = None
    found = []

    def row(*values):
        trace = values[0]._trace
        if found:
            rewind_draws(draws)
        leaves, spec = run(values, trace)
        kept, through = [], []
        for x in leaves:
            if isinstance(x, Tensor):
                value = x._value
                mine = getattr(value, "_trace", None) is trace
                if mine or chunk_size is not None or shards is not None:  # every trace returns as many
                    concrete = not mine and not isinstance(value, jax.core.Tracer)
                    kept.append(_Through(len(through), mine, x if concrete else None))
                    through.append(value)
                    continue
            elif isinstance(x, jax.core.Tracer):
                x = _Traced(type(x))
            kept.append(x)
        found[:] = [(kept, spec)]  # nothing traced: what is traced leaves through the map
        return tuple(through)

    try:
        if chunk_size is None and shards is None:
            stacked = map_rows(row, tuple(in_place[0]), in_axes=tuple(in_place[1]))
        else:
            stacked = map_rows(row, tuple(arrays), chunk_size, shards)
    except UNVECTORIZABLE as error:
        if isinstance(error, NotImplementedError) and str(error) == NO_JVP:
            raise  # a tangent reached a Function without a jvp: torch's own error, as torch raises it
        raise RuntimeError(
            f"vmap: {getattr(func, '__qualname__', func)} could not be vectorized "
            f"({type(error).__name__}: it leaves JAX, e.g. NumPy, .item() or a branch on "
            "values). Write it with Tensor ops, or give the custom autograd.Function inside it a "
            "vmap staticmethod (a batching rule)."
        ) from error
    kept, spec = found[0]
    leaves = []
    for x in kept:
        if type(x) is _Through:
            if x.mine:
                x = _Rows(stacked[x.k])
            elif x.tensor is not None:
                x = x.tensor
            else:  # traced by lax.map's loop or shard_map, the same in every row
                x = Tensor._wrap(stacked[x.k][0])
        leaves.append(x)
    return leaves, spec


def _as_seen(args, args_spec, flat_args, written):
    """The arguments as func saw them, for a backward's rerun: copies of those it wrote into, as they were."""
    if not written:
        return args
    with no_grad():
        return args_spec.unflatten([x.detach().clone() if i in written else x for i, x in enumerate(flat_args)])


def _record(placed, leaves, recorded, inputs, call):
    """Give the batched results that require grad one VmapNode (_vmap_node.py) linking them to the graph made before
    the call and to the mapped arguments that require grad (`inputs`: (flat index, argument, in_dim) triples)."""
    edges, requires_grad = recorded
    rows_k = [k for k, x in enumerate(leaves) if type(x) is _Rows and requires_grad[k]]
    if not rows_k:
        return
    node = VmapNode(edges, inputs, [placed[k] for k in rows_k], call, rows_k, [0] * len(rows_k))
    for j, k in enumerate(rows_k):
        placed[k] = Tensor._wrap(placed[k]._v, grad_fn=node, output_nr=j)


def _moved(placed, leaves, dims):
    """The results with rows on axis 0 moved to their out_dims: as torch's, views of those (movedim)."""
    for k, (x, d) in enumerate(zip(leaves, dims)):
        if type(x) is _Rows and _out_dim(d, x.array.ndim):
            placed[k] = placed[k].movedim(0, d)


def _place(func, leaves, dims, size):
    """The leaves of the result: those that vary across the rows with their rows on axis 0 (_moved takes them to
    their out_dims), the others expanded to their out_dims, or left as they are for an out_dim of None."""
    name = _name(func)
    placed = []
    for x, d in zip(leaves, dims):
        if type(x) is _Rows:
            if d is None:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            _out_dim(d, x.array.ndim)
            placed.append(Tensor._wrap(x.array))
        elif isinstance(x, Tensor) and d is not None:  # the same for every row: expanded, as torch does
            expanded = x.expand((size,) + tuple(x.shape))
            d = _out_dim(d, expanded.ndim)
            placed.append(expanded.movedim(0, d) if d else expanded)
        elif d is not None or type(x) is _Traced:
            kind = x.kind if type(x) is _Traced else type(x)
            raise ValueError(
                f"vmap({name}, ...): `{name}` must only return Tensors, got type {kind}. Did you "
                "mean to set out_dims= to None for output?"
            )
        else:
            placed.append(x)
    return placed


def _out_dim(d, ndim):
    if not -ndim <= d < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})")
    return d % ndim


def _name(func):
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return repr(func)


def _is_dim(d):
    return isinstance(d, int) and not isinstance(d, bool)


def _batched_inputs(func, in_dims, args):
    """torch's checks of in_dims against the arguments: the batch size, the in_dim of every leaf of the
    arguments (None or a dimension in range, made non-negative), the leaves and their structure."""
    name = _name(func)
    where = f"vmap({name}, in_dims={in_dims}, ...)(<inputs>)"
    if not _is_dim(in_dims) and not isinstance(in_dims, tuple):
        raise ValueError(
            f"{where}: expected `in_dims` to be int or a (potentially nested) tuple matching the "
            f"structure of inputs, got: {type(in_dims)}."
        )
    if not args:
        raise ValueError(
            f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
            "trying to vmap over a function with no inputs. The latter is unsupported."
        )
    flat_args, args_spec = flatten(args)
    dims = broadcast_prefix(in_dims, args_spec)
    if dims is None:
        raise ValueError(
            f"{where}: in_dims is not compatible with the structure of `inputs`. in_dims has "
            f"structure {flatten(in_dims)[1]} but inputs has structure {args_spec}."
        )
    for i, (arg, d) in enumerate(zip(flat_args, dims)):
        if d is None:
            continue
        if not _is_dim(d):
            raise ValueError(
                f"{where}: Got in_dim={d} for an input but in_dim must be either an integer dimension or None."
            )
        if not isinstance(arg, Tensor):
            raise ValueError(
                f"{where}: Got in_dim={d} for an input but the input is of type {type(arg)}. We "
                "cannot vmap over non-Tensor arguments, please use None as the respective in_dim"
            )
        n = arg.ndim
        if not -n <= d < n:
            raise ValueError(
                f"{where}: Got in_dim={d} for some input, but that input is a Tensor of "
                f"dimensionality {n} so expected in_dim to satisfy -{n} <= in_dim < {n}."
            )
        dims[i] = d % n
    sizes = [arg.shape[d] for arg, d in zip(flat_args, dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
            f"{sizes} for the mapped dimension"
        )
    return sizes[0], dims, flat_args, args_spec


def _check_out_dims(func, out_dims):
    if isinstance(out_dims, int):
        return
    if not all(d is None or isinstance(d, int) for d in flatten(out_dims)[0]):
        raise ValueError(
            f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a "
            "python collection of ints representing where in the outputs the vmapped dimension "
            "should appear."
        )


def _flat_out_dims(func, out_dims, spec, leaves):
    """The out_dim of every leaf of the result (torch's rules: a single Tensor takes an int, None or a 1-tuple)."""
    if spec is LEAF and (type(leaves[0]) is _Rows or isinstance(leaves[0], Tensor)):
        if out_dims is None or isinstance(out_dims, int):
            return [out_dims]
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            return list(out_dims)
        dims = None
    else:
        dims = broadcast_prefix(out_dims, spec)
    if dims is None:
        raise ValueError(
            f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with "
            f"the structure of `outputs`. out_dims has structure {flatten(out_dims)[1]} but outputs has "
            f"structure {spec}."
        )
    return dims
