"""Sparse Jacobians and Hessians: batched_grad's sparsity="auto" against asdex (jax.jit) and dense Jacobians
(batched_grad's vectorized one, torch.func's), float64.

Workloads, each at two sizes (the larger ones with --quick off):
  stencil     J of (x[1:] - x[:-1])**2, n = 10,000 and 100,000;
  bratu       J of the 2-D Bratu residual (5-point Laplacian + 0.1 exp(u), zero boundary), 64x64 and 256x256;
  rosenbrock  H of the extended Rosenbrock function, n = 4096 and 65,536;
  mlp         J of a 16-32-8 tanh MLP with respect to its input rows (block diagonal), 256 and 4096 rows.
Peers: "bg sparse" (`jacobian(f, x, sparsity="auto")` / `hessian(...)`, eager), "bg sparse compiled" (the same call
inside bg.compile), "asdex jit" (`jax.jit(asdex.jacobian_from_coloring(f, asdex.jacobian_coloring(f, x)))`),
"bg dense" (`jacobian(f, x, vectorize=True)`) and "torch.func dense" (`torch.func.jacrev` / `hessian`); the dense
peers only where the dense matrix fits in 2 GB.

Each (workload, size, peer) runs in a fresh process, so its first call includes every trace and compile, and its
peak memory (the largest resident set, over what the process held before its first call) is its own. Columns:
colors; detection + coloring (asdex: jacobian_coloring; bg: jacobian_sparsity on emptied pattern caches, after the
first call); the first call (for bg, detection and coloring included); the warm call (median and min of the
repeats); the peak memory; the largest difference from bg sparse's values. Then the targets, each met or missed.

    python benchmarks/sparse.py            # every size, 5 repeats: about 5-10 minutes on a loaded 2-core machine
    python benchmarks/sparse.py --quick    # the small sizes, 3 repeats, dense peers on the stencil only: 2-4 min
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np
from _timing import table
from absl import app, flags

from batched_grad._lazy import materialize

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "The small size of each workload only, 3 repeats.")
flags.DEFINE_integer("repeats", None, "Timed repeats of the warm call per peer (default 5, 3 with --quick).")
flags.DEFINE_string("run", None, "Internal: measure one 'workload:size:peer' in this process, print JSON.")
flags.DEFINE_string("out", None, "Internal: where the measuring process saves its result (.npz).")

SIZES = {"stencil": (10_000, 100_000), "bratu": (64, 256), "rosenbrock": (4096, 65_536), "mlp": (256, 4096)}
PEERS = ("bg sparse", "bg sparse compiled", "asdex jit", "bg dense", "torch.func dense")
DENSE_LIMIT = 2 * 2**30  # bytes of a dense matrix the dense peers may form
HESSIAN = {"rosenbrock"}


# ---------------------------------------------------------------- the workloads, written once against a module m
def stencil(m, x):
    return (x[1:] - x[:-1]) ** 2


def bratu(m, u, k):
    g = m.pad(u.reshape(k, k), 1)
    lap = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] - 4 * g[1:-1, 1:-1]
    return (lap + 0.1 * m.exp(g[1:-1, 1:-1])).reshape(-1)


def rosenbrock(m, x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def mlp(m, x, w1, w2):
    return m.tanh(x @ w1) @ w2


class _Torchish:
    """The few functions the workloads call, for batched_grad or torch."""

    def __init__(self, lib):
        self.exp, self.tanh = lib.exp, lib.tanh
        self.pad = lambda a, w: lib.nn.functional.pad(a, (w, w, w, w))


class _Jax:
    def __init__(self):
        import jax.numpy as jnp

        self.exp, self.tanh = jnp.exp, jnp.tanh
        self.pad = lambda a, w: jnp.pad(a, w)


def problem(workload, size, lib_name):
    """(f, x, shape (m, n)) of a workload for 'bg', 'torch' or 'jax'; f takes the one input."""
    rng = np.random.default_rng(0)
    if lib_name == "jax":
        import jax.numpy as jnp

        m, array = _Jax(), jnp.asarray
    else:
        lib = __import__("batched_grad" if lib_name == "bg" else "torch")
        m, array = _Torchish(lib), lambda a: lib.tensor(a, dtype=lib.float64)
    if workload == "stencil":
        return (lambda x: stencil(m, x)), array(rng.uniform(-1, 1, size)), (size - 1, size)
    if workload == "bratu":
        return (lambda u: bratu(m, u, size)), array(rng.uniform(0, 1, size * size)), (size * size, size * size)
    if workload == "rosenbrock":
        return (lambda x: rosenbrock(m, x)), array(rng.uniform(-1, 1, size)), (size, size)
    w1, w2 = array(rng.standard_normal((16, 32)) / 4), array(rng.standard_normal((32, 8)) / 6)
    return (lambda x: mlp(m, x, w1, w2)), array(rng.standard_normal((size, 16))), (8 * size, 16 * size)


# ---------------------------------------------------------------- one measurement, in its own process
def _status_mb(field):
    """VmRSS (resident now) or VmHWM (the largest resident set of this process image) in MB; ru_maxrss would
    carry the parent's peak over the exec."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _timed(fn, repeats):
    """(first call seconds, seconds of each timed call, the last result): after the first call, untimed calls for
    at least 20 calls and 1 s (the per-op tier, the fused program's compile, then a transient of some 50 calls
    that run several times slower, as the process settles; 3 calls for a peer whose calls take 0.1 s or more),
    then `repeats` blocks of calls of about 0.1 s each, every call timed on its own."""
    start = time.perf_counter()
    out = fn()
    first = time.perf_counter() - start
    calls, end = 0, time.perf_counter() + 1.0
    while (calls < 20 or time.perf_counter() < end) and (calls < 3 or time.perf_counter() - start < 0.1):
        start = time.perf_counter()
        out = fn()
        calls += 1
    number = max(1, min(50, int(0.1 / max(time.perf_counter() - start, 1e-6))))
    warm = []
    for _ in range(repeats * number):
        start = time.perf_counter()
        out = fn()
        warm.append(time.perf_counter() - start)
    return first, warm, out


