"""The exact diagonal of the generalized Gauss-Newton matrix, per parameter (BackPACK's DiagGGNExact):

    diag(G) = sum_i diag(J_i^T H_i J_i),   J_i = d f(x_i) / d theta,   H_i = d^2 L / d f(x_i)^2

for a loss L summed or averaged over samples. H_i (K x K, K the size of one sample's output) comes from K
Hessian-vector products of the loss with respect to the output, one batched call (H is block diagonal, so probing
with e_c in every sample's block gives every H_i's column c). With H_i = sum_c sign_ic s_ic s_ic^T (its
eigendecomposition, s_ic = sqrt|lambda_ic| v_ic), diag(G) = sum_ic sign_ic (J_i^T s_ic)^2: one batched backward with
the K columns s_c as cotangents gives each layer's output gradients, and the layer rules of _ghost.py form the
per-(column, sample) gradients J_i^T s_ic of its parameters, which are squared and summed."""

import math

from .. import Tensor, eye, linalg
from ..autograd import grad
from ._ghost import Call
from ._persample import forward, handlers, output_grads, rule_results


def _loss_hessian_blocks(loss_fn, output, targets):
    """H_i (B, K, K), K = output.numel() / B: the Hessian of the loss with respect to sample i's output."""
    batch, size = output.shape[0], math.prod(output.shape[1:])
    o = output.detach().requires_grad_(True)
    loss = loss_fn(o) if targets is None else loss_fn(o, targets)
    if not isinstance(loss, Tensor) or loss.ndim != 0:
        raise ValueError(f"loss_fn must return the loss as a scalar tensor, but returned {type(loss).__name__}")
    (g,) = grad(loss, o, create_graph=True)
    probes = eye(size, dtype=o.dtype).reshape(size, 1, *o.shape[1:]).expand(size, *o.shape)
    (columns,) = grad(g, o, probes, is_grads_batched=True, allow_unused=True, materialize_grads=True)
    return columns.reshape(size, batch, size).permute(1, 2, 0)


FORMED_ELEMENTS = 2**24  # per-(column, sample) gradients formed at a time, per layer


def _repeated(call, columns, batch):
    """The call for the cotangent columns `columns` (a range): every batch-first argument (keywords too) repeated
    once per column, the output gradients of those columns; rows (column, sample), column-major."""
    count = len(columns)

    def rows(a):
        if isinstance(a, Tensor) and a.ndim and a.shape[0] == batch:
            return a.unsqueeze(0).expand(count, *a.shape).reshape(count * batch, *a.shape[1:])
        return a

    grad_outputs = [
        None if g is None else g[columns.start : columns.stop].reshape(count * batch, *g.shape[2:])
        for g in call.grad_outputs
    ]
    kwargs = {k: rows(v) for k, v in call.kwargs.items()}
    return Call(tuple(rows(a) for a in call.args), kwargs, call.outputs, grad_outputs)


def _signed_square_sums(handler, calls, signs, batch):
    """{name: sum over (column, sample) of sign * gradient^2} for the handler's parameters, the per-(column,
    sample) gradients formed a few columns at a time (FORMED_ELEMENTS)."""
    size = signs.shape[0]
    elements = batch * sum(handler.module.get_parameter(local).numel() for local in handler.names)
    step = max(1, FORMED_ELEMENTS // max(1, elements))
    total = {}
    for start in range(0, size, step):
        columns = range(start, min(size, start + step))
        repeated = {handler.module: [_repeated(c, columns, batch) for c in calls[handler.module]]}
        grads = rule_results([handler], repeated, "grads", len(columns) * batch)
        weights = signs[start : columns.stop].reshape(-1)
        for name, g in grads.items():
            value = (weights.reshape(-1, *[1] * (g.ndim - 1)) * g.square()).sum(0)
            total[name] = value if name not in total else total[name] + value
    return total


def diag_ggn(model, loss_fn, inputs, targets=None):
    """{parameter name: the diagonal of the GGN of `loss_fn(model(*inputs), targets)` for that parameter}, shaped as
    the parameter, for every trainable parameter the output depends on. The loss must be a sum or mean of
    per-sample terms (as cross-entropy and MSE are); every layer must be batch first."""
    for clone_outputs in (False, True):
        output, calls = forward(model, inputs, clone_outputs)
        if not isinstance(output, Tensor) or output.ndim == 0:
            raise ValueError("diag_ggn needs a model whose output is one batch-first tensor")
        batch = output.shape[0]
        hessians = _loss_hessian_blocks(loss_fn, output, targets)
        values, vectors = linalg.eigh(hessians)
        factors = vectors * values.abs().sqrt().unsqueeze(1)  # column c of sample i: s_ic
        size = factors.shape[-1]
        cotangents = factors.permute(2, 0, 1).reshape(size, *output.shape)
        layers = handlers(model, calls)
        if output_grads(output, layers, calls, cotangents, is_grads_batched=True):
            break
    signs = values.sign().transpose(0, 1)  # (column, sample), as the cotangents
    diagonal = {}
    for h in layers:
        if any(g is not None for c in calls[h.module] for g in c.grad_outputs):
            diagonal.update(_signed_square_sums(h, calls, signs, batch))
    return diagonal
