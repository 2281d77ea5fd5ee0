"""Per-sample gradient norms at B=256 without forming per-sample gradients (ghost norms), against forming them, and
the DP-SGD step built on them, on CPU.

Two models (float64 by default, random data, cross-entropy): the 784-64-64-10 tanh MLP of the curvature anchors
(55,050 parameters) and a CIFAR-sized CNN, Conv2d(3,16,3,p1) ReLU MaxPool Conv2d(16,32,3,p1) ReLU MaxPool
Linear(2048,10) (25,578 parameters) on 3x32x32 images. Peers:
  - ghost, eager: batched_grad.curvature.per_sample_grad_norms, as a training loop calls it;
  - ghost, compiled: GhostClipping(model, compile=True).per_sample_norms, the same as one program (bg.compile);
  - bg vmap(grad): per-sample gradients formed by batched_grad.func, then their norms;
  - torch.func vmap(grad): the same in torch 2.13;
  - Opacus ghost: GradSampleModuleFastGradientClipping(use_ghost_clipping=True).get_norm_sample() after one
    backward of the per-sample losses' sum (where opacus imports; `pip install --no-deps opacus`);
  - references: the gradient of the mean loss alone, bg (compiled) and torch: what a step without DP costs.
Every peer's norms are checked against torch.func's before timing. Tables: a. steady-state time (medians of
interleaved repeats); b. peak memory of one steady-state call, each peer in a fresh process (VmHWM reset before the
call, large allocations unmapped when freed: MALLOC_MMAP_THRESHOLD_), against the size of the per-sample gradients
(B x P) and of B + P numbers; c. one DP-SGD step (clip to C = 1, noise sigma = 1, into .grad): GhostClipping
(compile=True; one backward, the clipped sum from the recorded layer quantities), clipping by hand over
torch.func's per-sample gradients, Opacus' ghost clipping (two backwards); d. targets.

    python benchmarks/persample.py            # about 6 minutes on a loaded 2-core machine
    python benchmarks/persample.py --quick    # about 5 minutes: 3 repeats, one call per block
"""

import ctypes
import gc
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import torch
from _models import build
from _timing import WARMUP_S, compare, environment, fmt, ratio, stat, table
from absl import app, flags

import batched_grad as bg
import batched_grad.func  # noqa: F401 - bg.func
from batched_grad.curvature import GhostClipping, per_sample_grad_norms

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "3 repeats, one call per timed block.")
flags.DEFINE_integer("repeats", None, "Timing repeats (default 7, 3 with --quick).")
flags.DEFINE_integer("batch", 256, "Samples per batch.")
flags.DEFINE_enum("dtype", "float64", ["float32", "float64"], "Parameters' and inputs' dtype.")
flags.DEFINE_integer("torch_threads", 1, "torch.set_num_threads (1, as the other benchmarks).")
flags.DEFINE_string("child", None, "Internal: measure one 'model:peer' in this process and print JSON.")

MODELS = {  # name: (layer table for _models.build, one input's shape)
    "MLP 784-64-64-10": (
        [("Linear", 784, 64), ("Tanh",), ("Linear", 64, 64), ("Tanh",), ("Linear", 64, 10)],
        (784,),
    ),
    "CNN 3x32x32": (
        [
            ("Conv2d", 3, 16, 3, 1, 1),
            ("ReLU",),
            ("MaxPool2d", 2),
            ("Conv2d", 16, 32, 3, 1, 1),
            ("ReLU",),
            ("MaxPool2d", 2),
            ("Flatten",),
            ("Linear", 32 * 8 * 8, 10),
        ],
        (3, 32, 32),
    ),
}
GHOST, GHOST_COMPILED, BG_VMAP, TORCH_FUNC, OPACUS = (
    "ghost, eager",
    "ghost, compiled",
    "bg vmap(grad)",
    "torch.func vmap(grad)",
    "Opacus ghost",
)
BG_GRADIENT, TORCH_GRADIENT = "reference: bg gradient, compiled", "reference: torch gradient"
MAX_GRAD_NORM, NOISE = 1.0, 1.0


def opacus_module():
    """Opacus' GradSampleModuleFastGradientClipping, or None where opacus does not import."""
    try:
        from opacus.grad_sample import GradSampleModuleFastGradientClipping
    except Exception:  # noqa: BLE001 - any failure to import means: no Opacus peer
        return None
    return GradSampleModuleFastGradientClipping


