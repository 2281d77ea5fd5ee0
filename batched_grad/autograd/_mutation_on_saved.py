"""torch.autograd.graph.allow_mutation_on_saved_tensors: under it, a tensor saved for backward may be changed in
place, and backward reads the values it had when saved.

As torch's, it is a pair of saved-tensor hooks and a watcher of writes (torch's dispatch mode). The pack hook keeps
each saved tensor under a handle, one per (tensor, storage address, version) -- the tensor's "tid" -- and notes
which tids share a (storage address, version) -- a "sid". Before a write into a tensor, every saved tensor with the
tensor's sid that is still saved somewhere is cloned, and the handle reads the clone from then on. The handles are
held by the graph alone: the context's maps forget a tensor once no node saves it any more.

An in-place op that saves its own operand (sin_ saves the values before the write) saves a copy of it, as torch's
does: the write then clones nothing on that op's account."""

import contextlib
from collections import defaultdict
from weakref import WeakKeyDictionary, WeakValueDictionary

from .. import _saved_hooks, _write_watch
from .._grad_mode import no_grad

OUT_OF_CONTEXT = (
    "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
    "in which the graph was originally recorded."
)
NESTED = "allow_mutation_on_saved_tensors contexts cannot be nested"

_enabled = False  # whether a context is open (one at a time, in the whole process, as torch's flag)


def _tid(tensor):
    return (id(tensor), tensor.data_ptr(), tensor._version)


def _sid(tensor):
    return (tensor.data_ptr(), tensor._version)


class _Handle:
    pass


class _AllowMutationOnSavedContext:
    """The state of one allow_mutation_on_saved_tensors context, as torch's: `original` and `cloned` map each live
    handle to the saved tensor or to its clone, `tid_to_weakhandle` each saved tid to its handle (weakly), and
    `sid_to_tid` each sid to the tids saved with it. Cleared when the context ends."""

    def __init__(self):
        self.cloned = WeakKeyDictionary()
        self.original = WeakKeyDictionary()
        self.tid_to_weakhandle = WeakValueDictionary()
        self.sid_to_tid = defaultdict(set)

    def clear(self):
        self.cloned.clear()
        self.original.clear()
        self.tid_to_weakhandle.clear()
        self.sid_to_tid.clear()

    def pack(self, tensor):
        """The handle `tensor` is saved under (the one of its tid where that is saved already)."""
        tid = _tid(tensor)
        self.sid_to_tid[_sid(tensor)].add(tid)
        handle = self.tid_to_weakhandle.get(tid)
        if handle is None:
            handle = self.tid_to_weakhandle[tid] = _Handle()
            self.original[handle] = tensor
        return handle

    def unpack(self, handle):
        if not _enabled:
            raise AssertionError(OUT_OF_CONTEXT)
        tensor = self.cloned.get(handle)
        if tensor is None:
            tensor = self.original.get(handle)
            if tensor is None:
                raise AssertionError(OUT_OF_CONTEXT)
        return tensor

    def before_write(self, tensor, node):
        """Before a write into `tensor` by the op whose node is `node`: the node's own saved values of `tensor` are
        saved as a copy, then every saved tensor sharing its sid is cloned (once)."""
        if node is not None:
            self._save_copy_for(tensor, node)
        sid = _sid(tensor)
        if sid not in self.sid_to_tid:
            return
        for tid in self.sid_to_tid[sid]:
            handle = self.tid_to_weakhandle.get(tid)
            if handle is None or handle in self.cloned:  # no longer saved (a backward freed it), or cloned already
                continue
            with no_grad():
                self.cloned[handle] = self.original[handle].clone()
            del self.original[handle]

    def _save_copy_for(self, tensor, node):
        copy = None
        for saved in node.saved_values():
            packed = saved.packed
            if packed is None or type(packed[0]) is not _Handle or self.original.get(packed[0]) is not tensor:
                continue
            if copy is None:
                with no_grad():
                    copy = tensor.clone()
            saved.packed = (self.pack(copy), packed[1])


@contextlib.contextmanager
def _watching(callback):
    previous = _write_watch.install(callback)
    try:
        yield
    finally:
        _write_watch.install(previous)


@contextlib.contextmanager
def allow_mutation_on_saved_tensors():
    """Context manager under which a tensor saved for backward may be changed in place: it is cloned before the
    change, and backward reads the clone. Forward and backward must both run inside the same context (backward
    elsewhere raises AssertionError); contexts cannot be nested (RuntimeError). Yields the context's state (an
    _AllowMutationOnSavedContext: its maps of saved and cloned tensors), cleared when the context ends."""
    global _enabled
    ctx = _AllowMutationOnSavedContext()
    _saved_hooks.push(ctx.pack, ctx.unpack)
    try:
        with _watching(ctx.before_write):
            try:
                if _enabled:
                    raise RuntimeError(NESTED)
                _enabled = True
                yield ctx
            finally:
                ctx.clear()
                _enabled = False
    finally:
        _saved_hooks.pop()
