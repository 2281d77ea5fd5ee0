"""The batch a backward program runs over, as records: how many rows are real, how many it is padded to, how many
run at a time, and which cotangents are blocks of the identity (a Jacobian's: the program makes their rows instead
of reading them), and over which devices its rows are split. Everything here is arrays and numbers: the engine
describes its batch with these records."""

import math
import numbers
from typing import NamedTuple

import numpy as np

from ._memory import AUTO
from ._shards import Shards


class BasisBlock(NamedTuple):
    """A grad_output whose rows are columns `offset`.. of an identity: row b is one at flat index b - offset of a
    row of shape `row_shape`, zero elsewhere."""

    offset: int
    row_shape: tuple
    dtype: np.dtype


class ProgramBatch(NamedTuple):
    """The static part of a whole backward program's batch (the program may read no cotangent at all): per
    grad_output in `basis`, None or its BasisBlock; `shards`: the devices its rows are split over, or None."""

    chunk_size: int | None
    padded: int
    basis: tuple
    shards: Shards | None = None


class KernelBatch(NamedTuple):
    """The static part of a batched kernel (its padded size is in its avals)."""

    chunk_size: int | None
    shards: Shards | None = None


class Batch:
    """The batch a backward runs over: `size` real rows, padded to `padded`, processed `chunk_size` at a time (on
    each device, where `shards` splits the rows over devices); `basis`: per grad_output, None or its BasisBlock.
    `whole`: the real rows of the whole backward's batch, of which this batch may be one chunk (what a
    FallbackWarning counts)."""

    __slots__ = ("size", "padded", "chunk_size", "basis", "shards", "whole")

    def __init__(self, size, padded, chunk_size, basis, shards=None, whole=None):
        self.size, self.padded, self.chunk_size, self.basis, self.shards = size, padded, chunk_size, basis, shards
        self.whole = size if whole is None else whole

    def with_chunk(self, chunk_size):
        """This batch run `chunk_size` rows at a time (for chunk_size="auto", once chosen)."""
        return Batch(self.size, self.padded, chunk_size, self.basis, self.shards, self.whole)

    @property
    def blocks(self):
        """How many blocks the rows are split into, one a device (1 where they are on one device)."""
        return 1 if self.shards is None else self.shards.count

    def rows(self, start):
        """The chunk of `chunk_size` rows from row `start`, as a batch of its own: its rows vectorized at once,
        dense (a chunk of a block of the identity is no block of its own)."""
        real = min(max(self.size - start, 0), self.chunk_size)
        return Batch(real, self.chunk_size, None, (None,) * len(self.basis), whole=self.whole)

    @property
    def looped(self):
        """How many leading rows a per-row loop runs: the real ones, at least one (a batch of 0 still runs one
        padding row to learn the result shapes); every row where they are split over devices, whose blocks each
        end in padding rows of their own."""
        return self.padded if self.shards is not None else max(self.size, 1)

    @property
    def in_chunks(self):
        """Whether the rows run a chunk at a time on one device: a chunk size smaller than the padded batch."""
        return self.chunk_size is not None and self.padded > self.chunk_size and self.shards is None

    @property
    def kernel_key(self):
        return KernelBatch(self.chunk_size, self.shards)

    @property
    def fused_key(self):
        return ProgramBatch(self.chunk_size, self.padded, self.basis, self.shards)


def check_chunk_size(chunk_size):
    """The one check of `chunk_size` for every entry point (vmap.vmap, grad, jacobian, hessian, jacrev): None,
    "auto" (vmap/_memory.py) or a positive integer (a NumPy one too, but not a bool); returns it as a Python int."""
    if chunk_size is None or (isinstance(chunk_size, str) and chunk_size == AUTO):
        return chunk_size
    if isinstance(chunk_size, numbers.Integral) and not isinstance(chunk_size, bool) and chunk_size > 0:
        return int(chunk_size)
    raise ValueError(f'chunk_size must be None, "auto" or a positive int, but got {chunk_size!r}')


def identity_block(rows):
    """The BasisBlock of a host array whose rows are columns offset.. of an identity (row b is one at flat index
    b - offset, zero elsewhere: jacobian()'s cotangents), else None: bit for bit, so -0.0 is not a zero here."""
    n_rows, shape = rows.shape[0], rows.shape[1:]
    n = math.prod(shape)
    if not 0 < n <= n_rows:  # fewer rows than a row's size: not a block of the identity
        return None
    flat = rows.reshape(n_rows, n)
    offset = 0 if flat[0, 0] == 1 else int(np.argmax(flat[:, 0] != 0))
    diagonal = flat.diagonal(-offset)
    if len(diagonal) != n or not (diagonal == 1).all():
        return None
    # n nonzero bit patterns, the diagonal's ones: every other entry is +0.0
    return BasisBlock(offset, shape, flat.dtype) if np.count_nonzero(flat.view(f"u{flat.itemsize}")) == n else None
