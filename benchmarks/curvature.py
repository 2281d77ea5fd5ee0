"""batched_grad.curvature against curvlinops 3 (on torch 2.13) and PyHessian's loops, side by side in one process,
repeats interleaved, on two models (benchmarks/_curvature_peers.py): the 784-64-64-10 tanh MLP of issue 33 and a
small CIFAR-sized CNN, both float64, cross-entropy, two batches.

  1. products of the Hessian, GGN and empirical Fisher operators: a vector (k=1) and matrices of k = 16, 64, 256
     columns (bg: one batched program per data batch; curvlinops: torch.func's vmap over the columns);
  2. hutchinson_trace and hutchinson_diag of the Hessian with 64 probes (each library draws its own);
  3. a Lanczos spectral density with 100 iterations (boundaries given, so every peer does 100 products): bg's and
     curvlinops' lanczos_approximate_spectrum, and PyHessian's density loop (full reorthogonalization);
  4. the top-5 eigenvalues of the Hessian: bg's top_eigenvalues (block Lanczos, blocks of 5, residuals below 1e-3
     relative), PyHessian's deflated power iteration (tol 1e-3) and SciPy's eigsh on curvlinops' to_scipy (tol 1e-3);
  5. peak memory: the RSS growth during one product of k = 64 and 256 columns, each peer in a fresh process.
Every bg result is checked against curvlinops' (products: the same vectors, rtol 1e-8; estimators and spectra: the
same probes or start vectors) before anything is timed.

    python benchmarks/curvature.py            # MLP and CNN, k up to 256 (about 15 minutes on a loaded machine)
    python benchmarks/curvature.py --quick    # the MLP, k up to 64, no memory table (about 2 minutes)
    python benchmarks/curvature.py --models=cnn --sections=products,estimators --ks=1,64   # a selection
"""

import os

# NumPy's BLAS (the host-side algebra of eigsh, of bg's estimators and eigensolver, of PyHessian's loops) runs one
# thread, as torch does (--torch_threads): on this loaded 2-core machine OpenBLAS's threads made a (5 x 55050) @
# (55050 x 100) product 6x slower (70 ms against 12 ms). Set before NumPy is imported; OPENBLAS_NUM_THREADS overrides.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import importlib  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

try:
    import curvlinops  # the peer: a bench extra (pip install -e ".[bench]")
except ImportError:  # pragma: no cover - depends on the environment
    print("benchmarks/curvature.py: curvlinops is not installed (pip install -e '.[bench]'); skipped")
    raise SystemExit(0) from None
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _curvature_peers import CNN, MLP, Problem, pyhessian_density, pyhessian_top_eigenvalues  # noqa: E402
from _timing import WARMUP_S, compare, environment, fmt, ratio, stat, table  # noqa: E402
from absl import app, flags  # noqa: E402

import batched_grad as bg  # noqa: E402
from batched_grad import curvature  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "The MLP only, k up to 64, 3 repeats, no memory table.")
flags.DEFINE_integer("repeats", 3, "Timing repeats per measurement (the tables show medians and minima).")
flags.DEFINE_integer("torch_threads", 1, "torch.set_num_threads (1 by default, as in the other benchmarks).")
flags.DEFINE_list("models", ["mlp", "cnn"], "The models to run (mlp, cnn); --quick runs the MLP only.")
SECTIONS = ("products", "estimators", "spectra", "top", "memory")
flags.DEFINE_list("sections", list(SECTIONS), f"The tables to make, of {', '.join(SECTIONS)}.")
flags.DEFINE_list("ks", None, "The products' column counts (default 1, 16, 64, 256; 1, 64 with --quick).")
flags.DEFINE_string("memory_probe", None, "Internal: 'model:operator:k:peer' -> print the RSS growth of one product.")

OPERATORS = ("HessianLinearOperator", "GGNLinearOperator", "EFLinearOperator")
PROBES, LANCZOS_STEPS, TOP = 64, 100, 5
# Lanczos without reorthogonalization amplifies rounding: after 100 steps the densities of two libraries differ by
# ~1e-3 where they were equal to 1e-15 after 20; the check compares 20 steps
CHECK_STEPS = 20
CURVLINOPS_VERSION = importlib.metadata.version("curvlinops-for-pytorch")
SLOW_S = 1.0  # a call longer than this is timed without its untimed warm-up block


def numpy_of(x):
    if hasattr(x, "detach"):
        x = x.detach()
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def check_close(name, ours, theirs, rtol):
    a, b = numpy_of(ours), numpy_of(theirs)
    error = np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)
    if not error <= rtol:
        raise AssertionError(f"{name}: bg differs from curvlinops by {error:.2e} (relative), above {rtol}")
    return error


def timed(peers, repeats, slow=False):
    return {name: stat(t) for name, t in compare(peers, 1, repeats, warmup=0 if slow else WARMUP_S).items()}


