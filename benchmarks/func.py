"""batched_grad.func against torch.func and jax.jit: the transforms of torch.func's tutorials, on CPU.

Five workloads, three peers each, measured in the same process with their repeats interleaved:
  1. per-sample gradients of the CNN of benchmarks/functional.py (cross-entropy), B=64:
     `vmap(grad(loss), in_dims=(None, 0, 0))` over `functional_call`;
  2. `jacrev` of x -> tanh(W x), W (2048, 32): a Jacobian (2048, 32);
  3. `vmap(jacrev)` of an MLP 32-64-16 (Linear, Tanh, Linear) over B=64 inputs: Jacobians (64, 16, 32);
  4. `hessian` of f(x) = sum(tanh(W x)^2), W (512, 32): a Hessian (32, 32);
  5. the empirical NTK of the same CNN between 16 and 16 images: `vmap(jacrev)` over the parameters through
     `functional_call`, then the kernel (16, 16, 10, 10) by einsum, as torch.func's NTK tutorial computes it.
Peers: `batched_grad.func` and `torch.func` run the same code (only the library differs: bg.nn loads torch's
state_dict); `jax.jit` runs the same computation written in JAX, weights passed as arguments. Every peer's result is
checked against torch.func's before timing. Tables: steady state, first-call latency with compiles, targets.

    python benchmarks/func.py            # about 40 s on a loaded 2-core machine
    python benchmarks/func.py --quick    # about 20 s: 3 repeats, shorter blocks
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
import batched_grad.func  # noqa: F401 - bg.func
import batched_grad.nn.functional  # noqa: F401 - bg.nn.functional

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "3 repeats and shorter timed blocks (about 20 s).")
flags.DEFINE_integer("repeats", None, "Timing repeats per measurement (default 9, 3 with --quick).")
flags.DEFINE_integer("torch_threads", 1, "torch.set_num_threads (1 by default, as in benchmarks/overhead.py).")

# The steady state of the fused programs, reached in a known number of calls: each structure is compiled from its
# third sighting on (by default a structure is compiled once its per-op runs have paid for the compile, _payback.py)
FUSE_AFTER = 2
bg.set_fuse_after(FUSE_AFTER)
FUSE_WARMUP = FUSE_AFTER + 2  # calls of a structure after which it surely runs as one fused program
BG, TORCH, JAX = "batched_grad.func", "torch.func", "jax.jit"
MLP_SMALL = [("Linear", 32, 64), ("Tanh",), ("Linear", 64, 16)]
BG_OVER_JAX = 1.5  # the target: bg's median within this factor of jax.jit's


# ---------------------------------------------------------------- models and data shared by the peers


def models(layers, seed):
    """{BG: bg module, TORCH: torch module} with the same weights, and those weights as JAX arrays by name."""
    torch.manual_seed(seed)
    t_model = build(torch.nn, layers)
    b_model = build(bg.nn, layers)
    b_model.load_state_dict({k: bg.tensor(v.detach().numpy()) for k, v in t_model.state_dict().items()})
    j_params = {k: jnp.asarray(v.detach().numpy()) for k, v in t_model.named_parameters()}
    return {BG: b_model, TORCH: t_model}, j_params


def detached_params(model):
    return {k: v.detach() for k, v in model.named_parameters()}


def libraries():
    """{peer: (the library, its func module)}: the bg and torch peers run the same code on either."""
    return {BG: (bg, bg.func), TORCH: (torch, torch.func)}


# ---------------------------------------------------------------- the workloads, written once for bg and torch


def per_sample_grads(lib, func, model, X, Y):
    params, X, Y = detached_params(model), lib.tensor(X), lib.tensor(Y)

    def loss(params, x, y):
        logits = func.functional_call(model, params, (x.unsqueeze(0),))
        return lib.nn.functional.cross_entropy(logits, y.unsqueeze(0))

    per_sample = func.vmap(func.grad(loss), in_dims=(None, 0, 0))
    return lambda: per_sample(params, X, Y)


def jax_per_sample_grads(params, X, Y):
    def loss(p, x, y):
        return jax_cross_entropy(jax_forward(CNN, p, x[None]), y[None])

    per_sample = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    X, Y = jnp.asarray(X), jnp.asarray(Y)
    return lambda: per_sample(params, X, Y)


def tanh_layer_jacobian(lib, func, w, x):
    w, x = lib.tensor(w), lib.tensor(x)
    jacobian = func.jacrev(lambda x: lib.tanh(w @ x))
    return lambda: jacobian(x)


def jax_tanh_layer_jacobian(w, x):
    jacobian = jax.jit(jax.jacrev(lambda x, w: jnp.tanh(w @ x)))
    w, x = jnp.asarray(w), jnp.asarray(x)
    return lambda: jacobian(x, w)


def per_sample_jacobians(lib, func, model, X):
    X = lib.tensor(X)
    jacobians = func.vmap(func.jacrev(model))
    return lambda: jacobians(X)


def jax_per_sample_jacobians(params, X):
    jacobians = jax.jit(jax.vmap(jax.jacrev(lambda x, p: jax_forward(MLP_SMALL, p, x)), in_axes=(0, None)))
    X = jnp.asarray(X)
    return lambda: jacobians(X, params)


def tanh_energy(x, w, tanh):
    return (tanh(w @ x) ** 2).sum()


def tanh_energy_hessian(lib, func, w, x):
    w, x = lib.tensor(w), lib.tensor(x)
    hessian = func.hessian(lambda x: tanh_energy(x, w, lib.tanh))
    return lambda: hessian(x)


def jax_tanh_energy_hessian(w, x):
    hessian = jax.jit(jax.hessian(lambda x, w: tanh_energy(x, w, jnp.tanh)))
    w, x = jnp.asarray(w), jnp.asarray(x)
    return lambda: hessian(x, w)


def ntk(lib, func, model, X1, X2):
    """torch.func's NTK tutorial: the Jacobians of the outputs for the parameters, contracted."""
    params, X1, X2 = detached_params(model), lib.tensor(X1), lib.tensor(X2)

    def single(params, x):
        return func.functional_call(model, params, (x.unsqueeze(0),)).squeeze(0)

    jacobians = func.vmap(func.jacrev(single), (None, 0))

    def kernel():
        j1 = [j.flatten(2) for j in jacobians(params, X1).values()]
        j2 = [j.flatten(2) for j in jacobians(params, X2).values()]
        return lib.stack([lib.einsum("Naf,Mbf->NMab", a, b) for a, b in zip(j1, j2)]).sum(0)

    return kernel


