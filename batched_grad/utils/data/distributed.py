"""torch.utils.data.distributed.DistributedSampler: this replica's share of a dataset's (shuffled) indices.

batched_grad has no process groups, so num_replicas and rank must be given (without them torch's error for an
unavailable distributed package is raised); with them the shares are torch's, index for index."""

import math

from ... import distributed as dist
from ..._generator import Generator
from ..._ops import randperm
from .sampler import Sampler


class DistributedSampler(Sampler):
    """Every num_replicas-th index from position `rank`, of a permutation seeded with seed + epoch (or of the
    indices in order without shuffle), padded by repeating indices (or trimmed, with drop_last) so that every
    replica gets num_samples of them."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if drop_last and len(dataset) % num_replicas != 0:
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = randperm(n, generator=Generator().manual_seed(self.seed + self.epoch)).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[: self.total_size]
        else:
            padding = self.total_size - n
            indices += (indices * math.ceil(padding / n))[:padding] if padding else []
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch that, added to the seed, seeds the next pass's permutation."""
        self.epoch = epoch
