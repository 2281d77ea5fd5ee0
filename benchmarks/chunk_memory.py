"""Peak memory (ru_maxrss) of a structure's first calls of grad(..., is_grads_batched=True, chunk_size=k), each
configuration in a fresh process. The per-node tier answers calls 1 and 2, the fused program call 3 on.

    python benchmarks/chunk_memory.py [--workload jacobian|vjp] [--chunk 10] [--rows 10000] [--width 2000]

`jacobian`: the Jacobian of x (100) -> W2 tanh(W1 x) with `rows` outputs through a `width`-wide layer (cotangents:
the identity); `vjp`: `rows` random cotangents of 100 outputs through a `width`-wide layer. Measured (2 shared cores,
medians of 3 interleaved runs, each call's own peak): vjp B=10000 width 4000 chunk 10, call 1: 526 MB before the
per-node walk ran in chunks, 215 MB after (fused call 3: 230 MB; no chunk_size: 721 MB); jacobian B=10000 width
2000 chunk 10, call 1: 1223 MB before, 742 MB after (of which 400 MB is the identity itself).
"""

import argparse
import json
import subprocess
import sys
import textwrap

# one process: build the graph, then after each call report the peak RSS so far (MB) and the call's time
CHILD = textwrap.dedent("""
    import json, os, resource, sys, threading, time
    import numpy as np
    import batched_grad as bg

    workload, rows, width, chunk, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    chunk = None if chunk == "none" else int(chunk)
    rng = np.random.default_rng(0)
    n_in = 100
    n_out = rows if workload == "jacobian" else 100
    w1 = bg.tensor(rng.standard_normal((width, n_in)).astype(np.float32) / 10)
    w2 = bg.tensor(rng.standard_normal((n_out, width)).astype(np.float32) / 50)
    if workload == "jacobian":
        v = bg.eye(rows)  # the standard basis of the outputs: a Jacobian's cotangents
    else:
        v = bg.tensor(rng.standard_normal((rows, n_out)).astype(np.float32))

    def peak_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    page_mb = os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    sampled = [0.0]

    def sample(stop):  # the call's own peak: ru_maxrss only grows, so later calls hide under earlier ones
        while not stop.is_set():
            with open("/proc/self/statm") as f:
                sampled[0] = max(sampled[0], int(f.read().split()[1]) * page_mb)
            time.sleep(0.002)

    report = {"before": peak_mb(), "calls": [], "call_peaks": [], "seconds": []}
    for _ in range(calls):
        x = bg.tensor(rng.standard_normal(n_in).astype(np.float32), requires_grad=True)
        y = w2 @ bg.tanh(w1 @ x)
        stop, sampled[0] = threading.Event(), 0.0
        sampler = threading.Thread(target=sample, args=(stop,))
        sampler.start()
        start = time.perf_counter()
        (g,) = bg.autograd.grad(y, x, v, is_grads_batched=True, chunk_size=chunk)
        g.numpy()
        report["seconds"].append(time.perf_counter() - start)
        stop.set()
        sampler.join()
        report["call_peaks"].append(sampled[0])
        report["calls"].append(peak_mb())
        del g, y, x
    print(json.dumps(report))
""")


def measure(workload, rows, width, chunk, calls=3, python=sys.executable, env=None):
    out = subprocess.run(
        [python, "-c", CHILD, workload, str(rows), str(width), str(chunk), str(calls)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(out.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("jacobian", "vjp"), default="jacobian")
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--width", type=int, default=2000)
    parser.add_argument("--chunk", default="10")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    for chunk in ("none", args.chunk):
        r = measure(args.workload, args.rows, args.width, chunk, args.calls)
        peaks = ", ".join(f"{p:.0f}" for p in r["calls"])
        own = ", ".join(f"{p:.0f}" for p in r["call_peaks"])
        times = ", ".join(f"{t:.2f}" for t in r["seconds"])
        print(
            f"{args.workload} B={args.rows} width={args.width} chunk={chunk}: peak RSS MB before {r['before']:.0f}, "
            f"after calls 1..{args.calls}: {peaks}; "
            f"each call's own peak (sampled): {own}; seconds {times}"
        )


if __name__ == "__main__":
    main()
