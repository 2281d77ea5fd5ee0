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


def _repeated(call, columns, batch):
    """The call with every batch-first argument repeated `columns` times: rows (column, sample), column-major."""

    def rows(a):
        if isinstance(a, Tensor) and a.ndim and a.shape[0] == batch:
            return a.unsqueeze(0).expand(columns, *a.shape).reshape(columns * batch, *a.shape[1:])
        return a

    grad_outputs = [None if g is None else g.reshape(columns * batch, *g.shape[2:]) for g in call.grad_outputs]
    return Call(tuple(rows(a) for a in call.args), call.kwargs, call.outputs, grad_outputs)


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
    signs = values.sign().transpose(0, 1).reshape(size * batch)  # rows (column, sample), as the cotangents
    repeated = {h.module: [_repeated(c, size, batch) for c in calls[h.module]] for h in layers}
    grads = rule_results(layers, repeated, "grads", size * batch)
    return {name: (signs.reshape(-1, *[1] * (g.ndim - 1)) * g.square()).sum(0) for name, g in grads.items()}
