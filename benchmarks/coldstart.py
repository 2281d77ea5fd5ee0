"""Cold start: the first calls of a workload in a fresh process, batched_grad against torch and jax.jit.

Every workload runs in fresh processes (this script in its worker mode), one per peer and library state. A worker
imports its library and warms it on an unrelated small graph (so import and start-up are not counted), then times
the workload's first call, calls 2-5 and the median of the warm calls after them, with batched_grad's compile count
and the process's peak RSS. batched_grad runs twice, in two consecutive processes sharing one fresh persistent
compilation cache directory (BATCHED_GRAD_CACHE_DIR): the first fills it, the second reads it. jax.jit runs in a
fresh process without a cache (its first call is the XLA floor), and with JAX's persistent cache in a process after
one that filled it. Workloads (float32, every call builds its graph anew as a user would):
  1. Jacobian (128, 256) of a 256-256x3-128 tanh MLP: grad(is_grads_batched=True) / jax.jit(jax.jacrev);
  2. 64 batched HVPs of sum(tanh(W x)^2), n=512: grad(create_graph=True), then grad(is_grads_batched=True) /
     jax.jit(vmap(jvp of grad));
  3. Jacobian (64, 192) through a Function with a NumPy backward: batched_grad's per-row fallback, torch's per-row
     loop (its is_grads_batched cannot batch the Function); no JAX peer;
  4. autograd.functional.hessian(f, x, vectorize=True) of sum(tanh(W x)^2), n=256 / jax.jit(jax.hessian);
  5. a 2000-op chain (1000 times y = y * 1.0001 + 0.0), then grad of its sum / jax.jit(jax.grad);
  6. per-sample gradients of an MLP 784-128-10 (ReLU, cross-entropy), B=64: func.vmap(func.grad) /
     jax.jit(jax.vmap(jax.grad)).
batched_grad and torch run the same code (only the library differs); every result is checked against torch's.
The tree under test is whatever `import batched_grad` finds (PYTHONPATH), so two branches can be compared.

    python benchmarks/coldstart.py            # 6 workloads, 20 warm calls, JAX's cache too
    python benchmarks/coldstart.py --quick    # workloads 1, 2, 4, 6; 5 warm calls; no JAX cache processes
    python benchmarks/coldstart.py --runs 3   # the whole thing three times, medians reported
    python benchmarks/coldstart.py --save run1.json; ... ; python benchmarks/coldstart.py --merge run1.json,...
"""

import importlib.metadata
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from _cold_workloads import WORKLOADS
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "Workloads 1, 2, 4 and 6 only, 5 warm calls, no JAX cache processes.")
flags.DEFINE_integer("runs", 1, "Run everything this many times (each with fresh caches); medians reported.")
flags.DEFINE_integer("warm_calls", None, "Calls after call 5 whose median is the warm time (20; 5 with --quick).")
flags.DEFINE_list("workloads", None, "Workload numbers to run (default all; 1,2,4,6 with --quick).")
flags.DEFINE_bool("jax_cache", None, "Also time jax.jit with JAX's persistent cache (default on; off with --quick).")
flags.DEFINE_integer("torch_threads", 1, "torch.set_num_threads (1 by default, as in benchmarks/overhead.py).")
flags.DEFINE_integer("timeout", 900, "Seconds a worker process may take before it is stopped.")
flags.DEFINE_string("save", None, "Also write the runs' figures to this JSON file (for --merge).")
flags.DEFINE_list("merge", None, "Report the medians over the runs saved in these JSON files (--save), run nothing.")
flags.DEFINE_enum(
    "worker", None, ["bg", "torch", "jax"], "Internal: run one workload with this library, print its record and exit."
)
flags.DEFINE_integer("workload", None, "Internal: the workload number of --worker.")
flags.DEFINE_string("result", None, "Internal: where --worker saves its result (.npy).")

CALLS_COUNTED = 5  # calls 1-5 are timed one by one; the warm calls follow
WARM_UP_REPEATS = 5  # of the unrelated graph: its kernels compiled, and its structures' per-op time counted
RECORD = "RECORD "


QUICK_WORKLOADS = [1, 2, 4, 6]
CHAIN = 5  # the long chain: targets of its own (no call above 1 s, peak RSS under 1 GB)


# ---------------------------------------------------------------- worker mode: one library, one workload


