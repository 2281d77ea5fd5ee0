"""Scale: batches whose rows are split over 1, 2 and 4 simulated CPU devices, and chunk_size="auto" under a memory
budget. Each configuration runs in a fresh process.

    python benchmarks/scale.py [--devices 1 2 4] [--repeats 5] [--quick]

Rows: a Jacobian of 16384 rows (x (64) -> W2 tanh(W1 x), 256 hidden; its cotangents the identity, split over the
devices with vmap.shard_rows) and per-sample gradients of a 64-256-10 MLP at B=4096 (vmap.vmap over examples split
over the devices), each against jax.jit of the same computation given the same split arrays. Simulated devices share
this machine's cores, so the table reports time per row and what splitting costs against one device, not a
speed-up; every result is checked against the one-device result. Memory: the peak RSS a first Jacobian call adds
with chunk_size="auto" under a 64 MB budget, against all rows at once (about 1 GB by XLA's analysis).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROWS_CHILD = textwrap.dedent("""
    import json, sys, time
    import jax, jax.numpy as jnp
    import numpy as np
    import batched_grad as bg
    import vmap

    out_dir, repeats, jac_rows, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    devices = jax.device_count()
    rng = np.random.default_rng(0)
    W1 = rng.standard_normal((256, 64)).astype(np.float32) / 8
    W2 = rng.standard_normal((jac_rows, 256)).astype(np.float32) / 16
    V1 = rng.standard_normal((64, 256)).astype(np.float32) / 8
    V2 = rng.standard_normal((256, 10)).astype(np.float32) / 16
    x0 = rng.standard_normal(64).astype(np.float32)
    X = rng.standard_normal((batch, 64)).astype(np.float32)
    Y = rng.standard_normal((batch, 10)).astype(np.float32)

    def split(a):
        return vmap.shard_rows(bg.tensor(a)) if devices > 1 else bg.tensor(a)

    seeds = split(np.eye(jac_rows, dtype=np.float32))
    w1, w2 = bg.tensor(W1), bg.tensor(W2)
    v1, v2 = bg.tensor(V1, requires_grad=True), bg.tensor(V2, requires_grad=True)
    Xs, Ys = split(X), split(Y)

    def bg_jacobian():
        x = bg.tensor(x0, requires_grad=True)
        return bg.autograd.grad(w2 @ bg.tanh(w1 @ x), x, seeds, is_grads_batched=True)[0]

    def loss_grad(x, y):
        return bg.autograd.grad(((bg.tanh(x @ v1) @ v2 - y) ** 2).mean(), (v1, v2))

    per_sample = vmap.vmap(loss_grad)

    def jax_f(x, a, b):
        return b @ jnp.tanh(a @ x)

    jax_jacobian = jax.jit(lambda x, a, b, s: jax.vmap(jax.vjp(lambda x: jax_f(x, a, b), x)[1])(s)[0])

    def jax_loss(p, x, y):
        return ((jnp.tanh(x @ p[0]) @ p[1] - y) ** 2).mean()

    jax_per_sample = jax.jit(jax.vmap(jax.grad(jax_loss), in_axes=(None, 0, 0)))
    J_seeds = seeds.jax()
    args = {"jacobian": (jnp.asarray(x0), jnp.asarray(W1), jnp.asarray(W2), J_seeds),
            "per_sample": ((jnp.asarray(V1), jnp.asarray(V2)), Xs.jax(), Ys.jax())}
    peers = {("jacobian", "bg"): bg_jacobian, ("jacobian", "jax"): lambda: jax_jacobian(*args["jacobian"]),
             ("per_sample", "bg"): lambda: per_sample(Xs, Ys),
             ("per_sample", "jax"): lambda: jax_per_sample(*args["per_sample"])}

    def arrays(out):
        out = out if isinstance(out, (tuple, list)) else (out,)
        return [o.jax() if isinstance(o, bg.Tensor) else o for o in jax.tree_util.tree_leaves(out)]

    report = {"devices": devices, "first": {}, "times": {}, "placement": {}}
    for (work, peer), fn in peers.items():
        start = time.perf_counter()
        results = jax.block_until_ready(arrays(fn()))
        report["first"][f"{work} {peer}"] = time.perf_counter() - start
        report["placement"][f"{work} {peer}"] = [len(r.devices()) for r in results]
        np.savez(f"{out_dir}/{work}-{peer}-{devices}.npz", *[np.asarray(r) for r in results])
        for _ in range(4):  # past the calls the per-op kernels answer on one device (docs/design.md)
            jax.block_until_ready(arrays(fn()))
        bg.wait_for_compiles()
    for _ in range(repeats):  # peers interleaved
        for (work, peer), fn in peers.items():
            start = time.perf_counter()
            jax.block_until_ready(arrays(fn()))
            report["times"].setdefault(f"{work} {peer}", []).append(time.perf_counter() - start)
    print(json.dumps(report))
