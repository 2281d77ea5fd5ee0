"""The eager code around the batched calls: small ops, in-place updates, new sizes, hand-written loops, first calls
and whole programs, batched_grad (bg) against torch. Rows 1-6 run both in this process, repeats interleaved (bg,
torch, bg, torch, ...); rows 7-8 time fresh processes. Every ratio is bg / torch (> 1: bg slower).

  1. Small ops on 64 float32 elements, no grad: x * y, x.tanh(), A @ x (A 64x64), x.sum(), x.dot(y). us per call.
  2. In-place on 1000 elements: p.add_(g), p.add_(g, alpha=-0.01), p.mul_(0.999), p.zero_(), p.copy_(g). us per call.
  3. A new size every call, then a reduction: x[:k].sum(), x[:k].mean(), x[:k].exp().sum() of a 4096-vector, and
     v[v > c].pow(2).mean() with c picking k entries; k never repeats in the process (each a size bg compiles for),
     then the same calls again, cycling over the sizes already seen. us per call, and bg's compiles per call.
  4. Newton-CG, n=256: 10 Hessian-vector products grad(g, x, v, retain_graph=True) after g = grad(f, x,
     create_graph=True), f(x) = sum(log(1 + exp(W x))) + 0.005 |x|^2, CG's updates in place (x.add_(p, alpha=a),
     r.sub_(Hp, alpha=a), p.mul_(beta).add_(r)). ms per solve.
  5. A hand-written SGD step of an MLP 32-64-1 (tanh), batch 32: loss.backward(), then under no_grad
     p -= lr * p.grad; p.grad.zero_(). ms per step.
  6. A 2000-op chain y * 1.0001 + 0.0 on 1000 elements, forward + grad, warm. ms per call.
  7. First calls, each in a fresh process, timed from just before the call to its result (import excluded):
     autograd.functional.hessian of sum(tanh(W x)^2), W 16x32; 10 HVPs of it; autograd.functional.jacobian of
     tanh(W x). bg twice on one fresh cache (BATCHED_GRAD_CACHE_DIR): p1 fills it, p2 reads it.
  8. Whole programs: each ported program of tests/ported run once in a fresh process (`python -c`), timed as a
     whole; bg with a fresh cache (cold) and then on the filled one (warm).

    python benchmarks/eager.py [--quick] [--repeats N] [--runs N] [--rows 1,2,...]
"""

import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np
import torch
from _cold_workloads import chain, chain_data
from _eager_workers import FIRST_CALLS, RECORD, ported_programs
from _timing import RTOL, WARMUP_S, check, compare, environment, ratio, stat, table
from absl import app, flags

import batched_grad as bg

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "Fewer repeats and runs (3-4 minutes on 2 cores).")
flags.DEFINE_integer("repeats", None, "Timing repeats of rows 1-6 (default 11, 3 with --quick).")
flags.DEFINE_integer("runs", None, "Fresh-process runs of rows 7-8 (default 3, 1 with --quick).")
flags.DEFINE_list("rows", None, "Row numbers to run (default all).")
flags.DEFINE_integer("torch_threads", 1, "torch.set_num_threads (1: these sizes gain nothing from threads).")
flags.DEFINE_integer("timeout", 600, "Seconds a fresh process may take before it is stopped.")

PEERS = ("bg", "torch")
LIBS = {"bg": bg, "torch": torch}
SETTLE_CALLS = 5  # untimed calls of each peer before a steady-state row: bg's structures are fused after 2 calls
QUIET_CALLS, MAX_SETTLE_CALLS = 3, 50
SIZES = 4096  # the vector of row 3: its prefixes give 4095 sizes
RAISED = re.compile(r"^[\w.]*(Error|Exception)\b")  # the line of a traceback naming what was raised
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))


def numpy_of(t):
    return t.detach().numpy() if isinstance(t, (bg.Tensor, torch.Tensor)) else np.asarray(t)


def measure(peers, number, repeats, warmups=None, warmup=WARMUP_S):
    """{peer: stat} of `compare`, and bg's compiles per timed call."""
    before = bg.compile_count()
    times = compare(peers, number, repeats, warmup=warmup, warmups=warmups)
    return {name: stat(t) for name, t in times.items()}, (bg.compile_count() - before) / (number * repeats)


