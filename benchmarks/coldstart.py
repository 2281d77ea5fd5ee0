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

from absl import app, flags
import numpy as np

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "Workloads 1, 2, 4 and 6 only, 5 warm calls, no JAX cache processes.")
flags.DEFINE_integer("runs", 1, "Run everything this many times (each with fresh caches); medians reported.")
flags.DEFINE_integer("warm_calls", None, "Calls after call 5 whose median is the warm time (20; 5 with --quick).")
flags.DEFINE_list("workloads", None, "Workload numbers to run (default all; 1,2,4,6 with --quick).")
flags.DEFINE_bool("jax_cache", None, "Also time jax.jit with JAX's persistent cache (default on; off with --quick).")
flags.DEFINE_integer("torch_threads", 1, "torch.set_num_threads (1 by default, as in benchmarks/overhead.py).")
flags.DEFINE_integer("timeout", 900, "Seconds a worker process may take before it is stopped.")
flags.DEFINE_enum("worker", None, ["bg", "torch", "jax"], "Internal: run one workload with this library, print its "
                  "record and exit.")
flags.DEFINE_integer("workload", None, "Internal: the workload number of --worker.")
flags.DEFINE_string("result", None, "Internal: where --worker saves its result (.npy).")

CALLS_COUNTED = 5  # calls 1-5 are timed one by one; the warm calls follow
WARM_UP_REPEATS = 5  # of the unrelated graph: past FUSE_AFTER, so the fused tier's machinery has started too
RECORD = "RECORD "
CHAIN_STEPS = 1000  # two ops each


# ---------------------------------------------------------------- the workloads: data, bg/torch code, JAX code

def mlp_data(rng):
    sizes = [256, 256, 256, 256, 128]
    return {"x": rng.standard_normal(256).astype(np.float32),
            "ws": [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32) for a, b in zip(sizes, sizes[1:])],
            "bs": [(0.1 * rng.standard_normal(b)).astype(np.float32) for b in sizes[1:]]}


def mlp(x, ws, bs, tanh):
    """tanh after each hidden layer, linear output."""
    for i, (w, b) in enumerate(zip(ws, bs)):
        x = x @ w + b
        x = tanh(x) if i < len(ws) - 1 else x
    return x


def mlp_jacobian(lib, d):
    ws, bs, eye = [lib.tensor(w) for w in d["ws"]], [lib.tensor(b) for b in d["bs"]], lib.eye(128)

    def call():
        x = lib.tensor(d["x"], requires_grad=True)
        return lib.autograd.grad(mlp(x, ws, bs, lib.tanh), x, eye, is_grads_batched=True)[0]
    return call


def jax_mlp_jacobian(jax, jnp, d):
    jacobian = jax.jit(jax.jacrev(lambda x, ws, bs: mlp(x, ws, bs, jnp.tanh)))  # weights are arguments
    args = jax.tree_util.tree_map(jnp.asarray, (d["x"], d["ws"], d["bs"]))
    return lambda: jacobian(*args)


def energy_data(n, rows=0):
    def make(rng):
        d = {"w": (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32),
             "x": rng.standard_normal(n).astype(np.float32)}
        return {**d, "v": rng.standard_normal((rows, n)).astype(np.float32)} if rows else d
    return make


def tanh_energy(x, w, tanh):
    return (tanh(w @ x) ** 2).sum()


def batched_hvps(lib, d):
    w, v = lib.tensor(d["w"]), lib.tensor(d["v"])

    def call():
        x = lib.tensor(d["x"], requires_grad=True)
        (g,) = lib.autograd.grad(tanh_energy(x, w, lib.tanh), x, create_graph=True)
        return lib.autograd.grad(g, x, v, is_grads_batched=True)[0]
    return call


def jax_batched_hvps(jax, jnp, d):
    grad = jax.grad(lambda x, w: tanh_energy(x, w, jnp.tanh))
    hvps = jax.jit(lambda x, w, v: jax.vmap(lambda t: jax.jvp(lambda y: grad(y, w), (x,), (t,))[1])(v))
    x, w, v = (jnp.asarray(d[k]) for k in "xwv")
    return lambda: hvps(x, w, v)


def fallback_data(rng):
    def normal(*shape, scale=1.0):
        return (scale * rng.standard_normal(shape)).astype(np.float32)
    return {"x": normal(192), "params": [normal(192, 320, scale=192 ** -0.5), normal(320, scale=0.1),
                                         normal(320, 64, scale=320 ** -0.5), normal(64, scale=0.1)]}


def numpy_sin(lib):
    """sin and its backward in NumPy: no transform can trace it, so batched_grad loops over its rows."""
    class NumpySin(lib.autograd.Function):
        @staticmethod
        def forward(ctx, h):
            ctx.save_for_backward(h)
            return lib.from_numpy(np.sin(h.detach().numpy()))

        @staticmethod
        def backward(ctx, g):
            (h,) = ctx.saved_tensors
            return lib.from_numpy(np.cos(h.detach().numpy()) * g.numpy())
    return NumpySin.apply


