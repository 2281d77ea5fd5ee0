"""Batched backward (`grad(..., is_grads_batched=True)`) of batched_grad against torch and JAX.

Four workloads, every peer measured in the same process with its repeats interleaved:
  1. Jacobian of a 256-256x3-128 tanh MLP (128 cotangents);
  2. Jacobian of tanh(W2 tanh(W1 x)) at N=1024 (1024 cotangents);
  3. 64 batched Hessian-vector products of f(x) = sum(tanh(W x)^2) at n=512;
  4. the per-row fallback at B=256: a custom Function with a NumPy backward inside a vectorizable graph
     (B=32 with --quick; on the CPU backend the loop slices rows and stacks results on the host: no kernel).
Every timed call runs forward + backward (batched_grad and torch rebuild the graph each call, as a user would).
Two tables: steady state (after warm-up, so batched_grad runs its fused program) and the latency of the first
three calls of each peer (compiles included), then the targets, each marked met or missed.

    python benchmarks/batched.py            # about 1.5-2 minutes on a loaded 2-core machine
    python benchmarks/batched.py --quick    # 25-50 s: fewer repeats, torch's is_grads_batched and per-row
                                            # loop at N=1024 skipped, fallback at B=32
"""

import os
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch
from _timing import ATOL, RTOL, WARMUP_S, check, compare, environment, fmt, median_faults, ratio, ready, stat, table
from absl import app, flags

import batched_grad as bg
import vmap
from vmap import _fallback

FLAGS = flags.FLAGS
flags.DEFINE_bool(
    "quick",
    False,
    "Fewer repeats; at N=1024 torch's is_grads_batched and per-row loop skipped; "
    "fallback workload at B=32 (under 45 s).",
)
flags.DEFINE_integer("fallback_rows", None, "B of the fallback workload (default 256, 32 with --quick).")
flags.DEFINE_integer("repeats", None, "Timing repeats per measurement (default 11, 3 with --quick).")
flags.DEFINE_integer("torch_threads", 1, "torch.set_num_threads (1 by default, as in benchmarks/overhead.py).")
flags.DEFINE_integer(
    "slow_torch_runs",
    None,
    "Calls of torch's is_grads_batched Jacobian at N=1024 (seconds each, a legacy-vmap cliff): "
    "default 2, 0 (skipped) with --quick.",
)

# The steady state of the fused programs, reached in a known number of calls: each structure is compiled from its
# third sighting on (by default a structure is compiled once its per-op runs have paid for the compile, _payback.py)
FUSE_AFTER = 2
bg.set_fuse_after(FUSE_AFTER)
FUSE_WARMUP = FUSE_AFTER + 2  # calls of a structure after which it surely runs as one fused program
BG_IGB, T_IGB, T_LOOP, T_JACREV, JAX = (
    "bg is_grads_batched",
    "torch is_grads_batched",
    "torch per-row loop",
    "torch.func.jacrev",
    "jax.jit(jax.jacrev)",
)
BG_GRAD_ONLY = "bg grad() only, graph pre-built"


# ---------------------------------------------------------------- results


def to_numpy(out):
    if isinstance(out, (tuple, list)):
        (out,) = out
    if isinstance(out, bg.Tensor):
        return np.asarray(out.jax())
    if isinstance(out, torch.Tensor):
        return out.detach().numpy()
    return np.asarray(out)


# ---------------------------------------------------------------- the workloads (same code for bg, torch, JAX)


def mlp(x, params, tanh):
    """256-256x3-128: tanh after each hidden layer, linear output."""
    ws, bs = params
    h = x
    for i, (w, b) in enumerate(zip(ws, bs)):
        h = h @ w + b
        if i < len(ws) - 1:
            h = tanh(h)
    return h


def two_layer(x, params, tanh):
    w1, w2 = params
    return tanh(w2 @ tanh(w1 @ x))


def hvp_objective(x, w, tanh):
    return (tanh(w @ x) ** 2).sum()


class BgNumpySin(bg.autograd.Function):
    """sin computed in NumPy, backward in NumPy: jax.vmap cannot trace it, so it runs per row."""

    @staticmethod
    def forward(ctx, h):
        ctx.save_for_backward(h)
        return bg.from_numpy(np.sin(h.detach().numpy()))

    @staticmethod
    def backward(ctx, g):
        (h,) = ctx.saved_tensors
        return bg.from_numpy(np.cos(h.detach().numpy()) * g.numpy())


class TorchNumpySin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h):
        ctx.save_for_backward(h)
        return torch.from_numpy(np.sin(h.detach().numpy()))

    @staticmethod
    def backward(ctx, g):
        (h,) = ctx.saved_tensors
        return torch.from_numpy(np.cos(h.detach().numpy()) * g.numpy())


def fallback_net(x, params, tanh, numpy_sin):
    """x (192,) -> tanh(x W1 + b1) (320,) -> NumPy sin -> tanh(. W2 + b2) (256,)."""
    w1, b1, w2, b2 = params
    return tanh(numpy_sin(tanh(x @ w1 + b1)) @ w2 + b2)


def jax_fallback_net(x, params):  # the same function with jnp.sin, for the reference Jacobian only
    return fallback_net(x, params, jnp.tanh, jnp.sin)


# ---------------------------------------------------------------- peers: each a zero-argument callable


def bg_jacobian(f, x0, params, m):
    params = jax.tree_util.tree_map(bg.tensor, params)
    eye = bg.eye(m)

    def forward():
        x = bg.tensor(x0, requires_grad=True)
        return x, f(x, params, bg.tanh)

    def backward(graph):
        x, out = graph
        return bg.autograd.grad(out, x, eye, is_grads_batched=True)

    return forward, backward


def torch_jacobian(f, x0, params, m):
    params = jax.tree_util.tree_map(torch.tensor, params)
    eye = torch.eye(m)
    rows = list(eye)

    def forward():
        x = torch.tensor(x0, requires_grad=True)
        return x, f(x, params, torch.tanh)

    def batched():
        x, out = forward()
        return torch.autograd.grad(out, x, eye, is_grads_batched=True)

    def loop():
        x, out = forward()
        return torch.stack([torch.autograd.grad(out, x, e, retain_graph=True)[0] for e in rows])

    jacrev = torch.func.jacrev(lambda x: f(x, params, torch.tanh))
    x_plain = torch.tensor(x0)
    return {T_IGB: batched, T_LOOP: loop, T_JACREV: lambda: jacrev(x_plain)}


def jax_jacobian(f, x0, params):
    params = jax.tree_util.tree_map(jnp.asarray, params)
    x = jnp.asarray(x0)
    jac = jax.jit(jax.jacrev(lambda x, p: f(x, p, jnp.tanh)))  # weights are arguments, not baked-in constants
    return lambda: jac(x, params)


def bg_hvp(x0, w, v):
    w, v = bg.tensor(w), bg.tensor(v)

    def forward():
        x = bg.tensor(x0, requires_grad=True)
        return x, hvp_objective(x, w, bg.tanh)

    def backward(graph):
        x, f = graph
        (g,) = bg.autograd.grad(f, x, create_graph=True)
        return bg.autograd.grad(g, x, v, is_grads_batched=True)

    return forward, backward


def torch_hvp(x0, w, v):
    w, v = torch.tensor(w), torch.tensor(v)

    def batched():
        x = torch.tensor(x0, requires_grad=True)
        (g,) = torch.autograd.grad(hvp_objective(x, w, torch.tanh), x, create_graph=True)
        return torch.autograd.grad(g, x, v, is_grads_batched=True)

    return batched


def jax_hvps(x0, w, v):
    x, w, v = jnp.asarray(x0), jnp.asarray(w), jnp.asarray(v)
    grad_f = jax.grad(lambda x, w: hvp_objective(x, w, jnp.tanh))
    fwd_over_rev = jax.jit(lambda x, w, v: jax.vmap(lambda t: jax.jvp(lambda y: grad_f(y, w), (x,), (t,))[1])(v))
    rev_over_rev = jax.jit(lambda x, w, v: jax.vmap(jax.vjp(lambda y: grad_f(y, w), x)[1])(v)[0])
    return {
        "jax.jit(vmap(jvp of grad))": lambda: fwd_over_rev(x, w, v),
        "jax.jit(vmap(vjp of grad))": lambda: rev_over_rev(x, w, v),
    }


def bg_fallback(x0, params, m):
    forward, backward = bg_jacobian(lambda x, p, tanh: fallback_net(x, p, tanh, BgNumpySin.apply), x0, params, m)
    return forward, backward


