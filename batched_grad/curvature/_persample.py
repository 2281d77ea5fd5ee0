"""Per-sample gradient norms without forming per-sample gradients: one forward that keeps every layer's inputs and
outputs (forward hooks), one backward of the sum of the per-sample losses to the layers' outputs (the engine gives
each sample's output gradient, as samples do not mix), then each layer's rule (_ghost.py).

Which module computes a parameter's per-sample quantities: the module that owns it, if it was called; else the
nearest called module above it, by vmap(grad) (a parameter read by its parent's forward, as MultiheadAttention reads
out_proj's). Batch statistics (BatchNorm in training mode) mix the samples, and are refused."""

import contextlib

from .. import Tensor
from ..autograd import grad
from ..nn.batchnorm import _BatchNorm
from ._ghost import FALLBACK, Call, flat_tensors, rule_for


def _detached(value):
    return value.detach() if isinstance(value, Tensor) else value


def _cloned(output):
    """The output with its tensors copied: what the rest of the forward sees, so that an in-place change there
    leaves the kept output as the layer made it."""
    if isinstance(output, Tensor):
        return output.clone()
    if isinstance(output, (tuple, list)):
        return type(output)(_cloned(o) for o in output)
    return output


@contextlib.contextmanager
def recording(model, clone_outputs):
    """{module: [Call]} filled by each module's calls while inside."""
    calls, handles = {}, []

    def keep(module, args, kwargs, output):
        outputs = flat_tensors(output)
        # the arguments are detached after the backward: detach() here would compute them now
        call = Call(args, kwargs, outputs, versions=[t._counter.value for t in outputs])
        calls.setdefault(module, []).append(call)
        return _cloned(output) if clone_outputs else None

    try:
        for module in model.modules():
            handles.append(module.register_forward_hook(keep, with_kwargs=True))
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def _as_args(inputs):
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


@contextlib.contextmanager
def _unreduced(loss_fn):
    """A loss module with a `reduction` attribute set to 'none' while inside, so that it returns per-sample losses."""
    reduction = getattr(loss_fn, "reduction", None)
    if reduction is None or reduction == "none":
        yield
        return
    loss_fn.reduction = "none"
    try:
        yield
    finally:
        loss_fn.reduction = reduction


def check_samples_independent(model):
    """Refuse a model whose modules mix the samples of a batch (BatchNorm in training mode)."""
    for name, module in model.named_modules():
        if isinstance(module, _BatchNorm) and module.training:
            raise ValueError(
                f"per-sample gradients of model: its module {name or 'model'} ({type(module).__name__}) is in "
                "training mode, where batch statistics mix the samples; use GroupNorm or LayerNorm, or call .eval()"
            )


def forward(model, inputs, clone_outputs):
    """The model's output on `inputs` (a tensor, or a tuple of positional arguments) and {module: [Call]}."""
    check_samples_independent(model)
    with recording(model, clone_outputs) as calls:
        output = model(*_as_args(inputs))
    return output, calls


def per_sample_losses(model, loss_fn, inputs, targets, clone_outputs=False):
    """(losses (B,), the model's output, {module: [Call]}) from one recorded forward."""
    output, calls = forward(model, inputs, clone_outputs)
    with _unreduced(loss_fn):
        losses = loss_fn(output) if targets is None else loss_fn(output, targets)
    if not isinstance(losses, Tensor) or losses.ndim != 1:
        shape = list(losses.shape) if isinstance(losses, Tensor) else type(losses).__name__
        raise ValueError(
            f"loss_fn must return one loss per sample (a 1-d tensor), or be a loss module with a reduction "
            f"attribute, but returned {shape}"
        )
    return losses, output, calls


class Handler:
    """A module that computes per-sample quantities of some parameters: {name relative to it: full name}."""

    def __init__(self, module, rule, names):
        self.module, self.rule, self.names = module, rule, names


