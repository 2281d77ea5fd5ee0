"""Fetchers: read one batch (or one sample, without auto-batching) from a dataset and collate it. The same code
runs in the main process (num_workers=0) and in worker processes."""

import sys
import traceback


class MapFetcher:
    """Reads the samples at given indices of a map-style dataset (its __getitems__ where it has one)."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        read_many = getattr(self.dataset, "__getitems__", None)
        samples = read_many(index) if read_many else [self.dataset[i] for i in index]
        return self.collate_fn(samples)


class IterableFetcher:
    """Reads the next batch_size samples (the count is the length of the index list the batch sampler gives) of an
    iterable dataset; raises StopIteration when the stream is spent (or has only a short last batch to drop)."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset_iter = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        samples = []
        for _ in index:
            try:
                samples.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not samples or (self.drop_last and len(samples) < len(index)):
            raise StopIteration
        return self.collate_fn(samples)


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process with its traceback as text and raised there
    again (same type, torch's message: "Caught ValueError in DataLoader worker process 0. Original Traceback...")."""

    def __init__(self, where):
        exc_type, exc, tb = sys.exc_info()
        self.exc_type = exc_type
        self.exc_msg = "".join(traceback.format_exception(exc_type, exc, tb))
        self.where = where

    def reraise(self):
        message = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        try:
            exception = self.exc_type(message)
        except Exception:
            raise RuntimeError(message) from None
        raise exception