def fallback_graph(lib, d):
    """(forward, the cotangent rows): x (192,) -> tanh(x W1 + b1) -> NumPy sin -> tanh(. W2 + b2) (64,)."""
    sin, (w1, b1, w2, b2) = numpy_sin(lib), [lib.tensor(p) for p in d["params"]]

    def forward():
        x = lib.tensor(d["x"], requires_grad=True)
        return x, lib.tanh(sin(lib.tanh(x @ w1 + b1)) @ w2 + b2)
    return forward, lib.eye(64)


def fallback_jacobian(lib, d):
    forward, eye = fallback_graph(lib, d)

    def call():
        x, out = forward()
        return lib.autograd.grad(out, x, eye, is_grads_batched=True)[0]
    return call


def fallback_jacobian_loop(lib, d):
    forward, eye = fallback_graph(lib, d)

    def call():
        x, out = forward()
        return lib.stack([lib.autograd.grad(out, x, e, retain_graph=True)[0] for e in eye])
    return call


def vectorized_hessian(lib, d):
    w, x = lib.tensor(d["w"]), lib.tensor(d["x"])
    return lambda: lib.autograd.functional.hessian(lambda x: tanh_energy(x, w, lib.tanh), x, vectorize=True)


def jax_hessian(jax, jnp, d):
    hessian = jax.jit(jax.hessian(lambda x, w: tanh_energy(x, w, jnp.tanh)))
    x, w = jnp.asarray(d["x"]), jnp.asarray(d["w"])
    return lambda: hessian(x, w)


def chain_data(rng):
    return {"x": rng.standard_normal(1000).astype(np.float32)}


def chain(y):
    for _ in range(CHAIN_STEPS):
        y = y * 1.0001 + 0.0
    return y.sum()


def chain_grad(lib, d):
    def call():
        x = lib.tensor(d["x"], requires_grad=True)
        return lib.autograd.grad(chain(x), x)[0]
    return call


def jax_chain_grad(jax, jnp, d):
    grad, x = jax.jit(jax.grad(chain)), jnp.asarray(d["x"])
    return lambda: grad(x)


def per_sample_data(rng):
    return {"X": rng.standard_normal((64, 784)).astype(np.float32), "Y": rng.integers(0, 10, 64),
            "params": {"w1": (rng.standard_normal((784, 128)) / 28).astype(np.float32),
                       "b1": (0.1 * rng.standard_normal(128)).astype(np.float32),
                       "w2": (rng.standard_normal((128, 10)) / np.sqrt(128)).astype(np.float32),
                       "b2": (0.1 * rng.standard_normal(10)).astype(np.float32)}}


def mlp_logits(p, x, relu):
    return relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def per_sample_grads(lib, d):
    F, params = lib.nn.functional, {k: lib.tensor(v) for k, v in d["params"].items()}

    def loss(p, x, y):
        return F.cross_entropy(mlp_logits(p, x, F.relu).unsqueeze(0), y.unsqueeze(0))
    per_sample = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))
    X, Y = lib.tensor(d["X"]), lib.tensor(d["Y"])
    return lambda: per_sample(params, X, Y)


def jax_per_sample_grads(jax, jnp, d):
    def loss(p, x, y):
        return -jax.nn.log_softmax(mlp_logits(p, x, jax.nn.relu))[y]
    per_sample = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    params, X, Y = jax.tree_util.tree_map(jnp.asarray, (d["params"], d["X"], d["Y"]))
    return lambda: per_sample(params, X, Y)


WORKLOADS = {  # number: (label, data, batched_grad's code, torch's code, JAX's code or None)
    1: ("Jacobian, 256-256x3-128 tanh MLP, 128 rows", mlp_data, mlp_jacobian, mlp_jacobian, jax_mlp_jacobian),
    2: ("64 batched HVPs, n=512", energy_data(512, 64), batched_hvps, batched_hvps, jax_batched_hvps),
    3: ("Jacobian through a NumPy Function, 64 rows", fallback_data, fallback_jacobian, fallback_jacobian_loop, None),
    4: ("hessian(vectorize=True), n=256", energy_data(256), vectorized_hessian, vectorized_hessian, jax_hessian),
    5: (f"{2 * CHAIN_STEPS}-op chain y * 1.0001 + 0.0, grad", chain_data, chain_grad, chain_grad, jax_chain_grad),
    6: ("per-sample grads, MLP 784-128-10, B=64", per_sample_data, per_sample_grads, per_sample_grads,
        jax_per_sample_grads),
}
QUICK_WORKLOADS = [1, 2, 4, 6]


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
    return bg, lambda: warm_up(bg), wait, bg.compile_count


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
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(RECORD + json.dumps({"seconds": seconds, "compiles": compiles, "xla_compiles": xla_compiles() - xla0,
                               "rss_mb": peak / 1024}))


# ---------------------------------------------------------------- the driver: fresh processes per peer