def settle(peers):
    """Untimed calls until bg compiles nothing for QUIET_CALLS calls in a row (and its background compiles are
    done): the steady state. Newton-CG's structures compile through its first 8-9 solves."""
    for fn in peers.values():
        for _ in range(SETTLE_CALLS):
            fn()
    quiet = 0
    for _ in range(MAX_SETTLE_CALLS):
        before = bg.compile_count()
        numpy_of(peers["bg"]())
        bg.wait_for_compiles()
        quiet = quiet + 1 if bg.compile_count() == before else 0
        if quiet == QUIET_CALLS:
            break


def figure(value):
    """Three significant figures or more: 12800, 65.2, 4.61."""
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def cell(s, scale):
    """'median (min)' of a stat, scaled."""
    return "n/a" if s is None else f"{figure(s[0] * scale)} ({figure(s[1] * scale)})"


def row(number, what, unit, stats, compiles):
    scale = {"us": 1e6, "ms": 1e3}[unit]
    cells = [cell(stats["bg"], scale), cell(stats["torch"], scale), ratio(stats["bg"], stats["torch"], "{:.2f}")]
    return [number, what, unit, *cells, f"{compiles:.2f}"]


# ---------------------------------------------------------------- 1-2: small ops, in place


def small_ops(rng):
    data = {k: rng.standard_normal(s).astype(np.float32) for k, s in (("x", 64), ("y", 64), ("A", (64, 64)))}
    ops = {
        "x * y": lambda t: t["x"] * t["y"],
        "x.tanh()": lambda t: t["x"].tanh(),
        "A @ x (A 64x64)": lambda t: t["A"] @ t["x"],
        "x.sum()": lambda t: t["x"].sum(),
        "x.dot(y)": lambda t: t["x"].dot(t["y"]),
    }
    tensors = {name: {k: lib.tensor(v) for k, v in data.items()} for name, lib in LIBS.items()}
    for label, op in ops.items():
        yield f"{label}, 64 elements, no grad", {name: (lambda op=op, t=tensors[name]: op(t)) for name in PEERS}, None


def in_place(rng):
    p0, g0 = rng.standard_normal(1000).astype(np.float32), (0.01 * rng.standard_normal(1000)).astype(np.float32)
    ops = {
        "p.add_(g)": lambda p, g: p.add_(g),
        "p.add_(g, alpha=-0.01)": lambda p, g: p.add_(g, alpha=-0.01),
        "p.mul_(0.999)": lambda p, g: p.mul_(0.999),
        "p.zero_()": lambda p, g: p.zero_(),
        "p.copy_(g)": lambda p, g: p.copy_(g),
    }
    for label, op in ops.items():
        state = {name: (lib.tensor(p0), lib.tensor(g0)) for name, lib in LIBS.items()}
        peers = {name: (lambda op=op, s=state[name]: op(*s)) for name in PEERS}
        # mul_'s warm-up starts again from p0: 0.999 ** n would reach float32's denormals, which slow every library
        warmups = {
            name: (lambda s=state[name], lib=LIBS[name]: s[0].copy_(lib.tensor(p0)).mul_(0.999)) for name in PEERS
        }
        yield f"{label}, 1000 elements", peers, warmups if "mul_" in label else None


def steady_rows(first, make, rng, number, repeats):
    rows = []
    for i, (what, peers, warmups) in enumerate(make(rng)):
        check({name: numpy_of(fn()) for name, fn in peers.items()}, "torch")
        settle(peers)
        rows.append(row(first if i == 0 else "", what, "us", *measure(peers, number, repeats, warmups)))
    return rows


# ---------------------------------------------------------------- 3: a new size every call


def each_size(op, tensors, sizes):
    """A call of `op` on the next size of the iterator `sizes`."""
    return lambda: op(tensors, next(sizes))