class Setup:
    """One model in torch and bg with the same weights, a batch of random data, and the loss."""

    def __init__(self, model_name, batch, dtype, seed=0):
        layers, shape = MODELS[model_name]
        torch.manual_seed(seed)
        self.layers, self.batch = layers, batch
        self.t_dtype, self.b_dtype = getattr(torch, dtype), getattr(bg, dtype)
        self.t_model = build(torch.nn, layers).to(self.t_dtype)
        self.b_model = build(bg.nn, layers).to(self.b_dtype)
        self.b_model.load_state_dict({k: bg.tensor(v.detach().numpy()) for k, v in self.t_model.state_dict().items()})
        rng = np.random.default_rng(seed)
        x, y = rng.standard_normal((batch, *shape)), rng.integers(0, 10, batch)
        self.tX, self.tY = torch.tensor(x, dtype=self.t_dtype), torch.tensor(y)
        self.bX, self.bY = bg.tensor(x, dtype=self.b_dtype), bg.tensor(y)
        self.parameters = sum(p.numel() for p in self.t_model.parameters())

    def fresh_torch_model(self):
        model = build(torch.nn, self.layers).to(self.t_dtype)
        model.load_state_dict(self.t_model.state_dict())
        return model


# ---------------------------------------------------------------- per-sample norms


def formed_norms(lib, model, X, Y):
    """Per-sample gradients by vmap(grad) over functional_call (torch.func's recipe), then their norms."""
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, x, y):
        return lib.nn.functional.cross_entropy(lib.func.functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))

    per_sample = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))

    def run():
        grads = per_sample(params, X, Y)
        return sum(g.reshape(g.shape[0], -1).square().sum(1) for g in grads.values()).sqrt()

    return run


def opacus_norms(setup):
    module_class = opacus_module()
    if module_class is None:
        return None
    model = module_class(setup.fresh_torch_model(), loss_reduction="sum", max_grad_norm=MAX_GRAD_NORM)

    def run():
        losses = torch.nn.functional.cross_entropy(model(setup.tX), setup.tY, reduction="none")
        losses.sum().backward()
        norms = model.get_norm_sample()
        model.zero_grad(set_to_none=True)
        return norms

    return run


def norm_peers(setup):
    loss = bg.nn.CrossEntropyLoss()
    compiled = GhostClipping(setup.b_model, MAX_GRAD_NORM, compile=True)
    peers = {
        GHOST: lambda: per_sample_grad_norms(setup.b_model, loss, setup.bX, setup.bY),
        GHOST_COMPILED: lambda: compiled.per_sample_norms(loss, setup.bX, setup.bY),
        BG_VMAP: formed_norms(bg, setup.b_model, setup.bX, setup.bY),
        TORCH_FUNC: formed_norms(torch, setup.t_model, setup.tX, setup.tY),
    }
    opacus = opacus_norms(setup)
    return peers if opacus is None else {**peers, OPACUS: opacus}


def reference_peers(setup):
    """The gradient of the mean loss alone (what a training step without DP costs): bg compiled, and torch."""
    b_params, t_params = list(setup.b_model.parameters()), list(setup.t_model.parameters())

    def b_gradient(x, y):
        return bg.autograd.grad(bg.nn.functional.cross_entropy(setup.b_model(x), y), b_params)

    compiled = bg.compile(b_gradient)

    def t_gradient():
        return torch.autograd.grad(torch.nn.functional.cross_entropy(setup.t_model(setup.tX), setup.tY), t_params)

    return {BG_GRADIENT: lambda: compiled(setup.bX, setup.bY), TORCH_GRADIENT: t_gradient}


# ---------------------------------------------------------------- one DP-SGD step


def bg_dp_step(setup, noise_multiplier):
    dp = GhostClipping(setup.b_model, MAX_GRAD_NORM, noise_multiplier, compile=True)
    loss = bg.nn.CrossEntropyLoss()

    def run():
        dp.step(loss, setup.bX, setup.bY)
        return [p.grad for p in setup.b_model.parameters()]

    return run


def torch_dp_step(setup, noise_multiplier):
    model, batch = setup.t_model, setup.batch

    def loss(p, x, y):
        out = torch.func.functional_call(model, p, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, y.unsqueeze(0))

    per_sample = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))

    def run():
        formed_grads = per_sample({k: v.detach() for k, v in model.named_parameters()}, setup.tX, setup.tY)
        norms = torch.cat([g.reshape(batch, -1) for g in formed_grads.values()], 1).norm(dim=1)
        factors = (MAX_GRAD_NORM / (norms + 1e-6)).clamp(max=1.0)
        for p, g in zip(model.parameters(), formed_grads.values()):
            noise = torch.randn_like(p) * noise_multiplier * MAX_GRAD_NORM
            p.grad = (torch.einsum("i,i...->...", factors, g) + noise) / batch
        return [p.grad for p in model.parameters()]

    return run


