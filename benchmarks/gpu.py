"""batched_grad against jax.jit and torch on one GPU (JAX's default device, torch's cuda), markdown table to stdout:
PYTHONPATH=. python benchmarks/gpu.py --out gpu.json   # one NVIDIA GPU, JAX with CUDA and torch+cuda: < 5 min
PYTHONPATH=. python benchmarks/gpu.py --quick          # smaller sizes, fewer repeats (runs on the CPU too)"""

import json
import os
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch
from _timing import WARMUP_S, compare, ready
from absl import app, flags

import batched_grad as bg
import batched_grad.func  # noqa: F401 - bg.func
import batched_grad.nn.functional  # noqa: F401 - bg.nn.functional

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "Smaller sizes and 3 repeats: a check of the script itself (10-20 s on a CPU).")
flags.DEFINE_integer("repeats", None, "Timing repeats per workload, peers interleaved (default 11, 3 with --quick).")
flags.DEFINE_string("out", None, "Also write the table's rows (and the raw times) as JSON to this path.")
flags.DEFINE_enum(
    "matmul_precision",
    "float32",
    ["float32", "tf32"],
    "float32: full-precision matmuls everywhere (JAX's default_matmul_precision 'float32', torch's allow_tf32 "
    "False, its default); "
    "tf32: TensorFloat-32 in both (what JAX's default precision may use on GPUs), tolerances 10x looser.",
)
flags.DEFINE_float("timing_s", None, "Seconds of timed calls per workload, at most (default 30, 8 with --quick).")
flags.DEFINE_integer("torch_threads", 1, "torch.set_num_threads (1 by default, as in the other benchmarks).")
flags.DEFINE_string(
    "compilation_cache", None, "batched_grad's (and JAX's) persistent compilation cache directory; off by default."
)

BG, TORCH, JAX = "batched_grad", "torch", "jax.jit"
# The steady state of the fused programs, reached in a known number of calls: each structure is compiled from its
# third sighting on (by default a structure is compiled once its per-op runs have paid for the compile, _payback.py)
FUSE_AFTER = 2
bg.set_fuse_after(FUSE_AFTER)
FUSE_WARMUP = FUSE_AFTER + 2  # calls of a structure after which it surely runs as one fused program
MAX_CALLS = 50  # calls per timed block, at most
CHECK_CHUNK = 1 << 20  # elements compared at a time
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


# ---------------------------------------------------------------- the workloads, written once for bg, torch and jnp


def mlp(x, ws, bs, ops):
    """tanh after each hidden layer, linear output."""
    for i, (w, b) in enumerate(zip(ws, bs)):
        x = x @ w + b
        x = ops.tanh(x) if i < len(ws) - 1 else x
    return x


def softplus_energy(x, w, ops):
    return ops.log(1 + ops.exp(w @ x)).sum() + 0.005 * (x * x).sum()


def mlp_data(rng, sizes):
    return {
        "x": rng.standard_normal(sizes[0]).astype(np.float32),
        "ws": [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32) for a, b in zip(sizes, sizes[1:])],
        "bs": [(0.1 * rng.standard_normal(b)).astype(np.float32) for b in sizes[1:]],
    }


def mlp_jacobian(lib, device, d):
    """The full Jacobian by grad(is_grads_batched=True) with the identity as cotangents; the graph built every call."""
    ws, bs = [lib.tensor(w, device=device) for w in d["ws"]], [lib.tensor(b, device=device) for b in d["bs"]]
    eye = lib.eye(len(d["bs"][-1]), device=device)

    def call():
        x = lib.tensor(d["x"], device=device, requires_grad=True)
        return lib.autograd.grad(mlp(x, ws, bs, lib), x, eye, is_grads_batched=True)[0]

    return call


def jax_mlp_jacobian(d):
    jacobian = jax.jit(jax.jacrev(lambda x, ws, bs: mlp(x, ws, bs, jnp)))  # weights are arguments, not constants
    args = jax.tree_util.tree_map(jnp.asarray, (d["x"], d["ws"], d["bs"]))
    return lambda: jacobian(*args)


