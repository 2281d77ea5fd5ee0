"""Per-sample gradients and a vectorized Hessian: batched_grad's functional idioms against torch and JAX.

Four workloads, every peer measured in the same process with its repeats interleaved:
  1-2. per-sample gradients of the cross-entropy of an MLP 784-128-10 (ReLU), B=64 and B=256;
  3.   per-sample gradients of a small CNN on 1x28x28 images (conv 8 - pool - conv 16 - pool - linear 10), B=64;
  4.   the Hessian (256, 256) of f(x) = sum(tanh(W x)^2).
Per-sample peers: bg `vmap.vmap(lambda x, y: grad(loss(model(x), y), params))`, bg
`grad(losses, params, bg.eye(B), is_grads_batched=True)`, torch's per-sample loop, torch's is_grads_batched,
`torch.func.vmap(torch.func.grad(...))` and `jax.jit(jax.vmap(jax.grad(...)))`, all with the same weights (bg and
torch models are built from one layer table with bg.nn and torch.nn). Hessian peers:
`bg.autograd.functional.hessian(vectorize=True)`, `torch.autograd.functional.hessian(vectorize=True)`,
`jax.jit(jax.hessian)`. Every timed call runs forward + backward (bg and torch rebuild the graph each call).
Two tables: steady state (after warm-up, so batched_grad runs its fused programs) and the latency of the first
three calls of each peer (compiles included), then the targets, each marked met or missed.

    python benchmarks/functional.py            # about 2-4 minutes on a loaded 2-core machine
    python benchmarks/functional.py --quick    # about a minute on a loaded 2-core machine, slow peers skipped
"""

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch
from _models import CNN, build, jax_cross_entropy, jax_forward
from _timing import WARMUP_S, check, compare, environment, fmt, median_faults, ratio, ready, stat, table
from absl import app, flags

import batched_grad as bg
import batched_grad.autograd.functional  # noqa: F401 - bg.autograd.functional
import batched_grad.nn.functional as F
import vmap

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "3 repeats; the eye(B) peers of workloads 2-3 skipped (about a minute).")
flags.DEFINE_integer("repeats", None, "Timing repeats per measurement (default 9, 3 with --quick).")
flags.DEFINE_integer("torch_threads", 1, "torch.set_num_threads (1 by default, as in benchmarks/overhead.py).")

# The steady state of the fused programs, reached in a known number of calls: each structure is compiled from its
# third sighting on (by default a structure is compiled once its per-op runs have paid for the compile, _payback.py)
FUSE_AFTER = 2
bg.set_fuse_after(FUSE_AFTER)
FUSE_WARMUP = FUSE_AFTER + 2  # calls of a structure after which it surely runs as one fused program
BG_VMAP, BG_IGB = "bg vmap.vmap(grad)", "bg grad(eye(B), is_grads_batched)"
T_LOOP, T_IGB, T_FUNC = "torch per-sample loop", "torch is_grads_batched", "torch.func.vmap(grad)"
JAX = "jax.jit(jax.vmap(jax.grad))"
BG_HESS, T_HESS, JAX_HESS = "bg hessian(vectorize=True)", "torch hessian(vectorize=True)", "jax.jit(jax.hessian)"

# ---------------------------------------------------------------- the models: one layer table, three libraries

MLP = [("Linear", 784, 128), ("ReLU",), ("Linear", 128, 10)]


# ---------------------------------------------------------------- peers: each a zero-argument callable


