"""Compare: torch.utils.benchmark's table of Measurements, one table per label, a row per (threads, env,
sub_label or stmt), a column per description, medians in one unit, optionally trimmed to their significant figures,
colored and flagged where the spread is large."""

import collections
import enum
import itertools
import math

from . import _common

__all__ = ["Colorize", "Compare"]

BEST = "\033[92m"
GOOD = "\033[34m"
BAD = "\033[2m\033[91m"
VERY_BAD = "\033[31m"
BOLD = "\033[1m"
TERMINATE = "\033[0m"


class Colorize(enum.Enum):
    """How Compare colors its cells: not at all, against the best of each column, or of each row."""

    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


def _leading_digits(value):
    return math.ceil(_common.log10_float32(value))


class _Column:
    """One description's medians: the number format shared by its cells."""

    def __init__(self, grouped_results, time_scale, trim_significant_figures, highlight_warnings):
        self._grouped_results = grouped_results
        flat = [*itertools.chain.from_iterable(grouped_results)]
        self._time_scale = time_scale
        self._trim = trim_significant_figures
        self._highlight = highlight_warnings and any(r.has_warnings for r in flat if r)
        digits = [_leading_digits(r.median / time_scale) if r else None for r in flat]
        unit_digits = max(d for d in digits if d is not None)
        decimals = (
            min(max(m.significant_figures - d, 0) for d, m in zip(digits, flat) if m is not None and d is not None)
            if self._trim
            else 1
        )
        length = unit_digits + decimals + (1 if decimals else 0)
        self._template = f"{{:>{length}.{decimals}f}}{{:>{7 if self._highlight else 0}}}"

    def get_results_for(self, group):
        return self._grouped_results[group]

    def num_to_str(self, value, estimated_sigfigs, spread):
        if value is None:
            return " " * len(self.num_to_str(1, estimated_sigfigs, None))
        if self._trim:
            value = _common.trim_sigfig(value, estimated_sigfigs)
        flag = f" (! {spread * 100:.0f}%)" if self._highlight and spread is not None else ""
        return self._template.format(value, flag)


def _color(segment, value, best):
    if value <= best * 1.01 or value <= best + 100e-9:
        return BEST + BOLD + segment + TERMINATE * 2
    if value <= best * 1.1:
        return GOOD + BOLD + segment + TERMINATE * 2
    if value >= best * 5:
        return VERY_BAD + BOLD + segment + TERMINATE * 2
    if value >= best * 2:
        return BAD + segment + TERMINATE * 2
    return segment


class _Row:
    """One (threads, env, row name)'s Measurements across the columns."""

    def __init__(self, results, row_group, render_env, env_str_len, time_scale, colorize, num_threads=None):
        self._results = results
        self._row_group = row_group
        self._render_env = render_env
        self._env_str_len = env_str_len
        self._time_scale = time_scale
        self._colorize = colorize
        self._columns = ()
        self._num_threads = num_threads

    def register_columns(self, columns):
        self._columns = columns

    def as_column_strings(self):
        first = next(r for r in self._results if r is not None)
        env = (f"({first.env})" if self._render_env else "").ljust(self._env_str_len + 4)
        cells = ["  " + env + first.as_row_name]
        for m, column in zip(self._results, self._columns):
            if m is None:
                cells.append(column.num_to_str(None, 1, None))
            else:
                spread = m.iqr / m.median if m.has_warnings else None
                cells.append(column.num_to_str(m.median / self._time_scale, m.significant_figures, spread))
        return cells

    def row_separator(self, overall_width):
        return [f"{self._num_threads} threads: ".ljust(overall_width, "-")] if self._num_threads is not None else []

    def _best_values(self, count):
        if self._colorize == Colorize.ROWWISE:
            return [min(r.median for r in self._results if r is not None)] * count
        if self._colorize == Colorize.COLUMNWISE:
            medians = [[r.median for r in c.get_results_for(self._row_group) if r is not None] for c in self._columns]
            return [min(m) if m else None for m in medians]
        return [-1] * count

    def finalize_column_strings(self, column_strings, col_widths):
        contents = [column_strings[0].ljust(col_widths[0])]
        best_values = self._best_values(len(column_strings))
        for cell, width, result, best in zip(column_strings[1:], col_widths[1:], self._results, best_values):
            cell = cell.center(width)
            if self._colorize != Colorize.NONE and result is not None and best is not None:
                cell = _color(cell, result.median, best)
            contents.append(cell)
        return contents


