"""Memory of a long-lived process that meets many distinct input shapes: each shape may compile kernels and
programs, which the caches keep. Runs `--shapes` distinct sizes through three workloads, each `--calls` times per
shape (3 reaches the fused program of a structure), and prints the peak RSS and the compiles, every
`--report` shapes.

    python benchmarks/shape_sweep.py                       # 2000 shapes, one call each
    python benchmarks/shape_sweep.py --shapes=600 --calls=3
    python benchmarks/shape_sweep.py --json                # one JSON line at the end (the test reads it)

Workloads per size n: an elementwise and reduction chain with its gradient ((n,) float32), a matrix product
with its gradient ((n, 8) @ (8, 4)), and the Jacobian (4, 8) of a tanh MLP 8-n-4 by is_grads_batched."""

import json
import resource
import time

import numpy as np
from absl import app, flags

import batched_grad as bg
from batched_grad import _lazy

FLAGS = flags.FLAGS
flags.DEFINE_integer("shapes", 2000, "Distinct sizes to run.")
flags.DEFINE_integer("calls", 1, "Calls per size of each workload.")
flags.DEFINE_integer("report", 250, "Print a line every this many sizes.")
flags.DEFINE_bool("json", False, "Print only one JSON line at the end.")


def peak_rss_mb():
    """This process's peak RSS: VmHWM where Linux gives it (ru_maxrss carries a parent's larger peak across exec,
    which a test started from pytest would read)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def current_rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def mapping_count():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def chain_grad(rng, n):
    x = bg.tensor(rng.standard_normal(n).astype(np.float32), requires_grad=True)
    y = (bg.tanh(x * 1.5 + 0.25) * x).sum()
    (g,) = bg.autograd.grad(y, x)
    return g.numpy()


def matmul_grad(rng, n):
    a = bg.tensor(rng.standard_normal((n, 8)).astype(np.float32), requires_grad=True)
    b = bg.tensor(rng.standard_normal((8, 4)).astype(np.float32), requires_grad=True)
    ga, gb = bg.autograd.grad((a @ b).sum(), (a, b))
    return ga.numpy(), gb.numpy()


def mlp_jacobian(rng, n):
    w1, b1, w2 = (bg.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((n, 8), (n,), (4, n)))
    x = bg.tensor(rng.standard_normal(8).astype(np.float32), requires_grad=True)
    y = w2 @ bg.tanh(w1 @ x + b1)
    (j,) = bg.autograd.grad(y, x, bg.eye(4), is_grads_batched=True)
    return j.numpy()


def main(argv):
    del argv
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for i in range(FLAGS.shapes):
        n = i + 1
        for _ in range(FLAGS.calls):
            chain_grad(rng, n)
            matmul_grad(rng, n)
            mlp_jacobian(rng, n)
        if not FLAGS.json and (n % FLAGS.report == 0 or n == FLAGS.shapes):
            print(
                f"{n:5d} shapes  peak RSS {peak_rss_mb():7.1f} MB  now {current_rss_mb():7.1f} MB  "
                f"mappings {mapping_count():6d}  compiles {_lazy.compile_count():6d}  "
                f"{time.perf_counter() - start:6.1f} s",
                flush=True,
            )
    if FLAGS.json:
        print(
            json.dumps(
                dict(
                    shapes=FLAGS.shapes,
                    calls=FLAGS.calls,
                    peak_rss_mb=peak_rss_mb(),
                    rss_mb=current_rss_mb(),
                    mappings=mapping_count(),
                    compiles=_lazy.compile_count(),
                )
            )
        )


if __name__ == "__main__":
    app.run(main)
