"""The fusion policy: which structures run as one compiled XLA program. XLA's compile of one program grows much
faster than the program where a long chain of elementwise ops fuses into one loop (a 4000-op chain and its
backward: 29 s and 1.8 GB; 250 ops: 0.2 s), so in "auto" a structure of more than MAX_OPS calls or nodes is not
compiled whole: its deferred calls run in segments of at most MAX_OPS calls, each a structure of its own (fused once
seen often enough; the equal segments of a repeated chain share one program), and its backward in fused segments of at
most MAX_OPS steps (_segments.py).
"off": per-op kernels only; "always": fuse whatever the size."""

import os
import warnings

MODES = ("auto", "off", "always")
ENV = "BATCHED_GRAD_FUSION"
MAX_OPS = 256  # at most this many calls (or backward nodes, or steps of a segment) in one fused program in "auto"


def _check(mode, name):
    allowed = ", ".join(repr(m) for m in MODES)
    if not isinstance(mode, str):
        raise TypeError(f"{name} must be one of {allowed}, but got {type(mode).__name__}")
    if mode not in MODES:
        raise ValueError(f"{name} must be one of {allowed}, but got {mode!r}")
    return mode


def _from_environment():
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    try:
        return _check(value, ENV)
    except ValueError as error:
        warnings.warn(f"{error}; using 'auto'", UserWarning, stacklevel=2)
        return "auto"


_mode = [_from_environment()]


def set_fusion(mode):
    """Choose when structures run as one compiled program: "auto" (the default, or $BATCHED_GRAD_FUSION): those
    whose runs pay for their compile (set_fuse_after), split when larger than 256 ops; "off": per-op kernels only;
    "always": fused whatever their size."""
    _mode[0] = _check(mode, "set_fusion(): mode")


def get_fusion():
    """The fusion mode set_fusion() chose: "auto", "off" or "always"."""
    return _mode[0]


def allows(size):
    """Whether a structure of `size` calls (or backward nodes) may run as one fused program."""
    mode = _mode[0]
    return mode == "always" or (mode == "auto" and size <= MAX_OPS)


def segment_size():
    """The most calls (or backward steps) per fused segment of a structure too large to fuse whole, or None: do not
    segment."""
    return MAX_OPS if _mode[0] == "auto" else None
