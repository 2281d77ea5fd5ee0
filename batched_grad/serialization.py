"""torch.serialization: save and load; the extra globals that weights_only loading of a torch-written checkpoint
accepts (add_safe_globals, safe_globals, get_safe_globals, clear_safe_globals: NumPy scalars and arrays, a
training script's own config classes); default_restore_location, which map_location functions call."""

import contextlib

from ._map_location import default_restore_location
from ._serialization import load, save
from ._torch_checkpoint import SAFE_GLOBALS

__all__ = [
    "add_safe_globals",
    "clear_safe_globals",
    "default_restore_location",
    "get_safe_globals",
    "load",
    "safe_globals",
    "save",
]

_entries = []  # what add_safe_globals was given, in order (get_safe_globals returns it)


def _key(entry):
    """(module, name) under which the pickle names an allowed global: an object, or (object, "module.name")."""
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise ValueError(f"Expected a tuple of (global, 'module.name'), but got {entry!r}")
        return tuple(entry[1].rsplit(".", 1)), entry[0]
    return (entry.__module__, entry.__qualname__), entry


def add_safe_globals(safe_globals):
    """Allow these globals (objects, or (object, "module.name") pairs) in weights_only loads."""
    if not isinstance(safe_globals, list):
        raise TypeError(f"add_safe_globals: safe_globals must be a list, but got {type(safe_globals).__name__}")
    for entry in safe_globals:
        key, obj = _key(entry)
        SAFE_GLOBALS[key] = obj
        _entries.append(entry)


def get_safe_globals():
    """The globals add_safe_globals allowed, in the order given."""
    return list(_entries)


def clear_safe_globals():
    """Forget every global add_safe_globals allowed."""
    SAFE_GLOBALS.clear()
    _entries.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """Allow these globals in weights_only loads inside the block; the previous allowlist afterwards."""
    saved_map, saved_entries = dict(SAFE_GLOBALS), list(_entries)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        SAFE_GLOBALS.clear()
        SAFE_GLOBALS.update(saved_map)
        _entries[:] = saved_entries