def products(problem, ks, repeats, rng):
    rows = []
    for name in OPERATORS if len(ks) > 1 else OPERATORS[:1]:
        ours, theirs = problem.operator(curvature, "bg", name), problem.operator(curvlinops, "torch", name)
        for k in ks:
            V = rng.standard_normal(problem.P) if k == 1 else rng.standard_normal((problem.P, k))
            bv, tv = bg.tensor(V), torch.tensor(V)
            start = time.perf_counter()
            first = ours @ bv
            first_s = time.perf_counter() - start
            error = check_close(f"{name} k={k}", first, theirs @ tv, 1e-8)
            slow = first_s > SLOW_S
            t = timed({"bg": lambda: numpy_of(ours @ bv), "curvlinops": lambda: theirs @ tv}, repeats, slow)
            rows.append([name.replace("LinearOperator", ""), k, fmt(t["bg"]), fmt(t["curvlinops"]),
                         ratio(t["curvlinops"], t["bg"]), f"{first_s * 1e3:.0f}", f"{error:.0e}"])  # fmt: skip
            print(f"  {rows[-1]}", flush=True)
    return rows


def estimators(problem, repeats):
    H, B = problem.operator(curvature, "bg", OPERATORS[0]), problem.operator(curvlinops, "torch", OPERATORS[0])
    rows = []
    for name in ("hutchinson_trace", "hutchinson_diag"):
        seeded = lambda: bg.Generator().manual_seed(1)  # noqa: E731
        G = curvature.draw_probes(problem.P, PROBES, generator=seeded())
        with_same_probes = np.einsum(
            "ij,ij->i" if name.endswith("diag") else "ij,ij->", G, numpy_of(B @ torch.tensor(G))
        )
        error = check_close(
            name, getattr(curvature, name)(H, PROBES, generator=seeded()), with_same_probes / PROBES, 1e-8
        )
        fn_ours, fn_theirs = getattr(curvature, name), getattr(curvlinops, name)
        t = timed({"bg": lambda: numpy_of(fn_ours(H, PROBES)), "curvlinops": lambda: fn_theirs(B, PROBES)}, repeats)
        rows.append([name, PROBES, fmt(t["bg"]), fmt(t["curvlinops"]), ratio(t["curvlinops"], t["bg"]), f"{error:.0e}"])
        print(f"  {rows[-1]}", flush=True)
    return rows


def spectra(problem, repeats):
    """Lanczos densities with 100 products each; the boundaries come from bg's estimate (top_eigenvalues), given to
    every peer. bg and curvlinops are checked with the same start vector, over CHECK_STEPS steps."""
    H, B = problem.operator(curvature, "bg", OPERATORS[0]), problem.operator(curvlinops, "torch", OPERATORS[0])
    bounds = curvature._spectrum.approximate_boundaries(H, tol=1e-2)
    start = curvature.draw_probes(problem.P, 1, "normal", generator=bg.Generator().manual_seed(2))[:, 0]
    module = importlib.import_module("curvlinops.papyan2020traces.spectrum")
    original = module.randn
    module.randn = lambda dim, device=None, dtype=None: torch.tensor(start)
    try:
        theirs = curvlinops.lanczos_approximate_spectrum(B, CHECK_STEPS, boundaries=bounds)
    finally:
        module.randn = original
    ours_module, draw = curvature._spectrum, curvature._spectrum.draw_probes
    ours_module.draw_probes = lambda dim, num, dist, generator=None: start.reshape(-1, 1).copy()
    try:
        ours = curvature.lanczos_approximate_spectrum(H, CHECK_STEPS, boundaries=bounds)
    finally:
        ours_module.draw_probes = draw
    error = check_close("Lanczos density", ours[1], theirs[1], 1e-6)
    peers = {
        "bg": lambda: numpy_of(curvature.lanczos_approximate_spectrum(H, LANCZOS_STEPS, boundaries=bounds)[1]),
        "curvlinops": lambda: curvlinops.lanczos_approximate_spectrum(B, LANCZOS_STEPS, boundaries=bounds),
        "PyHessian loop": lambda: pyhessian_density(problem, LANCZOS_STEPS),
    }
    t = timed(peers, repeats, slow=True)
    return [[f"Lanczos, {LANCZOS_STEPS} steps", *(fmt(t[n]) for n in peers), ratio(t["curvlinops"], t["bg"]),
             ratio(t["PyHessian loop"], t["bg"]), f"{error:.0e}"]]  # fmt: skip