def opacus_dp_step(setup, noise_multiplier):
    """Opacus' ghost clipping step as DPLossFastGradientClipping.backward runs it: a backward of the losses' sum
    (the norms), a second of the losses weighted by the clipping factors with the hooks off; then noise."""
    module_class = opacus_module()
    if module_class is None:
        return None
    model = module_class(setup.fresh_torch_model(), loss_reduction="sum", max_grad_norm=MAX_GRAD_NORM)

    def run():
        losses = torch.nn.functional.cross_entropy(model(setup.tX), setup.tY, reduction="none")
        losses.sum().backward(retain_graph=True)
        model.zero_grad(set_to_none=True)
        factors = model.get_clipping_coef()
        model.disable_hooks()
        (factors * losses).sum().backward()
        model.enable_hooks()
        for p in model.parameters():
            p.grad = (p.grad + torch.randn_like(p) * noise_multiplier * MAX_GRAD_NORM) / setup.batch
        return [p.grad for p in model.parameters()]

    return run


def step_peers(setup, noise_multiplier):
    peers = {GHOST_COMPILED: bg_dp_step(setup, noise_multiplier), TORCH_FUNC: torch_dp_step(setup, noise_multiplier)}
    opacus = opacus_dp_step(setup, noise_multiplier)
    return peers if opacus is None else {**peers, OPACUS: opacus}


# ---------------------------------------------------------------- measuring


def as_array(out):
    if isinstance(out, (list, tuple)):
        return np.concatenate([as_array(o) for o in out])
    if isinstance(out, bg.Tensor):
        return np.asarray(out.detach().numpy()).ravel()
    return out.detach().numpy().ravel()


def warm(fn, rounds=2, calls=2):
    """Calls of `fn` until bg runs it in its steady state: a few, then wait for the background compiles, again."""
    for _ in range(rounds):
        for _ in range(calls):
            as_array(fn())
        bg.wait_for_compiles()


def check(peers, reference=TORCH_FUNC, rtol=1e-8):
    """The largest relative difference of every peer's result from the reference's; raises past rtol."""
    expected = as_array(peers[reference]())
    worst = 0.0
    for name, fn in peers.items():
        got = as_array(fn())
        diff = float(np.abs(got - expected).max() / np.abs(expected).max())
        if not diff <= rtol:
            raise AssertionError(f"{name} disagrees with {reference}: relative difference {diff:.1e}")
        worst = max(worst, diff)
    return worst


def timed(peers, repeats, number):
    for fn in peers.values():
        warm(fn)
    return {name: stat(t) for name, t in compare(peers, number, repeats, block_each=True, warmup=WARMUP_S).items()}


def memory_child(spec, batch, dtype):
    """In a fresh process: one steady-state call's peak resident memory above the memory held before it (MB)."""
    model_name, peer = spec.split(":", 1)
    setup = Setup(model_name, batch, dtype)
    fn = {**norm_peers(setup), **reference_peers(setup)}[peer]
    warm(fn)
    gc.collect()  # what the previous calls left in reference cycles
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM, the peak resident size, to the current one

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(key)) / 1024

    before = status("VmRSS")
    as_array(fn())
    print(json.dumps({"peak_mb": status("VmHWM") - before}))


def memory(model_name, peer, batch, dtype):
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    command = [sys.executable, __file__, f"--child={model_name}:{peer}", f"--batch={batch}", f"--dtype={dtype}"]
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if out.returncode:
        return f"failed ({out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode})"
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mb"]


# ---------------------------------------------------------------- report


def run_model(model_name, repeats, number):
    setup = Setup(model_name, FLAGS.batch, FLAGS.dtype)
    start = time.perf_counter()
    peers = norm_peers(setup)
    diff = check(peers)
    references = reference_peers(setup)
    norms = timed({**peers, **references}, repeats, number)
    steps = step_peers(setup, NOISE)
    step_diff = check(step_peers(setup, 0.0))
    step_times = timed(steps, repeats, number)
    peaks = {name: memory(model_name, name, FLAGS.batch, FLAGS.dtype) for name in {**peers, **references}}
    itemsize = torch.finfo(setup.t_dtype).bits // 8
    print(
        f"  {model_name}: P = {setup.parameters}, {time.perf_counter() - start:.0f} s; norms agree with torch.func "
        f"(max relative difference {diff:.1e}), DP steps without noise too ({step_diff:.1e})"
    )
    return {
        "model": model_name,
        "norms": norms,
        "steps": step_times,
        "peaks": peaks,
        "formed_mb": FLAGS.batch * setup.parameters * itemsize / 2**20,
        "b_plus_p_mb": (FLAGS.batch + setup.parameters) * itemsize / 2**20,
    }