def classifier_data(rng, n_in, hidden, classes, batch):
    return {
        "params": [
            (rng.standard_normal((n_in, hidden)) / np.sqrt(n_in)).astype(np.float32),
            (0.1 * rng.standard_normal(hidden)).astype(np.float32),
            (rng.standard_normal((hidden, classes)) / np.sqrt(hidden)).astype(np.float32),
            (0.1 * rng.standard_normal(classes)).astype(np.float32),
        ],
        "X": rng.standard_normal((batch, n_in)).astype(np.float32),
        "Y": rng.integers(0, classes, batch),
    }


def per_sample_grads(lib, device, d):
    """func.vmap(func.grad) of the cross-entropy of a ReLU MLP, over the rows of a batch."""
    params = tuple(lib.tensor(p, device=device) for p in d["params"])
    X, Y = lib.tensor(d["X"], device=device), lib.tensor(d["Y"], device=device)

    def loss(params, x, y):
        w1, b1, w2, b2 = params
        logits = lib.relu(x @ w1 + b1) @ w2 + b2
        return lib.nn.functional.cross_entropy(logits.unsqueeze(0), y.unsqueeze(0))

    grads = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))
    return lambda: grads(params, X, Y)


def jax_per_sample_grads(d):
    def loss(params, x, y):
        w1, b1, w2, b2 = params
        return -jax.nn.log_softmax(jnp.maximum(x @ w1 + b1, 0) @ w2 + b2)[y]

    grads = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    args = tuple(d["params"]), d["X"], d["Y"].astype(np.int32)
    args = jax.tree_util.tree_map(jnp.asarray, args)
    return lambda: grads(*args)


def hvp_data(rng, n, rows):
    return {
        "w": (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32),
        "x": rng.standard_normal(n).astype(np.float32),
        "v": rng.standard_normal((rows, n)).astype(np.float32),
    }


def batched_hvps(lib, device, d):
    """Hessian-vector products: grad(create_graph=True), then grad of the gradient with is_grads_batched=True."""
    w, v = lib.tensor(d["w"], device=device), lib.tensor(d["v"], device=device)

    def call():
        x = lib.tensor(d["x"], device=device, requires_grad=True)
        (g,) = lib.autograd.grad(softplus_energy(x, w, lib), x, create_graph=True)
        return lib.autograd.grad(g, x, v, is_grads_batched=True)[0]

    return call


def jax_batched_hvps(d):
    grad = jax.grad(lambda x, w: softplus_energy(x, w, jnp))
    hvps = jax.jit(lambda x, w, v: jax.vmap(lambda t: jax.jvp(lambda y: grad(y, w), (x,), (t,))[1])(v))
    x, w, v = (jnp.asarray(d[k]) for k in "xwv")
    return lambda: hvps(x, w, v)


def workloads(quick):
    """[(label, data maker, (bg and torch code, jax code))]: the GPU sizes, or small ones with --quick."""
    width, out, n_hidden, batch, n, rows = (256, 128, 128, 64, 512, 32) if quick else (1024, 512, 512, 1024, 4096, 128)
    return [
        (
            f"Jacobian ({out}, {width}) of a tanh MLP {width}-{width}x3-{out}: grad(is_grads_batched) / jacrev",
            lambda rng: mlp_data(rng, [width] * 4 + [out]),
            (mlp_jacobian, jax_mlp_jacobian),
        ),
        (
            f"Per-sample gradients of a 784-{n_hidden}-10 ReLU MLP, B={batch}: vmap(grad)",
            lambda rng: classifier_data(rng, 784, n_hidden, 10, batch),
            (per_sample_grads, jax_per_sample_grads),
        ),
        (
            f"{rows} HVPs of sum(log(1+exp(W x))) + 0.005 sum(x^2), n={n}: grad of grad(is_grads_batched) / vmap(jvp)",
            lambda rng: hvp_data(rng, n, rows),
            (batched_hvps, jax_batched_hvps),
        ),
    ]