def import_library(name):
    """(the library, its warm-up, a function waiting for a result, its compile count)."""
    if name == "jax":
        import jax
        import jax.numpy as jnp

        if FLAGS.jax_cache:  # JAX's default skips programs compiled in under a second: most of these
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        return (jax, jnp), lambda: warm_up_jax(jax, jnp), jax.block_until_ready, lambda: 0
    if name == "torch":
        import torch

        torch.set_num_threads(FLAGS.torch_threads)
        return torch, lambda: warm_up(torch), lambda out: out, lambda: 0
    import warnings

    import batched_grad as bg
    import batched_grad.autograd.functional  # noqa: F401 - bg.autograd.functional
    import batched_grad.func  # noqa: F401 - bg.func
    import batched_grad.nn.functional  # noqa: F401 - bg.nn.functional
    import vmap

    warnings.simplefilter("ignore", vmap.FallbackWarning)  # workload 3 falls back by design

    def wait(out):
        for t in out.values() if isinstance(out, dict) else [out]:
            t.jax().block_until_ready()
        return out

    def warm_up_bg():
        warm_up(bg)
        bg.wait_for_compiles()  # the warm-up's own background compiles are start-up, not the workload's

    return bg, warm_up_bg, wait, bg.compile_count


def warm_up(lib):
    """An unrelated small graph through grad, is_grads_batched and func.vmap(func.grad)."""
    for _ in range(WARM_UP_REPEATS):
        x = lib.tensor(np.linspace(-1, 1, 7, dtype=np.float32), requires_grad=True)
        y = x.sin() * 2 + x.exp()
        lib.autograd.grad(y.sum(), x, retain_graph=True)
        lib.autograd.grad(y[:3], x, lib.eye(3), is_grads_batched=True)
        lib.func.vmap(lib.func.grad(lambda v: (v.cos() * v).sum()))(lib.ones(2, 5))


def warm_up_jax(jax, jnp):
    f = lambda v: (jnp.cos(v) * v).sum()  # noqa: E731
    x = jnp.linspace(-1, 1, 7)
    for transform in (jax.grad(f), jax.jacrev(jnp.sin), jax.vmap(jax.grad(f))):
        jitted = jax.jit(transform)
        for _ in range(2):
            jax.block_until_ready(jitted(x))


def xla_compile_counter():
    """A function returning how many XLA compiles this process has run so far, loads from JAX's persistent cache
    excluded (JAX reports a load as a compile event and a cache-hit event)."""
    import jax

    compiles, hits = [0], [0]

    def on_duration(name, duration, **kwargs):
        compiles[0] += name.endswith("backend_compile_duration")

    def on_event(name, **kwargs):
        hits[0] += name == "/jax/compilation_cache/cache_hits"

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    return lambda: compiles[0] - hits[0]


def to_numpy(out):
    """A result as one NumPy array (a dict of per-sample gradients: flattened per sample, joined by key)."""
    if isinstance(out, dict):
        return np.concatenate([to_numpy(out[k]).reshape(len(out[k]), -1) for k in sorted(out)], axis=1)
    return np.asarray(out.detach().numpy() if hasattr(out, "detach") else out)


def run_worker():
    """Time one workload in this fresh process; print its record as one line."""
    label, make_data, bg_code, torch_code, jax_code = WORKLOADS[FLAGS.workload]
    lib, warm, wait, compile_count = import_library(FLAGS.worker)
    warm()
    data = make_data(np.random.default_rng(FLAGS.workload))
    code = {"bg": bg_code, "torch": torch_code, "jax": jax_code}[FLAGS.worker]
    fn = code(*lib, data) if FLAGS.worker == "jax" else code(lib, data)
    xla_compiles = xla_compile_counter() if FLAGS.worker != "torch" else lambda: 0
    seconds, compiles, xla0 = [], [], xla_compiles()
    for _ in range(CALLS_COUNTED + FLAGS.warm_calls):
        c0, t0 = compile_count(), time.perf_counter()
        out = wait(fn())
        seconds.append(time.perf_counter() - t0)
        compiles.append(compile_count() - c0)
    np.save(FLAGS.result, to_numpy(out))
    print(
        RECORD
        + json.dumps(
            {
                "seconds": seconds,
                "compiles": compiles,
                "xla_compiles": xla_compiles() - xla0,
                "rss_mb": peak_rss_kib() / 1024,
            }
        )
    )


def peak_rss_kib():
    """This process's peak RSS: VmHWM where Linux gives it (ru_maxrss carries over the driver's peak across exec)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


# ---------------------------------------------------------------- the driver: fresh processes per peer


def spawn(lib, number, result, env, jax_cache=False):
    """Run one worker; its record, or a string saying why there is none."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        f"--worker={lib}",
        f"--workload={number}",
        f"--result={result}",
        f"--warm_calls={FLAGS.warm_calls}",
        f"--torch_threads={FLAGS.torch_threads}",
        f"--jax_cache={jax_cache}",
    ]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=FLAGS.timeout)
    except subprocess.TimeoutExpired:
        return f"timeout ({FLAGS.timeout} s)"
    lines = [line for line in done.stdout.splitlines() if line.startswith(RECORD)]
    if done.returncode or not lines:
        return f"failed (exit {done.returncode}): " + " | ".join(done.stderr.strip().splitlines()[-3:])
    return {**json.loads(lines[-1][len(RECORD) :]), "result": result}


