"""A map-style dataset's batches read in the main process where worker processes cannot start (_startable.py), each
as torch's worker would read it: batch i of a pass by worker i % num_workers (the workers take tasks in turn),
under that worker's own Python, NumPy and library generators (seeded as worker.py seeds a worker, then moved only
by that worker's reads), with get_worker_info() naming it and worker_init_fn run once for it. A dataset that draws
random numbers in __getitem__ (negative sampling, augmentation) then gets the numbers torch's workers draw."""

import random

import numpy as np

from ... import _generator
from . import worker as _worker
from .dataloader import BaseDataLoaderIter
from .fetch import ExceptionWrapper, MapFetcher


def _generator_states():
    return random.getstate(), np.random.get_state(), _generator.get_rng_state()


def _set_generator_states(states):
    python, numpy_state, library = states
    random.setstate(python)
    np.random.set_state(numpy_state)
    _generator.set_rng_state(library)


class InProcessWorkersIter(BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = MapFetcher(self._dataset, self._auto_collation, self._collate_fn, self._drop_last)
        self._infos = [
            _worker.WorkerInfo(i, self._num_workers, self._base_seed + i, self._dataset)
            for i in range(self._num_workers)
        ]
        self._states = [
            self._as_worker(i, None, self._start_worker, i, loader.worker_init_fn)[1] for i in range(self._num_workers)
        ]

    def _reset(self, loader):
        super()._reset(loader)
        self._task = 0  # each pass hands its first batch to worker 0 again

    def _start_worker(self, worker_id, init_fn):
        _worker._seed_worker(self._base_seed, worker_id)
        if init_fn is not None:
            init_fn(worker_id)

    def _as_worker(self, worker_id, states, fn, *args):
        """(fn(*args), the generators' states after it), run as worker `worker_id` from `states` (None: from the
        main process's), the main process's generators restored after; an exception comes out as a worker's."""
        main = _generator_states()
        if states is not None:
            _set_generator_states(states)
        _worker._worker_info = self._infos[worker_id]
        try:
            result = fn(*args)
        except Exception:
            result = ExceptionWrapper(f"in DataLoader worker process {worker_id}")
        finally:
            _worker._worker_info = None
            after = _generator_states()
            _set_generator_states(main)
        if isinstance(result, ExceptionWrapper):
            result.reraise()
        return result, after

    def _next_data(self):
        index = self._next_index()
        worker_id, self._task = self._task % self._num_workers, self._task + 1
        batch, self._states[worker_id] = self._as_worker(worker_id, self._states[worker_id], self._fetcher.fetch, index)
        return batch
