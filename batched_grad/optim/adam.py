"""Adam (and AMSGrad, decoupled weight decay, maximize): torch's single-tensor update, with the step-dependent
bias corrections computed in double precision as torch does, on the device from the step count there (nothing is
read back to the host: the step compiles in bg.compile)."""

import functools

import jax.numpy as jnp

from .._factories import tensor, zeros_like
from .._ops.rounding import divide, fused_multiply_add, lerp, product
from ._parts import Update, in_parts, shapes_of, values
from .optimizer import Optimizer, complex_from_pairs, real_pairs


@functools.partial(Update, static_argnames=("weight_decay", "decoupled", "amsgrad", "maximize"))
def _adam(
    params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, hyper, *, weight_decay, decoupled, amsgrad, maximize
):
    lr, beta1, beta2, eps = hyper
    out = [], [], [], [], []
    for p_in, g, m_in, v_in, v_max_in, step in zip(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps):
        p, g, m, v, v_max = (real_pairs(a) for a in (p_in, g, m_in, v_in, v_max_in))
        step = step + 1
        count = step.astype(jnp.float64)  # torch's bias corrections, in double precision, then the values' type
        step_size = (lr / (1 - beta1**count)).astype(p.dtype)
        bias_correction2_sqrt = jnp.sqrt(1 - beta2**count).astype(p.dtype)
        # torch's ops in torch's order, each rounding as its CPU kernel does (fused_multiply_add)
        scalar = lambda value: jnp.asarray(value, p.dtype)  # noqa: E731  (torch casts a Scalar to the values' type)
        g = -g if maximize else g
        if weight_decay != 0:
            if decoupled:
                p = product(p, scalar(1 - lr * weight_decay))  # mul_, rounded before the add below
            else:
                g = fused_multiply_add(scalar(weight_decay), p, g)
        m = lerp(m, g, scalar(1 - beta1))
        v = fused_multiply_add(scalar(1 - beta2) * g, g, v * scalar(beta2))  # mul_(beta2).addcmul_(g, g)
        if amsgrad:
            v_max = jnp.maximum(v_max, v)
        denom = divide(jnp.sqrt(v_max if amsgrad else v), bias_correction2_sqrt) + scalar(eps)
        updated = (p + -step_size * m / denom, m, v, v_max)  # addcdiv_
        updated = [complex_from_pairs(a, like) for a, like in zip(updated, (p_in, m_in, v_in, v_max_in))]
        for results, value in zip(out, (*updated, step)):
            results.append(value)
    return out


class Adam(Optimizer):
    """Adam: moving averages of the gradient and its square, bias-corrected, as the update direction."""

    sparse_refusal = "Adam does not support sparse gradients, please consider SparseAdam instead"

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        amsgrad=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
        fused=None,
        decoupled_weight_decay=False,
    ):
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
            raise NotImplementedError(
                f"{type(self).__name__}: capturable=True, differentiable=True and fused=True are not supported."
            )
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                amsgrad=amsgrad,
                maximize=maximize,
                foreach=foreach,
                capturable=False,
                differentiable=False,
                fused=None,
                decoupled_weight_decay=decoupled_weight_decay,
            ),
        )

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
        beta1, beta2 = group["betas"]
        hyper = (float(group["lr"]), float(beta1), float(beta2), float(group["eps"]))
        flags = dict(
            weight_decay=float(group["weight_decay"]),
            decoupled=bool(group["decoupled_weight_decay"]),
            amsgrad=amsgrad,
            maximize=bool(group["maximize"]),
        )
        names = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step")
        new = in_parts(
            ("adam", tuple(sorted(flags.items())), shapes_of(params)),
            len(params),
            lambda chosen: _adam(
                values([params[i] for i in chosen]),
                values([params[i].grad for i in chosen]),
                *[values([states[i].get(name) for i in chosen]) for name in names],
                hyper,
                **flags,
            ),
        )
        self._write(params, new[0])
        for k, state in enumerate(states):  # in place, as torch's (a compiled step reads them back)
            self._write(
                [state[n] for n in names if n in state], [new[j][k] for j, n in enumerate(names, 1) if n in state]
            )


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter): p -= lr * weight_decay * p before the Adam step."""

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=1e-2,
        amsgrad=False,
        *,
        maximize=False,
        foreach=None,
        capturable=False,
        differentiable=False,
        fused=None,
    ):
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )
