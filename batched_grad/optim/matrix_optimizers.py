"""torch.optim's Adafactor (second moments factored into row and column averages, updates clipped by their RMS)
and Muon (momentum orthogonalized by Newton-Schulz iterations in bfloat16), each torch's single-tensor update
written with Tensor ops, in torch's order, so the numbers are torch's."""

import math

from .. import _dtypes
from .._factories import tensor, zeros_like
from .._info import finfo
from .._ops import addmm
from .optimizer import Optimizer


def _check_at_least(name, value, bound, rule=">="):
    if not (value >= bound if rule == ">=" else value <= bound):
        raise ValueError(f"{name} should be {rule} {bound:g} but is: {value}")


def _plain_parameters(name, params):
    for p in params:
        if p.is_complex():
            raise RuntimeError(f"{name} does not support complex parameters")


class Adafactor(Optimizer):
    """Adafactor (Shazeer and Stern, 2018) as torch's: a matrix's second moment kept as its row and column means,
    relative step sizes min(lr, 1/sqrt(t)) scaled by the parameter's RMS, updates clipped to RMS at most d."""

    def __init__(
        self,
        params,
        lr=1e-2,
        beta2_decay=-0.8,
        eps=(None, 1e-3),
        d=1.0,
        weight_decay=0.0,
        *,
        foreach=None,
        maximize=False,
    ):
        _check_at_least("Learning rate", lr, 0.0)
        _check_at_least("beta2_decay", beta2_decay, 0.0, "<=")
        if eps[0] is not None:
            _check_at_least("epsilon1", eps[0], 0.0)
        _check_at_least("epsilon2", eps[1], 0.0)
        _check_at_least("Clipping threshold d", d, 1.0)
        _check_at_least("weight_decay", weight_decay, 0.0)
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach)
        super().__init__(params, dict(defaults, maximize=maximize))

    def _state(self, p):
        state = self.state[p]
        if not state:
            state["step"] = tensor(0.0)
            if p.grad.ndim > 1:
                state["row_var"] = p.grad.new_zeros((*p.grad.shape[:-1], 1))
                state["col_var"] = p.grad.new_zeros((*p.grad.shape[:-2], 1, p.grad.shape[-1]))
            else:
                state["variance"] = zeros_like(p.grad)
        return state

    def _update(self, group, params):
        _plain_parameters("Adafactor", params)
        lr, d, weight_decay = float(group["lr"]), group["d"], group["weight_decay"]
        for p in params:
            state = self._state(p)
            grad = -p.grad if group["maximize"] else p.grad
            eps1 = finfo(p.dtype).eps if group["eps"][0] is None else group["eps"][0]
            state["step"] += 1
            step = state["step"].item()
            one_minus_beta2 = step ** group["beta2_decay"]
            alpha = max(group["eps"][1], p.norm(2).item() / p.numel() ** 0.5) * min(lr, 1 / step**0.5)
            if weight_decay != 0:
                p.mul_(1 - lr * weight_decay)
            if grad.ndim > 1:
                state["row_var"].lerp_(grad.norm(dim=-1, keepdim=True).square_().div_(grad.shape[-1]), one_minus_beta2)
                state["col_var"].lerp_(grad.norm(dim=-2, keepdim=True).square_().div_(grad.shape[-2]), one_minus_beta2)
                variance = state["row_var"] @ state["col_var"]
                variance.div_(state["row_var"].mean(dim=-2, keepdim=True).clamp_(min=eps1))
            else:
                state["variance"].lerp_(grad * grad, one_minus_beta2)
                variance = state["variance"].clone()
            update = variance.clamp_(min=eps1 * eps1).rsqrt_().mul_(grad)
            denominator = max(1.0, update.norm(2).item() / (update.numel() ** 0.5 * d))
            p.add_(update, alpha=-alpha / denominator)


_NS_COEFFICIENTS = (3.4445, -4.775, 2.0315)


def _orthogonalized(grad, coefficients, steps, eps):
    """Newton-Schulz iterations towards the orthogonal factor of `grad` (U V^T of its SVD), in bfloat16, on the
    wide orientation; the quintic's coefficients trade exactness for speed, as in Keller Jordan's Muon."""
    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = coefficients
    tall = grad.shape[0] > grad.shape[1]
    x = grad.to(_dtypes.bfloat16)
    x = x.T if tall else x
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = addmm(x, addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


def _adjusted_lr(lr, rule, shape):
    rows, columns = shape[:2]
    if rule is None or rule == "original":
        return lr * math.sqrt(max(1, rows / columns))
    return lr * 0.2 * math.sqrt(max(rows, columns))  # "match_rms_adamw"


class Muon(Optimizer):
    """Muon (Jordan et al., 2024) as torch's: SGD momentum (Nesterov by default) whose update, a matrix, is replaced
    by its approximate orthogonal factor; decoupled weight decay; the learning rate scaled by the matrix shape
    (adjust_lr_fn "original": sqrt(max(1, rows / columns)), or "match_rms_adamw": 0.2 sqrt(max(rows, columns)))."""

    def __init__(
        self,
        params,
        lr=1e-3,
        weight_decay=0.1,
        momentum=0.95,
        nesterov=True,
        ns_coefficients=_NS_COEFFICIENTS,
        eps=1e-7,
        ns_steps=5,
        adjust_lr_fn=None,
    ):
        _check_at_least("Learning rate", lr, 0.0)
        _check_at_least("momentum", momentum, 0.0)
        _check_at_least("weight decay", weight_decay, 0.0)
        if adjust_lr_fn not in (None, "original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov)
        defaults.update(ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(
                        f"Muon only supports 2D parameters whereas we found a parameter with size: {p.size()}"
                    )

    def _update(self, group, params):
        _plain_parameters("Muon", params)
        lr, momentum = float(group["lr"]), group["momentum"]
        for p in params:
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = zeros_like(p.grad)
            buffer = state["momentum_buffer"].lerp_(p.grad, 1 - momentum)
            update = p.grad.lerp(buffer, momentum) if group["nesterov"] else buffer
            update = _orthogonalized(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
            p.mul_(1 - lr * group["weight_decay"])
            p.add_(update, alpha=-_adjusted_lr(lr, group["adjust_lr_fn"], p.shape))