def _computed(tensor):
    """`tensor` once its value is computed (as asdex's peer waits for its result, without copying it)."""
    value = materialize(tensor._v)
    if isinstance(value, jax.Array):
        value.block_until_ready()
    return tensor


def _bg(workload, size, peer, repeats):
    import batched_grad as bg
    from batched_grad._sparsity import _api, _recorded
    from batched_grad.autograd import functional

    f, x, _ = problem(workload, size, "bg")
    hessian = workload in HESSIAN
    bg.set_background_compile(False)  # the fused programs compile during the untimed calls, not the timed ones
    if peer == "bg dense":
        call = functional.hessian if hessian else functional.jacobian
        fn = lambda: call(f, x, vectorize=True).numpy()
        first, warm, out = _timed(fn, repeats)
        return {"first": first, "warm": warm}, {"dense": out}
    call = functional.hessian if hessian else functional.jacobian
    if peer == "bg sparse compiled":
        step = bg.compile(lambda x: call(f, x, sparsity="auto").values)
        fn = lambda: _computed(step(x))
    else:
        fn = lambda: _computed(call(f, x, sparsity="auto").values)
    first, warm, values = _timed(fn, repeats)
    values = values.numpy()
    _api._detected.clear()
    _recorded.node_jaxpr.cache_clear()
    start = time.perf_counter()
    pattern = (functional.hessian_sparsity if hessian else functional.jacobian_sparsity)(f, x)
    prep = time.perf_counter() - start
    result = {"first": first, "warm": warm, "prep": prep, "colors": pattern.n_colors, "mode": pattern.mode}
    return result, {"rows": pattern.rows, "cols": pattern.cols, "values": values}


def _asdex(workload, size, repeats):
    import asdex
    import jax

    jax.config.update("jax_enable_x64", True)
    f, x, _ = problem(workload, size, "jax")
    hessian = workload in HESSIAN
    start = time.perf_counter()
    coloring = (asdex.hessian_coloring if hessian else asdex.jacobian_coloring)(f, x)
    prep = time.perf_counter() - start
    compute = jax.jit((asdex.hessian_from_coloring if hessian else asdex.jacobian_from_coloring)(f, coloring))
    first, warm, out = _timed(lambda: compute(x).block_until_ready(), repeats)
    # BCOO indices over output dims then input dims: flattened to the (m, n) matrix
    indices, split = np.asarray(out.indices), out.ndim - x.ndim
    rows = np.ravel_multi_index(tuple(indices[:, :split].T), out.shape[:split]) if split else np.zeros(len(indices))
    cols = np.ravel_multi_index(tuple(indices[:, split:].T), out.shape[split:])
    result = {"first": first, "warm": warm, "prep": prep, "colors": int(coloring.num_colors), "mode": coloring.mode}
    return result, {"rows": rows, "cols": cols, "values": np.asarray(out.data)}


def _torch(workload, size, repeats):
    import torch

    torch.set_num_threads(1)
    f, x, _ = problem(workload, size, "torch")
    transform = torch.func.hessian if workload in HESSIAN else torch.func.jacrev
    first, warm, out = _timed(lambda: transform(f)(x).numpy(), min(repeats, 2))
    return {"first": first, "warm": warm}, {"dense": out}


def measure(spec, out_path):
    workload, size, peer = spec.split(":")
    size, repeats = int(size), FLAGS.repeats or 3
    baseline = _status_mb("VmRSS")
    if peer.startswith("bg"):
        result, arrays = _bg(workload, size, peer, repeats)
    elif peer == "asdex jit":
        result, arrays = _asdex(workload, size, repeats)
    else:
        result, arrays = _torch(workload, size, repeats)
    result["peak_mb"] = _status_mb("VmHWM") - baseline
    np.savez(out_path, **arrays)
    print(json.dumps(result))


# ---------------------------------------------------------------- the driver
def _matrix(arrays, shape):
    import scipy.sparse

    if "dense" in arrays:
        return scipy.sparse.csr_matrix(arrays["dense"].reshape(shape))
    return scipy.sparse.csr_matrix((arrays["values"], (arrays["rows"], arrays["cols"])), shape=shape)