class _Table:
    """The Measurements of one label laid out in rows and columns."""

    def __init__(self, results, colorize, trim_significant_figures, highlight_warnings):
        if len({r.label for r in results}) != 1:
            raise AssertionError("All results must share the same label")
        self.results = results
        self._colorize = colorize
        self._trim = trim_significant_figures
        self._highlight = highlight_warnings
        self.label = results[0].label
        self.time_unit, self.time_scale = _common.select_unit(min(r.median for r in results))
        self.row_keys = _common.ordered_unique([self.row_fn(r) for r in results])
        self.row_keys.sort(key=lambda key: key[:2])  # by threads and env; stable, so statements keep their order
        self.column_keys = _common.ordered_unique([self.col_fn(r) for r in results])
        self.rows, self.columns = self._populate()

    @staticmethod
    def row_fn(m):
        return m.num_threads, m.env, m.as_row_name

    @staticmethod
    def col_fn(m):
        return m.description

    def _populate(self):
        grid = [[None] * len(self.column_keys) for _ in self.row_keys]
        row_at = {key: i for i, key in enumerate(self.row_keys)}
        column_at = {key: j for j, key in enumerate(self.column_keys)}
        for r in self.results:
            grid[row_at[self.row_fn(r)]][column_at[self.col_fn(r)]] = r
        envs = {r.env for r in self.results}
        render_env = len(envs) > 1
        env_str_len = max(len(e) for e in envs) if render_env else 0
        rows, groups = [], []
        prior_threads, prior_env = -1, ""
        for (threads, env, _), row in zip(self.row_keys, grid):
            new_group = threads != prior_threads
            if new_group:
                prior_threads, prior_env = threads, ""
                groups.append([])
            rows.append(
                _Row(
                    row,
                    len(groups) - 1,
                    render_env and env != prior_env,
                    env_str_len,
                    self.time_scale,
                    self._colorize,
                    threads if new_group else None,
                )
            )
            groups[-1].append(row)
            prior_env = env
        columns = tuple(
            _Column([tuple(row[j] for row in g) for g in groups], self.time_scale, self._trim, self._highlight)
            for j in range(len(self.column_keys))
        )
        for row in rows:
            row.register_columns(columns)
        return tuple(rows), columns

    def render(self):
        string_rows = [[""] + self.column_keys] + [r.as_column_strings() for r in self.rows]
        width = max(len(r) for r in string_rows)
        for r in string_rows:
            r.extend([""] * (width - len(r)))
        col_widths = [max(len(cell) for cell in column) for column in zip(*string_rows)]
        lines = ["  |  ".join(cell.center(w) for cell, w in zip(string_rows[0], col_widths))]
        overall_width = len(lines[0])
        for cells, row in zip(string_rows[1:], self.rows):
            lines.extend(row.row_separator(overall_width))
            lines.append("  |  ".join(row.finalize_column_strings(cells, col_widths)))
        has_warnings = self._highlight and any(r.has_warnings for r in self.results)
        note = "(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n" if has_warnings else ""
        title = (" " + (self.label or "") + " ").center(overall_width - 2, "-")
        newline = "\n"
        return (
            f"[{title}]\n{newline.join(lines)}\n\n"
            f"Times are in {_common.unit_to_english(self.time_unit)}s ({self.time_unit}).\n{note}"
        )


class Compare:
    """A table of Measurements: Compare(results).print(); trim_significant_figures(), colorize(rowwise) and
    highlight_warnings() change how it prints."""

    def __init__(self, results):
        self._results = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def __str__(self):
        return "\n".join(self._render())

    def extend_results(self, results):
        """Add Measurements to the table."""
        for r in results:
            if not isinstance(r, _common.Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} instead.")
        self._results.extend(results)

    def trim_significant_figures(self):
        """Print each median to the significant figures its spread supports."""
        self._trim_significant_figures = True

    def colorize(self, rowwise=False):
        """Color each cell by how it compares with the best of its row (rowwise) or column."""
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self):
        """Flag the cells whose interquartile range is large against their median."""
        self._highlight_warnings = True

    def print(self):
        """Print the tables."""
        print(str(self))

    def _render(self):
        by_label = collections.defaultdict(list)
        for r in _common.Measurement.merge(self._results):
            by_label[r.label].append(r)
        return [
            _Table(group, self._colorize, self._trim_significant_figures, self._highlight_warnings).render()
            for group in by_label.values()
        ]