def jax_ntk(params, X1, X2):
    def single(p, x):
        return jax_forward(CNN, p, x[None])[0]

    jacobians = jax.vmap(jax.jacrev(single), (None, 0))

    def kernel(p, x1, x2):
        j1 = [j.reshape(j.shape[:2] + (-1,)) for j in jax.tree_util.tree_leaves(jacobians(p, x1))]
        j2 = [j.reshape(j.shape[:2] + (-1,)) for j in jax.tree_util.tree_leaves(jacobians(p, x2))]
        return jnp.stack([jnp.einsum("Naf,Mbf->NMab", a, b) for a, b in zip(j1, j2)]).sum(0)

    kernel = jax.jit(kernel)
    X1, X2 = jnp.asarray(X1), jnp.asarray(X2)
    return lambda: kernel(params, X1, X2)


# ---------------------------------------------------------------- the five workloads' peers


def images(rng, n):
    return rng.standard_normal((n, 1, 28, 28)).astype(np.float32)


def peers_per_sample(rng):
    mods, j_params = models(CNN, 1)
    X, Y = images(rng, 64), rng.integers(0, 10, 64)
    peers = {k: per_sample_grads(lib, func, mods[k], X, Y) for k, (lib, func) in libraries().items()}
    return {**peers, JAX: jax_per_sample_grads(j_params, X, Y)}


def peers_jacrev(rng):
    w = (rng.standard_normal((2048, 32)) / np.sqrt(32)).astype(np.float32)
    x = rng.standard_normal(32).astype(np.float32)
    peers = {k: tanh_layer_jacobian(lib, func, w, x) for k, (lib, func) in libraries().items()}
    return {**peers, JAX: jax_tanh_layer_jacobian(w, x)}


def peers_vmap_jacrev(rng):
    mods, j_params = models(MLP_SMALL, 3)
    X = rng.standard_normal((64, 32)).astype(np.float32)
    peers = {k: per_sample_jacobians(lib, func, mods[k], X) for k, (lib, func) in libraries().items()}
    return {**peers, JAX: jax_per_sample_jacobians(j_params, X)}


def peers_hessian(rng):
    w = (rng.standard_normal((512, 32)) / np.sqrt(32)).astype(np.float32)
    x = rng.standard_normal(32).astype(np.float32)
    peers = {k: tanh_energy_hessian(lib, func, w, x) for k, (lib, func) in libraries().items()}
    return {**peers, JAX: jax_tanh_energy_hessian(w, x)}


def peers_ntk(rng):
    mods, j_params = models(CNN, 5)
    X1, X2 = images(rng, 16), images(rng, 16)
    peers = {k: ntk(lib, func, mods[k], X1, X2) for k, (lib, func) in libraries().items()}
    return {**peers, JAX: jax_ntk(j_params, X1, X2)}


WORKLOADS = [  # (label, peers builder, calls per timed block: full run, --quick)
    ("Per-sample gradients, CNN, B=64: vmap(grad) over functional_call", peers_per_sample, 3, 2),
    ("jacrev of tanh(W x), W (2048, 32)", peers_jacrev, 20, 10),
    ("vmap(jacrev) of an MLP 32-64-16, B=64", peers_vmap_jacrev, 20, 10),
    ("hessian of sum(tanh(W x)^2), W (512, 32)", peers_hessian, 20, 10),
    ("NTK of the CNN, 16x16 images: vmap(jacrev) over functional_call, einsum", peers_ntk, 3, 2),
]