def workload_processes(number, folder):
    """{peer: record or reason} of one workload's processes, in the order they ran."""
    base = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "BATCHED_GRAD_CACHE_DIR")}
    bg_env = {**base, "BATCHED_GRAD_CACHE_DIR": os.path.join(folder, "bg-cache")}
    jax_env = {**base, "JAX_COMPILATION_CACHE_DIR": os.path.join(folder, "jax-cache")}
    plan = [("torch", "torch", base, False), ("jax", "jax", base, False)]
    if FLAGS.jax_cache:
        plan += [("jax fill", "jax", jax_env, True), ("jax cached", "jax", jax_env, True)]
    plan += [("bg 1", "bg", bg_env, False), ("bg 2", "bg", bg_env, False)]
    records = {}
    for peer, lib, env, jax_cache in plan:
        if lib == "jax" and WORKLOADS[number][4] is None:
            continue
        records[peer] = spawn(lib, number, os.path.join(folder, f"{peer.replace(' ', '-')}.npy"), env, jax_cache)
    return records


def summary(record):
    """The figures of one process: first call, calls 2-5, slowest call, warm median (seconds), compiles, RSS."""
    s, c = record["seconds"], record["compiles"]
    return {
        "first": s[0],
        "next4": sum(s[1:CALLS_COUNTED]),
        "slowest": max(s),
        "warm": statistics.median(s[CALLS_COUNTED:] or s[-1:]),
        "compiles": sum(c),
        "xla": record["xla_compiles"],
        "rss": record["rss_mb"],
    }


def agreement(records):
    """'max |diff| ...' of every result against torch's, or what disagreed or failed."""
    from _timing import check

    results = {peer: np.load(r["result"]) for peer, r in records.items() if isinstance(r, dict)}
    if "torch" not in results:
        return "no torch result to check against"
    try:
        return f"results agree (max |diff| {check(results, 'torch'):.1e} vs torch)"
    except AssertionError as e:
        return f"RESULTS DISAGREE: {e}"


def run_once(numbers, run):
    """{workload: {peer: summary}} of one run, each workload with fresh caches; prints progress and failures."""
    out = {}
    for number in numbers:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="coldstart-") as folder:
            records = workload_processes(number, folder)
            checked = agreement(records)
        print(f"  run {run}, workload {number}: {time.perf_counter() - start:.0f} s; {checked}", flush=True)
        for peer, r in records.items():
            if not isinstance(r, dict):
                print(f"    {peer}: {r}")
        out[number] = {peer: summary(r) for peer, r in records.items() if isinstance(r, dict)}
    return out


# ---------------------------------------------------------------- the table


def median_of(runs, number, peer, key):
    values = [r[number][peer][key] for r in runs if peer in r[number]]
    return statistics.median(values) if values else None


def ms(seconds):
    if seconds is None:
        return "-"
    v = seconds * 1e3
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def pair(*cells):
    return " / ".join(cells)


def times(x, spec="{:.1f}x"):
    return "-" if x is None else spec.format(x)


def ratio(a, b):
    return None if a is None or not b else a / b


def row(runs, number):
    def get(peer, key):
        return median_of(runs, number, peer, key)

    def count(peer, key):
        v = get(peer, key)
        return "-" if v is None else f"{v:.0f}"

    torch_first, jax_first = get("torch", "first"), get("jax", "first")
    floor = None if torch_first is None else max(10 * torch_first, jax_first or 0)
    return [
        number,
        WORKLOADS[number][0],
        ms(torch_first),
        ms(jax_first),
        ms(get("jax cached", "first")),
        ms(get("bg 1", "first")),
        ms(get("bg 2", "first")),
        pair(ms(get("torch", "next4")), ms(get("bg 1", "next4"))),
        pair(ms(get("torch", "slowest")), ms(get("bg 1", "slowest"))),
        pair(ms(get("torch", "warm")), ms(get("bg 1", "warm")), ms(get("jax", "warm"))),
        f"{pair(count('bg 1', 'compiles'), count('bg 2', 'compiles'))} "
        f"({pair(count('bg 1', 'xla'), count('bg 2', 'xla'))})",
        pair(count("bg 1", "rss"), count("bg 2", "rss")),
        count("torch", "rss"),
        times(ratio(get("bg 1", "first"), floor), "{:.2f}"),
        times(ratio(get("bg 2", "first"), 3 * (torch_first or 0)), "{:.2f}"),
        times(ratio(get("bg 1", "next4"), 3 * (get("torch", "next4") or 0)), "{:.2f}"),
        times(ratio(get("bg 1", "first"), 5 * (torch_first or 0)), "{:.2f}"),
        times(ratio(get("bg 2", "first"), 2 * (torch_first or 0)), "{:.2f}"),
    ]


