"""torch.multiprocessing: Python's multiprocessing under torch's name, with torch's sharing-strategy settings and
spawn. Tensors pass between processes by value (pickled: a JAX array has no shared-memory form), so the sharing
strategy is kept and reported but moves nothing; a process started with `fork` after JAX has started is unsafe (JAX's
runtime threads do not survive it): use the default `spawn` of `spawn()` or `forkserver`."""

import multiprocessing
from multiprocessing import *  # noqa: F403  (torch re-exports every name of Python's multiprocessing)

from .spawn import (
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    spawn,
    start_processes,
)

__all__ = [
    "ProcessContext",
    "ProcessException",
    "ProcessExitedException",
    "ProcessRaisedException",
    "get_all_sharing_strategies",
    "get_sharing_strategy",
    "set_sharing_strategy",
    "spawn",
    "start_processes",
    *multiprocessing.__all__,
]

_STRATEGIES = {"file_descriptor", "file_system"}
_strategy = ["file_descriptor"]


def set_sharing_strategy(new_strategy):
    """Set the strategy torch shares CPU tensors' storage with; here tensors are pickled by value, so it is
    recorded and reported by get_sharing_strategy only."""
    assert new_strategy in _STRATEGIES, f"invalid sharing strategy {new_strategy!r}, expected one of {_STRATEGIES}"
    _strategy[0] = new_strategy


def get_sharing_strategy():
    return _strategy[0]


def get_all_sharing_strategies():
    return set(_STRATEGIES)
