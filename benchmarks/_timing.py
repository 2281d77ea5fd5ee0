"""Timing and table helpers shared by the benchmark scripts."""

import os
import resource
import statistics
import time

import jax
import numpy as np

import batched_grad as bg


def ready(out):
    """Wait until `out` (a Tensor, JAX array, torch tensor, or a sequence or dict of them) is computed."""
    if isinstance(out, dict):
        ready(list(out.values()))
    elif isinstance(out, (tuple, list)):
        for o in out:
            ready(o)
    elif isinstance(out, bg.Tensor):
        jax.block_until_ready(out.jax())  # a NumPy array where the op ran on the host
    elif isinstance(out, jax.Array):
        out.block_until_ready()


def minor_faults():
    """This process's minor page faults so far, every thread's: a result written into freshly mapped memory costs one
    per 4 KiB page (about 1 us each here), so a call that returns 25 MB can spend milliseconds in them."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


WARMUP_S = 0.1  # untimed calls before each timed block (docs/design.md: what the previous peer leaves behind)


def compare(peers, number, repeats, block_each=False, faults=None, warmup=0.0, warmups=None):
    """{name: fn} -> {name: [seconds per call, one per repeat]}; each repeat runs `number` calls, peers interleaved.

    With a `warmup` (seconds, WARMUP_S in the steady-state tables), each peer runs untimed that long (at least once)
    before its timed calls, or `warmups[name]` does for a peer whose calls are used up (a pre-built graph each): a
    peer after another one's long single-threaded calls starts in a slower state of the machine, which its first
    calls leave. Waits for the last call's result of each repeat, or for every call's with `block_each`. With a dict
    `faults`, also appends each repeat's minor page faults per call to faults[name]."""
    times = {name: [] for name in peers}
    for _ in range(repeats):
        for name, fn in peers.items():
            if warmup:
                warm, end = (warmups or {}).get(name, fn), time.perf_counter() + warmup
                ready(warm())
                while time.perf_counter() < end:
                    ready(warm())
            faults_before, start = minor_faults(), time.perf_counter()
            for _ in range(number):
                out = fn()
                if block_each:
                    ready(out)
            ready(out)
            times[name].append((time.perf_counter() - start) / number)
            if faults is not None:
                faults.setdefault(name, []).append((minor_faults() - faults_before) / number)
    return times


def median_faults(faults, name):
    """The median page faults per call of a peer, as a table cell."""
    return f"{statistics.median(faults[name]):.0f}" if faults.get(name) else "n/a"


def environment():
    """The allocator setting, for the header: it moves the time of results megabytes large (docs/design.md)."""
    return f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '(unset)')}"


def stat(times):
    """(median, min) of `times`, None if empty."""
    return None if not times else (statistics.median(times), min(times))


def fmt(s, scale=1e3):
    """'median (min)' of a stat, scaled (1e3: milliseconds)."""
    return "n/a" if s is None else f"{s[0] * scale:.1f} ({s[1] * scale:.1f})"


def ratio(a, b, spec="{:.1f}x"):
    """Ratio of the medians of two stats."""
    return "n/a" if a is None or b is None else spec.format(a[0] / b[0])


def table(title, header, rows, left=1):
    """Print rows under a title, the first `left` columns left-aligned, the rest right-aligned."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    print(f"\n{title}")
    for r in [header] + rows:
        print("  ".join(str(c).ljust(w) if i < left else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))))


RTOL, ATOL = 1e-4, 1e-5  # float32 results of different summation orders agree to this


def check(results, reference_name, rtol=RTOL):
    """Every peer's result must match the reference (np.allclose); returns the largest absolute difference."""
    ref = results[reference_name]
    worst = 0.0
    for name, r in results.items():
        if r.shape != ref.shape or not np.allclose(r, ref, rtol=rtol, atol=ATOL):
            diff = np.abs(r - ref).max() if r.shape == ref.shape else f"shape {r.shape} vs {ref.shape}"
            raise AssertionError(f"{name} disagrees with {reference_name}: max |diff| {diff}")
        worst = max(worst, float(np.abs(r - ref).max()))
    return worst
