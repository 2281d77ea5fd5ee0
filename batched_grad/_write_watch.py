"""The watcher of writes into tensors that allow_mutation_on_saved_tensors installs on its thread, as torch's
dispatch mode that sees every op writing into an argument (an in-place op, an out= argument, each tensor of a foreach
in-place op, set_, resize_, an in-place view op).

Every such write calls `before_write(tensor, node)` after torch's checks of the write and before the values change;
`node` is the write's own recorded node (None where none was recorded), whose saved values of `tensor` the watcher
may replace. While a watcher is installed, the host lanes that write into arrays in place step aside (`watching()`),
so that each write takes a path that calls it."""

import threading


class _Watch(threading.local):
    callback = None  # callback(tensor, node), or None


WATCH = _Watch()


def watching():
    """Whether a watcher is installed on this thread."""
    return WATCH.callback is not None


def before_write(tensor, node=None):
    callback = WATCH.callback
    if callback is not None:
        callback(tensor, node)


def install(callback):
    """Install `callback` on this thread; returns the one it replaces (to restore)."""
    previous, WATCH.callback = WATCH.callback, callback
    return previous