# ---------------------------------------------------------------- peers, results and checks


def peers(code, d):
    """{peer: zero-argument callable}; torch's waits for the GPU (torch.cuda.synchronize) before it returns."""
    lib_code, jax_code = code
    torch_call = lib_code(torch, DEVICE, d)

    def torch_synced():
        out = torch_call()
        torch.cuda.synchronize()
        return out

    return {BG: lib_code(bg, None, d), TORCH: torch_synced if DEVICE == "cuda" else torch_call, JAX: jax_code(d)}


def to_numpy(out):
    """A peer's result as one flat float32 array: the leaves of its tuple, raveled and joined."""
    if isinstance(out, (tuple, list)):
        return np.concatenate([to_numpy(o) for o in out])
    if isinstance(out, bg.Tensor):
        return np.asarray(out.jax()).ravel()
    if isinstance(out, torch.Tensor):
        return out.detach().cpu().numpy().ravel()
    return np.asarray(out).ravel()


def tolerances():
    """(rtol, atol relative to the largest |entry|) for float32 results of different summation orders."""
    return (1e-3, 1e-4) if FLAGS.matmul_precision == "float32" else (1e-2, 1e-3)


def check(results):
    """Every pair of results must agree as np.allclose(x, y, rtol, atol * max |entry|) has it (written with fewer
    temporaries: per-sample gradients are 1.6 GB); returns the largest |difference| over the largest |entry|."""
    rtol, atol = tolerances()
    names, worst = list(results), 0.0
    largest = {name: max(float(r.max()), -float(r.min())) if r.size else 0.0 for name, r in results.items()}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            x, y = results[a], results[b]
            if x.shape != y.shape:
                raise AssertionError(f"{a} and {b} disagree: shapes {x.shape} and {y.shape}")
            scale = max(largest[a], largest[b], float(np.finfo(np.float32).tiny))
            ok, rel = True, 0.0
            for start in range(0, x.size, CHECK_CHUNK):  # in pieces: no temporaries of the whole size
                diff = np.abs(x[start : start + CHECK_CHUNK] - y[start : start + CHECK_CHUNK])
                tol = np.abs(y[start : start + CHECK_CHUNK]) * rtol
                tol += atol * scale
                ok, rel = ok and bool((diff <= tol).all()), float(np.maximum(rel, diff.max() / scale))  # NaN stays
            if not ok or not np.isfinite(rel):
                raise AssertionError(f"{a} and {b} disagree: max |diff| / max |entry| = {rel:.2e}")
            worst = max(worst, rel)
    return worst


def one_call(fn):
    """(seconds, result) of one call, waited for."""
    start = time.perf_counter()
    out = fn()
    ready(out)
    return time.perf_counter() - start, out


# ---------------------------------------------------------------- running a workload


def warm_up(everyone):
    """bg's calls until its fused program runs (background compile waited for), 3 calls of the others; returns
    {peer: seconds of its last warm call} and bg's fused result."""
    last = {}
    for name, fn in everyone.items():
        for _ in range(FUSE_WARMUP if name == BG else 3):
            last[name], _ = one_call(fn)
        if name == BG:
            bg.wait_for_compiles()
            last[name], fused = one_call(fn)
    return last, to_numpy(fused)


def plan(last, repeats, budget):
    """(calls per timed block, repeats) that keep a workload's timed calls near `budget` seconds."""
    slowest = max(last.values())
    number = max(1, min(MAX_CALLS, int(0.2 * budget / repeats / max(slowest, 1e-6) / len(last))))
    per_repeat = sum(number * t + WARMUP_S for t in last.values())
    return number, max(3, min(repeats, int(budget / per_repeat)))


