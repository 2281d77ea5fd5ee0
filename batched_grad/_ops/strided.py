"""Explicit geometry: as_strided (a view of a tensor's storage by sizes, strides and an offset), its in-place form
as_strided_, and set_, which makes a tensor share another's storage (or a fresh empty one).

Arrays here have no storage of their own: a tensor's storage is its root's elements in row-major order, and a view
is a chain of view ops from the root (_layout.py). as_strided picks storage elements by position, a gather view of
the tensor it is taken of (AsStridedBackward0; its gradient adds each element's gradient into the position it was
read from); it must read only elements of that tensor. set_ gives a tensor the values of the storage it now shares,
as a detached alias (values flow both ways, the graph does not, each keeps its own version counter, as torch's);
recorded, it has no derivative (torch::autograd::NotImplemented)."""

import math
import operator

import jax
import jax.numpy as jnp
import numpy as np

from .. import _graph
from .._grad_mode import is_recording
from .._inplace import DETACH, _ops_of, _view_value, remember_view
from .._layout import in_storage, may_be_strided, storage_numel, storage_offset
from .._tensor import Tensor, python_type_name
from .._vmap_levels import is_batched
from .._write_watch import before_write
from ._core import Op, apply
from .inplace_views import _in_place_view


def _positions(xp, size, stride, start):
    """The storage position of each element of the view of `size` and `stride` that starts at `start`."""
    positions = xp.full(size, start, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        positions = positions + (xp.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(size) - d - 1))
    return positions


def _gather(xp, a, size, stride, start, index):
    """The elements of `a` (flat, row-major) that the view reads: by position in `a` itself (`index` None, `a` is
    its own storage) or through `index`, the flat index in `a` of each element read."""
    flat = a.reshape(-1)
    if index is None:
        return flat[_positions(xp, size, stride, start)]
    return flat[xp.asarray(index, dtype=np.int64)].reshape(size)


def _as_strided_host_vjp(ct, operands, avals, *, size, stride, storage_offset, start, index):
    shape, dtype = avals[0]
    grad = np.zeros(math.prod(shape), dtype)
    where = _positions(np, size, stride, start) if index is None else np.asarray(index, np.int64).reshape(size)
    np.add.at(grad, where.reshape(-1), np.asarray(ct).reshape(-1))
    return (grad.reshape(shape),)


def _as_strided_op(name):
    return Op(
        "as_strided",
        lambda a, *, size, stride, storage_offset, start, index: _gather(jnp, a, size, stride, start, index),
        linear=True,
        view=True,
        backward_name=name,
        host=lambda a, *, size, stride, storage_offset, start, index: _gather(np, a, size, stride, start, index),
        host_vjp=_as_strided_host_vjp,
        saved_static=("size", "stride", "storage_offset"),
    )


_AS_STRIDED = {name: _as_strided_op(name) for name in ("AsStridedBackward0", "AsStridedBackward1")}


def _int_list(values, what):
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        kind = python_type_name(values)
        raise TypeError(f"as_strided(): argument '{what}' must be tuple of ints, not {kind}") from None


def _check_geometry(size, stride, offset, storage_size, itemsize):
    """torch's checks of a view's geometry against the storage (of `storage_size` elements) it reads."""
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and strides={list(stride)}")
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    needed = _last_location(size, stride, offset) or 0
    if needed > storage_size:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and itemsize "
            f"{itemsize} requiring a storage size of {needed * itemsize} are out of bounds for storage of size "
            f"{storage_size * itemsize}"
        )


_OUTSIDE_ROW = (
    "result = tensor.as_strided({}, {}, {}) can access memory outside of `tensor`. {} This is not supported inside of "
    "vmap, please try to rewrite the `as_strided` call as a sequence of PyTorch view operations"
)


def _last_location(size, stride, offset):
    """One past the last storage position a view of `size` and `stride` from `offset` reads; None if it reads none."""
    return None if 0 in size else offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))


def _check_row_geometry(row, size, stride, offset):
    """torch's as_strided batching rule's checks: the view of each row reads only that row's memory."""
    if len(size) != len(stride):
        raise RuntimeError(
            f"Tensor.as_strided(size, stride, ...): size and stride must have the same length! Got size {list(size)} "
            f"and stride {list(stride)}"
        )
    base = storage_offset(row)
    start = base if offset is None else offset
    last = _last_location(size, stride, start)
    if last is None:
        return
    row_last = _last_location(tuple(row.shape), row.stride(), base)
    if row_last is None:
        problem = (
            "`tensor` has no storage but the passed-in (size, stride, storage_offset) imply a result with some storage."
        )
        raise RuntimeError(_OUTSIDE_ROW.format(list(size), list(stride), start, problem))
    if last > row_last or start < base:
        problem = (
            f"`result` can access some memory in range [{start}, {last}], but `tensor` can only access some memory in "
            f"range [{base}, {row_last}]."
        )
        raise RuntimeError(_OUTSIDE_ROW.format(list(size), list(stride), start, problem))