def _above_reference(peaks, name):
    """A peer's peak less its library's reference gradient's peak (None where either failed)."""
    reference = peaks.get(BG_GRADIENT if name in (GHOST, GHOST_COMPILED, BG_VMAP, BG_GRADIENT) else TORCH_GRADIENT)
    peak = peaks[name]
    return peak - reference if isinstance(peak, float) and isinstance(reference, float) else None


def report(results):
    rows = []
    for r in results:
        s = r["norms"]
        for name, v in s.items():
            rows.append([r["model"], name, fmt(v), ratio(s[TORCH_FUNC], v, "{:.2f}"), ratio(s[BG_VMAP], v, "{:.2f}")])
    table(
        f"a. Per-sample gradient norms, B={FLAGS.batch}, {FLAGS.dtype}: ms per call, median (min); "
        "torch.func / this and bg vmap / this: > 1 means faster",
        ["model", "peer", "ms per call", "torch.func / this", "bg vmap / this"],
        rows,
        left=2,
    )
    rows = []
    for r in results:
        for name, peak in r["peaks"].items():
            cell = f"{peak:.1f}" if isinstance(peak, float) else peak
            extra = _above_reference(r["peaks"], name)
            extra = f"{extra:.1f}" if extra is not None else "n/a"
            rows.append([r["model"], name, cell, extra, f"{r['formed_mb']:.1f}", f"{r['b_plus_p_mb']:.2f}"])
    table(
        "b. Peak memory of one steady-state call above what was held before it, MB (fresh process each); above "
        "gradient: less the same library's reference (the activations any backward keeps); B x P: the per-sample "
        "gradients' size; B + P: that many numbers",
        ["model", "peer", "peak MB", "above gradient", "B x P MB", "B + P MB"],
        rows,
        left=2,
    )
    rows = []
    for r in results:
        s = r["steps"]
        for name, v in s.items():
            rows.append([r["model"], name, fmt(v), ratio(s[TORCH_FUNC], v, "{:.2f}")])
    table(
        f"c. One DP-SGD step (clip to {MAX_GRAD_NORM}, noise multiplier {NOISE}, into .grad): ms, median (min)",
        ["model", "peer", "ms per step", "torch.func / this"],
        rows,
        left=2,
    )


def targets(results):
    print("\nd. Targets (medians)")
    for r in results:
        s, peaks = r["norms"], r["peaks"]
        best = min(s[GHOST_COMPILED][0], s[GHOST][0])
        formed = min(s[BG_VMAP][0], s[TORCH_FUNC][0])
        met = best < formed
        print(
            f"  {'MET   ' if met else 'MISSED'} {r['model']}: ghost norms faster than forming the per-sample "
            f"gradients: {best * 1e3:.1f} ms vs {formed * 1e3:.1f} ms (the faster of bg vmap and torch.func)"
        )
        extra = _above_reference(peaks, GHOST_COMPILED)
        if extra is not None:
            met = extra < r["formed_mb"]
            print(
                f"  {'MET   ' if met else 'MISSED'} {r['model']}: ghost norms' peak memory above bg's gradient below "
                f"the per-sample gradients' size: {extra:.1f} MB vs {r['formed_mb']:.1f} MB"
            )


def main(argv):
    del argv
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    torch.set_num_threads(FLAGS.torch_threads)
    if FLAGS.child:
        memory_child(FLAGS.child, FLAGS.batch, FLAGS.dtype)
        return
    repeats, number = FLAGS.repeats or (3 if FLAGS.quick else 7), 1 if FLAGS.quick else 2
    have_opacus = opacus_module() is not None
    print(
        f"batched_grad {bg.__version__}, torch {torch.__version__} (threads {torch.get_num_threads()}), "
        f"opacus {'imported' if have_opacus else 'not installed'}, {os.cpu_count()} CPUs, repeats {repeats}, "
        f"load average {os.getloadavg()[0]:.1f}, {environment()}"
    )
    start = time.perf_counter()
    results = [run_model(name, repeats, number) for name in MODELS]
    report(results)
    targets(results)
    print(f"\ntotal {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    app.run(main)