def torch_fallback(x0, params, m):
    return torch_jacobian(lambda x, p, tanh: fallback_net(x, p, tanh, TorchNumpySin.apply), x0, params, m)


# ---------------------------------------------------------------- running one workload


def first_calls(peers, calls=3, fewer=None):
    """{name: [(seconds, bg compiles) of calls 1..calls]} of freshly built peers (compiles included);
    `fewer` is {name: number of calls} for slow peers."""
    out, results = {}, {}
    for name, fn in peers.items():
        out[name] = []
        for _ in range((fewer or {}).get(name, calls)):
            c0, t0 = bg.compile_count(), time.perf_counter()
            r = fn()
            ready(r)
            out[name].append((time.perf_counter() - t0, bg.compile_count() - c0))
        results[name] = to_numpy(r)
    return out, results


def prebuilt(forward, backward, count):
    """A callable running `backward` on the next of `count` graphs built beforehand (not timed)."""
    graphs = iter([forward() for _ in range(count)])
    return lambda: backward(next(graphs))


def run_workload(name, bg_peer, peers, reference, number, repeats, slow=None, notes=()):
    """Latency of calls 1-3, agreement, warm-up, then interleaved steady-state timing.

    `bg_peer` is (forward, backward) of batched_grad, `peers` {name: callable} of the others. `slow` is
    {name: calls} for peers too slow for the interleaved loop: they make only that many calls in all (0: skipped),
    and their steady state is read from their calls after the first (from call 1 when it is the only one)."""
    slow = slow or {}
    forward, backward = bg_peer
    everyone = {BG_IGB: lambda: backward(forward()), **{k: v for k, v in peers.items() if slow.get(k, 1) > 0}}
    t_start = time.perf_counter()
    latency, results = first_calls(everyone, fewer={k: min(n, 3) for k, n in slow.items()})
    warmup = []  # compiles of bg's calls 4, 5, ...: a structure that changes when an inner grad fuses fuses later
    for _ in range(FUSE_WARMUP):
        c0 = bg.compile_count()
        ready(everyone[BG_IGB]())
        warmup.append(bg.compile_count() - c0)
    results[BG_IGB + " (fused)"] = to_numpy(everyone[BG_IGB]())
    diff = check(results, reference)
    timed = {k: v for k, v in everyone.items() if k not in slow}
    timed[BG_GRAD_ONLY] = prebuilt(forward, backward, number * repeats + 2)
    ready(timed[BG_GRAD_ONLY]())  # its fused program is already compiled; one call to be sure
    c0, faults = bg.compile_count(), {}
    times = compare(
        timed,
        number,
        repeats,
        block_each=True,
        faults=faults,
        warmup=WARMUP_S,
        warmups={BG_GRAD_ONLY: everyone[BG_IGB]},
    )
    steady_compiles = bg.compile_count() - c0
    for k, n in slow.items():
        if n > 0:
            times[k] = [t for t, _ in latency[k][1:]] or [latency[k][0][0]]
            times[k] += compare({k: everyone[k]}, 1, max(n - 3, 0), block_each=True)[k]
    stats = {k: stat(times.get(k)) for k in [BG_IGB] + list(peers) + [BG_GRAD_ONLY]}
    print(f"  {name}: {time.perf_counter() - t_start:.0f} s; results agree (max |diff| {diff:.1e} vs {reference})")
    for k, n in slow.items():
        print(f"    {k}: {n} call(s) in all" + (" (skipped)" if n == 0 else ""))
    for note in notes:
        print(f"    {note}")
    return {
        "name": name,
        "stats": stats,
        "faults": faults,
        "latency": latency,
        "warmup": warmup,
        "steady_compiles": steady_compiles,
    }


# ---------------------------------------------------------------- the four workloads


def workload_mlp(rng, number, repeats, slow):
    sizes = [256, 256, 256, 256, 128]
    ws = [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32) for a, b in zip(sizes[:-1], sizes[1:])]
    bs = [(0.1 * rng.standard_normal(b)).astype(np.float32) for b in sizes[1:]]
    x0 = rng.standard_normal(256).astype(np.float32)
    params = (ws, bs)
    peers = {**torch_jacobian(mlp, x0, params, 128), JAX: jax_jacobian(mlp, x0, params)}
    return run_workload(
        "1. Jacobian (128, 256) of a 256-256x3-128 tanh MLP",
        bg_jacobian(mlp, x0, params, 128),
        peers,
        T_LOOP,
        number,
        repeats,
        slow=slow,
    )


