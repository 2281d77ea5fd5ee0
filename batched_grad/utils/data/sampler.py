"""torch.utils.data's samplers: iterables of dataset indices (or of lists of indices, for BatchSampler).

The random ones draw from batched_grad's generators, which reproduce torch's CPU stream: a seed gives torch's order
for that seed."""

import itertools

from ... import _dtypes
from ..._factories import as_tensor, empty, randint
from ..._generator import Generator
from ..._ops import multinomial, randperm

_RANDINT_BLOCK = 32  # RandomSampler with replacement draws its indices 32 at a time, as torch


class Sampler:
    """The base class: subclasses define __iter__ (indices) and usually __len__."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def fresh_seed(generator=None):
    """A 64-bit seed drawn from `generator` (the default generator for None), as torch's random_() on an int64."""
    return int(empty((), dtype=_dtypes.int64).random_(generator=generator).item())


class RandomSampler(Sampler):
    """A random permutation of the indices (repeated as needed for num_samples), or num_samples indices drawn with
    replacement. Without a generator, each pass seeds a new one from the default generator."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            generator = Generator().manual_seed(fresh_seed())
        if self.replacement:  # in blocks, drawn as they are read: num_samples may be huge (an endless loader)
            blocks, rest = divmod(self.num_samples, _RANDINT_BLOCK)
            for size in itertools.chain(itertools.repeat(_RANDINT_BLOCK, blocks), (rest,)):
                yield from randint(high=n, size=(size,), dtype=_dtypes.int64, generator=generator).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=generator).tolist()
        yield from randperm(n, generator=generator).tolist()[: self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices of range(len(weights)), index i drawn with probability proportional to weights[i]."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights = as_tensor(weights, dtype=_dtypes.float64)
        if weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(weights.shape)}")
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        drawn = multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from drawn.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of batch_size consecutive indices of `sampler`; the last shorter list is dropped with drop_last."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        indices = iter(self.sampler)
        batch = list(itertools.islice(indices, self.batch_size))
        while batch and (len(batch) == self.batch_size or not self.drop_last):
            yield batch
            batch = list(itertools.islice(indices, self.batch_size))

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