HEADER = [
    "#",
    "workload",
    "torch 1st",
    "jax 1st",
    "jax 1st cached",
    "bg 1st p1",
    "bg 1st p2",
    "calls 2-5 torch / bg",
    "slowest call torch / bg",
    "warm torch / bg / jax",
    "bg compiles p1 / p2 (XLA)",
    "bg RSS MB p1 / p2",
    "torch RSS MB",
    "p1 / max(10x torch, jax)",
    "p2 / 3x torch",
    "2-5 / 3x torch",
    "p1 / 5x torch",
    "p2 / 2x torch",
]


def report(runs, numbers):
    from _timing import table

    table(
        f"Milliseconds, medians of {len(runs)} run(s). 1st: the first call in a fresh process, after import and a "
        "warm-up on an unrelated graph; p1 / p2: batched_grad's first / second process on one fresh persistent "
        "cache; jax 1st: jax.jit, no cache (the floor); jax 1st cached: jax.jit after a process that filled JAX's "
        f"cache; warm: median of {FLAGS.warm_calls} calls after call 5 (bg's from p1); slowest: of all "
        f"{CALLS_COUNTED + FLAGS.warm_calls} calls; compiles: bg.compile_count() "
        f"over calls 1 to {CALLS_COUNTED + FLAGS.warm_calls} of the workload, then (XLA) the compiles XLA ran, "
        "loads from the persistent cache excluded; RSS: the process's peak. Last five columns: the "
        "targets of issue 19 (p1, p2, calls 2-5), then of issue 31 (p1, p2), met at <= 1.",
        HEADER,
        [row(runs, n) for n in numbers],
        left=2,
    )
    if CHAIN in numbers:
        slowest, rss = median_of(runs, CHAIN, "bg 1", "slowest"), median_of(runs, CHAIN, "bg 1", "rss")
        if slowest is not None:
            print(
                f"\nWorkload {CHAIN}'s targets, bg's first process: slowest call {ms(slowest)} ms (under 1000: "
                f"{'met' if slowest < 1 else 'MISSED'}), peak RSS {rss:.0f} MB (under 1024: "
                f"{'met' if rss < 1024 else 'MISSED'})"
            )


def main(argv):
    del argv
    if FLAGS.warm_calls is None:
        FLAGS.warm_calls = 5 if FLAGS.quick else 20
    if FLAGS.jax_cache is None:
        FLAGS.jax_cache = not FLAGS.quick
    if FLAGS.worker:
        return run_worker()
    unknown = [n for n in FLAGS.workloads or [] if n not in {str(k) for k in WORKLOADS}]
    if unknown:
        raise app.UsageError(f"--workloads: expected numbers among {list(WORKLOADS)}, got {unknown}")
    numbers = (
        [int(n) for n in FLAGS.workloads] if FLAGS.workloads else QUICK_WORKLOADS if FLAGS.quick else list(WORKLOADS)
    )
    if FLAGS.merge:  # runs made apart (interleaved with another tree's, say), reported together
        runs = []
        for path in FLAGS.merge:
            with open(path) as f:
                runs += [{int(n): r for n, r in run.items()} for run in json.load(f)]
        return report(runs, [n for n in numbers if all(n in r for r in runs)])
    from _timing import environment

    import batched_grad as bg  # for the header; it also sets the XLA flags that every worker then inherits

    print(
        f"batched_grad {bg.__version__} ({os.path.dirname(os.path.dirname(bg.__file__))}), jax "
        f"{importlib.metadata.version('jax')}, torch {importlib.metadata.version('torch')} (torch threads "
        f"{FLAGS.torch_threads}), {os.cpu_count()} CPUs, {FLAGS.runs} run(s), load average "
        f"{os.getloadavg()[0]:.1f}, {environment()}, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}",
        flush=True,
    )
    start = time.perf_counter()
    runs = [run_once(numbers, run + 1) for run in range(FLAGS.runs)]
    if FLAGS.save:
        with open(FLAGS.save, "w") as f:
            json.dump(runs, f)
    report(runs, numbers)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    app.run(main)
