"""Coloring of sparsity patterns, so that one seed per color recovers every nonzero.

- Rows (reverse mode) and columns (forward mode): a partial distance-2 coloring: two columns conflict when some
  row holds both (two rows when some column does). Greedy colorings are tried in turn, natural order, DSATUR (the
  next vertex is the one whose conflicting vertices use the most distinct colors) and largest-first, until one
  reaches the lower bound (the longest row), and the fewest colors kept: DSATUR colors the 5-point stencil with
  its optimal 5 where a static order gives 7.
- Symmetric Hessians: a star coloring of the adjacency graph (distance-1, and every path on four vertices uses at
  least three colors), greedy in natural and in largest-first order, the fewer kept. Each nonzero H[i, j] is then
  read directly from the Hessian-vector products: in a star coloring j is the only neighbour of i with j's color,
  or i the only neighbour of j with i's.

The greedy passes are plain Python loops over the pattern's rows and columns as lists, walking the conflicts
without building the conflict graph (a 65,536-vertex grid colors in about half a second)."""

import heapq

import numpy as np

from . import _sets


def transpose(indptr, indices, n_cols):
    """The CSR of the transposed pattern."""
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    t = _sets.from_pairs(indices, rows, n_cols, max(len(indptr) - 1, 1))
    return t.indptr, t.indices


class Adjacency:
    """A graph's adjacency as Python lists (the greedy loops index them faster than NumPy arrays): the neighbours
    of v are flat[bounds[v]:bounds[v + 1]]."""

    __slots__ = ("bounds", "flat", "n")

    def __init__(self, indptr, indices):
        self.bounds, self.flat, self.n = indptr.tolist(), indices.tolist(), len(indptr) - 1

    def __getitem__(self, v):
        return self.flat[self.bounds[v] : self.bounds[v + 1]]

    def degrees(self):
        return np.diff(np.asarray(self.bounds, np.int64))


def greedy(columns, rows, order):
    """Distance-2 greedy: each vertex (column) in `order` takes the smallest color no column sharing a row with it
    has. `columns`: each column's rows; `rows`: each row's columns."""
    color = [-1] * columns.n
    mark = [-1] * (columns.n + 1)
    cb, cf, rb, rf = columns.bounds, columns.flat, rows.bounds, rows.flat
    for v in order:
        for r in cf[cb[v] : cb[v + 1]]:
            for w in rf[rb[r] : rb[r + 1]]:
                c = color[w]
                if c >= 0:
                    mark[c] = v
        c = 0
        while mark[c] == v:
            c += 1
        color[v] = c
    return color


def dsatur(columns, rows):
    """Distance-2 DSATUR: repeatedly color the uncolored column whose conflicting columns use the most distinct
    colors (ties: the one with more entries in its rows, then the lower number) with the smallest color free
    for it."""
    n = columns.n
    color = [-1] * n
    seen = [set() for _ in range(n)]
    cb, cf, rb, rf = columns.bounds, columns.flat, rows.bounds, rows.flat
    row_sizes = np.diff(np.asarray(rb, np.int64))
    reach = np.zeros(n, np.int64)  # the entries of a column's rows: its degree, counting repeats
    np.add.at(reach, np.repeat(np.arange(n), columns.degrees()), row_sizes[np.asarray(cf, np.int64)])
    negative_reach = (-reach).tolist()
    heap = list(zip([0] * n, negative_reach, range(n)))
    heapq.heapify(heap)
    while heap:
        saturation, _, v = heapq.heappop(heap)
        if color[v] >= 0 or -saturation != len(seen[v]):
            continue  # an entry left behind by a later, larger saturation
        used = seen[v]
        c = 0
        while c in used:
            c += 1
        color[v] = c
        for r in cf[cb[v] : cb[v + 1]]:
            for w in rf[rb[r] : rb[r + 1]]:
                if color[w] < 0 and c not in seen[w]:
                    seen[w].add(c)
                    heapq.heappush(heap, (-len(seen[w]), negative_reach[w], w))
    return color


def _largest_first(adjacency):
    return np.argsort(-adjacency.degrees(), kind="stable").tolist()


def _best(attempts, lower_bound):
    """The coloring with the fewest colors among those the `attempts` (functions) give, trying them in turn
    until one reaches `lower_bound` colors."""
    best = None
    for attempt in attempts:
        colors = attempt()
        if best is None or max(colors, default=-1) < max(best, default=-1):
            best = colors
        if max(best, default=-1) + 1 <= lower_bound:
            break
    return np.asarray(best, np.int64)