def workload_n1024(rng, number, repeats, slow):
    n = 1024
    w1, w2 = [(rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32) for _ in range(2)]
    x0 = rng.standard_normal(n).astype(np.float32)
    params = (w1, w2)
    peers = {**torch_jacobian(two_layer, x0, params, n), JAX: jax_jacobian(two_layer, x0, params)}
    return run_workload(
        f"2. Jacobian ({n}, {n}) of tanh(W2 tanh(W1 x))",
        bg_jacobian(two_layer, x0, params, n),
        peers,
        T_JACREV,
        number,
        repeats,
        slow=slow,
    )


def workload_hvp(rng, number, repeats):
    n, b = 512, 64
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    x0 = rng.standard_normal(n).astype(np.float32)
    v = rng.standard_normal((b, n)).astype(np.float32)
    peers = {T_IGB: torch_hvp(x0, w, v), **jax_hvps(x0, w, v)}
    return run_workload(
        f"3. {b} Hessian-vector products, f(x) = sum(tanh(W x)^2), n={n}",
        bg_hvp(x0, w, v),
        peers,
        T_IGB,
        number,
        repeats,
    )


def workload_fallback(rng, number, repeats, m):
    n_in, hidden = 192, 320
    params = (
        (rng.standard_normal((n_in, hidden)) / np.sqrt(n_in)).astype(np.float32),
        (0.1 * rng.standard_normal(hidden)).astype(np.float32),
        (rng.standard_normal((hidden, m)) / np.sqrt(hidden)).astype(np.float32),
        (0.1 * rng.standard_normal(m)).astype(np.float32),
    )
    x0 = rng.standard_normal(n_in).astype(np.float32)
    torch_peers = torch_fallback(x0, params, m)
    try:  # torch's legacy vmap cannot run a NumPy backward either; record what it says
        ready(torch_peers[T_IGB]())
        igb_note = "torch is_grads_batched ran"
    except Exception as error:  # noqa: BLE001 - reported, not hidden
        igb_note = f"torch is_grads_batched fails here: {type(error).__name__}: {str(error).splitlines()[0][:110]}"
        del torch_peers[T_IGB]
    del torch_peers[T_JACREV]  # torch.func cannot trace a NumPy backward
    jax_ref = jax.jit(jax.jacrev(jax_fallback_net))(jnp.asarray(x0), jax.tree_util.tree_map(jnp.asarray, params))
    forward, backward = bg_fallback(x0, params, m)
    result = run_workload(
        f"4. Fallback: Jacobian ({m}, {n_in}) through a NumPy-backward Function, B={m}",
        (forward, backward),
        torch_peers,
        T_LOOP,
        number,
        repeats,
        notes=[igb_note],
    )
    loops_before = _fallback.row_loops[0]
    with warnings.catch_warnings(record=True) as caught, vmap.fallback_warnings():
        warnings.simplefilter("always")
        bg_j = to_numpy(backward(forward()))
    fallback = [w for w in caught if issubclass(w.category, vmap.FallbackWarning)]
    if not fallback or _fallback.row_loops[0] != loops_before + 1:
        raise AssertionError("the NumPy backward did not take the per-row fallback")
    print(f"    FallbackWarning (one per call): {fallback[0].message}")
    if not np.allclose(bg_j, np.asarray(jax_ref), rtol=RTOL, atol=ATOL):
        raise AssertionError("bg fallback Jacobian disagrees with jax.jacrev of the same function (jnp.sin)")
    print("    and matches jax.jacrev of the same function written with jnp.sin")
    result["rows"] = m
    return result


# ---------------------------------------------------------------- report