def run_workload(index, label, make_data, code, rng, repeats, budget, cold=None):
    """First calls (cold for workload 1, when `cold` is a dict to fill), warm-up, agreement of every result, then the
    interleaved timing. Returns a row of the table."""
    t_start, d = time.perf_counter(), make_data(rng)
    everyone = peers(code, d)
    if DEVICE == "cuda":
        torch.cuda.synchronize()  # torch's copies of the data are done before its first call is timed
    first, results = {}, {}
    for name, fn in everyone.items():
        first[name], out = one_call(fn)
        results[name] = to_numpy(out)
    if cold is not None:
        cold.update(first)
    last, results[BG + " (fused)"] = warm_up(everyone)
    diff = check(results)
    del results  # gigabytes for the per-sample gradients
    number, repeats = plan(last, repeats, budget)
    compiles = bg.compile_count()
    times = compare(everyone, number, repeats, block_each=True, warmup=WARMUP_S)
    row = {
        "workload": index,
        "label": label,
        **{f"{name} ms": 1e3 * statistics.median(t) for name, t in times.items()},
        "first call ms": {name: 1e3 * t for name, t in first.items()},
        "calls x repeats": f"{number} x {repeats}",
        "max rel diff": diff,
        "bg compiles while timed": bg.compile_count() - compiles,
        "times s": times,
    }
    print(
        f"  {index}. {time.perf_counter() - t_start:.0f} s; results agree (max |diff| / max |entry| {diff:.1e}); "
        f"bg compiles while timed: {row['bg compiles while timed']}"
    )
    return with_ratios(row)


def with_ratios(row):
    b, t, j = row.get(f"{BG} ms"), row.get(f"{TORCH} ms"), row.get(f"{JAX} ms")
    row["bg / torch"] = b / t if b is not None and t is not None else None
    row["bg / jax"] = b / j if b is not None and j is not None else None
    return row


def library_start_up():
    """A small unrelated graph through each library (their runtimes, BLAS handles and bg's op table started), so that
    the cold calls time the workload, not the process. Returns {peer: seconds}."""
    x0 = np.linspace(-1, 1, 7, dtype=np.float32)
    out = {}
    for name, lib, device in ((BG, bg, None), (TORCH, torch, DEVICE)):
        start = time.perf_counter()
        for _ in range(FUSE_WARMUP):
            x = lib.tensor(x0, device=device, requires_grad=True)
            y = (lib.tensor(np.ones((7, 7), np.float32), device=device) @ x).sin() * 2 + x.exp()
            ready(lib.autograd.grad(y[:3], x, lib.eye(3, device=device), is_grads_batched=True))
            ready(lib.func.vmap(lib.func.grad(lambda v: (v.cos() * v).sum()))(lib.ones(2, 5, device=device)))
        if name == BG:
            bg.wait_for_compiles()
        elif DEVICE == "cuda":
            torch.cuda.synchronize()
        out[name] = time.perf_counter() - start
    start = time.perf_counter()
    f = lambda v: (jnp.cos(v) * v).sum()
    for transform in (jax.grad(f), jax.jacrev(lambda v: jnp.ones((7, 7)) @ v), jax.vmap(jax.grad(f))):
        ready(jax.jit(transform)(jnp.linspace(-1, 1, 7)))
    out[JAX] = time.perf_counter() - start
    return out


# ---------------------------------------------------------------- report


