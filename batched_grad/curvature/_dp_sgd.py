"""DP-SGD (Abadi et al., 2016) with ghost clipping (Opacus' grad_sample_mode="ghost"): each sample's gradient
clipped to norm C by a factor f_i = min(1, C / (norm_i + 1e-6)) from its ghost norm, without forming it. One
backward gives the layers' output gradients and from them the per-sample norms (_persample.py). Where Opacus runs a
second backward of sum_i f_i loss_i, the clipped sum sum_i f_i g_i is computed from the same recorded inputs and
output gradients, layer by layer ("book-keeping", Bu et al. 2023): for Linear (f G)^T A, equal to what the second
backward gives at the cost of one weight gradient, without the backward through the rest of the network. Where a
layer's norms formed its per-sample gradients anyway (the products route, LayerNorm, vmap(grad)), they are kept and
weighted instead (mixed ghost clipping). Gaussian noise of standard deviation noise_multiplier * C is added and the
sum divided by the (expected) batch size, into each parameter's .grad."""

from collections import namedtuple

from .. import Tensor, randn
from .. import compile as compile_step
from .._tracing import compiling
from ._persample import Capture, total_norms

DPStep = namedtuple("DPStep", ["loss", "per_sample_norms", "clip_factors"])
DPStep.__doc__ = """What a DP-SGD step computed: the mean of the per-sample losses (detached), each sample's gradient
norm before clipping (B,), and the factor its gradient was scaled by (B,)."""

CLIP_EPS = 1e-6  # Opacus' guard in max_grad_norm / (norm + eps)
KEPT_ELEMENTS = 2**24  # a layer's per-sample gradients formed for its norms are kept for the clipped sum up to this