def _owners(model):
    """{id(parameter): [(owning module, its name there, dotted prefix)]}, for trainable parameters."""
    owners = {}
    for prefix, module in model.named_modules(remove_duplicate=False):
        for name, p in module._parameters.items():
            if p is not None and p.requires_grad:
                entry = (module, name, prefix)
                if all(m is not module or n != name for m, n, _ in owners.get(id(p), [])):
                    owners.setdefault(id(p), []).append(entry)
    return owners


def _called_ancestor(model, prefix, calls):
    """The nearest module above `prefix` (dotted) that was called, with its own prefix; None if none was."""
    parts = prefix.split(".") if prefix else []
    for depth in range(len(parts) - 1, -1, -1):
        above = ".".join(parts[:depth])
        module = model.get_submodule(above)
        if module in calls:
            return module, above
    return None


def handlers(model, calls):
    """The Handlers of the trainable parameters that the forward used; a parameter whose owner was not called and has
    no called module above it was not used (its per-sample gradients are zero) and is left out."""
    chosen = {}
    for entries in _owners(model).values():
        called = [e for e in entries if e[0] in calls]
        if len({id(m) for m, _, _ in called}) > 1:
            owners = ", ".join(f"{p or 'model'}.{n}" for _, n, p in called)
            raise NotImplementedError(
                f"per-sample gradients of a parameter shared by several called modules ({owners}) are not supported"
            )
        module, name, prefix = called[0] if called else entries[0]
        full = f"{prefix}.{name}" if prefix else name
        if called:
            key, local = (id(module), "own"), name
            chosen.setdefault(key, Handler(module, rule_for(module), {}))
        else:
            found = _called_ancestor(model, prefix, calls)
            if found is None:
                continue
            ancestor, above = found
            key, local = (id(ancestor), "vmap"), full[len(above) + 1 :] if above else full
            chosen.setdefault(key, Handler(ancestor, FALLBACK, {}))
        chosen[key].names[local] = full
    return list(chosen.values())


def output_grads(root, handlers_, calls, grad_output=None, is_grads_batched=False):
    """Fill each handled call's grad_outputs with the gradient of `root` (with `grad_output`, a batch of them when
    `is_grads_batched`) with respect to its outputs (None where an output does not reach `root`); the graph is freed.
    False if an output was changed in place after its layer returned it (its gradient would be the changed
    tensor's)."""
    needed = [(call, k, t) for h in handlers_ for call in calls[h.module] for k, t in enumerate(call.outputs)]
    if any(t._counter.value != call.versions[k] for call, k, t in needed):
        return False
    differentiable = [(call, k, t) for call, k, t in needed if t.requires_grad]
    grads = grad(
        root,
        [t for _, _, t in differentiable],
        grad_output,
        allow_unused=True,
        is_grads_batched=is_grads_batched,
    )
    for h in handlers_:
        for call in calls[h.module]:
            call.grad_outputs = [None] * len(call.outputs)
            call.args = tuple(_detached(a) for a in call.args)
            call.kwargs = {k: _detached(v) for k, v in call.kwargs.items()}
    for (call, k, _), g in zip(differentiable, grads):
        call.grad_outputs[k] = g
    return True


def reached(handler, calls):
    """The handler's calls whose outputs reached the root of the backward."""
    return [c for c in calls[handler.module] if any(g is not None for g in c.grad_outputs)]


def rule_results(handlers_, calls, kind, batch, *extra):
    """{parameter name: what each handler's rule gives for `kind` ("sq_norms", "grads", or "weighted_sums" with
    the weights as `extra`)} over its calls that reached the root of the backward."""
    result = {}
    for h in handlers_:
        used = reached(h, calls)
        if used:
            values = getattr(h.rule, kind)(h.module, used, list(h.names), batch, *extra)
            result.update({h.names[local]: v for local, v in values.items()})
    return result


