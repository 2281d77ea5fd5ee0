"""torch.utils.data.DataLoader: batches of a dataset, in the main process or in worker processes."""

import math
import multiprocessing
import multiprocessing.context
import warnings

from ... import cuda as _cuda
from ._startable import reason_not_to_start, warn_loading_in_process
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .fetch import IterableFetcher, MapFetcher
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, fresh_seed
from .worker import get_worker_info  # noqa: F401  (torch.utils.data.dataloader's name too)

_FROZEN_AFTER_INIT = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class _DatasetKind:
    Map = 0
    Iterable = 1


class _InfiniteConstantSampler(Sampler):
    """The index 'sampler' of an iterable dataset: None forever (the dataset decides when to stop)."""

    def __iter__(self):
        while True:
            yield None


def _check_worker_options(num_workers, timeout, prefetch_factor, persistent_workers):
    """torch's checks of the multiprocessing options; returns the prefetch factor (2 by default with workers)."""
    if num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError(
            "prefetch_factor option could only be specified in multiprocessing."
            "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
        )
    if num_workers > 0 and prefetch_factor is None:
        prefetch_factor = 2
    elif prefetch_factor is not None and prefetch_factor < 0:
        raise ValueError("prefetch_factor option should be non-negative")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")
    return prefetch_factor


def _check_iterable_options(shuffle, sampler, batch_sampler):
    if shuffle not in {False, None}:
        raise ValueError(
            f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}"
        )
    if sampler is not None:
        raise ValueError(
            f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}"
        )
    if batch_sampler is not None:
        raise ValueError(
            "DataLoader with IterableDataset: expected unspecified "
            f"batch_sampler option, but got batch_sampler={batch_sampler}"
        )


def _check_batching_options(batch_size, shuffle, sampler, batch_sampler, drop_last):
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
        raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last")
    if batch_sampler is None and batch_size is None and drop_last:
        raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")


def _context(multiprocessing_context, num_workers):
    """torch's checks of multiprocessing_context: a start method's name or a context, only with workers."""
    if multiprocessing_context is None:
        return None
    if num_workers == 0:
        raise ValueError(
            "multiprocessing_context can only be used with multi-process loading (num_workers > 0), but got "
            f"num_workers={num_workers}"
        )
    if isinstance(multiprocessing_context, str):
        methods = multiprocessing.get_all_start_methods()
        if multiprocessing_context not in methods:
            raise ValueError(
                f"multiprocessing_context option should specify a valid start method in {methods!r}, but got "
                f"multiprocessing_context={multiprocessing_context!r}"
            )
        multiprocessing_context = multiprocessing.get_context(multiprocessing_context)
    if not isinstance(multiprocessing_context, multiprocessing.context.BaseContext):
        raise TypeError(
            "multiprocessing_context option should be a valid context object or a string specifying the start "
            f"method, but got multiprocessing_context={multiprocessing_context}"
        )
    return multiprocessing_context