def new_sizes(rng, number, repeats):
    """Two rows per op: each call a size never seen in this process, then the same sizes again."""
    x, v = rng.standard_normal(SIZES).astype(np.float32), rng.standard_normal(SIZES).astype(np.float32)
    descending = np.sort(v)[::-1]
    thresholds = {k: float((descending[k - 1] + descending[k]) / 2) for k in range(1, SIZES)}  # v > c: k entries
    ops = {
        "x[:k].sum()": lambda t, k: t["x"][:k].sum(),
        "x[:k].mean()": lambda t, k: t["x"][:k].mean(),
        "x[:k].exp().sum()": lambda t, k: t["x"][:k].exp().sum(),
        "v[v > c].pow(2).mean()": lambda t, k: t["v"][t["v"] > thresholds[k]].pow(2).mean(),
    }
    tensors = {name: {"x": lib.tensor(x), "v": lib.tensor(v)} for name, lib in LIBS.items()}
    if len(ops) * (1 + number * repeats) >= SIZES:
        raise app.UsageError(f"--repeats: row 3 has sizes for at most {(SIZES // len(ops) - 1) // number} repeats")
    fresh = iter(rng.permutation(np.arange(1, SIZES)).tolist())  # no size serves two ops: each op compiles its own
    rows = []
    for label, op in ops.items():
        check_k = next(fresh)
        check({name: numpy_of(op(tensors[name], check_k)) for name in PEERS}, "torch")
        sizes = list(itertools.islice(fresh, number * repeats))
        warmups = {name: (lambda op=op, t=tensors[name]: op(t, check_k)) for name in PEERS}  # a size already seen
        for what, order in (("new k every call", iter), ("the same k again, cycled", itertools.cycle)):
            peers = {name: each_size(op, tensors[name], order(sizes)) for name in PEERS}
            stats, compiles = measure(peers, number, repeats, warmups)
            rows.append(row(3 if not rows else "", f"{label}, {what}", "us", stats, compiles))
    return rows


# ---------------------------------------------------------------- 4-6: loops around the batched calls


def newton_cg(rng, n=256, iterations=10):
    W = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    x0, b0 = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)

    def solver(lib):
        w, b = lib.tensor(W), lib.tensor(b0)

        def solve():
            x = lib.tensor(x0, requires_grad=True)
            f = lib.log1p(lib.exp(w @ x)).sum() + 0.005 * (x * x).sum()
            (g,) = lib.autograd.grad(f, x, create_graph=True)
            d, r = lib.zeros(n), b.clone()
            p, rr = r.clone(), r.dot(r)
            for _ in range(iterations):
                (hp,) = lib.autograd.grad(g, x, p, retain_graph=True)
                a = rr / p.dot(hp)
                d.add_(p, alpha=a)
                r.sub_(hp, alpha=a)
                rr, rr_old = r.dot(r), rr
                p.mul_(rr / rr_old).add_(r)
            return d

        return solve

    return {name: solver(lib) for name, lib in LIBS.items()}


def sgd_mlp(rng, batch=32, lr=0.01):
    state = {
        "0.weight": rng.uniform(-(32**-0.5), 32**-0.5, (64, 32)),
        "0.bias": rng.uniform(-(32**-0.5), 32**-0.5, 64),
        "2.weight": rng.uniform(-(64**-0.5), 64**-0.5, (1, 64)),
        "2.bias": rng.uniform(-(64**-0.5), 64**-0.5, 1),
    }
    X, Y = rng.standard_normal((batch, 32)).astype(np.float32), rng.standard_normal((batch, 1)).astype(np.float32)

    def stepper(lib):
        model = lib.nn.Sequential(lib.nn.Linear(32, 64), lib.nn.Tanh(), lib.nn.Linear(64, 1))
        model.load_state_dict({k: lib.tensor(v.astype(np.float32)) for k, v in state.items()})
        x, y, params = lib.tensor(X), lib.tensor(Y), list(model.parameters())

        def step():
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            with lib.no_grad():
                for p in params:
                    p -= lr * p.grad
                    p.grad.zero_()
            return params[0]

        return step

    return {name: stepper(lib) for name, lib in LIBS.items()}


def chain_grad(rng):
    x0 = chain_data(rng)["x"]

    def call(lib):
        def run():
            x = lib.tensor(x0, requires_grad=True)
            return lib.autograd.grad(chain(x), x)[0]

        return run

    return {name: call(lib) for name, lib in LIBS.items()}