class Capture:
    """A forward and a backward to the layer outputs, recorded: the per-sample losses, their batch size, and what
    each parameter's per-sample quantities are computed from."""

    def __init__(self, model, loss_fn, inputs, targets=None, clone_outputs=False):
        self.losses, self.output, self.calls = per_sample_losses(model, loss_fn, inputs, targets, clone_outputs)
        self.cloned = clone_outputs
        self.batch = self.losses.shape[0]
        self.handlers = handlers(model, self.calls)
        self.clean = output_grads(self.losses.sum(), self.handlers, self.calls)
        self.formed = {}  # per-sample gradients kept by sq_norms_keeping_formed

    @classmethod
    def run(cls, model, loss_fn, inputs, targets=None, clone_outputs=False):
        """A Capture, run again with the layer outputs copied if an output was changed in place the first time."""
        capture = cls(model, loss_fn, inputs, targets, clone_outputs)
        if not capture.clean:
            capture = cls(model, loss_fn, inputs, targets, clone_outputs=True)
        return capture

    def sq_norms(self):
        """{parameter name: squared per-sample gradient norms (B,)} of every parameter that reached the losses."""
        return rule_results(self.handlers, self.calls, "sq_norms", self.batch)

    def grads(self):
        """{parameter name: per-sample gradients (B, *shape)}, formed."""
        return rule_results(self.handlers, self.calls, "grads", self.batch)

    def sq_norms_keeping_formed(self, limit):
        """(sq_norms(), {parameter name: per-sample gradients}) where a layer's norms form its per-sample gradients
        anyway (the products route, LayerNorm, vmap(grad)) and they hold at most `limit` numbers: kept for
        weighted_sums."""
        sq_norms = {}
        for h in self.handlers:
            used = reached(h, self.calls)
            size = self.batch * sum(h.module.get_parameter(local).numel() for local in h.names)
            if used and size <= limit and h.rule.formed_first(h.module, used, self.batch):
                grads = {h.names[k]: g for k, g in h.rule.grads(h.module, used, list(h.names), self.batch).items()}
                self.formed.update(grads)
                sq_norms.update({name: g.reshape(self.batch, -1).square().sum(1) for name, g in grads.items()})
            else:
                sq_norms.update(rule_results([h], self.calls, "sq_norms", self.batch))
        return sq_norms

    def weighted_sums(self, weights):
        """{parameter name: sum_i weights_i * (the gradient of sample i)}, shaped as the parameter, from the same
        recorded quantities (no second backward); from the kept per-sample gradients where there are some."""
        formed = self.formed
        sums = {name: (weights.reshape(-1, *[1] * (g.ndim - 1)) * g).sum(0) for name, g in formed.items()}
        rest = [h for h in self.handlers if not all(name in formed for name in h.names.values())]
        return {**sums, **rule_results(rest, self.calls, "weighted_sums", self.batch, weights)}


def total_norms(sq_norms, batch, like):
    """The per-sample norms over all parameters: sqrt of the sum of their squared norms (zeros if none)."""
    total = None
    for sq in sq_norms.values():
        total = sq if total is None else total + sq
    if total is None:
        total = like.new_zeros(batch)
    return total.sqrt()


def per_sample_grad_norms(model, loss_fn, inputs, targets=None, *, per_parameter=False):
    """The L2 norm of each sample's gradient over all trainable parameters of `model`, shape (B,), without forming
    the per-sample gradients (Opacus' ghost norms). `loss_fn(model(*inputs), targets)` (or `loss_fn(output)` when
    `targets` is None) must return the B per-sample losses, or be a loss module whose `reduction` is switched to
    'none' for the call. With `per_parameter=True`, {parameter name: its per-sample norms (B,)} instead."""
    capture = Capture.run(model, loss_fn, inputs, targets)
    sq_norms = capture.sq_norms()
    if per_parameter:
        return {name: sq.sqrt() for name, sq in sq_norms.items()}
    return total_norms(sq_norms, capture.batch, capture.losses.detach())


def per_sample_grads(model, loss_fn, inputs, targets=None):
    """{parameter name: the per-sample gradients (B, *shape)}, formed layer by layer from the same recorded
    forward and backward (BackPACK's BatchGrad); for checks and small models."""
    return Capture.run(model, loss_fn, inputs, targets).grads()
