"""First and warm calls of small functional-API calls, batched_grad (bg) against torch: f(x) = tanh(W2 @ tanh(W1 @ x)),
W1 32x16, W2 4x32, x of 16 float32 values, s(x) = f(x).pow(2).sum().

Rows, in this order in one process: autograd.functional's jacobian(f, x), hessian(s, x), both with vectorize=True,
vjp(f, x, v), hvp(s, x, v); torch.func's jacrev(f)(x), jacfwd(f)(x), hessian(s)(x), vmap(grad(s)) over 8 rows; a
double backward (grad(s(x), x, create_graph=True), then grad of its sum) and a batched grad (is_grads_batched over
the 4 rows of an identity). Each row makes 21 calls: its first call (the first of that call in the process: earlier
rows may have traced or compiled what it shares with them) and the median of the other 20 ("warm": a script's
next calls, by default before a structure's compile pays back, so mostly on the host tier).

Each round runs torch in a fresh process, then bg in a fresh process on an empty cache (`BATCHED_GRAD_CACHE_DIR` a
new folder: "cold") and again on the cache that one filled ("2nd": a second process's first calls); with
`--baseline=PATH` (another source tree, e.g. a checkout of an earlier commit), its batched_grad the same way, in the
same rounds. Medians over the rounds, milliseconds.

    python benchmarks/functional_calls.py [--quick] [--rounds N] [--baseline PATH]
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "One round instead of three.")
flags.DEFINE_integer("rounds", None, "Rounds of fresh processes (default 3, 1 with --quick).")
flags.DEFINE_string("baseline", None, "A source tree whose batched_grad is timed too, as 'before'.")
flags.DEFINE_string("worker", None, "Internal: run the rows with this library (bg or torch) and print them.")

CALLS = 21


def rows(lib):
    """{name: a call} of the rows, on `lib` (batched_grad or torch)."""
    F, func = lib.autograd.functional, lib.func
    lib.manual_seed(0)
    w1, w2, x, xs = lib.randn(32, 16), lib.randn(4, 32), lib.randn(16), lib.randn(8, 16)

    def f(x):
        return lib.tanh(w2 @ lib.tanh(w1 @ x))

    def s(x):
        return f(x).pow(2).sum()

    def double_backward():
        xr = x.detach().requires_grad_(True)
        (g,) = lib.autograd.grad(s(xr), xr, create_graph=True)
        return lib.autograd.grad(g.sum(), xr)

    def grads_batched():
        xr = x.detach().requires_grad_(True)
        return lib.autograd.grad(f(xr), xr, lib.eye(4), is_grads_batched=True)

    return {
        "jacobian": lambda: F.jacobian(f, x),
        "hessian": lambda: F.hessian(s, x),
        "jacobian, vectorize": lambda: F.jacobian(f, x, vectorize=True),
        "hessian, vectorize": lambda: F.hessian(s, x, vectorize=True),
        "vjp": lambda: F.vjp(f, x, lib.ones(4)),
        "hvp": lambda: F.hvp(s, x, lib.ones(16)),
        "func.jacrev": lambda: func.jacrev(f)(x),
        "func.jacfwd": lambda: func.jacfwd(f)(x),
        "func.hessian": lambda: func.hessian(s)(x),
        "vmap(grad)": lambda: func.vmap(func.grad(s))(xs),
        "double backward": double_backward,
        "batched grad": grads_batched,
    }


def worker(name):
    if name == "torch":
        import torch as lib

        lib.set_num_threads(1)
    else:
        import batched_grad as lib
    for row, call in rows(lib).items():
        times = []
        for _ in range(CALLS):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        print(f"{row}\t{times[0] * 1e3}\t{statistics.median(times[1:]) * 1e3}", flush=True)


def spawn(peer, cache=None, tree=None):
    env = dict(os.environ)
    if cache is not None:
        env["BATCHED_GRAD_CACHE_DIR"] = cache
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")])
    command = [sys.executable, os.path.abspath(__file__), f"--worker={peer}"]
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the {peer} worker failed:\n{out.stderr[-3000:]}")
    lines = [line.split("\t") for line in out.stdout.split("\n") if line]
    return {row: (float(first), float(warm)) for row, first, warm in lines}


def bg_runs(runs, label, tree):
    """A fresh process of bg (from `tree`, or the one this interpreter imports) on an empty cache, then one on the
    cache it filled."""
    with tempfile.TemporaryDirectory() as cache:
        runs.setdefault(f"{label} cold", []).append(spawn("bg", cache, tree))
        runs.setdefault(f"{label} 2nd", []).append(spawn("bg", cache, tree))


def main(argv):
    del argv
    if FLAGS.worker:
        worker(FLAGS.worker)
        return
    rounds = FLAGS.rounds or (1 if FLAGS.quick else 3)
    runs = {"torch": []}
    for _ in range(rounds):
        runs["torch"].append(spawn("torch"))
        if FLAGS.baseline:
            bg_runs(runs, "before", os.path.abspath(FLAGS.baseline))
        bg_runs(runs, "bg", None)
    if os.path.exists("/proc/loadavg"):
        with open("/proc/loadavg") as f:
            print(f"load average after the runs: {f.read().strip()}")
    labels = (["before"] if FLAGS.baseline else []) + ["bg"]

    def med(peer, row, k):
        return statistics.median([run[row][k] for run in runs[peer]])

    print(
        "| call | torch first / warm | "
        + " | ".join(f"{b} first: cold, 2nd / warm" for b in labels)
        + " | bg / torch |"
    )
    print("|---" * (3 + len(labels)) + "|")
    for row in runs["torch"][0]:
        t_first, t_warm = med("torch", row, 0), med("torch", row, 1)
        cells = [
            f"{med(b + ' cold', row, 0):.3g}, {med(b + ' 2nd', row, 0):.3g} / {med(b + ' cold', row, 1):.3g}"
            for b in labels
        ]
        over = (med("bg cold", row, 0) / t_first, med("bg 2nd", row, 0) / t_first, med("bg cold", row, 1) / t_warm)
        ratios = ", ".join([f"{r:.1f}" for r in over])
        print(f"| {row} | {t_first:.3g} / {t_warm:.3g} | " + " | ".join(cells) + f" | {ratios} |")


if __name__ == "__main__":
    app.run(main)