def environment(start_up):
    jax_device = jax.devices()[0]
    torch_name = torch.cuda.get_device_name(0) if DEVICE == "cuda" else f"host CPU, {platform.machine()}"
    rtol, atol = tolerances()
    return {
        "batched_grad": f"{bg.__version__} ({os.path.dirname(bg.__file__)})",
        "jax": f"{jax.__version__}, default backend {jax.default_backend()}",
        "torch": f"{torch.__version__} (threads {torch.get_num_threads()})",
        "JAX device (batched_grad and jax.jit)": f"{jax_device.device_kind} ({jax_device.platform}:{jax_device.id})",
        "batched_grad tensors on": str(bg.ones(1).device),
        "torch device": f"{DEVICE} ({torch_name})",
        "matmul precision": f"{FLAGS.matmul_precision} (JAX {jax.config.jax_default_matmul_precision}, "
        f"torch allow_tf32 {torch.backends.cuda.matmul.allow_tf32})",
        "checks": f"every pair of peers: np.allclose(rtol={rtol:g}, atol={atol:g} x max |entry|)",
        "compilation cache": FLAGS.compilation_cache or "off",
        "library start-up s (not counted)": ", ".join(f"{k} {v:.1f}" for k, v in start_up.items()),
        "CPUs, load average": f"{os.cpu_count()}, {os.getloadavg()[0]:.1f}",
        "XLA_PYTHON_CLIENT_PREALLOCATE / MEM_FRACTION": " / ".join(
            os.environ.get(f"XLA_PYTHON_CLIENT_{k}", "(unset)") for k in ("PREALLOCATE", "MEM_FRACTION")
        ),
        "FUSE_AFTER": FUSE_AFTER,
    }


def cell(value, spec):
    return "n/a" if value is None else spec.format(value)


def ms(value):
    return cell(value, "{:.3f}" if value is not None and value < 10 else "{:.1f}")


def markdown(env, rows):
    print()
    for key, value in env.items():
        print(f"- {key}: {value}")
    print(
        "\nMilliseconds per call, median of the repeats (forward + backward: bg and torch rebuild the graph every "
        "call; peers interleaved; bg / x < 1: batched_grad faster)\n"
    )
    header = [
        "#",
        "workload",
        f"{BG} ms",
        f"{TORCH} ms",
        f"{JAX} ms",
        "bg / torch",
        "bg / jax",
        "calls x repeats",
        "check",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" if i in (0, 2, 3, 4, 5, 6) else "---" for i in range(len(header))) + "|")
    for r in rows:
        cells = [r["workload"], r["label"]] + [ms(r.get(f"{p} ms")) for p in (BG, TORCH, JAX)]
        cells += [cell(r.get("bg / torch"), "{:.2f}"), cell(r.get("bg / jax"), "{:.2f}")]
        cells += [r.get("calls x repeats", "-"), r["check"]]
        print("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")


def cold_row(label, cold, check):
    row = {"workload": 4, "label": label, **{f"{name} ms": 1e3 * t for name, t in cold.items()}, "check": check}
    row["calls x repeats"] = "1 x 1"
    return with_ratios(row)


def main(argv):
    del argv
    quick = FLAGS.quick
    repeats = FLAGS.repeats or (3 if quick else 11)
    budget = FLAGS.timing_s or (8.0 if quick else 30.0)
    torch.set_num_threads(FLAGS.torch_threads)
    tf32 = FLAGS.matmul_precision == "tf32"
    jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "float32")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    bg.set_compilation_cache(FLAGS.compilation_cache)
    start = time.perf_counter()
    print(f"GPU benchmark: {DEVICE}, repeats {repeats}, timed calls <= {budget:.0f} s per workload")
    env = environment(library_start_up())
    rng, rows, failures, cold = np.random.default_rng(0), [], [], {}
    for index, (label, make_data, code) in enumerate(workloads(quick), 1):
        try:
            row = run_workload(index, label, make_data, code, rng, repeats, budget, cold if index == 1 else None)
            row["check"] = f"ok ({row['max rel diff']:.1e})"
        except Exception as error:  # noqa: BLE001 - reported in the table, and the exit status is 1
            row = {"workload": index, "label": label, "check": f"FAILED: {type(error).__name__}: {error}"}
            failures.append(f"workload {index}: {type(error).__name__}: {error}")
            print(f"  {index}. {row['check']}", file=sys.stderr)
        rows.append(row)
    if len(cold) == 3:
        first_ok = rows[0]["check"].startswith("ok")
        rows.append(cold_row("First call (cold) of workload 1, compiles included", cold, "ok" if first_ok else "see 1"))
    markdown(env, rows)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    if FLAGS.out:
        with open(FLAGS.out, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=1)
    if failures:
        print("\n".join(["FAILED:"] + failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
