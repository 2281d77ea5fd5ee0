"""What a benchmark measured: TaskSpec (what was timed, and its labels), Measurement (the times, their statistics and
torch's printout of them), and the unit and rounding helpers of torch.utils.benchmark."""

import collections
import contextlib
import dataclasses
import math
import textwrap

import numpy as np

from ..._settings import get_num_threads, set_num_threads

__all__ = [
    "TaskSpec",
    "Measurement",
    "select_unit",
    "unit_to_english",
    "trim_sigfig",
    "ordered_unique",
    "set_torch_threads",
]

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # seconds
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


@dataclasses.dataclass(init=True, repr=False, eq=True, frozen=True)
class TaskSpec:
    """The statement timed, its setup, and the labels a Compare table groups it by."""

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self):
        """The label (and sub_label), else the one-line statement, else the statement indented below "stmt:"."""
        suffix = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + suffix
        if "\n" not in self.stmt:
            return self.stmt + suffix
        return f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self):
        """The setup as printed: nothing for "pass", else after "setup:" (indented below it when several lines)."""
        if self.setup == "pass" or not self.setup:
            return ""
        return f"setup:\n{textwrap.indent(self.setup, '  ')}" if "\n" in self.setup else f"setup: {self.setup}"

    def summarize(self):
        """The title, description and setup, one section a line (a section of several lines gets a blank after)."""
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{s}\n" if "\n" in s else s for s in sections if s)


_TASKSPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


def _quantile(sorted_times, q):
    """torch.quantile's linear interpolation between the two nearest order statistics."""
    return float(np.quantile(np.asarray(sorted_times, dtype=np.float64), q))


@dataclasses.dataclass(init=True, repr=False)
class Measurement:
    """Times of a statement: raw_times holds the seconds of each block of `number_per_run` runs; the statistics
    are per run. The task_spec's fields read as the Measurement's own (m.label, m.stmt, ...)."""

    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict | None = None  # for the user

    def __post_init__(self):
        self._sorted_times = ()
        self._warnings = ()
        self._median = self._mean = self._p25 = self._p75 = -1.0

    def __getattr__(self, name):
        if name in _TASKSPEC_FIELDS:
            return getattr(self.task_spec, name)
        return super().__getattribute__(name)

    @property
    def times(self):
        """Seconds per run of each block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self):
        """The median of the per-run times."""
        self._lazy_init()
        return self._median

    @property
    def mean(self):
        """The mean of the per-run times."""
        self._lazy_init()
        return self._mean

    @property
    def iqr(self):
        """The interquartile range of the per-run times."""
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self):
        """How many digits of the median the spread of the middle half of the times supports (1 to 4): the
        median over a 90% confidence interval of the mean of that half, in decades."""
        self._lazy_init()
        n = len(self._sorted_times)
        middle = np.asarray(self._sorted_times[n // 4 : math.ceil(3 * n / 4)], dtype=np.float32)
        interval = max(1.645 * float(middle.std()) / math.sqrt(len(middle)), _MIN_CONFIDENCE_INTERVAL)
        figures = math.floor(log10_float32(self._median / interval))
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self):
        """Whether the interquartile range is 10% of the median or more."""
        self._lazy_init()
        return bool(self._warnings)

    def _lazy_init(self):
        if not self.raw_times or self._sorted_times:
            return
        self._sorted_times = tuple(sorted(self.times))
        self._median = _quantile(self._sorted_times, 0.5)
        self._mean = float(np.mean(np.asarray(self._sorted_times, dtype=np.float64)))
        self._p25 = _quantile(self._sorted_times, 0.25)
        self._p75 = _quantile(self._sorted_times, 0.75)
        if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
            self._add_warning("This suggests significant environmental influence.")
        elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
            self._add_warning("This could indicate system fluctuation.")

    def _add_warning(self, message):
        spread = self.iqr / self.median * 100
        self._warnings += (
            f"  WARNING: Interquartile range is {spread:.1f}% of the median measurement.\n           {message}",
        )

    def meets_confidence(self, threshold=_IQR_WARN_THRESHOLD):
        """Whether the interquartile range is under `threshold` of the median."""
        return self.iqr / self.median < threshold

    @property
    def title(self):
        """The task's title."""
        return self.task_spec.title

    @property
    def as_row_name(self):
        """The name of this Measurement's row in a Compare table: sub_label, else the statement."""
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self):
        """torch's printout: the object, the task summary, median (and IQR from four times on), and the counts."""
        self._lazy_init()
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        lines = [object.__repr__(self), self.task_spec.summarize()]
        lines.append(f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}")
        if n >= 4:
            lines.append(
                f"  IQR:    {self.iqr / scale:.2f} {unit} ({self._p25 / scale:.2f} to {self._p75 / scale:.2f})"
            )
        runs = "per measurement," if n > 1 else ","
        threads = f"{self.num_threads} thread{'s' if self.num_threads > 1 else ''}"
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs {runs} {threads}")
        lines.append("\n".join(self._warnings))
        return "\n".join("\n".join(lines).strip().splitlines())

    @staticmethod
    def merge(measurements):
        """One Measurement per TaskSpec, with the per-run times of all that share it (number_per_run 1, no
        metadata)."""
        groups = collections.defaultdict(list)
        for m in measurements:
            groups[m.task_spec].append(m)
        return [
            Measurement(number_per_run=1, raw_times=[t for m in group for t in m.times], task_spec=spec, metadata=None)
            for spec, group in groups.items()
        ]


def log10_float32(x):
    """log10 of x as torch computes it on a float32 tensor: x rounded to float32, its log10 rounded to float32
    (the unit and digit choices below depend on that rounding at exact powers of ten)."""
    return float(np.float32(math.log10(float(np.float32(x)))))


def select_unit(t):
    """(unit, seconds per unit) to print `t` seconds in: ns, us, ms or s."""
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(log10_float32(t) // 3), "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[unit]


def unit_to_english(u):
    """The unit's English name: "us" -> "microsecond"."""
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x, n):
    """x rounded to `n` significant figures."""
    if n != int(n):
        raise AssertionError("Number of significant figures must be an integer")
    magnitude = math.ceil(log10_float32(abs(x)))
    scale = 10 ** (magnitude - n)
    return float(np.round(np.float32(x / scale)) * np.float32(scale))


def ordered_unique(elements):
    """The distinct elements in the order they first appear."""
    return list(dict.fromkeys(elements))


@contextlib.contextmanager
def set_torch_threads(n):
    """Run the block with `n` intra-op threads, restoring the previous count after."""
    prior = get_num_threads()
    try:
        set_num_threads(n)
        yield
    finally:
        set_num_threads(prior)
