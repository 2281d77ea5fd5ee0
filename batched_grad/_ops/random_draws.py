"""Random values as Tensors: a NumPy sampler's draw from a generator; inside vmap.vmap(randomness="different") every
row draws its own, as one draw for all rows of which each row reads its own."""

import jax
import numpy as np
from jax._src.interpreters.batching import BatchTracer

from .._generator import resolve
from .._layout import contiguous_strides, is_row_major, storage_order, strides_through
from .._lazy import Pending, materialize
from .._tensor import Tensor
from .._vmap_levels import in_vmap_randomness, is_batched, note_draw, random_rows
from ._core import Op, apply

_ROW = Op("select_row", lambda rows, index: jax.lax.dynamic_index_in_dim(rows, index, keepdims=False))

DIFFERENT_INPLACE = (
    "vmap: Cannot ask for different inplace randomness on an unbatched tensor. This will appear like "
    "same randomness. If this is necessary for your usage, please file an issue with functorch."
)


SAME_BATCHED = (
    "Vmap does not currently support same randomness with a batched tensor input. Please file an issue with functorch"
)


RANDOM_OUT = (
    "vmap: We do not support calling out variants of random operations inside of vmap. Please use non-out variants "
    "as a workaround"
)
_TAKING_OUT = frozenset(("rand", "randn", "randint", "randperm", "normal", "multinomial"))


def refuse_random_out(name):
    """torch's refusal of the out= variant of the random function `name` inside vmap.vmap, whatever its
    randomness."""
    if name in _TAKING_OUT and in_vmap_randomness() is not None:
        raise RuntimeError(RANDOM_OUT)


INPLACE_OF_BATCHED = (
    "vmap: {0}(self, *extra_args) is not possible because there exists a Tensor `other` in extra_args that has more "
    "elements than `self`. This happened due to `other` being vmapped over but `self` not being vmapped over in a "
    "vmap. Please try to use out-of-place operators instead of {0}. If said operator is being called inside the "
    "PyTorch framework, please file a bug report instead."
)


def check_inplace_parameters(target, name, *parameters):
    """torch's refusals, in order, of an in-place draw into `target` (`name`: torch's word for it) with Tensor
    `parameters` inside vmap.vmap: its randomness mode's ("error"; "same" with parameters that vary across the
    rows), then parameters that vary across the rows where `target` does not."""
    random_rows()
    check_parameters(*parameters)
    if not is_batched(target._v) and any(is_batched(p._v) for p in parameters):
        raise RuntimeError(INPLACE_OF_BATCHED.format(name))


def check_parameters(*parameters):
    """torch's refusal, inside vmap.vmap(randomness="same"), of a draw whose distribution's parameters (Tensors
    among `parameters`) vary across the rows."""
    if in_vmap_randomness() == "same" and any(isinstance(p, Tensor) and is_batched(p._v) for p in parameters):
        raise RuntimeError(SAME_BATCHED)


def sample(generator, fn, shape, draw):
    """A Tensor of `shape` drawn by `draw(bits, size)` (a NumPy array of `size` from the NumPy generator `bits`)
    from `generator` (None: the default one) for `fn`; torch's error inside vmap.vmap(randomness="error")."""
    return _drawn(generator, fn, shape, draw, random_rows(), None)


def sample_like(generator, fn, like, draw, strided_draw=None, rows_first=False, in_place=False):
    """sample() of `like`'s shape drawn through the storage torch's kernel fills for it, `like` itself where it is
    filled `in_place`, else a new tensor made like it: where that storage is not row-major (a permuted view; under
    vmap.vmap(randomness="different"), a mapped argument's own storage with its rows where in_dims puts them, unless
    `rows_first`: torch's batching rule fills a new row-major tensor of the rows), the draws fill the storage in
    order and are permuted back to `like`'s dims. `strided_draw`: the draw torch's kernel makes on a storage that is
    not contiguous, where it is another algorithm (normal_'s element-by-element one)."""
    levels = random_rows()
    layout = None if levels and rows_first else _storage_layout(like, levels)
    order = None if layout is None else storage_order(*layout)
    if strided_draw is not None and (order is not None or (in_place and layout and not is_row_major(*layout))):
        draw = strided_draw
    return _drawn(generator, fn, like.shape, draw, levels, order)


