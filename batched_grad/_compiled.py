"""Compiled programs of whole structures (_lazy.program_for): a jitted function whose large results reuse the memory
of earlier ones, and which can compile in a background thread while the caller computes the same values with per-op
kernels (set_background_compile)."""

import atexit
import functools
import os
import sys
import threading

import jax
import numpy as np

from ._budget import Jitted, stored
from ._tracing import is_tracer, tracing
from ._x64 import scoped

_spares_lock = threading.Lock()

# a structure's fused program compiles in a background thread while per-op kernels answer ("0" turns it off)
_background = [os.environ.get("BATCHED_GRAD_BACKGROUND_COMPILE", "1") != "0"]
_compiling = set()  # the Events of the programs compiling now, each set when its compile has finished


def set_background_compile(enabled):
    """Whether a structure's fused program compiles in a background thread while per-op kernels compute its first
    calls (True, the default; the environment variable BATCHED_GRAD_BACKGROUND_COMPILE=0 sets False), or in the
    calling thread when first needed (False). Either way a call's values are those of the tier that computes it: the
    per-op tier and a fused program agree to rounding (a float32 sum taken in another order), so which one runs a
    call, which depends on timing, can move a value by an ulp, and a long float32 iteration can carry that along."""
    if not isinstance(enabled, bool):
        raise TypeError(f"set_background_compile(): argument 'enabled' must be a bool, not {type(enabled).__name__}")
    _background[0] = enabled


def wait_for_compiles():
    """Wait until every fused program compiling in the background is ready. Waits on what each compile sets when it
    finishes, not on Thread.join: a join interrupted by Ctrl-C marks the thread stopped while it still compiles, and
    the interpreter would then not wait for it at exit (XLA aborts a process that exits mid-compile)."""
    for done in list(_compiling):
        done.wait()


atexit.register(wait_for_compiles)  # after threading's own wait at exit, which an interrupted join can defeat


RECYCLE_BYTES = 1 << 20  # results at least this large are written into the memory of earlier ones no longer held
_recycling = []  # the programs whose large results are kept for that, the last called last


def _reference_counts(arrays):
    return [sys.getrefcount(a) for a in arrays]


@functools.cache
def alone_count():
    """What _reference_counts sees of an array that only its tuple refers to, or None where this interpreter's
    counts cannot tell (then no result's memory is reused). Checked once, on a real array: another reference, a
    NumPy view included, must raise the count by one, and dropping it must lower it again."""
    held = (jax.device_put(np.zeros(1, np.float32)),)
    alone = _reference_counts(held)[0]
    other = held[0]
    with_other = _reference_counts(held)[0]
    del other
    view = np.asarray(held[0])
    with_view = _reference_counts(held)[0]
    del view
    return alone if with_other == with_view == alone + 1 and _reference_counts(held)[0] == alone else None


def _after_spares(fn, spares, *args):
    return fn(*args)


class Program:
    """A jitted function that writes its large results into the buffers of earlier calls' results once nothing
    else refers to them (they are donated to XLA). A result in freshly mapped memory costs a page fault per 4 KiB
    page on every call: 25,000 of them, most of the call's time, for 100 MB of per-sample gradients (README,
    Performance). The last two programs called with large results keep those of their last two calls for this: in
    a loop, `g = f(x)` still holds the previous result while f runs."""

    __slots__ = ("plain", "reusing", "large", "spares", "ready", "compiling")

    def __init__(self, fn, key=None, size=None):
        """`fn` computes the structure `key` (its stable name in the store of executables) of `size` ops."""
        named = key is not None
        self.plain = Jitted(fn, name=("program", key) if named else None, size=size)
        self.reusing = Jitted(
            functools.partial(_after_spares, fn),
            name=("reusing program", key) if named else None,
            donate_argnums=0,
            keep_unused=True,
        )
        self.large, self.spares = None, []
        # ready: compiled (called once); compiling: an Event its background compile sets when it ends
        self.ready, self.compiling = False, None

    def ready_or_compiling(self, args):
        """Whether the program is compiled; if not, its compile is started in a background thread (once), which
        runs it on `args` and drops the result: meanwhile the caller computes the same values another way."""
        if self.ready or not _background[0] or tracing():
            return True
        if self.compiling is None:
            if self.stored(args):  # loaded from the store, in the caller's thread: nothing to wait for
                return True
            # not a daemon: the interpreter waits for it at exit (XLA aborts the process if it is stopped mid-compile)
            self.compiling = threading.Event()
            _compiling.add(self.compiling)
            threading.Thread(target=self._compile, args=(args,), name="batched_grad compile").start()
            return False
        return self.ready

    def stored(self, args):
        """Whether the store of executables holds this program's for these arguments."""
        return stored(self.plain, args)

    @scoped
    def _compile(self, args):
        try:
            jax.block_until_ready(self.plain(*args))
        except Exception:  # the caller's own call raises it again, where it can be seen
            pass
        finally:
            self.ready = True
            _compiling.discard(self.compiling)
            self.compiling.set()

    def __call__(self, *args):
        if not tracing():
            return self._call(args, traced=False)
        if any([is_tracer(a) for a in args]):
            return self._call(args, traced=True)
        with jax.ensure_compile_time_eval():  # concrete arguments in a trace: results kept after it, computed now
            return self._call(args, traced=False)

    def _call(self, args, traced):
        self.ready = True
        if self.large == ():  # known to have no large result (its results' avals are fixed by its key)
            return self.plain(*args)
        with _spares_lock:  # the spares are shared by the threads calling this program
            return self._call_reusing(args, traced)

    def _call_reusing(self, args, traced):
        spare = None if traced else self._free_spare()  # inside another trace: nothing to reuse
        outs = self.plain(*args) if spare is None else self.reusing(spare, *args)  # compiled at its first call
        if self.large is None:
            self.large = tuple([i for i, o in enumerate(outs) if o.nbytes >= RECYCLE_BYTES])
        if self.large and not traced:
            self.spares = self.spares[-1:] + [tuple([outs[i] for i in self.large])]
            if self in _recycling:
                _recycling.remove(self)
            elif len(_recycling) == 2:
                _recycling.pop(0).spares = []
            _recycling.append(self)
        return outs

    def _free_spare(self):
        """Take the older set of kept results that nothing else refers to, if any."""
        alone = alone_count()
        for i, spare in enumerate(self.spares):
            if (
                alone is not None
                and _reference_counts(spare) == [alone] * len(spare)
                and not any([a.is_deleted() for a in spare])
            ):
                return self.spares.pop(i)
        return None