LOOPS = {  # row: (what, peers, calls per timed block, rtol of the check)
    # CG's ten float32 iterations amplify rounding: torch's d and bg's each differ from float64's by about 4e-5
    # (relative 1e-4 on an entry of 0.28), so row 4 checks to 1e-3
    4: ("Newton-CG, 10 HVPs, n=256, in-place updates", newton_cg, 5, 1e-3),
    5: ("SGD step, MLP 32-64-1, batch 32, backward()", sgd_mlp, 20, RTOL),
    6: ("2000-op chain on 1000 elements, forward + grad", chain_grad, 3, RTOL),
}


def loop_row(number, rng, repeats):
    what, make, calls, rtol = LOOPS[number]
    peers = make(rng)
    check({name: numpy_of(fn()) for name, fn in peers.items()}, "torch", rtol)  # row 5: one step from equal weights
    settle(peers)
    return row(number, what, "ms", *measure(peers, calls, repeats))


# ---------------------------------------------------------------- 7-8: fresh processes


def child_env(cache):
    """This environment with the cache `cache` ("" turns bg's off) and this process's batched_grad importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "BATCHED_GRAD_CACHE_DIR")}
    source = os.path.dirname(os.path.dirname(os.path.abspath(bg.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([source, *filter(None, [env.get("PYTHONPATH")])])
    return {**env, "BATCHED_GRAD_CACHE_DIR": cache}


def spawn(call, env):
    """Run `python -c` calling `call` of _eager_workers; (its record, the process's wall seconds) or a reason."""
    code = f"import sys; sys.path.insert(0, {BENCH_DIR!r}); import _eager_workers as w; w.{call}"
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=FLAGS.timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"timeout ({FLAGS.timeout} s)"
    seconds = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith(RECORD)]
    if done.returncode or not lines:
        raised = [line for line in done.stderr.splitlines() if RAISED.match(line)]
        return f"failed (exit {done.returncode}): " + (raised[-1] if raised else done.stderr.strip()[-300:])
    return {**json.loads(lines[-1][len(RECORD) :]), "wall_s": seconds}


def processes(folder, call_of):
    """torch, then bg on a fresh cache in `folder` twice (cold, warm): {peer: record or reason}."""
    cache = os.path.join(folder, "bg-cache")
    plan = (("torch", "torch", ""), ("bg cold", "bg", cache), ("bg warm", "bg", cache))
    return {peer: spawn(call_of(library, peer), child_env(env_cache)) for peer, library, env_cache in plan}


def report_failures(label, records):
    for peer, r in records.items():
        if not isinstance(r, dict):
            print(f"  {label}, {peer}: {r}", flush=True)


def median_of(runs, peer, key):
    values = [r[peer][key] for r in runs if isinstance(r.get(peer), dict)]
    return statistics.median(values) if values else None


def over(a, b):
    return "n/a" if a is None or not b else f"{a / b:.2f}"


def seconds(s, scale=1e3, spec="{:.1f}"):
    return "n/a" if s is None else spec.format(s * scale)


def first_call_rows(runs):
    results = {w: [] for w in FIRST_CALLS}
    for run in range(runs):
        for workload in FIRST_CALLS:
            with tempfile.TemporaryDirectory(prefix="eager-first-") as folder:
                records = processes(
                    folder, lambda lib, peer: f"first_calls({lib!r}, {workload!r}, {os.path.join(folder, peer)!r})"
                )
                report_failures(f"7. {workload}, run {run + 1}", records)
                arrays = {
                    p: np.load(os.path.join(folder, p) + ".npy") for p, r in records.items() if isinstance(r, dict)
                }
                if "torch" in arrays:
                    check(arrays, "torch")
            results[workload].append(records)
    rows = []
    for i, (workload, rs) in enumerate(results.items()):
        t, cold, warm = (median_of(rs, p, "seconds") for p in ("torch", "bg cold", "bg warm"))
        compiles = "/".join(seconds(median_of(rs, p, "compiles"), 1, "{:.0f}") for p in ("bg cold", "bg warm"))
        rows.append([7 if i == 0 else "", workload, seconds(t), seconds(cold), seconds(warm), over(cold, t),
                     over(warm, t), compiles])  # fmt: skip
    return rows


