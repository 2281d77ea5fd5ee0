"""The DataLoader's pass with worker processes: indices go out round-robin to the workers' queues (at most
prefetch_factor tasks per worker in flight), batches come back on one queue and are yielded in sampler order."""

import itertools
import queue

from ..._dtypes import get_default_dtype
from . import worker as _worker
from .dataloader import BaseDataLoaderIter, _DatasetKind
from .fetch import ExceptionWrapper

_POLL_S = 2.0  # how often the main process, waiting for a batch, checks that its workers are alive
_JOIN_S = 5.0  # how long a worker gets to exit at shutdown before it is terminated


class MultiProcessingDataLoaderIter(BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._timeout, self._persistent = loader.timeout, loader.persistent_workers
        self._prefetch = loader.prefetch_factor * self._num_workers
        context = loader.multiprocessing_context or _worker.default_context()
        config = _worker.WorkerConfig(
            iterable=self._dataset_kind == _DatasetKind.Iterable,
            dataset=self._dataset,
            auto_collation=self._auto_collation,
            collate_fn=self._collate_fn,
            drop_last=self._drop_last,
            base_seed=self._base_seed,
            init_fn=loader.worker_init_fn,
            num_workers=self._num_workers,
            default_dtype=get_default_dtype(),
        )
        self._result_queue, self._done_event = context.Queue(), context.Event()
        self._index_queues, self._workers = [], []
        for worker_id in range(self._num_workers):
            index_queue = context.Queue()
            index_queue.cancel_join_thread()
            process = context.Process(
                target=_worker.worker_loop,
                args=(config, worker_id, index_queue, self._result_queue, self._done_event),
                daemon=True,
            )
            process.start()
            self._index_queues.append(index_queue)
            self._workers.append(process)
        self._shutdown = False
        self._start_pass(first=True)

    def _reset(self, loader):
        super()._reset(loader)
        if hasattr(self, "_workers"):
            self._start_pass(first=False)

    def _start_pass(self, first):
        """Reset the bookkeeping of a pass (persistent workers: resume each worker and drop last pass's batches),
        then send the first tasks."""
        self._send_idx = self._rcvd_idx = self._outstanding = 0
        self._task_worker, self._early = {}, {}  # task id -> worker id; task id -> a batch that came early
        self._active = [True] * self._num_workers
        self._next_worker = itertools.cycle(range(self._num_workers))
        if not first:
            for index_queue in self._index_queues:
                index_queue.put(_worker.RESUME)
            resumed = 0
            while resumed < self._num_workers:
                resumed += self._get_result()[0] == _worker.RESUME
        for _ in range(self._prefetch):
            self._send_task()

    def _send_task(self):
        """Send the next indices to the next worker still reading, unless enough tasks are in flight."""
        if self._outstanding >= self._prefetch or not any(self._active):
            return
        try:
            index = self._next_index()
        except StopIteration:
            return
        worker_id = next(w for w in self._next_worker if self._active[w])
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_worker[self._send_idx] = worker_id
        self._send_idx += 1
        self._outstanding += 1

    def _get_result(self):
        """The next (task id, batch) from any worker; raises if a worker died or the timeout passed."""
        while True:
            try:
                return self._result_queue.get(timeout=self._timeout or _POLL_S)
            except queue.Empty:
                if self._timeout:
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
                dead = [str(w.pid) for w in self._workers if not w.is_alive()]
                if dead:
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(dead)}) exited unexpectedly") from None

    def _skip_abandoned(self):
        """Move past tasks whose iterable-dataset worker ended before answering them."""
        while self._rcvd_idx < self._send_idx and self._rcvd_idx not in self._early:
            if self._active[self._task_worker[self._rcvd_idx]]:
                return
            del self._task_worker[self._rcvd_idx]
            self._rcvd_idx += 1

    def _next_data(self):
        while True:
            self._skip_abandoned()
            if self._rcvd_idx >= self._send_idx:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if self._rcvd_idx in self._early:
                return self._deliver(self._early.pop(self._rcvd_idx))
            task_id, data = self._get_result()
            self._outstanding -= 1
            if isinstance(data, _worker.IterableEnd):
                self._active[data.worker_id] = False
                self._send_task()
            elif task_id == self._rcvd_idx:
                return self._deliver(data)
            else:
                self._early[task_id] = data

    def _deliver(self, data):
        del self._task_worker[self._rcvd_idx]
        self._rcvd_idx += 1
        self._send_task()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        self._done_event.set()
        for index_queue in self._index_queues:
            index_queue.put(None)
        for process in self._workers:
            process.join(timeout=_JOIN_S)
            if process.is_alive():
                process.terminate()
        for index_queue in self._index_queues:
            index_queue.close()
        self._result_queue.cancel_join_thread()
        self._result_queue.close()

    def __del__(self):
        if hasattr(self, "_shutdown"):
            self._shutdown_workers()
