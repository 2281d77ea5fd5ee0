"""The Sparsity record: a Jacobian's (or a symmetric Hessian's) pattern, its colorings, and for the chosen mode
the seeds of the compressed products and where each nonzero is read from them."""

import numpy as np

from . import _coloring, _sets

COUNTS = {"colorings": 0}  # colorings computed in this process (tests count them)


class Sparsity:
    """The sparsity of an (m, n) Jacobian, or of an (n, n) Hessian (`symmetric`): its nonzeros in CSR order
    (`indptr`, `indices`; `rows` and `cols` per nonzero), and how it is computed: `mode` "reverse" (one
    vector-Jacobian product per color of rows), "forward" (one Jacobian-vector product per color of columns) or
    "symmetric" (one Hessian-vector product per color of a star coloring), `colors` (per row, per column, per
    column) and `n_colors`.

    Its structure converts without values: `to_scipy()` (a scipy.sparse CSR of booleans), `to_dense()` (a NumPy
    boolean array)."""

    def __init__(self, shape, indptr, indices, symmetric=False, mode=None):
        self.shape = (int(shape[0]), int(shape[1]))
        self.indptr, self.indices = np.asarray(indptr, np.int64), np.asarray(indices, np.int64)
        self.symmetric = symmetric
        self._colorings = {}
        self._plans = {}
        self.mode = None
        if mode is not None:
            self.choose(mode)

    # ---- structure ---------------------------------------------------------------------------------------------
    @property
    def nnz(self):
        """The number of nonzeros."""
        return len(self.indices)

    @property
    def rows(self):
        """The row of each nonzero (NumPy int64, CSR order)."""
        return np.repeat(np.arange(self.shape[0], dtype=np.int64), np.diff(self.indptr))

    @property
    def cols(self):
        """The column of each nonzero (NumPy int64, CSR order)."""
        return self.indices

    def to_dense(self):
        """The pattern as a NumPy boolean array."""
        dense = np.zeros(self.shape, bool)
        dense[self.rows, self.cols] = True
        return dense

    def to_scipy(self, format="csr"):
        """The pattern as a scipy.sparse matrix of booleans (`format`: "csr", "csc", "coo", ...)."""
        import scipy.sparse

        data = np.ones(self.nnz, bool)
        matrix = scipy.sparse.csr_matrix((data, self.indices, self.indptr), shape=self.shape)
        return matrix.asformat(format)

    def __repr__(self):
        colors = f", mode={self.mode!r}, n_colors={self.n_colors}" if self.mode else ""
        return f"Sparsity(shape={self.shape}, nnz={self.nnz}{colors})"

    # ---- colorings ---------------------------------------------------------------------------------------------
    def coloring(self, mode):
        """The colors of `mode` (per row for "reverse", per column for "forward" and "symmetric")."""
        colors = self._colorings.get(mode)
        if colors is None and mode != "symmetric":  # a pattern equal to its transpose colors rows as columns
            colors = self._colorings.get("forward" if mode == "reverse" else "reverse")
            colors = colors if colors is not None and self._equals_transpose() else None
            if colors is not None:
                self._colorings[mode] = colors
        if colors is None:
            COUNTS["colorings"] += 1
            if mode == "reverse":
                t_indptr, t_indices = self._transpose()
                colors = _coloring.distance2_coloring(t_indptr, t_indices, self.shape[0])
            elif mode == "forward":
                colors = _coloring.distance2_coloring(self.indptr, self.indices, self.shape[1])
            else:
                colors = _coloring.star_coloring(self.indptr, self.indices)
            self._colorings[mode] = colors
        return colors

    def _transpose(self):
        found = self._plans.get("transpose")
        if found is None:
            found = self._plans["transpose"] = _coloring.transpose(self.indptr, self.indices, self.shape[1])
        return found

    def _equals_transpose(self):
        if self.shape[0] != self.shape[1]:
            return False
        t_indptr, t_indices = self._transpose()
        return np.array_equal(t_indptr, self.indptr) and np.array_equal(t_indices, self.indices)

    def best_mode(self, preferred):
        """The mode with the fewest colors (`preferred`, "reverse" or "forward", on a tie); a symmetric pattern
        takes its star coloring unless a distance-2 coloring has fewer colors."""
        found = self._plans.get(("best", preferred))
        if found is not None:
            return found
        if preferred not in ("reverse", "forward"):
            raise ValueError(f"mode must be 'reverse' or 'forward', got {preferred!r}")
        other = "forward" if preferred == "reverse" else "reverse"
        best, fewest = None, None
        for mode in (["symmetric"] if self.symmetric else []) + [preferred, other]:
            bound = self._lower_bound(mode)
            if fewest is not None and (fewest < bound or (fewest == bound and (mode != "forward" or self.symmetric))):
                continue  # cannot do better: not colored at all (a Jacobian's forward mode is, where it may tie)
            count = _count(self.coloring(mode))
            if fewest is None or count < fewest:
                best, fewest = mode, count
        self._plans[("best", preferred)] = best
        return best

    def program_mode(self, preferred):
        """The mode a compiled program computes a Jacobian in: best_mode(preferred), or forward mode where it
        takes as few colors (Jacobian-vector products need no transposed ops: on the stencil and Bratu workloads of
        benchmarks/sparse.py their programs were 8-15% faster, a third of the size)."""
        best = self.best_mode(preferred)
        forward = self._colorings.get("forward")
        if best == "reverse" and forward is not None and _count(forward) == _count(self.coloring(best)):
            return "forward"
        return best

    def _lower_bound(self, mode):
        """Colors that `mode` needs at least: a column's rows all differ in reverse mode, a row's columns in
        forward mode (and in a star coloring, a vertex and its neighbours)."""
        if mode == "reverse":
            return int(np.bincount(self.indices, minlength=1).max(initial=0))
        return int(np.diff(self.indptr).max(initial=0))

    def choose(self, preferred):
        """Set `mode` (and so `colors`, `n_colors`) to best_mode(preferred); returns self."""
        self.mode = self.best_mode(preferred)
        return self

    @property
    def colors(self):
        """The colors of `mode` (NumPy int64: per row in reverse mode, per column otherwise), None before one is
        chosen."""
        return None if self.mode is None else self.coloring(self.mode)

    @property
    def n_colors(self):
        """How many colors `mode` takes: the number of products a Jacobian (Hessian) costs."""
        return None if self.mode is None else _count(self.colors)

    def plan(self, mode):
        """(seeds, source) of `mode`: `seeds` (n_colors, m or n) float64, one row per color marking its rows
        ("reverse") or columns; `source`, per nonzero, its flat position in the compressed products as they come
        out, (n_colors, n) for "reverse" and "symmetric", (n_colors, m) for "forward"."""
        plan = self._plans.get(mode)
        if plan is None:
            plan = self._plans[mode] = self._make_plan(mode)
        return plan

    def blocks(self, out_sizes, in_sizes):
        """Per (output i, input j) block: (positions of its nonzeros among all, their rows and columns within
        the block); cached per split."""
        key = ("blocks", tuple(out_sizes), tuple(in_sizes))
        found = self._plans.get(key)
        if found is None:
            found = self._plans[key] = _split(self.rows, self.cols, out_sizes, in_sizes)
        return found

    def _make_plan(self, mode):
        colors = self.coloring(mode)
        k = _count(colors)
        rows, cols = self.rows, self.cols
        m, n = self.shape
        size = m if mode == "reverse" else n
        seeds = np.zeros((k, size))
        seeds[colors, np.arange(size)] = 1.0
        if mode == "reverse":  # C[c] = sum of the rows of color c: J[r, j] = C[color r, j]
            source = colors[rows] * n + cols
        elif mode == "forward":  # C[c] = J (sum of the columns of color c): J[r, j] = C[color j, r]
            source = colors[cols] * m + rows
        else:
            source = _star_source(rows, cols, colors, n, k)
        return seeds, source


