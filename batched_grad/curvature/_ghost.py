"""Per-sample gradients of one layer's parameters, and their squared norms, from what the layer saw: its inputs and
the gradient of the per-sample losses with respect to its output.

For a linear map y_t = W a_t (t over the positions of a sequence, or of an image for a convolution) the gradient of
sample i is G_i^T A_i, with A_i (T, d_in) its inputs and G_i (T, d_out) its output gradients, and

    ||G_i^T A_i||_F^2 = <A_i A_i^T, G_i G_i^T>_F          (the ghost-norm identity)

which costs T^2 (d_in + d_out) per sample against T d_in d_out for forming the gradient: the cheaper of the two is
used. Embedding is the same with one-hot inputs (A_i A_i^T is "same index"); LayerNorm's per-sample gradients are
as small as its parameters and are formed. Any other layer's per-sample gradients come from batched_grad.func's
vmap(grad) over the layer alone (functional_call), with its output gradient as the cotangent.

A convolution is such a map tap by tap of its kernel (each tap a strided slice of the input: no im2col copy).
A layer called several times in one forward contributes the sum of its calls: the calls are joined along the
sequence axis (the identity holds for the sum), or their formed gradients are added. Each rule also gives
sum_i w_i (gradient of sample i) for weights w, DP-SGD's clipped sum: for a linear map (w G)^T A."""

import itertools
import math
from dataclasses import dataclass

from .. import Tensor, arange, bmm, cat, einsum, enable_grad, func, stack, zeros
from ..autograd import grad
from ..nn import basic
from ..nn import functional as F


@dataclass
class Call:
    """One call of a layer: its positional and keyword arguments, its output tensors and, after the backward, the
    gradients with respect to them (None where an output does not reach the root), the arguments then detached."""

    args: tuple
    kwargs: dict
    outputs: list
    grad_outputs: list = None
    versions: list = None  # the outputs' versions when the layer returned them

    @property
    def input(self):
        """The layer's input: its first positional argument, or its `input` keyword."""
        return self.args[0] if self.args else self.kwargs["input"]


def _rows(t, batch):
    """`t` as (batch, T, d): its leading axis the batch, its last the features, T every axis between."""
    return t.reshape(batch, -1, t.shape[-1])


def _matched_sq_norms(A, G):
    """||G_i^T A_i||_F^2 for each i, A (n, T, d_in), G (n, T, d_out): by the Gram matrices or by the products,
    whichever takes fewer multiplications."""
    T, d_in, d_out = A.shape[1], A.shape[2], G.shape[2]
    if T == 1:
        return A.square().sum((1, 2)) * G.square().sum((1, 2))
    if T * T * (d_in + d_out) <= T * d_in * d_out:
        return (bmm(A, A.transpose(1, 2)) * bmm(G, G.transpose(1, 2))).sum((1, 2))
    return bmm(G.transpose(1, 2), A).square().sum((1, 2))


def _sum_of_calls(per_call):
    """{name: per-sample tensor} summed over the calls' dicts."""
    total = {}
    for grads in per_call:
        for name, g in grads.items():
            total[name] = g if name not in total else total[name] + g
    return total


# ---------------------------------------------------------------- Linear


def _linear_sequences(module, calls, batch):
    A = cat([_rows(c.input, batch) for c in calls], 1)
    G = cat([_rows(c.grad_outputs[0], batch) for c in calls], 1)
    return A, G


def _linear_sq_norms(module, calls, names, batch):
    A, G = _linear_sequences(module, calls, batch)
    norms = {"weight": lambda: _matched_sq_norms(A, G), "bias": lambda: G.sum(1).square().sum(1)}
    return {name: norms[name]() for name in names}


def _linear_grads(module, calls, names, batch):
    A, G = _linear_sequences(module, calls, batch)
    grads = {"weight": lambda: bmm(G.transpose(1, 2), A), "bias": lambda: G.sum(1)}
    return {name: grads[name]() for name in names}


def _linear_formed_first(module, calls, batch):
    """Whether the products, not the Gram matrices, give the norms (T (d_in + d_out) > d_in d_out)."""
    T = sum(c.input.numel() for c in calls) // (batch * module.in_features)
    return T > 1 and T * (module.in_features + module.out_features) > module.in_features * module.out_features