def spawn(lib, number, result, env, jax_cache=False):
    """Run one worker; its record, or a string saying why there is none."""
    command = [sys.executable, os.path.abspath(__file__), f"--worker={lib}", f"--workload={number}",
               f"--result={result}", f"--warm_calls={FLAGS.warm_calls}", f"--torch_threads={FLAGS.torch_threads}",
               f"--jax_cache={jax_cache}"]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=FLAGS.timeout)
    except subprocess.TimeoutExpired:
        return f"timeout ({FLAGS.timeout} s)"
    lines = [line for line in done.stdout.splitlines() if line.startswith(RECORD)]
    if done.returncode or not lines:
        return f"failed (exit {done.returncode}): " + " | ".join(done.stderr.strip().splitlines()[-3:])
    return {**json.loads(lines[-1][len(RECORD):]), "result": result}


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
    """The figures of one process: first call, calls 2-5, slowest of 1-5, warm median (seconds), compiles, RSS."""
    s, c = record["seconds"], record["compiles"]
    return {"first": s[0], "next4": sum(s[1:CALLS_COUNTED]), "max5": max(s[:CALLS_COUNTED]),
            "warm": statistics.median(s[CALLS_COUNTED:] or s[-1:]), "compiles": sum(c), "xla": record["xla_compiles"],
            "rss": record["rss_mb"]}


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
    return [number, WORKLOADS[number][0], ms(torch_first), ms(jax_first), ms(get("jax cached", "first")),
            ms(get("bg 1", "first")), ms(get("bg 2", "first")),
            pair(ms(get("torch", "next4")), ms(get("bg 1", "next4"))),
            pair(ms(get("torch", "max5")), ms(get("bg 1", "max5"))),
            pair(ms(get("torch", "warm")), ms(get("bg 1", "warm")), ms(get("jax", "warm"))),
            f'{pair(count("bg 1", "compiles"), count("bg 2", "compiles"))} '
            f'({pair(count("bg 1", "xla"), count("bg 2", "xla"))})',
            pair(count("bg 1", "rss"), count("bg 2", "rss")), count("torch", "rss"),
            times(ratio(get("bg 1", "first"), floor), "{:.2f}"),
            times(ratio(get("bg 2", "first"), None if torch_first is None else 3 * torch_first), "{:.2f}"),
            times(ratio(get("bg 1", "next4"), 3 * (get("torch", "next4") or 0)), "{:.2f}")]


HEADER = ["#", "workload", "torch 1st", "jax 1st", "jax 1st cached", "bg 1st p1", "bg 1st p2",
          "calls 2-5 torch / bg", "max call 1-5 torch / bg", "warm torch / bg / jax", "bg compiles p1 / p2 (XLA)",
          "bg RSS MB p1 / p2", "torch RSS MB", "p1 / max(10x torch, jax)", "p2 / 3x torch", "2-5 / 3x torch"]


def report(runs, numbers):
    from _timing import table
    table(f"Milliseconds, medians of {len(runs)} run(s). 1st: the first call in a fresh process, after import and a "
          "warm-up on an unrelated graph; p1 / p2: batched_grad's first / second process on one fresh persistent "
          "cache; jax 1st: jax.jit, no cache (the floor); jax 1st cached: jax.jit after a process that filled JAX's "
          f"cache; warm: median of {FLAGS.warm_calls} calls after call 5 (bg's from p1); compiles: bg.compile_count() "
          f"over calls 1 to {CALLS_COUNTED + FLAGS.warm_calls} of the workload, then (XLA) the compiles XLA ran, "
          "loads from the persistent cache excluded; RSS: the process's peak. Last three columns: the "
          "targets of issue 19, met at <= 1.",
          HEADER, [row(runs, n) for n in numbers], left=2)


def main(argv):
    del argv
    if FLAGS.warm_calls is None:
        FLAGS.warm_calls = 5 if FLAGS.quick else 20
    if FLAGS.jax_cache is None:
        FLAGS.jax_cache = not FLAGS.quick
    if FLAGS.worker:
        return run_worker()
    numbers = [int(n) for n in FLAGS.workloads] if FLAGS.workloads else QUICK_WORKLOADS if FLAGS.quick \
        else list(WORKLOADS)
    unknown = [n for n in numbers if n not in WORKLOADS]
    if unknown:
        raise app.UsageError(f"--workloads: expected numbers among {list(WORKLOADS)}, got {unknown}")
    import batched_grad as bg  # for the header; it also sets the XLA flags that every worker then inherits
    from _timing import environment
    print(f"batched_grad {bg.__version__} ({os.path.dirname(os.path.dirname(bg.__file__))}), jax "
          f"{importlib.metadata.version('jax')}, torch {importlib.metadata.version('torch')} (torch threads "
          f"{FLAGS.torch_threads}), {os.cpu_count()} CPUs, {FLAGS.runs} run(s), load average "
          f"{os.getloadavg()[0]:.1f}, {environment()}, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}", flush=True)
    start = time.perf_counter()
    runs = [run_once(numbers, run + 1) for run in range(FLAGS.runs)]
    report(runs, numbers)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    app.run(main)
