"""The optimizer updates of sparse gradients (Embedding(sparse=True)'s): SparseAdam, and torch's sparse forms of SGD
and Adagrad, in torch's order of operations on the gradient's specified elements."""

import math

from .._factories import tensor, zeros_like
from .._tensor import Tensor
from ..sparse._coo import SparseCOO
from ..sparse._grads import add_sparse_, added_into
from ..sparse._math import sparse_mask
from .optimizer import Optimizer


def _add_into_(param, sparse, alpha=1):
    """param += alpha * sparse in place (a dense tensor: the parameter or a dense state)."""
    param.copy_(Tensor._wrap(added_into(param, sparse, alpha)))


def _with_values(grad, values):
    return SparseCOO._of(grad._coo_indices, values, grad.shape, grad._coalesced)


def sgd_sparse_update(optimizer, group, params):
    """SGD on sparse gradients, as torch: the momentum buffer is sparse too (a clone of the first gradient, then
    buf * momentum + (1 - dampening) * grad, merged by index); weight decay (a sparse + dense sum) is refused."""
    lr, momentum = float(group["lr"]), float(group["momentum"])
    for p in params:
        grad = -p.grad if group["maximize"] else p.grad
        if not isinstance(grad, SparseCOO):  # a dense gradient among sparse ones: the group's dense rule
            optimizer._update(group, [p])
            continue
        if group["weight_decay"] != 0:
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
        if momentum != 0:
            state = optimizer.state[p]
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = _with_values(grad, grad._coo_values.detach().clone())
            else:
                buf._coo_values = buf._coo_values * momentum
                add_sparse_(buf, grad, 1 - float(group["dampening"]))
            if group["nesterov"]:
                grad = _with_values(grad, grad._coo_values.clone())
                add_sparse_(grad, buf, momentum)
            else:
                grad = buf
        _add_into_(p, grad, -lr)


def adagrad_sparse_update(optimizer, group, params):
    """Adagrad on sparse gradients, as torch: the coalesced gradient's squares add into the dense sum, and only its
    rows move; weight decay is refused."""
    for p in params:
        if not isinstance(p.grad, SparseCOO):
            optimizer._update(group, [p])
            continue
        state = optimizer._init_state(p, group)
        step = float(state["step"].item()) + 1
        state["step"] = tensor(step)
        grad = -p.grad if group["maximize"] else p.grad
        if group["weight_decay"] != 0:
            raise RuntimeError("weight_decay option is not compatible with sparse gradients")
        clr = float(group["lr"]) / (1 + (step - 1) * float(group["lr_decay"]))
        grad = grad.coalesce()
        values = grad._coo_values
        _add_into_(state["sum"], _with_values(grad, values.pow(2)))
        std = sparse_mask(state["sum"], grad)._coo_values.sqrt() + float(group["eps"])
        _add_into_(p, _with_values(grad, values / std), -clr)


class SparseAdam(Optimizer):
    """Adam for sparse gradients (Embedding(sparse=True)'s): the moments and the parameter move only at the rows
    the gradient specifies, with Adam's bias corrections of the parameter's step count."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse = [
            [g, i] for g, group in enumerate(self.param_groups) for i, p in enumerate(group["params"]) if p.is_sparse
        ]
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense parameter tensors")
        complex_ = [
            [g, i] for g, group in enumerate(self.param_groups) for i, p in enumerate(group["params"]) if p.is_complex()
        ]
        if complex_:
            raise ValueError(f"Complex params at indices {complex_}: SparseAdam does not support complex parameters")

    def _update(self, group, params):
        raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")

    def _sparse_update(self, group, params):
        if any(not isinstance(p.grad, SparseCOO) for p in params):
            self._update(group, params)
        for p in params:
            state = self.state[p]
            if not state:
                state.update(step=0, exp_avg=zeros_like(p), exp_avg_sq=zeros_like(p))
            state["step"] += 1
            self._step_one(group, p, state)

    @staticmethod
    def _step_one(group, p, state):
        beta1, beta2 = group["betas"]
        grad = (-p.grad if group["maximize"] else p.grad).coalesce()
        values = grad._coo_values
        if values.numel() == 0:
            return
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        # old <- b * old + (1 - b) * new, as old += (1 - b) * (new - old) at the gradient's rows
        old_avg = sparse_mask(exp_avg, grad)._coo_values
        avg_update = (values - old_avg) * (1 - beta1)
        _add_into_(exp_avg, _with_values(grad, avg_update))
        old_sq = sparse_mask(exp_avg_sq, grad)._coo_values
        sq_update = (values.pow(2) - old_sq) * (1 - beta2)
        _add_into_(exp_avg_sq, _with_values(grad, sq_update))
        numer = avg_update + old_avg
        denom = (sq_update + old_sq).sqrt() + group["eps"]
        bias_correction1 = 1 - beta1 ** state["step"]
        bias_correction2 = 1 - beta2 ** state["step"]
        step_size = group["lr"] * math.sqrt(bias_correction2) / bias_correction1
        _add_into_(p, _with_values(grad, -step_size * (numer / denom)))
