"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize: torch's single-tensor update."""

import functools

import jax.numpy as jnp

from .._ops.rounding import fused_multiply_add
from .._tensor import Tensor
from ._parts import Update, in_parts, shapes_of, values
from .optimizer import Optimizer
from .sparse import sgd_sparse_update


# lr and momentum are arguments, not constants: schedulers (OneCycleLR, CyclicLR) change both every step
@functools.partial(Update, static_argnames=("weight_decay", "uses_momentum", "dampening", "nesterov", "maximize"))
def _sgd(params, grads, buffers, lr, momentum, *, weight_decay, uses_momentum, dampening, nesterov, maximize):
    new_params, new_buffers = [], []
    for p, g, buf in zip(params, grads, buffers):
        # torch's ops in torch's order: each add with an alpha rounds once (fused_multiply_add)
        scalar = lambda value: jnp.asarray(value, p.dtype)  # noqa: E731  (torch casts a Scalar to the values' type)
        g = -g if maximize else g
        if weight_decay != 0:
            g = fused_multiply_add(scalar(weight_decay), p, g)
        if uses_momentum:
            buf = g if buf is None else fused_multiply_add(scalar(1 - dampening), g, buf * scalar(momentum))
            g = fused_multiply_add(scalar(momentum), buf, g) if nesterov else buf
        new_params.append(fused_multiply_add(scalar(-lr), g, p))
        new_buffers.append(buf)
    return new_params, new_buffers


class SGD(Optimizer):
    """Stochastic gradient descent: p -= lr * g, where g adds weight_decay * p and (Nesterov) momentum."""

    def __init__(
        self,
        params,
        lr=1e-3,
        momentum=0,
        dampening=0,
        weight_decay=0,
        nesterov=False,
        *,
        maximize=False,
        foreach=None,
        differentiable=False,
        fused=None,
    ):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable or fused:
            raise NotImplementedError("SGD: differentiable=True and fused=True are not supported.")
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
                maximize=maximize,
                foreach=foreach,
                differentiable=False,
                fused=None,
            ),
        )

    def _update(self, group, params):
        states = [self.state[p] for p in params]
        buffers = values([s.get("momentum_buffer") for s in states])
        flags = dict(
            weight_decay=float(group["weight_decay"]),
            uses_momentum=group["momentum"] != 0,
            dampening=float(group["dampening"]),
            nesterov=bool(group["nesterov"]),
            maximize=bool(group["maximize"]),
        )
        new_params, new_buffers = in_parts(
            ("sgd", tuple(sorted(flags.items())), shapes_of(params), tuple([b is None for b in buffers])),
            len(params),
            lambda chosen: _sgd(
                values([params[i] for i in chosen]),
                values([params[i].grad for i in chosen]),
                [buffers[i] for i in chosen],
                float(group["lr"]),
                float(group["momentum"]),
                **flags,
            ),
        )
        self._write(params, new_params)
        if group["momentum"] != 0:
            for s, b in zip(states, new_buffers):
                if "momentum_buffer" in s:  # updated in place, as torch's (a compiled step reads it back)
                    s["momentum_buffer"].copy_(Tensor._wrap(b))
                else:
                    s["momentum_buffer"] = Tensor._wrap(b)

    def _sparse_update(self, group, params):
        sgd_sparse_update(self, group, params)