def _split(rows, cols, out_sizes, in_sizes):
    row_start, col_start = np.cumsum([0, *out_sizes]), np.cumsum([0, *in_sizes])
    if len(out_sizes) == 1 and len(in_sizes) == 1:
        return [[(None, rows, cols)]]
    out_of, in_of = np.searchsorted(row_start, rows, "right") - 1, np.searchsorted(col_start, cols, "right") - 1
    blocks = []
    for i in range(len(out_sizes)):
        row = []
        for j in range(len(in_sizes)):
            positions = np.flatnonzero((out_of == i) & (in_of == j))
            row.append((positions, rows[positions] - row_start[i], cols[positions] - col_start[j]))
        blocks.append(row)
    return blocks


def _count(colors):
    return int(colors.max()) + 1 if len(colors) else 0


def _star_source(rows, cols, colors, n, k):
    """Where H[i, j] is read from the products C[c] = H s_c of a star coloring: C[color j, i] when j is the only
    neighbour of i with its color (always so on the diagonal), else C[color i, j]."""
    key = rows * k + colors[cols]
    counts = np.bincount(key, minlength=n * k)
    direct = counts[key] == 1
    return np.where(direct, colors[cols] * n + rows, colors[rows] * n + cols)


def from_sets(output_sets, sizes, width):
    """The Sparsity of outputs of `sizes` elements whose index sets are `output_sets` (None: no input)."""
    indptr, indices = [np.zeros(1, np.int64)], []
    for sets, size in zip(output_sets, sizes):
        if sets is None:
            sets = _sets.Sets(np.zeros(size + 1, np.int64), np.zeros(0, np.int64))
        indptr.append(sets.indptr[1:] + indptr[-1][-1])
        indices.append(sets.indices)
    indices = np.concatenate(indices) if indices else np.zeros(0, np.int64)
    return Sparsity((int(sum(sizes)), width), np.concatenate(indptr), indices)


def from_pairs(i, j, n):
    """The symmetric Sparsity of an (n, n) Hessian whose nonzeros are the pairs (i, j) (both ways round)."""
    sets = _sets.from_pairs(i, j, n, max(n, 1))
    return Sparsity((n, n), sets.indptr, sets.indices, symmetric=True)
