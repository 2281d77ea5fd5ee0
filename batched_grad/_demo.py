"""The demo workloads: each batched result is checked against the per-row loop, then both are timed."""
import sys
import time

import numpy as np

import batched_grad as bg
import vmap


def _mlp(x, weights):
    for w in weights[:-1]:
        x = bg.tanh(w @ x)
    return weights[-1] @ x


def _data(seed=0):
    rng = np.random.default_rng(seed)
    sizes = [64, 128, 128, 32]
    weights = [bg.tensor(rng.standard_normal((o, i)) / np.sqrt(i), dtype=bg.float32)
               for i, o in zip(sizes[:-1], sizes[1:])]
    X = bg.tensor(rng.standard_normal((64, 20)), dtype=bg.float32)
    y = bg.tensor((rng.random(64) > 0.5).astype(np.float32))
    return weights, X, y


def jacobian(batched):
    """d mlp(x) / dx for a 64-128-128-32 tanh network: (32, 64)."""
    weights, _, _ = _data()
    x = bg.tensor(np.linspace(-1, 1, 64), dtype=bg.float32, requires_grad=True)
    out = _mlp(x, weights)
    if batched:
        return bg.autograd.grad(out, x, bg.eye(32), is_grads_batched=True)[0]
    return bg.stack([bg.autograd.grad(out[i], x, retain_graph=True)[0] for i in range(32)])


def _logistic_loss(w, X, y):
    p = bg.sigmoid(X @ w)
    return -(y * bg.log(p + 1e-7) + (1 - y) * bg.log(1 - p + 1e-7))


def per_sample_gradients(batched):
    """Gradients of each of 64 logistic-regression losses w.r.t. the 20 weights: (64, 20)."""
    _, X, y = _data()
    w = bg.tensor(np.full(20, 0.1), dtype=bg.float32, requires_grad=True)
    if batched:
        return vmap.vmap(lambda xi, yi: bg.autograd.grad(_logistic_loss(w, xi, yi), w)[0])(X, y)
    return bg.stack([bg.autograd.grad(_logistic_loss(w, X[i], y[i]), w)[0] for i in range(64)])


def hessian_vector_products(batched):
    """20 Hessian-vector products of the mean logistic loss (the Hessian's rows): (20, 20)."""
    _, X, y = _data()
    w = bg.tensor(np.full(20, 0.1), dtype=bg.float32, requires_grad=True)
    (g,) = bg.autograd.grad(_logistic_loss(w, X, y).mean(), w, create_graph=True)
    vs = bg.eye(20)
    if batched:
        return bg.autograd.grad(g, w, vs, is_grads_batched=True)[0]
    return bg.stack([bg.autograd.grad(g, w, vs[i], retain_graph=True)[0] for i in range(20)])


WORKLOADS = [("Jacobian (MLP 64-128-128-32)", jacobian), ("per-sample gradients (B=64)", per_sample_gradients),
             ("Hessian-vector products (20)", hessian_vector_products)]


def _time(fn, repeats):
    fn()  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def _progress(i, n, label):
    sys.stderr.write(f"\r[{'#' * (i + 1)}{'.' * (n - i - 1)}] {label:<40}")
    sys.stderr.flush()


def check(fn):
    """(max |batched - loop|, whether they agree) for one workload."""
    batched, loop = fn(True).numpy(), fn(False).numpy()
    if batched.shape != loop.shape:
        return float("inf"), False
    return float(np.max(np.abs(batched - loop))), bool(np.allclose(batched, loop, rtol=1e-4, atol=1e-5))


def run(repeats=5, out=print):
    """Run every workload; return True when every batched result equals the per-row loop."""
    rows, ok = [], True
    for i, (name, fn) in enumerate(WORKLOADS):
        _progress(i, len(WORKLOADS), name)
        error, good = check(fn)
        ok &= good
        rows.append((name, _time(lambda: fn(True), repeats), _time(lambda: fn(False), repeats), error, good))
    sys.stderr.write("\n")
    out(f"{'workload':<32}{'batched ms':>12}{'loop ms':>10}{'speedup':>9}{'max |diff|':>12}  check")
    for name, tb, tl, error, good in rows:
        out(f"{name:<32}{tb:>12.2f}{tl:>10.2f}{tl / tb:>8.1f}x{error:>12.2e}  {'ok' if good else 'MISMATCH'}")
    return ok
