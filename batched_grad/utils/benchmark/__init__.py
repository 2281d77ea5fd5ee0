"""torch.utils.benchmark for batched_grad: Timer (timeit, blocked_autorange, adaptive_autorange) of Python
statements, waiting for the values they compute; Measurement with torch's statistics and printout; Compare's
tables; the Fuzzer of random benchmark inputs."""

from ._common import Measurement, TaskSpec, ordered_unique, select_unit, set_torch_threads, trim_sigfig, unit_to_english
from ._compare import Colorize, Compare
from ._fuzzer import FuzzedParameter, FuzzedTensor, Fuzzer, ParameterAlias
from ._timer import Language, Timer, timer

__all__ = [
    "Colorize",
    "Compare",
    "FuzzedParameter",
    "FuzzedTensor",
    "Fuzzer",
    "Language",
    "Measurement",
    "ParameterAlias",
    "TaskSpec",
    "Timer",
    "ordered_unique",
    "select_unit",
    "set_torch_threads",
    "timer",
    "trim_sigfig",
    "unit_to_english",
]
