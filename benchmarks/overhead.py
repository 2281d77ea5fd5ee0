"""Overhead of batched_grad against torch and plain JAX on small, unbatched workloads.

Three tables, every peer measured in the same process with its repeats interleaved:
  a. the cost of one recorded op on small tensors that require grad;
  b. a steady-state 3-layer tanh MLP: forward + grad, and grad alone on pre-built graphs;
  c. first-call latency of a fresh graph structure, with the kernel compiles of calls 1, 2, 3, 10.

    python benchmarks/overhead.py            # about 1-2 minutes
    python benchmarks/overhead.py --quick    # under 30 s, fewer repeats
"""

import contextlib
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch
from _timing import compare, fmt, ratio, ready, stat, table
from absl import app, flags

import batched_grad as bg

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "Fewer iterations and repeats (under 30 s).")
flags.DEFINE_integer("repeats", None, "Timing repeats per measurement (default 7, 3 with --quick).")
flags.DEFINE_integer(
    "torch_threads",
    1,
    "torch.set_num_threads. 1 by default: at these sizes XLA runs each kernel on one thread, and "
    "torch's intra-op threads only add synchronization (and oversubscribe a shared machine).",
)

WIDTH, BATCH, DEPTH = 64, 32, 3
# The steady state of the fused programs, reached in a known number of calls: each structure is compiled from its
# third sighting on (by default a structure is compiled once its per-op runs have paid for the compile, _payback.py)
FUSE_AFTER = 2
bg.set_fuse_after(FUSE_AFTER)
FUSE_WARMUP = FUSE_AFTER + 2  # calls of a structure after which it surely runs as one fused program


# ---------------------------------------------------------------- a. per-op recording cost

OPS = [  # (label, op on a dict of same-named inputs); `tanh` is passed in because JAX arrays have no .tanh()
    ("x * y  (64,)", lambda d, tanh: d["x"] * d["y"]),
    ("x.tanh()  (64,)", lambda d, tanh: tanh(d["x"])),
    ("x @ W  (32,64)@(64,64)", lambda d, tanh: d["xm"] @ d["w"]),
    ("x[3:10]  (64,)", lambda d, tanh: d["x"][3:10]),
    ("x.sum()  (64,)", lambda d, tanh: d["x"].sum()),
]


def per_op_inputs(rng):
    """The same float32 inputs as bg (requires grad), bg (no grad), torch (requires grad) and JAX arrays."""
    shapes = dict(x=(64,), y=(64,), xm=(BATCH, WIDTH), w=(WIDTH, WIDTH))
    data = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    return {
        "bg": ({k: bg.tensor(v, requires_grad=True) for k, v in data.items()}, bg.tanh),
        "bg_nograd": ({k: bg.tensor(v) for k, v in data.items()}, bg.tanh),
        "torch": ({k: torch.tensor(v, requires_grad=True) for k, v in data.items()}, torch.tanh),
        "jax": ({k: jnp.asarray(v) for k, v in data.items()}, jnp.tanh),
    }


def bench_per_op(rng, number, repeats):
    rows = []
    inputs = per_op_inputs(rng)
    for name, op in OPS:
        peers = {peer: (lambda d=d, tanh=tanh, op=op: op(d, tanh)) for peer, (d, tanh) in inputs.items()}
        compare(peers, 20, 1)  # warm-up: compiles each bg kernel and JAX's eager op once
        r = {k: stat(t) for k, t in compare(peers, number, repeats).items()}
        rows.append(
            [
                name,
                fmt(r["bg"], 1e6),
                fmt(r["torch"], 1e6),
                ratio(r["bg"], r["torch"]),
                fmt(r["bg_nograd"], 1e6),
                fmt(r["jax"], 1e6),
            ]
        )
    table(
        "a. One op on small tensors, microseconds per op: median (min). "
        "bg/torch: requires_grad=True (op is recorded); bg no-grad: same op, nothing recorded",
        ["op", "bg", "torch", "bg/torch", "bg no-grad", "JAX eager"],
        rows,
    )


# ---------------------------------------------------------------- b. steady-state MLP


def mlp_data(rng, width=WIDTH, depth=DEPTH):
    """Numpy weights, biases, input and target of a depth-layer tanh MLP."""
    ws = [(rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32) for _ in range(depth)]
    bs = [np.zeros(width, np.float32) for _ in range(depth)]
    x = rng.standard_normal((BATCH, width)).astype(np.float32)
    y = rng.standard_normal((BATCH, width)).astype(np.float32)
    return ws + bs, x, y