def _linear_weighted_sums(module, calls, names, batch, weights):
    A, G = _linear_sequences(module, calls, batch)
    G = (G * weights.reshape(batch, 1, 1)).reshape(-1, G.shape[-1])
    sums = {"weight": lambda: G.transpose(0, 1) @ A.reshape(-1, A.shape[-1]), "bias": lambda: G.sum(0)}
    return {name: sums[name]() for name in names}


# ---------------------------------------------------------------- Conv1d, Conv2d


def _conv_pads(module, spatial):
    """The (left, right) zero or mode padding of each spatial axis, as the module applies it."""
    if module.padding == "valid":
        return [(0, 0)] * len(spatial)
    if module.padding == "same":
        totals = [d * (k - 1) for d, k in zip(module.dilation, module.kernel_size)]
        return [(t // 2, t - t // 2) for t in totals]
    return [(p, p) for p in module.padding]


def _conv_taps(module, call, batch):
    """The call as a grouped linear map, one kernel tap at a time (no im2col copy of the input): for each tap the
    input positions it multiplies, (batch * groups, C_in/groups, L), and the output gradients
    (batch * groups, C_out/groups, L), L the output positions."""
    x, g, groups = call.input, call.grad_outputs[0], module.groups
    if x.ndim != module.n + 2:
        raise ValueError(
            f"per-sample gradients of {type(module).__name__} need a batched input of {module.n + 2} dims "
            f"(batch first), but got an input of shape {list(x.shape)}"
        )
    flat_pads = tuple(p for pair in reversed(_conv_pads(module, x.shape[2:])) for p in pair)
    if any(flat_pads):
        x = F.pad(x, flat_pads, mode="constant" if module.padding_mode == "zeros" else module.padding_mode)
    out = g.shape[2:]
    taps = []
    for offsets in itertools.product(*(range(k) for k in module.kernel_size)):
        window = zip(offsets, module.dilation, module.stride, out)
        index = (slice(None), slice(None)) + tuple(slice(o * d, o * d + s * (n - 1) + 1, s) for o, d, s, n in window)
        taps.append(x[index].reshape(batch * groups, x.shape[1] // groups, -1))
    return taps, g.reshape(batch * groups, g.shape[1] // groups, -1)


def _conv_joined(module, calls, batch):
    """_conv_taps of every call, joined along the output positions."""
    per_call = [_conv_taps(module, c, batch) for c in calls]
    taps = [cat([t[j] for t, _ in per_call], 2) for j in range(len(per_call[0][0]))]
    return taps, cat([g for _, g in per_call], 2)


def _conv_weight_sq_norms(taps, G):
    """sum over taps of ||G_i S_ij^T||^2, by the Gram matrices (sum_j S_j^T S_j) . (G^T G) when cheaper."""
    L, d_in, d_out = G.shape[2], taps[0].shape[1] * len(taps), G.shape[1]
    if L * (d_in + d_out) <= d_in * d_out:
        gram = sum(bmm(t.transpose(1, 2), t) for t in taps)
        return (gram * bmm(G.transpose(1, 2), G)).sum((1, 2))
    return sum(bmm(G, t.transpose(1, 2)).square().sum((1, 2)) for t in taps)


def _conv_sq_norms(module, calls, names, batch):
    taps, G = _conv_joined(module, calls, batch)
    norms = {
        "weight": lambda: _conv_weight_sq_norms(taps, G).reshape(batch, module.groups).sum(1),
        "bias": lambda: G.sum(2).square().reshape(batch, -1).sum(1),
    }
    return {name: norms[name]() for name in names}


def _conv_grads(module, calls, names, batch):
    taps, G = _conv_joined(module, calls, batch)
    grads = {
        "weight": lambda: stack([bmm(G, t.transpose(1, 2)) for t in taps], -1).reshape(batch, *module.weight.shape),
        "bias": lambda: G.sum(2).reshape(batch, -1),
    }
    return {name: grads[name]() for name in names}


def _conv_formed_first(module, calls, batch):
    """Whether the products, not the Gram matrices, give the norms (as in _conv_weight_sq_norms)."""
    L = sum(c.grad_outputs[0][0, 0].numel() for c in calls)
    d_in = module.in_channels // module.groups * math.prod(module.kernel_size)
    d_out = module.out_channels // module.groups
    return L * (d_in + d_out) > d_in * d_out


def _conv_weighted_sums(module, calls, names, batch, weights):
    taps, G = _conv_joined(module, calls, batch)
    groups = module.groups
    G = G.reshape(batch, groups, *G.shape[1:]) * weights.reshape(batch, 1, 1, 1)

    def weight():
        per_tap = [einsum("bgol,bgil->goi", G, t.reshape(batch, groups, *t.shape[1:])) for t in taps]
        return stack(per_tap, -1).reshape(module.weight.shape)

    sums = {"weight": weight, "bias": lambda: G.sum((0, 3)).reshape(-1)}
    return {name: sums[name]() for name in names}


# ---------------------------------------------------------------- Embedding


def _embedding_sequences(module, calls, batch):
    """The looked-up indices (batch, T) and their output gradients (batch, T, D), rows at padding_idx zeroed (they
    get no gradient)."""
    index = cat([c.input.reshape(batch, -1) for c in calls], 1)
    G = cat([_rows(c.grad_outputs[0], batch) for c in calls], 1)
    if module.padding_idx is not None:
        G = G * (index != module.padding_idx).unsqueeze(-1).to(G.dtype)
    return index, G


def _embedding_scattered(module, index, G, batch):
    """The per-sample gradients (batch, num_embeddings, D): each output gradient added to its index's row."""
    rows = module.num_embeddings
    flat = (index + arange(batch).unsqueeze(1) * rows).reshape(-1)
    summed = zeros(batch * rows, G.shape[-1], dtype=G.dtype).index_add(0, flat, G.reshape(-1, G.shape[-1]))
    return summed.reshape(batch, rows, -1)


def _embedding_sq_norms(module, calls, names, batch):
    index, G = _embedding_sequences(module, calls, batch)
    T = index.shape[1]
    if T * T <= T + module.num_embeddings:  # the Gram matrix is smaller than the scattered gradient
        same = (index.unsqueeze(2) == index.unsqueeze(1)).to(G.dtype)
        return {"weight": (same * bmm(G, G.transpose(1, 2))).sum((1, 2))}
    return {"weight": _embedding_scattered(module, index, G, batch).square().sum((1, 2))}


def _embedding_grads(module, calls, names, batch):
    index, G = _embedding_sequences(module, calls, batch)
    return {"weight": _embedding_scattered(module, index, G, batch)}


def _embedding_weighted_sums(module, calls, names, batch, weights):
    index, G = _embedding_sequences(module, calls, batch)
    G = (G * weights.reshape(batch, 1, 1)).reshape(-1, G.shape[-1])
    return {"weight": zeros(module.num_embeddings, G.shape[-1], dtype=G.dtype).index_add(0, index.reshape(-1), G)}


# ---------------------------------------------------------------- LayerNorm


def _layer_norm_grads(module, calls, names, batch):
    axes = tuple(range(-len(module.normalized_shape), 0))

    def one_call(call):
        x, g = call.input, call.grad_outputs[0]
        mean = x.mean(axes, keepdim=True)
        var = (x - mean).square().mean(axes, keepdim=True)
        x_hat = (x - mean) / (var + module.eps).sqrt()
        shape = (batch, -1, *module.normalized_shape)
        grads = {"weight": lambda: (g * x_hat).reshape(shape).sum(1), "bias": lambda: g.reshape(shape).sum(1)}
        return {name: grads[name]() for name in names}

    return _sum_of_calls(one_call(c) for c in calls)


# ---------------------------------------------------------------- any other layer: vmap(grad)


def _batched_positions(values, batch):
    """in_dims for `values`: 0 for a tensor whose leading axis is the batch, None for anything else."""
    return tuple(0 if isinstance(v, Tensor) and v.ndim and v.shape[0] == batch else None for v in values)


def flat_tensors(value):
    """The tensors of a module's output (a tensor, or tuples, lists and dicts of them), in order."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat_tensors(v)]
    return []


def vmap_grads(module, calls, names, batch):
    """Per-sample gradients of `names` (dotted, relative to `module`) by vmap(grad) over one call of the module on
    one sample, the cotangent its output gradients: sum_k <module(x_i)_k, g_ik>. Arguments whose leading axis is
    the batch are mapped, the others (and keyword arguments) passed whole; every output must be batch first."""
    params = {name: module.get_parameter(name).detach() for name in names}
    # the module's other parameters enter as constants, so that the results do not require grad
    constants = {name: p.detach() for name, p in module.named_parameters() if name not in params}

    def one_call(call):
        used = [(k, g) for k, g in enumerate(call.grad_outputs) if g is not None]
        for k, g in used:
            if g.ndim == 0 or g.shape[0] != batch:
                raise ValueError(
                    f"per-sample gradients of {type(module).__name__} by vmap(grad): its output {k} of shape "
                    f"{list(g.shape)} is not batch first (batch {batch})"
                )
        in_dims = _batched_positions(call.args, batch)

        def inner_product(p, args, grad_outputs):
            args = tuple(a.unsqueeze(0) if d == 0 else a for a, d in zip(args, in_dims))
            out = flat_tensors(func.functional_call(module, {**constants, **p}, args, call.kwargs))
            return sum((out[k] * g.unsqueeze(0)).sum() for (k, _), g in zip(used, grad_outputs))

        per_sample = func.vmap(func.grad(inner_product), in_dims=(None, in_dims, 0))
        return per_sample(params, call.args, [g for _, g in used])

    return _sum_of_calls(one_call(c) for c in calls)


def recomputed_weighted_sums(module, calls, names, batch, weights):
    """sum_i weights_i * (the gradient of sample i) for `names`: one VJP of the module recomputed on the whole
    batch (its recorded arguments, detached), the cotangent each output gradient times the sample's weight."""
    params = {name: module.get_parameter(name).detach().requires_grad_(True) for name in names}
    constants = {name: p.detach() for name, p in module.named_parameters() if name not in params}
    per_call = []
    for call in calls:
        with enable_grad():
            out = flat_tensors(func.functional_call(module, {**constants, **params}, call.args, call.kwargs))
            used = [(out[k], g) for k, g in enumerate(call.grad_outputs) if g is not None]
            total = sum((o * (g * weights.reshape(batch, *[1] * (g.ndim - 1)))).sum() for o, g in used)
            grads = grad(total, list(params.values()), allow_unused=True, materialize_grads=True)
        per_call.append(dict(zip(params, grads)))
    return _sum_of_calls(per_call)


def _from_grads(grads_rule):
    def sq_norms(module, calls, names, batch):
        grads = grads_rule(module, calls, names, batch)
        return {name: g.reshape(batch, -1).square().sum(1) for name, g in grads.items()}

    return sq_norms


def _weighted_from_grads(grads_rule):
    def weighted_sums(module, calls, names, batch, weights):
        grads = grads_rule(module, calls, names, batch)
        return {name: (g * weights.reshape(batch, *[1] * (g.ndim - 1))).sum(0) for name, g in grads.items()}

    return weighted_sums


def _never(module, calls, batch):
    return False


def _always(module, calls, batch):
    return True


@dataclass(frozen=True)
class Rule:
    """How a layer kind's per-sample quantities are computed, each a function (module, calls, parameter names,
    batch, ...) -> {name: tensor}: squared norms (batch,), formed gradients (batch, *shape), and the sum of the
    per-sample gradients weighted by `weights` (batch,), shaped as the parameter (DP-SGD's clipped sum);
    `formed_first(module, calls, batch)`: whether the norms form the per-sample gradients anyway (then a DP step
    keeps them for its weighted sum rather than computing it again)."""

    sq_norms: object
    grads: object
    weighted_sums: object
    formed_first: object


RULES = {
    basic.Linear: Rule(_linear_sq_norms, _linear_grads, _linear_weighted_sums, _linear_formed_first),
    basic.Conv1d: Rule(_conv_sq_norms, _conv_grads, _conv_weighted_sums, _conv_formed_first),
    basic.Conv2d: Rule(_conv_sq_norms, _conv_grads, _conv_weighted_sums, _conv_formed_first),
    basic.Embedding: Rule(_embedding_sq_norms, _embedding_grads, _embedding_weighted_sums, _never),
    basic.LayerNorm: Rule(
        _from_grads(_layer_norm_grads), _layer_norm_grads, _weighted_from_grads(_layer_norm_grads), _always
    ),
}
FALLBACK = Rule(_from_grads(vmap_grads), vmap_grads, recomputed_weighted_sums, _always)


def rule_for(module):
    """The rule of `module`'s exact type (a subclass may compute something else), else vmap(grad)."""
    return RULES.get(type(module), FALLBACK)
