"""The demo workloads. Each computes the same derivatives twice, batched and by the loop of unbatched calls that
the batched call replaces; the two results are checked against each other and both are timed."""

import sys
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import batched_grad as bg
import vmap

RTOL, ATOL = 1e-4, 1e-5  # float32 results summed in different orders: np.allclose(batched, loop, RTOL, ATOL)
FEATURES, CLASSES = 16, 4  # inputs and classes of the per-sample-gradient classifier
SETTLE_CALLS = 12  # the most warm-up calls before timing (a structure fuses in at most a few)
# the demo times the steady state: each structure compiled from its third sighting on, reached while settling (by
# default a structure is compiled once its per-op runs pay for the compile, later in a longer loop)
FUSE_AFTER = 2


class Sizes(NamedTuple):
    """The workloads' sizes: network width, Jacobian rows, samples, Hessian-vector products."""

    width: int = 64
    outputs: int = 32
    batch: int = 64
    hvps: int = 32


class Workload(NamedTuple):
    """One workload: `batched()` and `loop()` return the same (rows, ...) tensor, computed the two ways."""

    name: str
    title: str
    batched: Callable[[], bg.Tensor]
    loop: Callable[[], bg.Tensor]


class Outcome(NamedTuple):
    """What the demo found for one workload (times in milliseconds)."""

    title: str
    batched_ms: float
    loop_ms: float
    max_diff: float
    ok: bool


def _float32(array, requires_grad=False):
    return bg.tensor(np.asarray(array, dtype=np.float32), requires_grad=requires_grad)


def _rows(array):
    """One tensor per row, made from host data (slicing a tensor row by row would compile a kernel per index)."""
    return [bg.tensor(row) for row in np.asarray(array)]


def jacobian(sizes, rng):
    """d net(x) / dx of a tanh MLP: one grad() with the identity's rows as a batch of grad_outputs, against one
    grad() per row."""
    width, outputs = sizes.width, sizes.outputs
    net = bg.nn.Sequential(
        bg.nn.Linear(width, 2 * width),
        bg.nn.Tanh(),
        bg.nn.Linear(2 * width, 2 * width),
        bg.nn.Tanh(),
        bg.nn.Linear(2 * width, outputs),
    )
    x = _float32(rng.standard_normal(width), requires_grad=True)
    eye = np.eye(outputs, dtype=np.float32)
    basis, basis_rows = bg.tensor(eye), _rows(eye)

    def batched():
        return bg.autograd.grad(net(x), x, basis, is_grads_batched=True)[0]

    def loop():
        out = net(x)
        return bg.stack([bg.autograd.grad(out, x, row, retain_graph=True)[0] for row in basis_rows])

    return Workload("jacobian", f"Jacobian {outputs}x{width}, tanh MLP", batched, loop)


def per_sample_gradients(sizes, rng):
    """Each sample's gradient of a classifier's cross-entropy w.r.t. all its parameters, flattened: vmap.vmap of
    grad() over the samples, against one grad() per sample."""
    model = bg.nn.Sequential(bg.nn.Linear(FEATURES, sizes.width), bg.nn.Tanh(), bg.nn.Linear(sizes.width, CLASSES))
    params = list(model.parameters())
    X, y = rng.standard_normal((sizes.batch, FEATURES)).astype(np.float32), rng.integers(0, CLASSES, sizes.batch)
    samples = list(zip(_rows(X), _rows(y)))
    X, y = bg.tensor(X), bg.tensor(y)

    def sample_gradient(x, label):
        grads = bg.autograd.grad(bg.nn.functional.cross_entropy(model(x), label), params)
        return bg.cat([g.reshape(-1) for g in grads])

    def batched():
        return vmap.vmap(sample_gradient)(X, y)

    def loop():
        return bg.stack([sample_gradient(x, label) for x, label in samples])

    n_params = sum(p.numel() for p in params)
    return Workload("per-sample", f"per-sample grads {sizes.batch}x{n_params}, MLP", batched, loop)