def mlp_loss(params, x, y, tanh):
    """Works for bg Tensors, torch tensors and JAX arrays alike (only `tanh` differs)."""
    depth = len(params) // 2
    h = x
    for w, b in zip(params[:depth], params[depth:]):
        h = tanh(h @ w + b)
    return ((h - y) ** 2).mean()


def bg_mlp(data):
    params, x, y = data
    params = [bg.tensor(p, requires_grad=True) for p in params]
    x, y = bg.tensor(x), bg.tensor(y)
    forward = lambda: mlp_loss(params, x, y, bg.tanh)  # noqa: E731
    return forward, lambda loss: bg.autograd.grad(loss, params)


def torch_mlp(data):
    params, x, y = data
    params = [torch.tensor(p, requires_grad=True) for p in params]
    x, y = torch.tensor(x), torch.tensor(y)
    forward = lambda: mlp_loss(params, x, y, torch.tanh)  # noqa: E731
    return forward, lambda loss: torch.autograd.grad(loss, params)


def jax_mlp(data):
    params, x, y = data
    params = [jnp.asarray(p) for p in params]
    x, y = jnp.asarray(x), jnp.asarray(y)
    grad = jax.jit(jax.grad(lambda ps, x, y: mlp_loss(ps, x, y, jnp.tanh)))
    return lambda: grad(params, x, y)


def forward_and_grad(forward, grad):
    def step():
        out = grad(forward())
        ready(out)  # block every iteration: a step's gradients are really computed before the next starts
        return out

    return step


def grad_of_prebuilt(forward, grad, count):
    """A callable that runs `grad` on the next of `count` graphs built beforehand (not timed)."""
    graphs = iter([forward() for _ in range(count)])

    def step():
        out = grad(next(graphs))
        ready(out)
        return out

    return step


@contextlib.contextmanager
def per_node_tier():
    """Pin the engine to its first tier (per-node cached VJP kernels), as on a structure's first two calls."""
    saved = bg.set_fuse_after(10**9)
    try:
        yield
    finally:
        bg.set_fuse_after(saved)


def bench_mlp(rng, number, repeats):
    data = mlp_data(rng)
    bg_fwd, bg_grad = bg_mlp(data)
    t_fwd, t_grad = torch_mlp(data)
    jax_step = jax_mlp(data)
    for _ in range(FUSE_WARMUP):
        forward_and_grad(bg_fwd, bg_grad)()  # past FUSE_AFTER: the structure now runs as one program
    peers = {
        "bg": forward_and_grad(bg_fwd, bg_grad),
        "torch": forward_and_grad(t_fwd, t_grad),
        "jax": forward_and_grad(jax_step, lambda grads: grads),
    }
    compare(peers, 3, 1)
    step = {k: stat(t) for k, t in compare(peers, number, repeats).items()}
    fwd = {k: stat(t) for k, t in compare({"bg": bg_fwd, "torch": t_fwd}, number, repeats).items()}
    count = number * repeats + 3
    prebuilt = {"bg": grad_of_prebuilt(bg_fwd, bg_grad, count), "torch": grad_of_prebuilt(t_fwd, t_grad, count)}
    compare(prebuilt, 3, 1)
    only = {k: stat(t) for k, t in compare(prebuilt, number, repeats).items()}
    with per_node_tier():
        tier1 = grad_of_prebuilt(bg_fwd, bg_grad, count)
        tier1()
        only_tier1 = stat(compare({"bg": tier1}, number, repeats)["bg"])
    rows = [
        [
            "forward + grad",
            fmt(step["bg"], 1e3),
            fmt(step["torch"], 1e3),
            fmt(step["jax"], 1e3),
            ratio(step["bg"], step["torch"]),
            ratio(step["bg"], step["jax"]),
        ],
        [
            "forward only (recording)",
            fmt(fwd["bg"], 1e3),
            fmt(fwd["torch"], 1e3),
            "n/a",
            ratio(fwd["bg"], fwd["torch"]),
            "n/a",
        ],
        [
            "grad only, pre-built graph",
            fmt(only["bg"], 1e3),
            fmt(only["torch"], 1e3),
            "n/a",
            ratio(only["bg"], only["torch"]),
            "n/a",
        ],
        [
            "grad only, per-node tier",
            fmt(only_tier1, 1e3),
            fmt(only["torch"], 1e3),
            "n/a",
            ratio(only_tier1, only["torch"]),
            "n/a",
        ],
    ]
    table(
        f"b. Steady-state MLP {WIDTH}-{WIDTH}x{DEPTH} tanh, batch {BATCH}, MSE loss; milliseconds per iteration: "
        "median (min). JAX column: jax.jit(jax.grad(loss)) (forward and grad in one program)",
        ["workload", "bg", "torch", "JAX jit", "bg/torch", "bg/JAX"],
        rows,
    )