def top_eigenvalues(problem, repeats):
    H, B = problem.operator(curvature, "bg", OPERATORS[0]), problem.operator(curvlinops, "torch", OPERATORS[0])
    from scipy.sparse.linalg import eigsh

    ours = np.sort(np.abs(numpy_of(curvature.top_eigenvalues(H, TOP, "LM", tol=1e-3)[0])))[::-1]
    power, used = pyhessian_top_eigenvalues(problem, TOP)
    scipy_values = np.sort(np.abs(eigsh(B.to_scipy(), k=TOP, which="LM", tol=1e-3, return_eigenvectors=False)))[::-1]
    agreement = np.abs(ours - scipy_values).max() / np.abs(scipy_values).max()
    if agreement > 1e-2:
        raise AssertionError(f"top eigenvalues: bg {ours} against eigsh {scipy_values}")
    peers = {
        "bg": lambda: numpy_of(curvature.top_eigenvalues(H, TOP, "LM", tol=1e-3)[0]),
        "PyHessian loop": lambda: pyhessian_top_eigenvalues(problem, TOP),
        "eigsh(curvlinops)": lambda: eigsh(B.to_scipy(), k=TOP, which="LM", tol=1e-3, return_eigenvectors=False),
    }
    t = timed(peers, repeats, slow=True)
    values = ", ".join(f"{v:.4g}" for v in ours)
    print(f"  top-{TOP} |eigenvalues|: bg {values}; power iteration {np.round(np.abs(power), 4)} ({used} products)")
    return [[f"top-{TOP} eigenvalues", *(fmt(t[n]) for n in peers), ratio(t["PyHessian loop"], t["bg"]),
             ratio(t["eigsh(curvlinops)"], t["bg"]), f"{agreement:.0e}"]]  # fmt: skip


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_probe(spec):
    """One product in this fresh process, after a warm-up product: the largest RSS growth over the RSS before it,
    sampled every millisecond. Prints {"peak": bytes}."""
    model, name, k, peer = spec.split(":")
    problem = Problem(model)
    V = np.random.default_rng(0).standard_normal((problem.P, int(k)))
    if peer == "bg":
        A, X = problem.operator(curvature, "bg", name), bg.tensor(V)
        call = lambda: numpy_of(A @ X)  # noqa: E731
    else:
        A, X = problem.operator(curvlinops, "torch", name), torch.tensor(V)
        call = lambda: A @ X  # noqa: E731
    call()
    base, peak, done = rss_bytes(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes() - base)
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    call()
    done.set()
    sampler.join()
    print(json.dumps({"peak": peak[0]}))


def memory(model, ks):
    rows = []
    for k in ks:
        row = [f"Hessian k={k}"]
        for peer in ("bg", "curvlinops"):
            command = [sys.executable, __file__, f"--memory_probe={model}:HessianLinearOperator:{k}:{peer}"]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            row.append(f"{json.loads(out)['peak'] / 2**20:.0f} MiB")
        rows.append(row)
        print(f"  {row}", flush=True)
    return rows


def run_model(model, label, quick, repeats, rng, sections):
    print(f"\n== {label} ==", flush=True)
    problem = Problem(model)
    print(f"  {problem.P} parameters, {problem.N} data points", flush=True)
    ks = [int(k) for k in FLAGS.ks] if FLAGS.ks else (1, 64) if quick else (1, 16, 64, 256)
    if "products" in sections:
        rows = products(problem, ks, repeats, rng)
        header = ["operator", "k", "bg", "curvlinops", "speedup", "bg first", "max rel diff"]
        table(f"{label}: products (ms, median (min) of {repeats}; the first bg call, with its compile)", header, rows)
    if "estimators" in sections:
        header = ["estimator", "probes", "bg", "curvlinops", "speedup", "check"]
        table(f"{label}: estimators of the Hessian (ms)", header, estimators(problem, repeats))
    if "spectra" in sections:
        header = ["workload", "bg", "curvlinops", "PyHessian loop", "vs curvlinops", "vs PyHessian", "check"]
        table(f"{label}: spectra (ms)", header, spectra(problem, repeats))
    if "top" in sections:
        header = ["workload", "bg", "PyHessian loop", "eigsh(curvlinops)", "vs PyHessian", "vs eigsh", "agreement"]
        table(f"{label}: top eigenvalues (ms)", header, top_eigenvalues(problem, repeats))
    if not quick and "memory" in sections:
        header = ["product", "bg", "curvlinops"]
        table(f"{label}: peak RSS growth during one product (fresh process each)", header, memory(model, (64, 256)))


def main(argv):
    del argv
    torch.set_num_threads(FLAGS.torch_threads)
    if FLAGS.memory_probe:
        memory_probe(FLAGS.memory_probe)
        return
    quick, repeats = FLAGS.quick, FLAGS.repeats
    print(
        f"batched_grad {bg.__version__}, curvlinops {CURVLINOPS_VERSION}, torch {torch.__version__} "
        f"(threads {torch.get_num_threads()}), {os.cpu_count()} CPUs, repeats {repeats}, "
        f"load average {os.getloadavg()[0]:.1f}, {environment()}, "
        f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}"
    )
    start = time.perf_counter()
    rng = np.random.default_rng(0)
    chosen = ["mlp"] if quick else FLAGS.models
    for model, label in [m for m in (MLP, CNN) if m[0] in chosen]:
        run_model(model, label, quick, repeats, rng, FLAGS.sections)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    app.run(main)
