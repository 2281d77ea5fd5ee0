"""Where a tensor's elements lie in the storage torch would give it: data_ptr(), stride(), storage_offset(), _base,
is_contiguous(), contiguous(), output_nr.

Arrays here have no strides: a view is a chain of view ops from its root (Tensor._view). Applied to the root's flat
positions, the chain tells which storage element each view element is, and so the view's offset and strides, as
torch's; a tensor that is not a view is contiguous, at offset 0 of its own storage. Storage addresses are made up:
one stable, 64-byte aligned range per root, never reused."""

import functools
import itertools
import threading
import weakref

import numpy as np

from ._foreign import not_a_tensor
from ._inplace import DETACH, _ops_of, element_positions
from ._memory_format import channels_last, channels_last_3d, contiguous_format
from ._memory_format import check as check_memory_format
from ._tensor import Tensor, _wrap_dim
from ._tracing import eagerly
from ._vmap_levels import is_batched
from ._x64 import scoped

_ALIGNMENT = 64
_lock = threading.RLock()  # a weak reference's callback may run (in a collection) while it is held
_addresses = {}  # id(root) -> (weak reference to the root, its address)
_next_address = itertools.count(1)  # in units of _ALIGNMENT
_bases = {}  # id(view) -> (weak reference to the view, its base): views of a detached tensor (see note_base)
_rows = {}  # id(row) -> (weak reference to the row, (argument, in_dim)): vmap.vmap's rows (see note_row)


def _remember(table, t, value):
    """table[id(t)] = value while `t` lives (a weak dict keyed by identity: a Tensor's == is elementwise)."""
    key = id(t)

    def forget(ref):
        with _lock:
            if table.get(key, (None,))[0] is ref:
                del table[key]

    table[key] = (weakref.ref(t, forget), value)


def _recall(table, t):
    entry = table.get(id(t))
    return entry[1] if entry is not None and entry[0]() is t else None