# ---------------------------------------------------------------- c. first-call latency and compiles

CALLS = (1, 2, 3, 10)


def bg_calls(data):
    """Latency (s) and compile counts (forward, grad) of calls 1..10 of one fresh structure."""
    forward, grad = bg_mlp(data)
    result = {}
    for call in range(1, max(CALLS) + 1):
        c0, t0 = bg.compile_count(), time.perf_counter()
        loss = forward()
        c1 = bg.compile_count()
        ready(grad(loss))
        result[call] = (time.perf_counter() - t0, c1 - c0, bg.compile_count() - c1)
    return result


def torch_calls(data):
    forward, grad = torch_mlp(data)
    result = {}
    for call in range(1, max(CALLS) + 1):
        t0 = time.perf_counter()
        grad(forward())
        result[call] = time.perf_counter() - t0
    return result


def jax_first_call(data):
    step = jax_mlp(data)
    t0 = time.perf_counter()
    ready(step())
    return time.perf_counter() - t0


def latency_rows(label, trials, with_jax):
    """Rows for calls 1, 2, 3, 10 over `trials` (a list of data sets, each a structure never seen before)."""
    bg_runs = [bg_calls(d) for d in trials]
    torch_runs = [torch_calls(d) for d in trials]
    jax_first = [jax_first_call(d) for d in trials] if with_jax else None
    rows = []
    for call in CALLS:
        b = [r[call][0] for r in bg_runs]
        t = [r[call] for r in torch_runs]
        counts = sorted({f"{r[call][1]}+{r[call][2]}" for r in bg_runs})
        stat_b, stat_t = stat(b), stat(t)
        j = "n/a"
        if with_jax and call == 1:
            j = fmt(stat(jax_first), 1e3)
        rows.append(
            [f"{label}, call {call}", fmt(stat_b, 1e3), fmt(stat_t, 1e3), ratio(stat_b, stat_t), j, " | ".join(counts)]
        )
    steady = sum(r[c][1] + r[c][2] for r in bg_runs for c in range(FUSE_WARMUP + 1, max(CALLS) + 1))
    return rows, steady


def bench_latency(rng, trials):
    # fresh shapes (a width never used before): every forward op and per-node VJP kernel compiles
    cold = [mlp_data(rng, width=WIDTH + 8 * (k + 1)) for k in range(trials)]
    # same width 64 as table b, new depth: per-node kernels are cached, only the structure is new
    warm_kernels = [mlp_data(rng, depth=DEPTH + 1 + k) for k in range(trials)]
    for _ in range(2):
        bg_calls(mlp_data(rng))  # make sure the width-64 kernels exist even if table b did not run
    rows_cold, steady_cold = latency_rows("new shapes", cold, with_jax=True)
    rows_warm, steady_warm = latency_rows("new depth", warm_kernels, with_jax=False)
    table(
        f"c. Fresh-structure latency, forward + grad of an MLP, milliseconds: median (min) over {trials} "
        f"fresh structures. compiles = bg.compile_count() increase, forward + grad",
        ["call", "bg", "torch", "bg/torch", "JAX jit", "compiles"],
        rows_cold + rows_warm,
    )
    steady = steady_cold + steady_warm
    print(
        f"  steady state (calls {FUSE_WARMUP + 1}-{max(CALLS)} of every structure): {steady} new compiles"
        + ("" if steady == 0 else "  <-- EXPECTED 0: something recompiles")
    )


# ---------------------------------------------------------------- main


def main(argv):
    del argv
    torch.set_num_threads(FLAGS.torch_threads)
    quick = FLAGS.quick
    repeats = FLAGS.repeats or (3 if quick else 7)
    print(
        f"batched_grad {bg.__version__}, jax {jax.__version__}, torch {torch.__version__} "
        f"(torch threads {torch.get_num_threads()}), {os.cpu_count()} CPUs, repeats {repeats}, "
        f"FUSE_AFTER {FUSE_AFTER}, load average {os.getloadavg()[0]:.1f}"
    )
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    bench_per_op(rng, 150 if quick else 1000, repeats)
    bench_mlp(rng, 15 if quick else 100, repeats)
    bench_latency(rng, 2 if quick else 5)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    app.run(main)
