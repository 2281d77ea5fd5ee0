"""Datasets for tests/test_utils_data.py's worker processes: a module of its own that does not import torch, so a
worker that unpickles them starts quickly."""

import batched_grad as bg
import batched_grad.utils.data as bud


class Squares(bud.IterableDataset):
    """0, 1, 4, ..., (n-1)**2; in workers each takes every num_workers-th item."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = bud.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(i * i for i in range(start, self.n, step))


class SizedSquares(Squares):
    """Squares that reports its length, as an IterableDataset may."""

    def __len__(self):
        return self.n


class Doubled(bud.Dataset):
    """Map-style samples (2 * i as a Tensor, i); index 3 raises when `fail` is set."""

    def __init__(self, n, fail=False):
        self.n, self.fail = n, fail

    def __getitem__(self, i):
        if self.fail and i == 3:
            raise KeyError("bad sample 3")
        return bg.tensor([2.0 * i]), i

    def __len__(self):
        return self.n


class Draws:
    """Map-style samples read from the global generators a worker seeds (NumPy's, Python's and the library's,
    named by `library`) and the dtype a Python float takes there; the torch side of a test names torch."""

    def __init__(self, n, library="batched_grad"):
        self.n, self.library = n, library

    def __getitem__(self, i):
        import importlib
        import random

        import numpy as np

        lib = importlib.import_module(self.library)
        words = [int(np.random.randint(10**6)), random.randrange(10**6), int(lib.randint(0, 10**6, ()))]
        return words, str(lib.tensor(0.5).dtype)

    def __len__(self):
        return self.n
