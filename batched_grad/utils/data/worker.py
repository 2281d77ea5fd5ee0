"""The DataLoader's worker processes: each reads batches of the dataset (its own copy) for the indices the main
process sends, collates them, and sends them back. Tensors cross the process boundary as host arrays (pickled
through NumPy), so no JAX state is shared: workers start by 'forkserver' or 'spawn', never by forking a process
whose JAX runtime is already running."""

import dataclasses
import multiprocessing
import multiprocessing.forkserver
import os
import queue
import random

import numpy as np

from ... import _generator
from ..._dtypes import set_default_dtype
from .fetch import ExceptionWrapper, IterableFetcher, MapFetcher

_POLL_S = 0.1  # how often an idle worker checks that the main process is alive and has not ended the pass
RESUME = "resume"  # persistent workers: start a new pass (the worker acknowledges with the same word)


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """What get_worker_info() returns inside a worker: its id, the number of workers, its seed and its dataset."""

    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info = None


def get_worker_info():
    """This worker's WorkerInfo inside a DataLoader worker process; None in the main process."""
    return _worker_info


@dataclasses.dataclass(frozen=True)
class IterableEnd:
    """A worker's answer once its copy of an iterable dataset is spent."""

    worker_id: int


@dataclasses.dataclass(frozen=True)
class WorkerConfig:
    """Everything a worker needs, sent once when it starts."""

    iterable: bool
    dataset: object
    auto_collation: bool
    collate_fn: object
    drop_last: bool
    base_seed: int
    init_fn: object
    num_workers: int
    default_dtype: object  # the main process's, which torch's forked workers inherit


def _seed_worker(base_seed, worker_id):
    """Seed Python's and batched_grad's global generators with base_seed + worker_id and NumPy's with the four words
    torch's workers give it: a SeedSequence over (worker_id, the low and high 32 bits of base_seed, 0)."""
    seed = base_seed + worker_id
    random.seed(seed)
    _generator.manual_seed(seed)
    words = [worker_id, base_seed & 0xFFFFFFFF, base_seed >> 32, 0]
    np.random.seed(np.random.SeedSequence(words).generate_state(4))


def _new_fetcher(config):
    kind = IterableFetcher if config.iterable else MapFetcher
    return kind(config.dataset, config.auto_collation, config.collate_fn, config.drop_last)


def _start(config, worker_id):
    """Set up this worker: its info, seeds, init function and fetcher; an exception comes back as a wrapper."""
    global _worker_info
    seed = config.base_seed + worker_id
    _worker_info = WorkerInfo(worker_id, config.num_workers, seed, config.dataset)
    set_default_dtype(config.default_dtype)
    _seed_worker(config.base_seed, worker_id)
    try:
        if config.init_fn is not None:
            config.init_fn(worker_id)
        return _new_fetcher(config)
    except Exception:
        return ExceptionWrapper(f"in DataLoader worker process {worker_id}")


def _restart(config, worker_id):
    try:
        return _new_fetcher(config)
    except Exception:
        return ExceptionWrapper(f"in DataLoader worker process {worker_id}")


def _fetch(fetcher, index, worker_id):
    if isinstance(fetcher, ExceptionWrapper):
        return fetcher
    try:
        return fetcher.fetch(index)
    except StopIteration:
        return IterableEnd(worker_id)
    except Exception:
        return ExceptionWrapper(f"in DataLoader worker process {worker_id}")


def worker_loop(config, worker_id, index_queue, result_queue, done_event):
    """A worker's life: answer each (task id, indices) with (task id, batch) until None arrives, `done_event` is
    set, or the main process is gone. (The event also reaches a worker when the main process shuts down from a
    garbage collection whose cycle already closed the index queues.)"""
    fetcher = _start(config, worker_id)
    parent = os.getppid()
    while not done_event.is_set() and os.getppid() == parent:
        try:
            task = index_queue.get(timeout=_POLL_S)
        except queue.Empty:
            continue
        if task is None:
            break
        if task == RESUME:
            fetcher = fetcher if isinstance(fetcher, ExceptionWrapper) else _restart(config, worker_id)
            result_queue.put((RESUME, None))
            continue
        task_id, index = task
        result_queue.put((task_id, _fetch(fetcher, index, worker_id)))
        del index
    if done_event.is_set():  # nobody reads what is still buffered: do not wait to flush it at exit
        result_queue.cancel_join_thread()


def default_context():
    """The start method for workers when none is given: 'forkserver' where the platform has it, else 'spawn'.
    Forking a process whose JAX runtime runs threads can deadlock the child, so 'fork' is used only on request.
    The fork server imports batched_grad before its first fork (importing starts no JAX runtime), so a worker
    starts without importing JAX again."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    preloaded = list(getattr(multiprocessing.forkserver._forkserver, "_preload_modules", None) or [])
    if "batched_grad" not in preloaded:
        context.set_forkserver_preload([*preloaded, "batched_grad"])
    return context
