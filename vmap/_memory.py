"""chunk_size="auto": the largest chunk of rows whose compiled program fits the memory budget, as XLA's own memory
analysis of the compiled program reports it (its arguments, results and temporaries on one device), not a guess
from shapes."""

import os

import jax
import numpy as np

AUTO = "auto"
_setting = [None]  # set_memory_budget's bytes, or None: VMAP_MEMORY_BUDGET's, or the default fraction
DEFAULT_FRACTION = 0.5  # of one device's memory (the host's RAM on the CPU backend)


def _check_budget(nbytes, where):
    if nbytes is None:
        return None
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
        raise ValueError(f"{where}: the memory budget must be a positive number of bytes or None, but got {nbytes!r}")
    return nbytes


def set_memory_budget(nbytes):
    """The bytes a program run with chunk_size="auto" may use on one device; None restores the default
    (VMAP_MEMORY_BUDGET, else half of a device's memory: the host's RAM on the CPU backend)."""
    _setting[0] = _check_budget(nbytes, "set_memory_budget(nbytes)")


def memory_budget():
    """The bytes a program run with chunk_size="auto" may use on one device (see set_memory_budget)."""
    if _setting[0] is not None:
        return _setting[0]
    from_env = os.environ.get("VMAP_MEMORY_BUDGET", "")
    if from_env:
        try:
            return _check_budget(int(from_env), "VMAP_MEMORY_BUDGET")
        except ValueError:
            raise ValueError(f"VMAP_MEMORY_BUDGET must be a positive number of bytes, but got {from_env!r}") from None
    return int(DEFAULT_FRACTION * _device_memory())


def _device_memory():
    device = jax.local_devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and stats.get("bytes_limit"):
        return stats["bytes_limit"]
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def lowerable(values):
    """`values` as a program is compiled for them: concrete arrays as they are (so that the program's first call on
    them finds it compiled), anything else with an array's shape and dtype (traced or deferred) as its abstract
    shape."""
    return [
        v
        if isinstance(v, (np.ndarray, jax.Array)) and not isinstance(v, jax.core.Tracer)
        else jax.ShapeDtypeStruct(v.shape, v.dtype)
        for v in values
    ]


def program_bytes(compiled):
    """What a compiled program needs on one device at its peak: its arguments, results and temporaries (less the
    results written into donated arguments)."""
    stats = compiled.memory_analysis()
    return (
        stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes - stats.alias_size_in_bytes
    )


_chosen = {}  # (budget, a structure's key) -> the chunk size chosen for it


def auto_chunk(key, compile_for, rows):
    """chunk_size="auto" for the structure `key` (hashable, naming what it is a key of): largest_chunk, chosen once
    per structure and budget (at most 1024 kept)."""
    key = (memory_budget(), key)
    chunk = _chosen.get(key, AUTO)
    if chunk == AUTO:
        if len(_chosen) > 1024:
            _chosen.clear()
        chunk = _chosen[key] = largest_chunk(compile_for, rows)
    return chunk


def largest_chunk(compile_for, rows):
    """The chunk_size for "auto" over `rows` rows (on one device): None (all rows at once) when that program fits
    the budget, else the largest power of two whose program fits (1 if none does). `compile_for(chunk_size)` gives
    the compiled program. Memory grows about linearly with the chunk, so two compiles place the first guess, and
    each guess that does not fit halves it."""
    budget = memory_budget()
    whole = program_bytes(compile_for(None))
    if whole <= budget or rows <= 1:
        return None
    one = program_bytes(compile_for(1))
    per_row = max((whole - one) / max(rows - 1, 1), 1.0)
    chunk = 1 << max(int(max((budget - one) / per_row + 1, 1)).bit_length() - 1, 0)
    chunk = min(chunk, 1 << max(rows - 1, 1).bit_length() - 1)  # a chunk smaller than the rows
    while chunk > 1 and program_bytes(compile_for(chunk)) > budget:
        chunk //= 2
    return chunk