""")

MEMORY_CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import batched_grad as bg
    import vmap
    from vmap import _memory

    def status_mb(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024

    chunk = None if sys.argv[1] == "none" else sys.argv[1]
    rng = np.random.default_rng(0)
    a = bg.tensor(rng.standard_normal((1024, 1)).astype(np.float32))
    c = bg.tensor(rng.standard_normal(256).astype(np.float32))
    x = bg.tensor(rng.standard_normal(256).astype(np.float32))
    f = lambda x: bg.tanh(a * (c * x)).sum(1)
    vmap.set_memory_budget(64 << 20)
    before = status_mb("VmRSS:")
    times = []
    for _ in range(3):
        start = time.perf_counter()
        bg.autograd.functional.jacobian(f, x, vectorize=True, chunk_size=chunk).numpy()
        times.append(time.perf_counter() - start)
    print(json.dumps({"raised_mb": status_mb("VmHWM:") - before, "first": times[0], "warm": min(times[1:]),
                      "chunk": list(_memory._chosen.values())}))
""")


def run_child(code, args, devices=1):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.splitlines()[-1])


def same_results(out_dir, work, peer, devices):
    import numpy as np

    base = np.load(f"{out_dir}/{work}-bg-1.npz")
    other = np.load(f"{out_dir}/{work}-{peer}-{devices}.npz")
    return all(np.allclose(base[k], other[k], rtol=1e-4, atol=1e-5) for k in base.files)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="4096 Jacobian rows, B=1024, 3 repeats")
    args = parser.parse_args()
    jac_rows, batch, repeats = (4096, 1024, 3) if args.quick else (16384, 4096, args.repeats)
    with tempfile.TemporaryDirectory() as out_dir:
        reports = [run_child(ROWS_CHILD, [out_dir, repeats, jac_rows, batch], d) for d in sorted(set(args.devices))]
        print(
            f"Rows split over simulated CPU devices: Jacobian {jac_rows} rows, per-sample B={batch} "
            f"(median of {repeats}, us per row; cost: time against one device)"
        )
        print(
            f"{'devices':>7} {'workload':>10} {'bg us/row':>9} {'jax us/row':>10} {'bg/jax':>6} {'cost':>5} "
            f"{'bg 1st s':>8} {'placed':>6} {'same':>5}"
        )
        base = {}
        for r in reports:
            for work, rows in (("jacobian", jac_rows), ("per_sample", batch)):
                bg_t = statistics.median(r["times"][f"{work} bg"])
                jax_t = statistics.median(r["times"][f"{work} jax"])
                base.setdefault(work, bg_t)
                placed = min(r["placement"][f"{work} bg"])
                same = same_results(out_dir, work, "bg", r["devices"]) and same_results(
                    out_dir, work, "jax", r["devices"]
                )
                print(
                    f"{r['devices']:>7} {work:>10} {bg_t / rows * 1e6:>9.2f} {jax_t / rows * 1e6:>10.2f} "
                    f"{bg_t / jax_t:>6.2f} {bg_t / base[work]:>5.2f} {r['first'][f'{work} bg']:>8.2f} "
                    f"{placed:>6} {str(same):>5}"
                )
    print('\nchunk_size="auto" under a 64 MB budget: a Jacobian of 1024 rows whose program over all rows needs ~1 GB')
    print(f"{'chunk_size':>10} {'peak +MB':>8} {'1st s':>6} {'warm s':>6} {'chosen':>6}")
    for chunk in ("auto", "none"):
        m = run_child(MEMORY_CHILD, [chunk])
        print(
            f"{chunk:>10} {m['raised_mb']:>8.0f} {m['first']:>6.2f} {m['warm']:>6.3f} "
            f"{str(m['chunk'][0]) if m['chunk'] else '-':>6}"
        )


if __name__ == "__main__":
    main()