# ---------------------------------------------------------------- running one workload


def to_numpy(out):
    """A peer's result as one flat array: the leaves of its pytree (dicts in key order), raveled and joined."""
    if isinstance(out, dict):
        return np.concatenate([to_numpy(out[k]) for k in sorted(out)])
    if isinstance(out, bg.Tensor):
        return np.asarray(out.jax()).ravel()
    if isinstance(out, torch.Tensor):
        return out.detach().numpy().ravel()
    return np.asarray(out).ravel()


def timed_calls(fn, calls):
    """[(seconds, bg compiles)] of `calls` calls of `fn`, each waited for, and the last result as an array."""
    out = []
    for _ in range(calls):
        c0, t0 = bg.compile_count(), time.perf_counter()
        r = fn()
        ready(r)
        out.append((time.perf_counter() - t0, bg.compile_count() - c0))
    return out, to_numpy(r)


def run_workload(number, label, peers, calls, repeats):
    """Latency of calls 1-3 of each fresh peer, bg's warm-up, agreement with torch.func, then interleaved timing."""
    name, t_start = f"{number}. {label}", time.perf_counter()
    latency, results = {}, {}
    for k, fn in peers.items():
        latency[k], results[k] = timed_calls(fn, 3)
    warmup, results[BG + " (fused)"] = timed_calls(peers[BG], FUSE_WARMUP)
    diff = check(results, TORCH)
    c0, faults = bg.compile_count(), {}
    times = compare(peers, calls, repeats, block_each=True, faults=faults, warmup=WARMUP_S)
    steady_compiles = bg.compile_count() - c0
    print(f"  {name}: {time.perf_counter() - t_start:.0f} s; results agree (max |diff| {diff:.1e} vs {TORCH})")
    return {
        "name": name,
        "stats": {k: stat(v) for k, v in times.items()},
        "faults": faults,
        "latency": latency,
        "warmup": warmup,
        "steady_compiles": steady_compiles,
    }


# ---------------------------------------------------------------- report


def report(workloads):
    rows = []
    for w in workloads:
        s = w["stats"]
        for peer, v in s.items():
            rows.append(
                [
                    w["name"].split(".")[0],
                    peer,
                    fmt(v),
                    ratio(s[TORCH], v, "{:.2f}"),
                    ratio(v, s[JAX], "{:.2f}"),
                    median_faults(w["faults"], peer),
                ]
            )
    table(
        "a. Steady state, milliseconds per call: median (min); ratios of medians. torch.func / this: > 1 means "
        "faster than torch.func; this / jax: < 1 means faster than jax.jit; faults / call: minor page faults per "
        "call (median)",
        ["#", "peer", "ms per call", "torch.func / this", "this / jax", "faults / call"],
        rows,
        left=2,
    )
    rows = []
    for w in workloads:
        for peer, calls in w["latency"].items():
            compiles = ""
            if peer == BG:
                warm = "/".join(str(c) for _, c in w["warmup"])
                compiles = "/".join(str(c) for _, c in calls) + f" then {warm}, timed: {w['steady_compiles']}"
            rows.append([w["name"].split(".")[0], peer] + [f"{t * 1e3:.1f}" for t, _ in calls] + [compiles])
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
    for w in workloads:
        s, number = w["stats"], w["name"].split(".")[0]
        b, t, j = s[BG], s[TORCH], s[JAX]
        met = t[0] >= b[0]
        print(
            f"  {'MET   ' if met else 'MISSED'} workload {number}: bg at least as fast as torch.func "
            f"(torch.func / bg): {t[0] / b[0]:.2f}x ({t[1] / b[1]:.2f}x)"
        )
        met = b[0] <= BG_OVER_JAX * j[0]
        print(
            f"  {'MET   ' if met else 'MISSED'} workload {number}: bg within {BG_OVER_JAX}x of jax.jit (bg / jax): "
            f"{b[0] / j[0]:.2f}x ({b[1] / j[1]:.2f}x)"
        )
    compiled = sum(w["steady_compiles"] for w in workloads)
    print(f"  {'MET   ' if compiled == 0 else 'MISSED'} bg compiled nothing during the timed calls: {compiled}")


def main(argv):
    del argv
    torch.set_num_threads(FLAGS.torch_threads)
    quick = FLAGS.quick
    repeats = FLAGS.repeats or (3 if quick else 9)
    print(
        f"batched_grad {bg.__version__}, jax {jax.__version__}, torch {torch.__version__} "
        f"(torch threads {torch.get_num_threads()}), {os.cpu_count()} CPUs, repeats {repeats}, "
        f"FUSE_AFTER {FUSE_AFTER}, load average {os.getloadavg()[0]:.1f}, {environment()}, "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '(unset)')} (the JAX peer's too)"
    )
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    workloads = [
        run_workload(i, label, build_peers(rng), quick_calls if quick else calls, repeats)
        for i, (label, build_peers, calls, quick_calls) in enumerate(WORKLOADS, 1)
    ]
    report(workloads)
    targets(workloads)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    app.run(main)