def per_sample_peers(layers, X, Y):
    """{name: callable} of every per-sample-gradient peer; each returns one (B,) + shape gradient per parameter, in
    the order of torch's named_parameters."""
    t_model = build(torch.nn, layers)
    names = [n for n, _ in t_model.named_parameters()]
    b_model = build(bg.nn, layers)
    b_model.load_state_dict({k: bg.tensor(v.detach().numpy()) for k, v in t_model.state_dict().items()})
    b_params, t_params = tuple(b_model.parameters()), tuple(t_model.parameters())
    bX, bY, tX, tY = bg.tensor(X), bg.tensor(Y), torch.tensor(X), torch.tensor(Y)
    b_eye, t_eye = bg.eye(len(X)), torch.eye(len(X))

    def bg_sample_loss(x, y):
        return F.cross_entropy(b_model(x.unsqueeze(0)), y.unsqueeze(0))

    def t_sample_loss(params, x, y):
        logits = torch.func.functional_call(t_model, params, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(logits, y.unsqueeze(0))

    bg_vmap = vmap.vmap(lambda x, y: bg.autograd.grad(bg_sample_loss(x, y), b_params))
    t_func = torch.func.vmap(torch.func.grad(t_sample_loss), in_dims=(None, 0, 0))
    t_detached = {k: v.detach() for k, v in t_model.named_parameters()}
    j_params = {k: jnp.asarray(v.detach().numpy()) for k, v in t_model.named_parameters()}
    j_loss = jax.jit(
        jax.vmap(
            jax.grad(lambda p, x, y: jax_cross_entropy(jax_forward(layers, p, x[None]), y[None])), in_axes=(None, 0, 0)
        )
    )
    jX, jY = jnp.asarray(X), jnp.asarray(Y)

    def bg_igb():
        losses = F.cross_entropy(b_model(bX), bY, reduction="none")
        return bg.autograd.grad(losses, b_params, b_eye, is_grads_batched=True)

    def t_igb():
        losses = torch.nn.functional.cross_entropy(t_model(tX), tY, reduction="none")
        return torch.autograd.grad(losses, t_params, t_eye, is_grads_batched=True)

    def t_loop():
        rows = [
            torch.autograd.grad(torch.nn.functional.cross_entropy(t_model(x[None]), y[None]), t_params)
            for x, y in zip(tX, tY)
        ]
        return tuple(torch.stack(g) for g in zip(*rows))

    def t_vmap():
        out = t_func(t_detached, tX, tY)
        return tuple(out[n] for n in names)

    def jax_vmap():
        out = j_loss(j_params, jX, jY)
        return tuple(out[n] for n in names)

    return {
        BG_VMAP: lambda: bg_vmap(bX, bY),
        BG_IGB: bg_igb,
        T_LOOP: t_loop,
        T_IGB: t_igb,
        T_FUNC: t_vmap,
        JAX: jax_vmap,
    }


def hessian_objective(x, w, tanh):
    return (tanh(w @ x) ** 2).sum()


def hessian_peers(x0, w):
    bw, tw, jw = bg.tensor(w), torch.tensor(w), jnp.asarray(w)
    bx, tx, jx = bg.tensor(x0), torch.tensor(x0), jnp.asarray(x0)
    j_hess = jax.jit(jax.hessian(lambda x, w: hessian_objective(x, w, jnp.tanh)))
    return {
        BG_HESS: lambda: bg.autograd.functional.hessian(
            lambda x: hessian_objective(x, bw, bg.tanh), bx, vectorize=True
        ),
        T_HESS: lambda: torch.autograd.functional.hessian(
            lambda x: hessian_objective(x, tw, torch.tanh), tx, vectorize=True
        ),
        JAX_HESS: lambda: j_hess(jx, jw),
    }


# ---------------------------------------------------------------- running one workload


def to_numpy(out):
    """A peer's result as one array: per-sample gradients flattened and joined to (B, P); a Hessian as it is."""
    if isinstance(out, (tuple, list)):
        return np.concatenate([to_numpy(o).reshape(len(out[0]), -1) for o in out], axis=1)
    if isinstance(out, bg.Tensor):
        return np.asarray(out.jax())
    if isinstance(out, torch.Tensor):
        return out.detach().numpy()
    return np.asarray(out)


def timed_calls(fn, calls):
    """[(seconds, bg compiles)] of `calls` calls of `fn`, each waited for, and the last result as an array."""
    out = []
    for _ in range(calls):
        c0, t0 = bg.compile_count(), time.perf_counter()
        r = fn()
        ready(r)
        out.append((time.perf_counter() - t0, bg.compile_count() - c0))
    return out, to_numpy(r)


def run_workload(name, peers, reference, number, repeats, slow=None, skip=()):
    """Latency of calls 1-3, bg warm-up, agreement, then interleaved steady-state timing.

    `slow` is {name: calls} for peers too slow for the interleaved loop: they make only that many calls in all
    (a bg peer makes its 3 + FUSE_WARMUP), and their steady state is read from their calls after the first (for a
    bg peer, from its warm-up calls after the last one that compiled). Peers in `skip` are not run."""
    slow = slow or {}
    peers = {k: v for k, v in peers.items() if k not in skip}
    t_start = time.perf_counter()
    latency, results, warmup = {}, {}, {}
    for k, fn in peers.items():  # calls 1-3 of each fresh peer, compiles included
        latency[k], results[k] = timed_calls(fn, 3 if k.startswith("bg") else min(slow.get(k, 3), 3))
    for k in [k for k in peers if k.startswith("bg")]:  # after these, bg runs its fused programs
        warmup[k], results[k + " (fused)"] = timed_calls(peers[k], FUSE_WARMUP)
    diff = check(results, reference)
    c0, faults = bg.compile_count(), {}
    times = compare(
        {k: v for k, v in peers.items() if k not in slow},
        number,
        repeats,
        block_each=True,
        faults=faults,
        warmup=WARMUP_S,
    )
    steady_compiles = bg.compile_count() - c0
    for k, n in slow.items():
        if k in warmup:
            last_compile = max([i for i, (_, c) in enumerate(warmup[k]) if c] + [-1])
            times[k] = [t for t, _ in warmup[k][last_compile + 1 :]]
        elif k in peers:
            times[k] = [t for t, _ in latency[k][1:]] + compare({k: peers[k]}, 1, max(n - 3, 0))[k]
    stats = {k: stat(times[k]) for k in peers}
    print(f"  {name}: {time.perf_counter() - t_start:.0f} s; results agree (max |diff| {diff:.1e} vs {reference})")
    for k in peers:
        if k in slow:
            calls = 3 + FUSE_WARMUP if k in warmup else slow[k]
            print(f"    {k}: {calls} call(s) in all, outside the interleaved loop")
    for k in skip:
        print(f"    {k}: skipped (--quick)")
    return {
        "name": name,
        "stats": stats,
        "faults": faults,
        "latency": latency,
        "warmup": warmup,
        "steady_compiles": steady_compiles,
    }


# ---------------------------------------------------------------- the four workloads

PER_SAMPLE = [  # (label, layers, sample shape, B, calls per timed block, {quick: slow, full: slow}, skipped by --quick)
    ("MLP 784-128-10", MLP, (784,), 64, 3, ({T_LOOP: 3}, {}), ()),
    ("MLP 784-128-10", MLP, (784,), 256, 1, ({T_LOOP: 2}, {}), (BG_IGB, T_IGB)),
    (
        "CNN conv8-pool-conv16-pool-linear10",
        CNN,
        (1, 28, 28),
        64,
        1,
        ({T_LOOP: 2}, {BG_IGB: 3 + FUSE_WARMUP, T_IGB: 3}),
        (BG_IGB, T_IGB),
    ),
]


def workload_per_sample(number, label, layers, shape, batch, calls, slow, skip, repeats):
    rng = np.random.default_rng(number)
    X = rng.standard_normal((batch,) + shape).astype(np.float32)
    Y = rng.integers(0, 10, batch)
    return run_workload(
        f"{number}. Per-sample gradients, {label}, B={batch}",
        per_sample_peers(layers, X, Y),
        T_LOOP,
        calls,
        repeats,
        slow,
        skip,
    )


def workload_hessian(n, calls, repeats):
    rng = np.random.default_rng(n)
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    x0 = rng.standard_normal(n).astype(np.float32)
    return run_workload(f"4. Hessian ({n}, {n}) of sum(tanh(W x)^2)", hessian_peers(x0, w), T_HESS, calls, repeats)


# ---------------------------------------------------------------- report


def torch_reference(stats):
    return stats.get(T_FUNC) or stats.get(T_HESS)


def report(workloads):
    rows = []
    for w in workloads:
        s = w["stats"]
        ref_t, ref_loop, ref_j = torch_reference(s), s.get(T_LOOP), s.get(JAX) or s.get(JAX_HESS)
        for peer, v in s.items():
            rows.append(
                [
                    w["name"].split(".")[0],
                    peer,
                    fmt(v),
                    ratio(ref_t, v, "{:.2f}"),
                    ratio(ref_loop, v, "{:.2f}"),
                    ratio(v, ref_j, "{:.2f}"),
                    median_faults(w["faults"], peer),
                ]
            )
    table(
        "a. Steady state, forward + backward per call, milliseconds: median (min); ratios of medians. "
        "torch ref / this: > 1 means faster than torch.func.vmap(grad) (1-3) or torch's hessian (4); "
        "torch loop / this: > 1 means faster than torch's per-sample loop; this / jax: < 1 means faster than "
        "the jitted JAX peer; faults / call: minor page faults per call (median; n/a outside the interleaved loop)",
        ["#", "peer", "ms per call", "torch ref / this", "torch loop / this", "this / jax", "faults / call"],
        rows,
        left=2,
    )
    rows = []
    for w in workloads:
        for peer, calls in w["latency"].items():
            compiles = ""
            if peer in w["warmup"]:
                warm = "/".join(str(c) for _, c in w["warmup"][peer])
                compiles = "/".join(str(c) for _, c in calls) + f" then {warm}, timed: {w['steady_compiles']}"
            cells = [f"{t * 1e3:.1f}" for t, _ in calls] + ["-"] * (3 - len(calls))
            rows.append([w["name"].split(".")[0], peer] + cells + [compiles])
    table(
        "b. First calls of freshly built peers (compiles included), milliseconds. compiles: bg.compile_count() "
        f"increase on calls 1/2/3, then on the warm-up calls 4-{3 + FUSE_WARMUP}, then during all the timed calls "
        "of the workload (must be 0)",
        ["#", "peer", "call 1", "call 2", "call 3", "compiles"],
        rows,
        left=2,
    )


def targets(workloads):
    print("\nc. Targets (medians; mins in brackets)")

    def line(label, faster, slower, goal):
        value, best = slower[0] / faster[0], slower[1] / faster[1]
        print(f"  {'MET   ' if value >= goal else 'MISSED'} {label}: {value:.2f}x ({best:.2f}x)")

    for w in workloads:
        s, number = w["stats"], w["name"].split(".")[0]
        if BG_VMAP in s:
            line(
                f"workload {number}: bg vmap.vmap(grad) at least as fast as torch.func.vmap(grad) (torch / bg)",
                s[BG_VMAP],
                s[T_FUNC],
                1,
            )
        if BG_HESS in s:
            line(f"workload {number}: bg hessian >= 10x faster than torch's (torch / bg)", s[BG_HESS], s[T_HESS], 10)


def main(argv):
    del argv
    torch.set_num_threads(FLAGS.torch_threads)
    quick = FLAGS.quick
    repeats = FLAGS.repeats or (3 if quick else 9)
    print(
        f"batched_grad {bg.__version__}, jax {jax.__version__}, torch {torch.__version__} "
        f"(torch threads {torch.get_num_threads()}), {os.cpu_count()} CPUs, repeats {repeats}, "
        f"FUSE_AFTER {FUSE_AFTER}, load average {os.getloadavg()[0]:.1f}, {environment()}"
    )
    start = time.perf_counter()
    workloads = [
        workload_per_sample(i, label, layers, shape, batch, calls, slow[not quick], skip if quick else (), repeats)
        for i, (label, layers, shape, batch, calls, slow, skip) in enumerate(PER_SAMPLE, 1)
    ]
    workloads.append(workload_hessian(256, 3 if quick else 10, repeats))
    report(workloads)
    targets(workloads)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    app.run(main)