def _check_positive(name, value, allow_zero=False):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0 or (value == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be a {bound} number, but got {value!r}")


class GhostClipping:
    """DP-SGD steps for `model` with per-sample clipping by ghost norms, as Opacus'
    GradSampleModuleFastGradientClipping with use_ghost_clipping=True:

        dp = GhostClipping(model, max_grad_norm=1.0, noise_multiplier=1.1, compile=True)
        for x, y in loader:
            optimizer.zero_grad()
            dp.step(nn.CrossEntropyLoss(), x, y)  # sets every trainable parameter's .grad
            optimizer.step()

    `loss_fn(model(*inputs), targets)` must give the per-sample losses, or be a loss module (its reduction is set to
    'none' for the call). Noise is drawn with `generator` (a batched_grad.Generator) when given;
    `expected_batch_size` (Opacus' name, for Poisson sampling) divides the sum instead of the batch's size. With
    `compile=True` each step after the first runs as one program (bg.compile, one per loss_fn and optimizer), the
    noise drawn outside it."""

    def __init__(
        self, model, max_grad_norm, noise_multiplier=0.0, *, expected_batch_size=None, generator=None, compile=False
    ):
        _check_positive("max_grad_norm", max_grad_norm)
        _check_positive("noise_multiplier", noise_multiplier, allow_zero=True)
        if expected_batch_size is not None and (not isinstance(expected_batch_size, int) or expected_batch_size < 1):
            raise ValueError(f"expected_batch_size must be a positive int or None, but got {expected_batch_size!r}")
        if not isinstance(compile, bool):
            raise TypeError(f"compile must be a bool, but got {type(compile).__name__}")
        self.model, self.max_grad_norm, self.noise_multiplier = model, max_grad_norm, noise_multiplier
        self.expected_batch_size, self.generator, self.compile = expected_batch_size, generator, compile
        self.clone_outputs = False  # set once a layer's output was changed in place: copy them from then on
        self._programs = {}  # (what, id(loss_fn), id(optimizer)) -> (the compiled function, what it holds)

    def _capture(self, loss_fn, inputs, targets):
        capture = Capture.run(self.model, loss_fn, inputs, targets, self.clone_outputs)
        self.clone_outputs = capture.cloned
        return capture

    def _compiled(self, what, fn, *held):
        """bg.compile(fn), kept for the objects `held` (a loss_fn, an optimizer) it closes over."""
        key = (what, *map(id, held))
        if key not in self._programs or any(a is not b for a, b in zip(self._programs[key][1], held)):
            self._programs[key] = (compile_step(fn), held)
        return self._programs[key][0]

    def per_sample_norms(self, loss_fn, inputs, targets=None):
        """Each sample's gradient norm over the trainable parameters (B,), by ghost norms."""

        def norms(inputs, targets):
            capture = self._capture(loss_fn, inputs, targets)
            return total_norms(capture.sq_norms(), capture.batch, capture.losses.detach())

        run = self._compiled("norms", norms, loss_fn) if self.compile else norms
        return run(inputs, targets)

    def _trainable(self):
        return [p for p in self.model.parameters() if p.requires_grad]

    def _draw(self, params):
        """Standard normal draws shaped as `params`, from the generator."""
        if compiling.name is not None:
            raise RuntimeError(
                f"GhostClipping.step inside bg.compile({compiling.name}): draws made while a step is traced are "
                "fixed into its program, so every call would add the same noise; draw it outside the compiled "
                "function and pass it as noise= (one standard normal tensor per trainable parameter), or use "
                "GhostClipping(..., compile=True)"
            )
        return [randn(p.shape, dtype=p.dtype, generator=self.generator) for p in params]

    def _checked(self, params, noise):
        noise = list(noise)
        if len(noise) != len(params) or any(tuple(n.shape) != tuple(p.shape) for n, p in zip(noise, params)):
            raise ValueError(
                f"noise must hold one tensor per trainable parameter, shaped {[list(p.shape) for p in params]}, "
                f"but got {[list(n.shape) if isinstance(n, Tensor) else type(n).__name__ for n in noise]}"
            )
        return noise

    def step(self, loss_fn, inputs, targets=None, *, optimizer=None, noise=None):
        """One DP-SGD gradient: clipped per-sample gradients summed, noise added, divided by the batch size, into
        each trainable parameter's .grad (replacing it); then optimizer.step() if an optimizer is given. `noise`
        (one standard normal tensor per trainable parameter, in parameters() order) replaces the draws. A
        DPStep."""
        params = self._trainable()
        if self.noise_multiplier:
            noise = self._draw(params) if noise is None else self._checked(params, noise)
        else:
            noise = None

        def dp_step(inputs, targets, noise):
            return self._step(loss_fn, inputs, targets, optimizer, noise)

        run = self._compiled("step", dp_step, loss_fn, optimizer) if self.compile else dp_step
        return run(inputs, targets, noise)

    def _step(self, loss_fn, inputs, targets, optimizer, noise):
        named = [(name, p) for name, p in self.model.named_parameters() if p.requires_grad]
        params = [p for _, p in named]
        capture = self._capture(loss_fn, inputs, targets)
        losses = capture.losses
        norms = total_norms(capture.sq_norms_keeping_formed(KEPT_ELEMENTS), capture.batch, losses.detach())
        factors = (self.max_grad_norm / (norms + CLIP_EPS)).clamp(max=1.0)
        sums = capture.weighted_sums(factors)
        clipped = [sums[name] if name in sums else p.new_zeros(p.shape) for name, p in named]
        if noise is not None:
            scale = self.noise_multiplier * self.max_grad_norm
            clipped = [g + z * scale for g, z in zip(clipped, noise)]
        denominator = self.expected_batch_size or capture.batch
        for p, g in zip(params, clipped):
            if p.grad is None:
                p.grad = (g / denominator).detach()
            else:  # in place, so that a compiled step keeps the same .grad tensors
                p.grad.copy_(g / denominator)
        if optimizer is not None:
            optimizer.step()
        return DPStep(losses.detach().mean(), norms.detach(), factors.detach())


def dp_sgd_step(
    model,
    loss_fn,
    inputs,
    targets=None,
    *,
    max_grad_norm,
    noise_multiplier,
    optimizer=None,
    generator=None,
    noise=None,
    expected_batch_size=None,
):
    """One DP-SGD step with ghost clipping: GhostClipping(model, ...).step(...) (not compiled); see GhostClipping.
    A DPStep."""
    clipping = GhostClipping(
        model, max_grad_norm, noise_multiplier, expected_batch_size=expected_batch_size, generator=generator
    )
    return clipping.step(loss_fn, inputs, targets, optimizer=optimizer, noise=noise)
