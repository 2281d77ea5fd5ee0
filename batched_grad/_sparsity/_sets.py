"""Index sets: for each element of an array (flattened in C order), the set of input elements it depends on, kept as
one compressed sparse row structure (CSR: `indptr`, `indices`, each row sorted and without repeats). None stands for
an array that depends on no input (a constant, an integer array), so the common case costs nothing.

Every operation is a handful of vectorized NumPy calls over all elements at once: a 1-D stencil of 100,000 elements
propagates through an op in a few milliseconds."""

import numpy as np

MAX_ENTRIES = 200_000_000  # entries (element, input) held at once: past this a pattern is too dense to be worth it


class TooDense(Exception):
    """The pattern grew past MAX_ENTRIES entries: a sparse Jacobian of it would cost more than a dense one."""


class Sets:
    """The index sets of `size` elements: row k is indices[indptr[k]:indptr[k + 1]]."""

    __slots__ = ("indptr", "indices")

    def __init__(self, indptr, indices):
        self.indptr, self.indices = indptr, indices

    @property
    def size(self):
        return len(self.indptr) - 1

    def lengths(self):
        return np.diff(self.indptr)

    def __repr__(self):
        rows = [self.indices[self.indptr[k] : self.indptr[k + 1]].tolist() for k in range(min(self.size, 8))]
        return f"Sets({rows}{', ...' if self.size > 8 else ''})"


def identity(n, offset=0):
    """Element k depends on input element offset + k."""
    return Sets(np.arange(n + 1, dtype=np.int64), np.arange(offset, offset + n, dtype=np.int64))


def _check(total):
    if total > MAX_ENTRIES:
        raise TooDense(f"the sparsity pattern has more than {MAX_ENTRIES} entries")


def ranges(starts, lengths):
    """The concatenation of arange(s, s + n) for each (s, n), vectorized."""
    total = int(lengths.sum())
    _check(total)
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    offsets = np.repeat(starts - (ends - lengths), lengths)
    return offsets + np.arange(total, dtype=np.int64)


def take(sets, source):
    """Element k gets the set of element source[k] of `sets` (empty where source[k] < 0): any move of elements
    (slicing, reshaping, broadcasting, transposing, gathering)."""
    if sets is None:
        return None
    source = np.asarray(source, np.int64).ravel()
    valid = source >= 0
    safe = np.where(valid, source, 0)
    lengths = np.where(valid, sets.indptr[safe + 1] - sets.indptr[safe], 0)
    indptr = np.zeros(len(source) + 1, np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return Sets(indptr, sets.indices[ranges(sets.indptr[safe], lengths)])


def from_pairs(rows, cols, size, width):
    """The sets of `size` elements holding the (row, col) pairs given (repeats allowed); cols are below `width`."""
    _check(len(rows))
    keys = rows.astype(np.int64) * width + cols
    keys.sort()  # a sort and a comparison of neighbours: several times faster than np.unique's hashing here
    if len(keys) > 1:
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    rows, cols = np.divmod(keys, width)
    indptr = np.zeros(size + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=size), out=indptr[1:])
    return Sets(indptr, cols)


def row_ids(sets):
    """The element each entry of sets.indices belongs to."""
    return np.repeat(np.arange(sets.size, dtype=np.int64), sets.lengths())


def union(all_sets, width):
    """Elementwise union of aligned sets (each None or of the same size)."""
    present = [s for s in all_sets if s is not None]
    if not present:
        return None
    first = present[0]
    if all(s is first for s in present):
        return first
    rows = np.concatenate([row_ids(s) for s in present])
    cols = np.concatenate([s.indices for s in present])
    return from_pairs(rows, cols, first.size, width)


def group(sets, groups, n_groups, width):
    """Element g of the result is the union of the elements k with groups[k] == g (none where groups[k] < 0): a
    reduction along some axes, or any many-to-one map."""
    if sets is None:
        return None
    groups = np.asarray(groups, np.int64).ravel()
    rows = np.repeat(groups, sets.lengths())
    keep = rows >= 0
    return from_pairs(rows[keep], sets.indices[keep], n_groups, width)


def gather_union(sets, out_rows, sources, size, width):
    """Element out_rows[i] of the result depends on element sources[i] of `sets`, for every pair i: a stencil
    (convolution, pooling window), a cumulative sum, any many-to-many map given by its pairs."""
    if sets is None:
        return None
    out_rows, sources = np.asarray(out_rows, np.int64).ravel(), np.asarray(sources, np.int64).ravel()
    keep = sources >= 0
    out_rows, sources = out_rows[keep], sources[keep]
    lengths = sets.indptr[sources + 1] - sets.indptr[sources]
    cols = sets.indices[ranges(sets.indptr[sources], lengths)]
    return from_pairs(np.repeat(out_rows, lengths), cols, size, width)


def everything(sets_list, size, width):
    """`size` elements each depending on every input element any of `sets_list` depends on (a rule's dense
    fallback)."""
    present = [s for s in sets_list if s is not None]
    if not present:
        return None
    cols = np.unique(np.concatenate([s.indices for s in present]))
    _check(len(cols) * size)
    return Sets(np.arange(size + 1, dtype=np.int64) * len(cols), np.tile(cols, size))


def cross(a, b):
    """Per element k, every pair (i, j) with i in a[k] and j in b[k]: the input pairs an elementwise nonlinearity
    makes interact (second derivatives). Returns (i, j) arrays."""
    la, lb = a.lengths(), b.lengths()
    counts = la * lb
    total = int(counts.sum())
    _check(total)
    row = np.repeat(np.arange(a.size, dtype=np.int64), counts)
    start = np.cumsum(counts) - counts
    p = np.arange(total, dtype=np.int64) - start[row]
    width_b = lb[row]
    return a.indices[a.indptr[row] + p // width_b], b.indices[b.indptr[row] + p % width_b]