def _storage_address(root):
    with _lock:
        address = _recall(_addresses, root)
        if address is None:
            blocks = max(-(-root.numel() * root.element_size() // _ALIGNMENT), 1)
            address = next(_next_address) * _ALIGNMENT
            for _ in range(blocks):  # the storage's range: no other root's address falls in it
                next(_next_address)
            _remember(_addresses, root, address)
    return address


def note_row(row, argument, in_dim):
    """`row` stands for the rows of `argument` along `in_dim` while a vmap.vmap call's function runs: as torch's
    BatchedTensor, it lies in the argument's storage with the argument's strides less the batch dim's."""
    _remember(_rows, row, (argument, in_dim))


def stood_for(row):
    """(the caller's tensor, its in_dim) that `row` stands for while a vmap.vmap call's function runs, or None."""
    return _recall(_rows, row) if _rows else None


def _root_layout(root):
    """(offset, strides) of `root` (a tensor that is not a view) in its storage: a vmap.vmap row's (its first row's
    offset), else (0, None): it is contiguous."""
    entry = _recall(_rows, root) if _rows else None
    if entry is None:
        return 0, None
    argument, in_dim = entry
    strides = stride(argument)
    return storage_offset(argument), strides[:in_dim] + strides[in_dim + 1 :]


def in_storage(root, positions):
    """Where the elements of `root` (a tensor that is not a view) at the row-major `positions` (an int array) lie in
    its storage: the positions themselves, unless `root` is a vmap.vmap row laid out in its caller's storage."""
    if not _rows or _recall(_rows, root) is None:
        return positions
    offset, strides = _root_layout(root)
    return offset + _laid_out(positions, tuple(root.shape), strides)


def storage_numel(root):
    """The number of elements of the storage of `root` (a tensor that is not a view): its own, or for a vmap.vmap
    row its caller's storage's."""
    entry = _recall(_rows, root) if _rows else None
    if entry is None:
        return root.numel()
    argument = entry[0]
    return storage_numel(argument._view[0] if argument._view is not None else argument)


def may_be_strided(t):
    """Whether `t`'s elements may lie other than in row-major order in its storage: a view or a vmap.vmap row."""
    return t._view is not None or (bool(_rows) and _recall(_rows, t) is not None)


def _laid_out(positions, shape, strides):
    """Where the elements at row-major `positions` (an int array) of a tensor of `shape` lie in a storage that holds
    it with `strides` (from its first element)."""
    index = np.unravel_index(positions, shape)
    return sum((i * s for i, s in zip(index, strides)), np.zeros_like(positions))


@functools.lru_cache(maxsize=1024)
@scoped
def _strides(root_shape, root_complex, chain, root_strides=None):
    """(offset, strides) of the view `chain` of a root that is contiguous or has `root_strides`, strides None where
    the view is not strided (a reshape of a non-contiguous view, which torch would copy)."""
    positions = np.asarray(element_positions(root_shape, root_complex, chain))
    if root_strides is not None and positions.size:  # the root's elements, row-major, to where they lie in storage
        positions = _laid_out(positions, root_shape, root_strides)
    return affine_layout(positions)


def affine_layout(positions):
    """(offset, strides) of the elements at storage `positions` (an array of the tensor's shape), strides None
    where they are not offset + index . strides."""
    if positions.size == 0:
        return 0, None
    offset = int(positions.flat[0])
    strides = tuple(
        int(positions[(0,) * d + (1,) + (0,) * (positions.ndim - d - 1)]) - offset if n > 1 else 0
        for d, n in enumerate(positions.shape)
    )
    affine = offset + sum(
        np.arange(n).reshape((-1,) + (1,) * (positions.ndim - d - 1)) * s
        for d, (n, s) in enumerate(zip(positions.shape, strides))
    )
    return offset, strides if np.array_equal(positions, affine) else None


def strides_through(t, root_strides):
    """The strides of `t`, a view of a root whose elements lie at `root_strides` in some storage (or the root
    itself), in that storage; None where they are not strided or `t` reinterprets its root's elements."""
    if t._view is None:
        return tuple(root_strides)
    root, chain = t._view
    if root.dtype.is_complex != t.dtype.is_complex:
        return None
    with eagerly():
        flat = np.asarray(element_positions(tuple(root.shape), root.dtype.is_complex, _ops_of(chain)))
    return affine_layout(_laid_out(flat.astype(np.int64), tuple(root.shape), root_strides))[1]


def _view_layout(t):
    """(offset, strides or None) of `t` in its root's storage; (0, None) for a tensor that is not a view (nor a
    vmap.vmap row)."""
    if t._view is None:
        return _root_layout(t)
    root, chain = t._view
    ops = _ops_of(chain)
    root_offset, root_strides = _root_layout(root)
    if not ops:
        return root_offset, root_strides
    with eagerly():  # the layout is static: computed from an arange now, not staged into a trace being compiled
        offset, strides = _strides(tuple(root.shape), root.dtype.is_complex, ops, root_strides)
    return root_offset + offset, strides


def data_ptr(self):
    """The address of the first element: the same for tensors sharing storage from the same element (a view, an
    alias from detach()), offset by the element size along a view; 0 for a tensor with no elements."""
    if self.numel() == 0:
        return 0
    root = self._view[0] if self._view is not None else self
    return _storage_address(root) + _view_layout(self)[0] * self.element_size()


# the dims of a channels-last layout from the innermost (channels) out, by rank
_CHANNELS_LAST_ORDER = {channels_last: (4, (1, 3, 2, 0)), channels_last_3d: (5, (1, 4, 3, 2, 0))}


def is_contiguous(self, memory_format=None):
    """Whether the elements lie in row-major order with no gaps, as torch's is_contiguous() (a transpose, a column,
    a strided slice or an expansion of a tensor is not; a tensor made by an op is); with memory_format=channels_last
    (channels_last_3d), whether they lie densely with the channels innermost, read from the same strides (a tensor
    made by an op is row-major here, whatever memory format it was asked for)."""
    check_memory_format(memory_format, "is_contiguous")
    _refuse_memory_format_of_rows(self, memory_format)
    strides = _view_layout(self)[1]
    if memory_format in _CHANNELS_LAST_ORDER:
        rank, order = _CHANNELS_LAST_ORDER[memory_format]
        if self.ndim != rank:
            return False
        strides = strides if strides is not None else contiguous_strides(tuple(self.shape))
        return _dense_in(order, self.shape, strides)
    if strides is None or self.numel() == 0:
        return True
    return _dense_in(reversed(range(self.ndim)), self.shape, strides)


def _refuse_memory_format_of_rows(tensor, memory_format):
    """torch's error for a memory format other than the contiguous one asked of a tensor that varies across the rows
    of a running vmap.vmap."""
    if memory_format is not None and memory_format is not contiguous_format and is_batched(tensor._v):
        raise RuntimeError(
            "NYI: querying is_contiguous inside of vmap for memory_format other than torch.contiguous_format"
        )


_CLONE_FORMAT_NAMES = {channels_last: "ChannelsLast", channels_last_3d: "ChannelsLast3d"}


def refuse_clone_format_of_rows(tensor, memory_format):
    """torch's error for clone(memory_format=) of a tensor that varies across the rows of a running vmap.vmap in a
    format other than the preserving or contiguous one."""
    if memory_format in _CLONE_FORMAT_NAMES and is_batched(tensor._v):
        raise RuntimeError(
            "NYI: Tensor.clone(memory_format) inside vmap is only supported with memory_format torch.preserve_format "
            f"or torch.contiguous_format (got {_CLONE_FORMAT_NAMES[memory_format]})"
        )


def _dense_in(order, shape, strides):
    """Whether the dims, innermost first in `order`, step through the storage densely (size-1 dims skipped)."""
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def contiguous_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def stride(self, dim=None):
    """The strides torch's storage would give this tensor (a view's, read from its chain of views; row-major for
    any other tensor), or the stride of `dim`."""
    strides = _view_layout(self)[1]
    strides = strides if strides is not None and self.numel() else contiguous_strides(tuple(self.shape))
    if dim is None:
        return tuple(strides)

    return strides[_wrap_dim(dim, self.ndim)]


def storage_order(shape, strides):
    """The order of the dims of a tensor of `shape` at `strides` from the outermost in its storage, where it is not
    row-major; None for row-major or `strides` None (not strided). torch's TensorIterator runs through a tensor's
    elements in this order, and its empty_like keeps it (infer_dense_strides): a draw that fills a tensor or one
    made like it (dropout's mask) follows it."""
    if strides is None:
        return None

    def should_swap(inner, outer):  # TensorIterator's comparison: a broadcast (or size-1) dim is ambiguous
        a, b = (strides[d] if shape[d] != 1 else 0 for d in (inner, outer))
        if a == 0 or b == 0:
            return 0
        if a == b:  # equal strides: the smaller dim goes inside
            return 1 if shape[inner] > shape[outer] else 0
        return 1 if a > b else -1

    perm = list(range(len(shape)))[::-1]  # innermost first, sorted by insertion with ambiguous comparisons
    for i in range(1, len(perm)):
        moving = i
        for j in range(i - 1, -1, -1):
            comparison = should_swap(perm[j], perm[moving])
            if comparison > 0:
                perm[j], perm[moving] = perm[moving], perm[j]
                moving = j
            elif comparison < 0:
                break
    order = perm[::-1]
    return None if order == sorted(order) else order


def is_row_major(shape, strides):
    """Whether `strides` lay a tensor of `shape` out row-major with no gaps (torch's is_contiguous)."""
    expected = 1
    for n, stride in zip(reversed(shape), reversed(strides)):
        if n != 1 and stride != expected:
            return False
        expected *= n
    return True


def storage_offset(self):
    """The position of the first element in the storage it shares with its base (0 for a tensor that is not a
    view)."""
    return _view_layout(self)[0]


def contiguous(self, memory_format=None):
    """This tensor if it is contiguous, else a contiguous copy of it (recorded: CloneBackward0)."""
    from . import _memory_format
    from ._ops import clone

    _refuse_memory_format_of_rows(self, memory_format)
    _memory_format.check(memory_format, "contiguous", self.dim())

    return self if is_contiguous(self) else clone(self)


def _base(self):
    """The tensor this one is a view of (None for a tensor that is not a view: detach() makes a new tensor sharing
    storage, not a view)."""
    if self._view is None:
        return None
    root, chain = self._view
    if chain[-1] is DETACH:
        return None
    return root if DETACH not in chain else _recall(_bases, self)


def note_base(view, src):
    """Record the base of `view`, a view of `src` whose chain passes through a detach(): the tensor detach() made,
    which no chain holds."""
    base = src if src._view[1][-1] is DETACH else _base(src)
    if base is not None:
        with _lock:
            _remember(_bases, view, base)


def output_nr(self):
    """Which output of its grad_fn this tensor is (0 for a tensor with no grad_fn)."""
    return self._output_nr if self.grad_fn is not None else 0


def reshape_as(self, other):
    """This tensor reshaped to `other`'s shape."""
    from ._ops import reshape

    if not isinstance(other, Tensor):
        raise not_a_tensor("reshape_as", "other", other, 1)
    return reshape(self, other.shape)


METHODS = {
    "data_ptr": data_ptr,
    "is_contiguous": is_contiguous,
    "contiguous": contiguous,
    "reshape_as": reshape_as,
    "stride": stride,
    "storage_offset": storage_offset,
    "_base": property(_base),
    "output_nr": property(output_nr),
}