def program_rows(runs):
    names = ported_programs()
    results = {name: [] for name in names}
    for run in range(runs):
        for name in names:
            with tempfile.TemporaryDirectory(prefix="eager-ported-") as folder:
                records = processes(folder, lambda lib, peer, name=name: f"ported({name!r}, {lib!r})")
            report_failures(f"8. {name}, run {run + 1}", records)
            results[name].append(records)
    rows, ratios = [], {"bg cold": [], "bg warm": []}
    for i, (name, rs) in enumerate(results.items()):
        wall = {p: median_of(rs, p, "wall_s") for p in ("torch", "bg cold", "bg warm")}
        run_s = {p: median_of(rs, p, "run_s") for p in wall}
        for p in ratios:
            if wall[p] is not None and wall["torch"]:
                ratios[p].append(wall[p] / wall["torch"])
        cells = [seconds(wall[p], 1, "{:.2f}") for p in wall] + [over(wall["bg cold"], wall["torch"])]
        cells += [over(wall["bg warm"], wall["torch"]), " / ".join(seconds(run_s[p], 1, "{:.2f}") for p in run_s)]
        rows.append([8 if i == 0 else "", name.removeprefix("test_"), *cells])
    medians = {p: statistics.median(v) if v else None for p, v in ratios.items()}
    return rows, medians


# ---------------------------------------------------------------- main


def main(argv):
    del argv
    torch.set_num_threads(FLAGS.torch_threads)
    # rows 1-6 time the steady state: each structure compiled from its third sighting on, so that settling reaches
    # it (by default a structure is compiled once its per-op runs pay for the compile); rows 7-8's fresh
    # processes keep the default
    bg.set_fuse_after(2)
    quick = FLAGS.quick
    repeats, runs = FLAGS.repeats or (3 if quick else 11), FLAGS.runs or (1 if quick else 3)
    wanted = {int(r) for r in FLAGS.rows} if FLAGS.rows else set(range(1, 9))
    print(
        f"batched_grad {bg.__version__}, jax {jax.__version__}, torch {torch.__version__} (threads "
        f"{FLAGS.torch_threads}), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, repeats {repeats}, "
        f"runs {runs}, {environment()}",
        flush=True,
    )
    # rows 1-6 compile into an empty cache of their own: row 3's new sizes are compiles on every run of the script
    cache = tempfile.TemporaryDirectory(prefix="eager-cache-")
    bg.set_compilation_cache(cache.name)
    start, rng, rows = time.perf_counter(), np.random.default_rng(0), []
    if 1 in wanted:
        rows += steady_rows(1, small_ops, rng, 1000, repeats)
    if 2 in wanted:
        rows += steady_rows(2, in_place, rng, 1000, repeats)
    if 3 in wanted:
        rows += new_sizes(rng, 20, repeats)
    rows += [loop_row(n, rng, repeats) for n in LOOPS if n in wanted]
    if rows:
        table(
            f"Rows 1-6: per call, median (min) of {repeats} interleaved repeats; every result agreed with torch's "
            "before timing; bg compiles: XLA kernels and programs bg compiled per timed call (0 in the steady state)",
            ["#", "what", "unit", "bg", "torch", "bg / torch", "bg compiles / call"],
            rows,
            2,
        )
    if 7 in wanted:
        table(
            f"7. First calls in fresh processes, ms, medians of {runs} run(s): from just before the call to its "
            "result, import excluded; p1: bg on an empty cache, p2: a second process on the cache p1 filled; "
            "results agreed with torch's",
            ["#", "workload", "torch", "bg p1", "bg p2", "p1 / torch", "p2 / torch", "bg compiles p1/p2"],
            first_call_rows(runs),
            2,
        )
    if 8 in wanted:
        if not ported_programs():
            print("\n8. skipped: no tests/ported next to this benchmarks folder (a source checkout has it)")
        else:
            program, medians = program_rows(runs)
            table(
                f"8. Ported programs, whole `python -c` processes, seconds, medians of {runs} run(s); cold: bg on an "
                "empty cache, warm: a second process on it; run: the program alone, in the process (the rest is "
                "Python's start, importing the program (its harness imports both libraries), and exit)",
                ["#", "program", "torch", "bg cold", "bg warm", "cold / torch", "warm / torch", "run torch/cold/warm"],
                program,
                2,
            )
            print(
                f"  median ratio over {len(program)} programs: cold / torch {over(medians['bg cold'], 1)}, "
                f"warm / torch {over(medians['bg warm'], 1)}"
            )
    bg.set_compilation_cache(None)
    cache.cleanup()
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    app.run(main)
