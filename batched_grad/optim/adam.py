"""Adam (and AMSGrad, decoupled weight decay, maximize): torch's single-tensor update, with the step-dependent
bias corrections computed on the host in double precision as torch does."""
import functools

import jax
import jax.numpy as jnp

from .._budget import Jitted
from .._factories import tensor, zeros_like
from .._tensor import Tensor
from .optimizer import Optimizer, values


@functools.partial(Jitted, static_argnames=("weight_decay", "decoupled", "amsgrad", "maximize"))
def _adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, hyper, *, weight_decay, decoupled, amsgrad,
          maximize):
    lr, beta1, beta2, eps, step_size, bias_correction2_sqrt = hyper
    out = [], [], [], []
    for p, g, m, v, v_max in zip(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs):
        g = -g if maximize else g
        if weight_decay != 0:
            if decoupled:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        m = m + (1 - beta1) * (g - m)  # torch's lerp_ for a weight below 0.5
        v = v * beta2 + (1 - beta2) * g * g
        if amsgrad:
            v_max = jnp.maximum(v_max, v)
        denom = jnp.sqrt(v_max if amsgrad else v) / bias_correction2_sqrt + eps
        for results, value in zip(out, (p + -step_size * (m / denom), m, v, v_max)):
            results.append(value)
    return out


class Adam(Optimizer):
    """Adam: moving averages of the gradient and its square, bias-corrected, as the update direction."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if capturable or differentiable or fused:
            raise NotImplementedError(f"{type(self).__name__}: capturable=True, differentiable=True and fused=True are "
                                      "not supported.")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize, foreach=foreach, capturable=False,
                                      differentiable=False, fused=None,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _update(self, group, params):
        amsgrad = bool(group["amsgrad"])
        states = []
        for p in params:
            state = self.state[p]
            if not state:
                state.update(step=tensor(0.0), exp_avg=zeros_like(p), exp_avg_sq=zeros_like(p))
                if amsgrad:
                    state["max_exp_avg_sq"] = zeros_like(p)
            states.append(state)
        # like torch, every parameter of the group keeps its own step count
        steps = [_step_value(s["step"]) + 1 for s in states]
        lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], float(group["eps"])
        for step_group in sorted(set(steps)):
            chosen = [i for i, s in enumerate(steps) if s == step_group]
            step_size = lr / (1 - beta1 ** step_group)
            hyper = (lr, float(beta1), float(beta2), eps, step_size, (1 - beta2 ** step_group) ** 0.5)
            pick = lambda key: values([states[i].get(key) for i in chosen])  # noqa: E731
            new = _adam(values([params[i] for i in chosen]), values([params[i].grad for i in chosen]),
                        pick("exp_avg"), pick("exp_avg_sq"), pick("max_exp_avg_sq"), hyper,
                        weight_decay=float(group["weight_decay"]), decoupled=bool(group["decoupled_weight_decay"]),
                        amsgrad=amsgrad, maximize=bool(group["maximize"]))
            self._write([params[i] for i in chosen], new[0])
            for k, i in enumerate(chosen):
                states[i].update(step=tensor(float(step_group)), exp_avg=Tensor._wrap(new[1][k]),
                                 exp_avg_sq=Tensor._wrap(new[2][k]))
                if amsgrad:
                    states[i]["max_exp_avg_sq"] = Tensor._wrap(new[3][k])


def _step_value(step):
    return step.item() if isinstance(step, Tensor) else float(step)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter): p -= lr * weight_decay * p before the Adam step."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