class DataLoader:
    """Iterate over `dataset` in batches: samples chosen by a sampler (sequential, or random with shuffle=True),
    grouped by a batch sampler, merged by collate_fn (default_collate; default_convert with batch_size=None).
    With num_workers > 0, worker processes read and collate the batches (started by 'forkserver' or 'spawn' unless
    multiprocessing_context says otherwise: the dataset, collate_fn and worker_init_fn must then be picklable); where
    they cannot start (a script without a main guard, a lambda, a notebook's dataset: _startable.py), the batches
    load in the main process, with a warning. pin_memory warns as torch's does without an accelerator; JAX places
    arrays, so pin_memory_device changes nothing."""

    __initialized = False

    def __init__(
        self,
        dataset,
        batch_size=1,
        shuffle=None,
        sampler=None,
        batch_sampler=None,
        num_workers=0,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        timeout=0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor=None,
        persistent_workers=False,
        pin_memory_device="",
        in_order=True,
    ):
        self.prefetch_factor = _check_worker_options(num_workers, timeout, prefetch_factor, persistent_workers)
        self.dataset, self.num_workers, self.timeout = dataset, num_workers, timeout
        self.pin_memory, self.pin_memory_device, self.in_order = pin_memory, pin_memory_device, in_order
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = _context(multiprocessing_context, num_workers)
        if isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Iterable
            _check_iterable_options(shuffle, sampler, batch_sampler)
            sampler = _InfiniteConstantSampler()
        else:
            self._dataset_kind = _DatasetKind.Map
            shuffle = bool(shuffle)
        _check_batching_options(batch_size, shuffle, sampler, batch_sampler, drop_last)
        if batch_sampler is not None:
            batch_size, drop_last = None, False
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last, self.sampler, self.batch_sampler = (
            batch_size,
            drop_last,
            sampler,
            batch_sampler,
        )
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._IterableDataset_len_called = None
        self._iterator = None
        self._start_check = None  # (the parts it pickled, reason_not_to_start's answer)
        self.__initialized = True

    def __setattr__(self, attr, val):
        if self.__initialized and attr in _FROZEN_AFTER_INIT:
            raise ValueError(f"{attr} attribute should not be set after {self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        """What yields each fetch's indices: the batch sampler with auto-batching, else the sampler."""
        return self.batch_sampler if self._auto_collation else self.sampler

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        # the check pickles the dataset: once per loader, again only where the parts it pickles were replaced
        parts = (self.collate_fn, self.worker_init_fn, self.multiprocessing_context)
        if self._start_check is None or any([a is not b for a, b in zip(self._start_check[0], parts)]):
            self._start_check = (parts, reason_not_to_start(self))
        reason = self._start_check[1]
        if reason is not None:
            warn_loading_in_process(reason, emulated=self._dataset_kind == _DatasetKind.Map)
            if self._dataset_kind == _DatasetKind.Iterable:
                return _SingleProcessDataLoaderIter(self)
            from ._in_process import InProcessWorkersIter

            return InProcessWorkersIter(self)
        from .multiprocess import MultiProcessingDataLoaderIter

        return MultiProcessingDataLoaderIter(self)

    def __iter__(self):
        if not (self.persistent_workers and self.num_workers > 0):
            return self._get_iterator()
        if self._iterator is None:
            self._iterator = self._get_iterator()
        else:
            self._iterator._reset(self)
        return self._iterator

    def __len__(self):
        if self._dataset_kind == _DatasetKind.Map:
            return len(self._index_sampler)
        length = self._IterableDataset_len_called = len(self.dataset)
        if self.batch_size is None:
            return length
        return length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)


class BaseDataLoaderIter:
    """One pass over a DataLoader: draws the pass's base seed (for workers), walks the index sampler, and warns
    when an iterable dataset yields more than the len() it reported."""

    def __init__(self, loader):
        self._dataset, self._dataset_kind = loader.dataset, loader._dataset_kind
        self._auto_collation, self._drop_last = loader._auto_collation, loader.drop_last
        self._index_sampler, self._collate_fn = loader._index_sampler, loader.collate_fn
        self._num_workers = loader.num_workers
        if loader.pin_memory and not _cuda.is_available():
            warnings.warn(
                "'pin_memory' argument is set as true but no accelerator is found, then device pinned memory won't be "
                "used.",
                stacklevel=2,
            )
        self._base_seed = fresh_seed(loader.generator)
        self._reset(loader)

    def _reset(self, loader):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)

    def __iter__(self):
        return self

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        reported = self._IterableDataset_len_called
        if self._dataset_kind == _DatasetKind.Iterable and reported is not None and self._num_yielded > reported:
            warnings.warn(
                f"Length of IterableDataset {self._dataset} was reported to be {reported}"
                f"(when accessing len(dataloader)), but {self._num_yielded} samples have been fetched. ",
                stacklevel=2,
            )
        return data

    def __len__(self):
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError("{} cannot be pickled", self.__class__.__name__)


class _SingleProcessDataLoaderIter(BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        if loader.timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        fetcher = IterableFetcher if self._dataset_kind == _DatasetKind.Iterable else MapFetcher
        self._fetcher = fetcher(self._dataset, self._auto_collation, self._collate_fn, self._drop_last)

    def _next_data(self):
        return self._fetcher.fetch(self._next_index())