def _storage(t):
    """(the root whose elements are `t`'s storage, the view ops from it to `t`)."""
    if t._view is None:
        return t, ()
    root, chain = t._view
    return root, _ops_of(chain)


def _index_in(t, root, ops, size, stride, start):
    """For a view `t` (the view ops `ops` of its root) or a vmap.vmap row, the flat index in `t` of each storage
    element the new view reads; None where `t` is its root's storage itself."""
    if not ops and not may_be_strided(root):
        return None
    held = np.arange(root.numel()).reshape(tuple(root.shape))
    held = np.asarray(_view_value(held, ops) if ops else held)
    held = in_storage(root, held).reshape(-1)
    wanted = _positions(np, size, stride, start).reshape(-1)
    where = np.full(max(held.max(initial=-1), wanted.max(initial=-1)) + 1, -1, np.int64)
    where[held] = np.arange(held.size)
    index = where[wanted]
    if (index < 0).any():
        raise RuntimeError(
            "as_strided: the view reads storage elements that are not elements of the tensor it is taken of (a view "
            "reaching outside its own elements); batched_grad's as_strided reads only the tensor's own elements: "
            "take it of the base tensor instead"
        )
    return tuple(index.tolist())


def _as_strided(input, size, stride, offset, name):
    size, stride = _int_list(size, "size"), _int_list(stride, "stride")
    if offset is not None:
        offset = operator.index(offset)
    if is_batched(input._v):
        _check_row_geometry(input, size, stride, offset)
    root, ops = _storage(input)
    start = storage_offset(input) if offset is None else offset
    _check_geometry(size, stride, start, storage_numel(root), input.element_size())
    index = _index_in(input, root, ops, size, stride, start)
    return apply(_AS_STRIDED[name], [input], size=size, stride=stride, storage_offset=offset, start=start, index=index)


def as_strided(input, size, stride, storage_offset=None):
    """The view of `input`'s storage with sizes `size` and strides `stride` (in elements), from `storage_offset`
    (by default `input`'s own). It may read an element more than once; it reads only elements of `input`."""
    return _as_strided(input, size, stride, storage_offset, "AsStridedBackward0")


def _undo_as_strided(static, shape):
    """The steps back from an as_strided_ of a tensor that is no view to its old shape, or None where its elements
    are not all there exactly once (then its views lose their link to it)."""
    static = dict(static)
    size, stride, start, index = static["size"], static["stride"], static["start"], static["index"]
    read = _positions(np, size, stride, start).reshape(-1) if index is None else np.asarray(index)
    n = math.prod(shape)
    if read.size != n or not np.array_equal(np.sort(read), np.arange(n)):
        return None
    back = tuple(np.argsort(read).tolist())
    return ((_AS_STRIDED["AsStridedBackward0"], _static(shape, back), 0),)


def _static(shape, index):
    """The static parameters of a gather by flat `index` giving `shape`, as an as_strided step."""
    size = tuple(shape)
    stride = tuple(math.prod(size[d + 1 :]) for d in range(len(size)))
    return (("index", index), ("size", size), ("start", 0), ("storage_offset", None), ("stride", stride))


def as_strided_(self, size, stride, storage_offset=None):
    """Make this tensor, in place, the view `as_strided(size, stride, storage_offset)` of its storage."""
    make = lambda t: _as_strided(t, size, stride, storage_offset, "AsStridedBackward1")  # noqa: E731
    return _in_place_view(self, make, _undo_as_strided)


# ---- set_ ----------------------------------------------------------------------------------------------------------

_SET_SIGNATURES = (
    " * ()\n"
    " * (torch.Storage source)\n"
    " * (torch.Storage source, int storage_offset, tuple of ints size, tuple of ints stride = None)\n"
    " * (Tensor source)\n"
    " * (Tensor source, int storage_offset, tuple of ints size, tuple of ints stride = None)\n"
)


def _invalid_set(args):
    got = ", ".join("Tensor" if isinstance(a, Tensor) else type(a).__name__ for a in args)
    return TypeError(
        f"set_() received an invalid combination of arguments - got ({got}), but expected one of:\n{_SET_SIGNATURES}"
    )


def _set_fn(*operands, shape):
    """The value of torch's set_ node (its operands: the tensor, and the source if any): zeros of the new shape,
    whose backward raises, as torch's for set_."""

    @jax.custom_vjp
    def no_derivative(*operands):
        return jnp.zeros(shape, operands[0].dtype)

    def backward(_, g):
        raise RuntimeError("derivative for set_ is not implemented")

    no_derivative.defvjp(lambda *operands: (no_derivative(*operands), None), backward)
    return no_derivative(*operands)


