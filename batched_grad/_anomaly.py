"""Anomaly mode's bookkeeping, as torch's: where each node was made, which backward node made it, and the
warnings that tell a failing backward's story."""

import contextlib
import os
import sys
import threading
import traceback
import warnings
from collections import namedtuple

mode = {"enabled": False, "check_nan": True}

# where a node was made: `trace` is the formatted forward stack; `parent` is the node whose backward was running
# when it was made (a node made by create_graph's backward or by a Function's backward), else None
ForwardRecord = namedtuple("ForwardRecord", "trace parent")

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_running = threading.local()  # .node: the node whose backward this thread runs in anomaly mode


def record():
    """The ForwardRecord of a node made now: the stack up to the caller's last frame outside this package (the
    recording machinery says nothing about where the failing computation came from), and the running node."""
    frames = traceback.extract_stack()
    while frames and frames[-1].filename.startswith(_PACKAGE):
        frames.pop()
    return ForwardRecord("".join(traceback.format_list(frames)), getattr(_running, "node", None))


@contextlib.contextmanager
def running(node):
    """Mark `node` as the node whose backward runs (nodes made inside it record it as their parent)."""
    previous = getattr(_running, "node", None)
    _running.node = node
    try:
        yield
    finally:
        _running.node = previous


def warn_forward_traces(node):
    """torch's warnings for a backward that failed in anomaly mode: where `node` was made, then where each node
    whose backward made it was made in turn."""
    forward = node.forward
    if forward is None:
        _warn_during_error(f"Error detected in {node.name()}. {NO_FORWARD}")
        return
    _warn_during_error(
        f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n{forward.trace}"
    )
    parent = forward.parent
    while parent is not None:
        made = parent.forward
        if made is None:
            _warn_during_error(f"Error detected in {parent.name()}. {NO_FORWARD}")
            return
        _warn_during_error(
            f"\n\nPrevious calculation was induced by {parent.name()}. Traceback of forward call that induced the "
            f"previous calculation:\n{made.trace}"
        )
        parent = made.parent


NO_FORWARD = "No forward pass information available. Enable detect anomaly during forward pass for more information."


def _warn_during_error(message):
    """A UserWarning raised while an error propagates: where warnings are errors, it is printed to stderr and the
    original error goes on, as torch's warning handler does when an exception is in flight."""
    try:
        warnings.warn(message, UserWarning, stacklevel=2)
    except Warning as escalated:
        sys.stderr.write("".join(traceback.format_exception_only(type(escalated), escalated)))