def hessian_vector_products(sizes, rng):
    """H v for a batch of vectors v, H the Hessian of a tanh least-squares loss in `width` weights: one
    grad-of-grad with the vectors batched, against one grad-of-grad per vector."""
    width = sizes.width
    X, target = _float32(rng.standard_normal((2 * width, width))), _float32(rng.standard_normal(2 * width))
    w = _float32(rng.standard_normal(width) / np.sqrt(width), requires_grad=True)
    vectors = rng.standard_normal((sizes.hvps, width)).astype(np.float32)
    V, V_rows = bg.tensor(vectors), _rows(vectors)

    def gradient():
        return bg.autograd.grad(((bg.tanh(X @ w) - target) ** 2).mean(), w, create_graph=True)[0]

    def batched():
        return bg.autograd.grad(gradient(), w, V, is_grads_batched=True)[0]

    def loop():
        g = gradient()
        return bg.stack([bg.autograd.grad(g, w, v, retain_graph=True)[0] for v in V_rows])

    return Workload("hvp", f"Hessian-vector products {sizes.hvps}x{width}", batched, loop)


WORKLOADS = {"jacobian": jacobian, "per-sample": per_sample_gradients, "hvp": hessian_vector_products}


_DEFAULT_SIZES = Sizes()


def build(names=tuple(WORKLOADS), sizes=_DEFAULT_SIZES, seed=0):
    """The named workloads on their built-in data (seeded), in the order given."""
    bg.manual_seed(seed)
    rng = np.random.default_rng(seed)
    return [WORKLOADS[name](sizes, rng) for name in names]


def compare(batched, loop):
    """(max |batched - loop|, np.allclose(batched, loop, RTOL, ATOL)) of two results; a shape mismatch fails."""
    batched, loop = np.asarray(batched), np.asarray(loop)
    if batched.shape != loop.shape:
        return float("inf"), False
    return float(np.max(np.abs(batched - loop), initial=0.0)), bool(np.allclose(batched, loop, RTOL, ATOL))


class Progress:
    """A plain-text progress bar on stderr, `[#####     ] 3/6 label`: redrawn in place on a terminal, one line
    per step otherwise. A context manager; `step(label)` announces the next step."""

    def __init__(self, total, stream=None, width=10):
        self.total, self.done, self.width = total, 0, width
        self.stream = stream or sys.stderr
        self.redraw = self.stream.isatty()

    def step(self, label):
        self.done += 1
        filled = round(self.width * self.done / self.total)
        bar = f"[{'#' * filled}{' ' * (self.width - filled)}] {self.done}/{self.total} {label}"
        self.stream.write(f"\r{bar:<60}" if self.redraw else bar + "\n")
        self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.redraw:
            self.stream.write("\n")


def _settle(fn):
    """Call `fn` until the engine has fused its structures (FUSE_AFTER + 1 calls in a row compile nothing);
    return the last result as a NumPy array."""
    quiet = 0
    for _ in range(SETTLE_CALLS):
        before = bg.compile_count()
        result = fn().numpy()
        quiet = quiet + 1 if bg.compile_count() == before else 0
        if quiet > FUSE_AFTER:
            break
    return result


def _median_ms(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn().numpy()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def run(workloads, repeats=5, stream=None):
    """Warm up, check and time each workload, batched then loop, with a progress bar on `stream` (stderr); a list
    of Outcomes."""
    outcomes = []
    previous = bg.set_fuse_after(FUSE_AFTER)
    try:
        with Progress(2 * len(workloads), stream) as bar:
            for w in workloads:
                timings, results = [], []
                for mode, fn in (("batched", w.batched), ("loop", w.loop)):
                    bar.step(f"{w.name} {mode}")
                    results.append(_settle(fn))
                    timings.append(_median_ms(fn, repeats))
                outcomes.append(Outcome(w.title, *timings, *compare(*results)))
    finally:
        bg.set_fuse_after(previous)
    return outcomes


def table(outcomes):
    """The printed table, one line per workload."""
    width = max([len("workload"), *(len(o.title) for o in outcomes)]) + 2
    lines = [f"{'workload':<{width}}{'batched ms':>11}{'loop ms':>10}{'speed-up':>10}{'max |diff|':>12}  check"]
    for o in outcomes:
        lines.append(
            f"{o.title:<{width}}{o.batched_ms:>11.2f}{o.loop_ms:>10.2f}{o.loop_ms / o.batched_ms:>9.1f}x"
            f"{o.max_diff:>12.1e}  {'ok' if o.ok else 'MISMATCH'}"
        )
    lines.append(f"check: np.allclose(batched, loop, rtol={RTOL:g}, atol={ATOL:g}); times are medians")
    return "\n".join(lines)