def sample_given(generator, fn, shape, draw, *parameters):
    """sample() of a draw that reads the values of the Tensors `parameters`: draw(bits, size, *values), each of
    (levels' sizes..., *its shape), its values in each row of the vmap.vmap(randomness="different") calls running
    (torch's batching rule draws for all rows at once)."""
    levels = random_rows()
    values = [host_rows(p, levels) for p in parameters]
    return _drawn(generator, fn, shape, lambda bits, size: draw(bits, size, *values), levels, None)


def host_rows(tensor, levels):
    """`tensor`'s values as a NumPy array of (levels' sizes..., *its shape): its values in each row of the running
    vmap.vmap calls `levels` (random_rows()), where it is a row of their traced run whose batch is known;
    Tensor.numpy()'s error where the values are not known (a compiled function, a chunk of a traced run)."""
    rows = _rows_of(tensor._value, levels)
    return np.asarray(tensor.detach().numpy()) if rows is None else rows


def values_known(tensor):
    """Whether host_rows can read `tensor`'s values for a draw (not inside a compiled function)."""
    return _rows_of(tensor._value, random_rows()) is not None


def _rows_of(value, levels):
    if isinstance(value, BatchTracer):
        inner = _rows_of(value.val, levels)
        if inner is None or value.batch_dim is None:
            return inner
        k = next((k for k, level in enumerate(levels) if level.trace is value._trace), None)
        if k is None:
            return None
        inner = np.take(inner, 0, axis=k)  # the batched array itself does not vary across level k's rows
        return np.moveaxis(inner, len(levels) - 1 + value.batch_dim, k)
    if isinstance(value, jax.core.Tracer):
        return None
    array = np.asarray(value)
    return np.broadcast_to(array, tuple(level.size for level in levels) + array.shape)


def fill_order(like):
    """sample_like's order of the dims of (random_rows()' sizes..., *like.shape) in the storage torch fills for a
    tensor made like `like`, outermost first; None for row-major."""
    layout = _storage_layout(like, random_rows())
    return None if layout is None else storage_order(*layout)


def _drawn(generator, fn, shape, draw, levels, order):
    """The draw of (levels' sizes..., *shape), filled in `order` (its dims, outermost in storage first; None:
    row-major), each level's row selected (outermost first)."""
    generator = resolve(generator, fn)
    note_draw(generator)
    size = tuple(level.size for level in levels) + tuple(shape)
    if order is None:
        drawn = draw(generator._bits, size)
    else:
        drawn = np.transpose(draw(generator._bits, tuple(size[d] for d in order)), np.argsort(order))
    value = Tensor._wrap(drawn)
    for level in levels:  # outermost first: the row of each vmap call's own axis
        value = apply(_ROW, [value, level.row])
    return value


def _storage_layout(like, levels):
    """(shape, strides) of (levels' sizes..., *like.shape) in the storage torch's kernel fills for `like`; None where
    it is not known (taken as row-major). Inside one vmap.vmap(randomness="different"), torch's batching rule sees
    the storage of a mapped argument (or a view of one) as the caller gave it, rows at in_dims, and of a tensor made
    inside a traced run row-major with its rows where the trace keeps them (torch's elementwise rules keep them in
    place, as JAX's); a tensor made inside a deferred run is taken as row-major with its rows first. A row of a
    vmap.vmap(randomness="same") is filled through a row-major copy, as torch's rule fills it."""
    if not levels:
        return None if is_batched(like._v) else (tuple(like.shape), like.stride())
    strides = _batch_strides(like, levels[0]) if len(levels) == 1 else None
    return None if strides is None else ((levels[0].size, *like.shape), strides)


def _batch_strides(like, level):
    """The strides of (rows, *like's dims) in the storage of all rows torch's batching rule sees; None where it
    is not known."""
    root = like._view[0] if like._view is not None else like
    if level.arguments and id(root) in level.arguments:
        given = level.arguments[id(root)]
        batch = level.in_dims[id(root)] % given.ndim
        strides = list(given.stride())
        rows = strides.pop(batch)
        within = strides_through(like, strides)
        return None if within is None else (rows, *within)
    value = like._v
    if type(value) is Pending and not value.call.mapped:  # an op on traced rows, recorded: its traced value
        value = materialize(value)
    if isinstance(value, BatchTracer) and value._trace is level.trace and value.batch_dim is not None:
        strides = list(contiguous_strides(tuple(value.val.shape)))
        rows = strides.pop(value.batch_dim)
        return (rows, *strides)
    return None


def check_inplace(target, value):
    """torch's error for filling `target`, the same in every row of a vmap.vmap, with a `value` drawn per row."""
    if is_batched(value._v) and not is_batched(target._v):
        raise RuntimeError(DIFFERENT_INPLACE)