def distinct_rows(indptr, indices):
    """The pattern without its repeated rows (a row holding the same columns as an earlier one): they add no
    conflict, and a block-diagonal Jacobian repeats each row of a block as many times as the block has rows."""
    n = len(indptr) - 1
    lengths = np.diff(indptr)
    if n < 2 or len(indices) == 0:
        return indptr, indices
    weights = np.random.default_rng(0).integers(1, 2**61, size=2, dtype=np.int64)
    nonempty = lengths > 0
    # two wrapping hashes of each row's columns, then an exact check against the first row of each hash
    h = np.zeros((2, n), np.int64)
    with np.errstate(over="ignore"):
        for k in range(2):
            h[k][nonempty] = np.add.reduceat((indices + 1) * weights[k] ^ (indices * 31 + 7), indptr[:-1][nonempty])
    order = np.lexsort((np.arange(n), h[1], h[0], lengths))
    same = np.zeros(n, bool)
    same[1:] = (lengths[order[1:]] == lengths[order[:-1]]) & (h[:, order[1:]] == h[:, order[:-1]]).all(axis=0)
    first = order[np.maximum.accumulate(np.where(same, 0, np.arange(n)))]  # each row's first equal-hash row
    candidate = first != order
    duplicate = np.zeros(n, bool)
    if candidate.any():
        mine, theirs = order[candidate], first[candidate]
        a = indices[_ranges(indptr[mine], lengths[mine])]
        b = indices[_ranges(indptr[theirs], lengths[theirs])]
        starts = np.concatenate([[0], np.cumsum(lengths[mine])[:-1]])
        equal = np.minimum.reduceat((a == b).view(np.int8), starts).astype(bool) if len(a) else np.ones(len(mine), bool)
        duplicate[mine[equal]] = True
    if not duplicate.any():
        return indptr, indices
    keep = ~duplicate
    kept_lengths = lengths[keep]
    new_indptr = np.concatenate([[0], np.cumsum(kept_lengths)]).astype(np.int64)
    return new_indptr, indices[_ranges(indptr[:-1][keep], kept_lengths)]


def _ranges(starts, lengths):
    return _sets.ranges(starts, lengths)


def distance2_coloring(indptr, indices, n_vertices):
    """Colors of the vertices (columns of the pattern given by its rows `indptr`, `indices`) such that no row
    holds two of one color. A row of k entries needs k colors, so an attempt that reaches the longest row's length
    ends the search."""
    indptr, indices = distinct_rows(indptr, indices)
    rows = Adjacency(indptr, indices)
    columns = Adjacency(*transpose(indptr, indices, n_vertices))
    lower_bound = int(np.diff(indptr).max(initial=0))
    return _best(
        [
            lambda: greedy(columns, rows, range(n_vertices)),
            lambda: dsatur(columns, rows),
            lambda: greedy(columns, rows, _largest_first(columns)),
        ],
        lower_bound,
    )


def star(adjacency, order):
    """Greedy star coloring (Gebremedhin, Manne and Pothen's first algorithm): a vertex avoids its neighbours'
    colors, the color of a vertex two steps away through an uncolored neighbour, and the color of a vertex x two
    steps away through a colored w where x has another neighbour of w's color (which would make a two-colored path
    on four vertices)."""
    color = [-1] * adjacency.n
    mark = [-1] * (adjacency.n + 1)
    bounds, flat = adjacency.bounds, adjacency.flat
    for v in order:
        for w in flat[bounds[v] : bounds[v + 1]]:
            cw = color[w]
            if cw >= 0:
                mark[cw] = v
            for x in flat[bounds[w] : bounds[w + 1]]:
                cx = color[x]
                if cx < 0 or x == v:
                    continue
                if cw < 0:
                    mark[cx] = v
                else:
                    for y in flat[bounds[x] : bounds[x + 1]]:
                        if y != w and color[y] == cw:
                            mark[cx] = v
                            break
        c = 0
        while mark[c] == v:
            c += 1
        color[v] = c
    return color


def star_coloring(indptr, indices):
    """A star coloring of the symmetric pattern (its diagonal ignored)."""
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    off = rows != indices
    n = len(indptr) - 1
    graph = _sets.from_pairs(rows[off], indices[off], n, max(n, 1))
    adjacency = Adjacency(graph.indptr, graph.indices)
    # a vertex and its neighbours all differ: the largest degree + 1 colors at least
    lower_bound = int(adjacency.degrees().max(initial=-1)) + 1
    return _best([lambda: star(adjacency, range(n)), lambda: star(adjacency, _largest_first(adjacency))], lower_bound)
