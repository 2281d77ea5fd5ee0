"""torch.utils.data's datasets: the map-style and iterable base classes, the tensor, stacked, concatenated, chained
and subset datasets, and random_split."""

import bisect
import itertools
import math
import warnings

from ... import _generator
from ..._ops import randperm


class Dataset:
    """A map-style dataset: `dataset[index]` is one sample. Subclasses define __getitem__ (and usually __len__,
    which samplers and DataLoader's len() use); `a + b` concatenates two datasets."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """An iterable-style dataset: its samples come from __iter__ (no indices). In worker processes every worker
    iterates its own copy: split the stream with get_worker_info() to avoid duplicates. `a + b` chains them."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the rows of `tensors` (indexed along their first dimension), as a tuple."""

    def __init__(self, *tensors):
        if any(tensors[0].size(0) != tensor.size(0) for tensor in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Samples are the same index of several datasets of one length: a tuple for positional datasets, a dict for
    keyword ones."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or"
                "``dict``- (via ``kwargs``) like input/output, but both types are given."
            )
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = args or list(kwargs.values())
        self._length = len(parts[0])
        if any(self._length != len(dataset) for dataset in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args or kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __getitems__(self, indices):
        return [self[index] for index in indices]

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after another."""

    @staticmethod
    def cumsum(sequence):
        """The running totals of the datasets' lengths."""
        return list(itertools.accumulate(len(dataset) for dataset in sequence))

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        if any(isinstance(dataset, IterableDataset) for dataset in self.datasets):
            raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """The samples of several iterable datasets, one stream after another (chained as they are iterated)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def _checked(self):
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield dataset

    def __iter__(self):
        for dataset in self._checked():
            yield from dataset

    def __len__(self):
        return sum(len(dataset) for dataset in self._checked())


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices
        if type(self).__getitem__ is not Subset.__getitem__ and type(self).__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__. "
                "When subclassing Subset and overriding __getitem__, you must also override "
                "__getitems__ to ensure DataLoader works correctly with your custom logic. "
                "A simple implementation:\n\n"
                "def __getitems__(self, indices):\n"
                "    return [self.__getitem__(idx) for idx in indices]"
            )

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        mapped = [self.indices[i] for i in indices]
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__(mapped)
        return [self.dataset[i] for i in mapped]

    def __len__(self):
        return len(self.indices)


def _lengths_from_fractions(fractions, total):
    """Split lengths floor(fraction * total), the remainder handed out one by one from the first split on."""
    lengths = []
    for i, fraction in enumerate(fractions):
        if fraction < 0 or fraction > 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        lengths.append(math.floor(total * fraction))
    for i in range(total - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.", stacklevel=3)
    return lengths


def random_split(dataset, lengths, generator=_generator.default_generator):
    """Split `dataset` into non-overlapping random Subsets of the given lengths, or of fractions of its length that
    sum to 1. The permutation comes from `generator` (batched_grad's generator: the same seed gives the same split
    on every run, but not torch's split for that seed)."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _lengths_from_fractions(lengths, len(dataset))
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(lengths), generator=generator).tolist()
    return [Subset(dataset, indices[end - length : end]) for end, length in zip(itertools.accumulate(lengths), lengths)]