def run_peer(workload, size, peer, repeats, folder):
    out = os.path.join(folder, f"{workload}-{size}-{peer.replace(' ', '_')}.npz")
    command = [sys.executable, __file__, f"--run={workload}:{size}:{peer}", f"--out={out}", f"--repeats={repeats}"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
        return {"error": tail[0][:100]}, None
    return json.loads(done.stdout.strip().splitlines()[-1]), dict(np.load(out))


def _ms(seconds):
    return "n/a" if seconds is None else f"{seconds * 1e3:.2f}" if seconds < 0.1 else f"{seconds * 1e3:.0f}"


def workload_table(workload, size, repeats, folder):
    shape = shape_of(workload, size)
    results, matrices = {}, {}
    for peer in PEERS:
        dense = peer.endswith("dense")
        if dense and shape[0] * shape[1] * 8 > DENSE_LIMIT:
            results[peer] = {"error": f"dense {shape[0]}x{shape[1]} too large"}
            continue
        if dense and FLAGS.quick and workload != "stencil":
            results[peer] = {"error": "skipped by --quick"}
            continue
        results[peer], arrays = run_peer(workload, size, peer, repeats, folder)
        if arrays is not None:
            matrices[peer] = _matrix(arrays, shape)
    reference = matrices.get("bg sparse")
    rows = []
    for peer, r in results.items():
        if "error" in r:
            rows.append([peer] + ["n/a"] * 6 + [r["error"]])
            continue
        diff = "n/a" if reference is None or peer not in matrices else f"{abs(matrices[peer] - reference).max():.1e}"
        warm = f"{_ms(statistics.median(r['warm']))} ({_ms(min(r['warm']))})"
        rows.append(
            [peer, r.get("colors", "-"), _ms(r.get("prep")), _ms(r["first"]), warm, f"{r['peak_mb']:.0f}", diff, ""]
        )
    label = f"{workload} {size}" + (f"x{size}" if workload == "bratu" else "")
    title = f"{label}: {'H' if workload in HESSIAN else 'J'} {shape[0]}x{shape[1]}"
    if reference is not None:
        title += f", {reference.nnz} nonzeros"
    header = ["peer", "colors", "detect+color ms", "first ms", "warm ms", "peak MB", "max |diff|", "note"]
    table(title, header, rows)
    return {"label": label, "results": results, "size": size, "workload": workload}


def shape_of(workload, size):
    """(m, n) of the workload's Jacobian (Hessian)."""
    shapes = {"stencil": (size - 1, size), "bratu": (size * size,) * 2, "rosenbrock": (size, size)}
    return shapes.get(workload, (8 * size, 16 * size))


def targets(tables):
    """The issue's targets on each workload, met or missed."""
    lines = []
    for t in tables:
        r = t["results"]
        ours, compiled, asdex = r.get("bg sparse", {}), r.get("bg sparse compiled", {}), r.get("asdex jit", {})
        if "warm" not in ours or "warm" not in asdex:
            continue
        med = lambda x: statistics.median(x["warm"])
        checks = [
            ("colors <= asdex's", ours["colors"] <= asdex["colors"], f"{ours['colors']} vs {asdex['colors']}"),
            ("warm (bg.compile) <= 1.0x asdex", med(compiled) <= med(asdex), f"{med(compiled) / med(asdex):.2f}x"),
            ("warm (eager) <= 1.0x asdex", med(ours) <= med(asdex), f"{med(ours) / med(asdex):.2f}x"),
            (
                "first call <= asdex detect+color + first",
                ours["first"] <= asdex["prep"] + asdex["first"],
                f"{_ms(ours['first'])} vs {_ms(asdex['prep'] + asdex['first'])} ms",
            ),
        ]
        torch_dense = r.get("torch.func dense", {})
        if t["workload"] == "stencil" and t["size"] == 10_000 and "warm" in torch_dense:
            speedup = med(torch_dense) / med(ours)
            checks.append(("eager >= 100x faster than torch.func dense", speedup >= 100, f"{speedup:.0f}x"))
        for name, ok, value in checks:
            lines.append([t["label"], name, value, "met" if ok else "MISSED"])
    table("Targets", ["workload", "target", "value", ""], lines, left=2)


def main(argv):
    del argv
    if FLAGS.run:
        measure(FLAGS.run, FLAGS.out)
        return
    repeats = FLAGS.repeats or (3 if FLAGS.quick else 5)
    import jax
    import torch

    import batched_grad as bg

    print(
        f"batched_grad {bg.__version__}, jax {jax.__version__}, torch {torch.__version__}, {os.cpu_count()} CPUs, "
        f"repeats {repeats}, load average {os.getloadavg()[0]:.1f}; times in ms, each peer in its own process"
    )
    start = time.perf_counter()
    tables = []
    with tempfile.TemporaryDirectory() as folder:
        for workload, sizes in SIZES.items():
            for size in sizes[:1] if FLAGS.quick else sizes:
                tables.append(workload_table(workload, size, repeats, folder))
    targets(tables)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    app.run(main)