_SET = Op("set_", _set_fn, linear=True, backward_name="torch::autograd::NotImplemented")


def _set_arguments(args, kwargs):
    """(source or None, storage_offset, size, stride) from set_'s arguments, checked as torch's overloads."""
    names = ("source", "storage_offset", "size", "stride")
    unknown = set(kwargs) - set(names)
    if unknown or len(args) > 4:
        raise _invalid_set(args + tuple(kwargs.values()))
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in given:
            raise _invalid_set(args + tuple(kwargs.values()))
        given[k] = v
    source = given.get("source")
    geometry = [given.get(k) for k in names[1:]]
    if (given and not isinstance(source, Tensor)) or (geometry[:2] != [None, None] and None in geometry[:2]):
        raise _invalid_set(args + tuple(kwargs.values()))
    if geometry[2] is not None and geometry[1] is None:
        raise _invalid_set(args + tuple(kwargs.values()))
    return source, *geometry


def _alias_of(source, offset, size, stride):
    """A tensor holding the elements `self.set_(source, offset, size, stride)` makes it share: `source` itself (no
    geometry given), else the view of its storage that the geometry describes (offset and strides in its root's
    storage)."""
    if offset is None:
        return source
    size = _int_list(size, "size")
    if stride is None:
        stride = tuple(math.prod(size[d + 1 :]) for d in range(len(size)))
    elif len(_int_list(stride, "stride")) != len(size):
        raise RuntimeError(f"unequal size length ({len(size)}) and stride length ({len(stride)})")
    root, _ = _storage(source)
    from .._grad_mode import no_grad

    with no_grad():
        return as_strided(root.detach(), size, stride, offset)


def _leave_storage(self):
    """`self` stops sharing the storage it shares: it leaves its base's views, and its own views keep the old
    values."""
    if self._view is not None:
        root = self._view[0]
        with _graph._lock:
            root._views = [r for r in root._views or () if r() is not self]
        self._view = None
    for ref in self._views or ():
        view = ref()
        if view is not None:
            view._view = None
    self._views = None


def _share(self, alias):
    """`self` shares `alias`'s storage from now on (values only, not the graph)."""
    self._value = alias._detached_value()
    root, chain = alias._view if alias._view is not None else (alias, ())
    self._view = (root, chain + (DETACH,))
    remember_view(root, self)


def set_(self, *args, **kwargs):
    """Make this tensor share `source`'s storage, sizes and strides (or, with `storage_offset`, `size` and `stride`,
    that view of its storage); with no source, an empty storage of its own. Changes to the elements of either show
    in the other. Recorded (grad mode on and either requires grad), it has no derivative, as torch's; a leaf gets a
    new gradient accumulator (the graph recorded before keeps the old one)."""
    source, offset, size, stride = _set_arguments(args, kwargs)
    if is_batched(self._v) or (source is not None and is_batched(source._v)):
        raise RuntimeError(
            "Batching rule not implemented for aten::set_; the fallback path doesn't work on out= or view ops."
        )
    if source is not None and source.dtype is not self.dtype:
        raise RuntimeError(
            f"Could not set tensor of type {source.dtype.cpp_name} to a tensor of type {self.dtype.cpp_name}"
        )
    self._check_inplace()
    alias = _alias_of(source, offset, size, stride) if source is not None else None
    before_write(self)
    recorded = None
    if is_recording() and (self.requires_grad or (source is not None and source.requires_grad)):
        operands = [self] if source is None else [self, source]
        recorded = apply(_SET, operands, shape=(0,) if alias is None else tuple(alias.shape))
    _leave_storage(self)
    if alias is None:
        self._value = np.zeros((0,), self.dtype.np)
    else:
        _share(self, alias)
    if recorded is not None:
        self._node, self._output_nr = recorded.grad_fn, 0
    self._accumulator = None
    self._counter.value += 1
    return self


def is_set_to(self, tensor):
    """Whether this tensor and `tensor` share storage and have the same offset, sizes and strides in it."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"is_set_to(): argument 'tensor' (position 1) must be Tensor, not {type(tensor).__name__}")
    return (
        _storage(self)[0] is _storage(tensor)[0]
        and tuple(self.shape) == tuple(tensor.shape)
        and self.storage_offset() == tensor.storage_offset()
        and self.stride() == tensor.stride()
    )


METHODS = {"as_strided": as_strided, "as_strided_": as_strided_, "set_": set_, "is_set_to": is_set_to}
FUNCTIONS = {"as_strided": as_strided, "as_strided_": as_strided_}