def report(workloads):
    rows = []
    for w in workloads:
        s = w["stats"]
        ref_t, ref_loop = s.get(T_IGB), s.get(T_LOOP)
        jax_names = [k for k in s if k.startswith("jax")]
        ref_j = min((s[k] for k in jax_names), key=lambda v: v[0]) if jax_names else None
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
        "torch igb / this, torch loop / this: > 1 means faster than torch's is_grads_batched, per-row loop; "
        "this / jax: < 1 means faster than the (fastest) jitted JAX peer; faults / call: minor page faults per call "
        "(median; n/a outside the interleaved loop)",
        ["#", "peer", "ms per call", "torch igb / this", "torch loop / this", "this / jax", "faults / call"],
        rows,
        left=2,
    )
    rows = []
    for w in workloads:
        for peer, calls in w["latency"].items():
            compiles = ""
            if peer == BG_IGB:
                compiles = "/".join(str(c) for _, c in calls) + " then " + "/".join(str(c) for c in w["warmup"])
                compiles += f", timed: {w['steady_compiles']}"
            cells = [f"{t * 1e3:.1f}" for t, _ in calls] + ["-"] * (3 - len(calls))
            rows.append([w["name"].split(".")[0], peer] + cells + [compiles])
    table(
        "b. First calls of freshly built peers (compiles included), milliseconds. compiles: bg.compile_count() "
        f"increase on calls 1/2/3 (calls 1-2 run per-node kernels, call 3 compiles the fused program), then on the "
        f"warm-up calls 4-{3 + FUSE_WARMUP}, then during all the timed calls (must be 0). The fallback graph is "
        "never fused (its Function node is not a table op): it runs per-node kernels on every call",
        ["#", "peer", "call 1", "call 2", "call 3", "compiles"],
        rows,
        left=2,
    )


def targets(workloads):
    print("\nc. Targets (medians; mins in brackets)")
    s = {w["name"].split(".")[0]: w["stats"] for w in workloads}

    def line(label, value, best, ok):
        print(f"  {'MET   ' if ok else 'MISSED'} {label}: {value:.2f}x ({best:.2f}x)")

    for k in ("1", "2"):
        b, t, j = s[k][BG_IGB], s[k].get(T_IGB), s[k][JAX]
        if t is None:
            print(f"  n/a    workload {k}: bg >= 2x faster than torch is_grads_batched (torch skipped)")
        else:
            line(
                f"workload {k}: bg >= 2x faster than torch is_grads_batched (torch / bg)",
                t[0] / b[0],
                t[1] / b[1],
                t[0] / b[0] >= 2,
            )
        line(
            f"workload {k}: bg within 1.5x of jax.jit(jax.jacrev) (bg / jax)",
            b[0] / j[0],
            b[1] / j[1],
            b[0] / j[0] <= 1.5,
        )
    b, t = s["3"][BG_IGB], s["3"][T_IGB]
    line("workload 3: 64 HVPs >= 10x faster than torch (torch / bg)", t[0] / b[0], t[1] / b[1], t[0] / b[0] >= 10)
    b, t = s["4"][BG_IGB], s["4"][T_LOOP]
    line(
        f"workload 4: fallback at B={workloads[3]['rows']} no slower than torch's per-row loop (torch / bg)",
        t[0] / b[0],
        t[1] / b[1],
        t[0] / b[0] >= 1,
    )


def main(argv):
    del argv
    torch.set_num_threads(FLAGS.torch_threads)
    quick = FLAGS.quick
    repeats = FLAGS.repeats or (3 if quick else 11)
    slow_runs = FLAGS.slow_torch_runs if FLAGS.slow_torch_runs is not None else (0 if quick else 2)
    slow_mlp = {T_LOOP: 3 if quick else 6}  # ~150 ms per call here: kept out of the interleaved loop
    slow_1024 = {T_IGB: slow_runs, T_LOOP: 0 if quick else 4}  # ~2-5 s and ~1.5-2 s per call here
    print(
        f"batched_grad {bg.__version__}, jax {jax.__version__}, torch {torch.__version__} "
        f"(torch threads {torch.get_num_threads()}), {os.cpu_count()} CPUs, repeats {repeats}, "
        f"FUSE_AFTER {FUSE_AFTER}, load average {os.getloadavg()[0]:.1f}, {environment()}"
    )
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    workloads = [
        workload_mlp(rng, 3 if quick else 10, repeats, slow_mlp),
        workload_n1024(rng, 1, repeats, slow_1024),
        workload_hvp(rng, 2 if quick else 10, repeats),
        workload_fallback(rng, 1 if quick else 2, repeats, FLAGS.fallback_rows or (32 if quick else 256)),
    ]
    report(workloads)
    targets(workloads)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    app.run(main)
