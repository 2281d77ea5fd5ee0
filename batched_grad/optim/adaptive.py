"""torch.optim's other adaptive methods, each torch's single-tensor update: RMSprop, Adagrad, Adadelta, Adamax,
NAdam, RAdam, Rprop and ASGD."""

import math

import jax
import jax.numpy as jnp

from .._factories import full_like, zeros_like
from ._elementwise import ElementwiseOptimizer, check_range, float32_product, maximum, sqrt
from .sparse import adagrad_sparse_update

_UNSUPPORTED = ("capturable", "differentiable", "fused")


def _plain(name, **flags):
    for flag in _UNSUPPORTED:
        if flags.get(flag):
            raise NotImplementedError(f"{name}: {flag}=True is not supported.")


def _decayed(g, p, weight_decay, maximize):
    g = -g if maximize else g
    return g + weight_decay * p if weight_decay else g


def _zeros(p, group):
    return zeros_like(p)


def _both_parts(p, value):
    """An initial state value for p: for a complex p, value in both the real and the imaginary part (torch steps the
    two parts as independent reals)."""
    return complex(value, value) if p.is_complex() else value


class RMSprop(ElementwiseOptimizer):
    """Divides the gradient by a running root mean square of recent gradients (centered: minus their mean), with
    optional momentum."""

    arrays = {
        "square_avg": _zeros,
        "momentum_buffer": lambda p, g: zeros_like(p) if g["momentum"] > 0 else None,
        "grad_avg": lambda p, g: zeros_like(p) if g["centered"] else None,
    }

    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.99,
        eps=1e-8,
        weight_decay=0,
        momentum=0,
        centered=False,
        capturable=False,
        foreach=None,
        maximize=False,
        differentiable=False,
    ):
        for name, value in (
            ("learning rate", lr),
            ("epsilon value", eps),
            ("momentum value", momentum),
            ("weight_decay value", weight_decay),
            ("alpha value", alpha),
        ):
            check_range(name, value)
        _plain("RMSprop", capturable=capturable, differentiable=differentiable)
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                alpha=alpha,
                eps=eps,
                centered=centered,
                weight_decay=weight_decay,
                capturable=False,
                foreach=foreach,
                maximize=maximize,
                differentiable=False,
            ),
        )

    def _flags(self, group):
        return dict(
            weight_decay=float(group["weight_decay"]),
            maximize=bool(group["maximize"]),
            centered=bool(group["centered"]),
            momentum=float(group["momentum"]),
        )

    def _hyper(self, group, step, scalars):
        return (float(group["lr"]), float(group["alpha"]), float(group["eps"])), {}

    @staticmethod
    def _rule(p, g, s, hyper, flags):
        lr, alpha, eps = hyper
        g = _decayed(g, p, flags["weight_decay"], flags["maximize"])
        s = dict(s, square_avg=s["square_avg"] * alpha + (1 - alpha) * g * g)
        if flags["centered"]:
            s["grad_avg"] = s["grad_avg"] + (1 - alpha) * (g - s["grad_avg"])
            avg = jnp.sqrt(s["square_avg"] - s["grad_avg"] * s["grad_avg"])
        else:
            avg = jnp.sqrt(s["square_avg"])
        avg = avg + eps
        if flags["momentum"] > 0:
            s["momentum_buffer"] = s["momentum_buffer"] * flags["momentum"] + g / avg
            return p + -lr * s["momentum_buffer"], s
        return p + -lr * (g / avg), s


class Adagrad(ElementwiseOptimizer):
    """Divides each step by the root of the sum of all squared gradients so far; lr decays as lr / (1 + (t - 1)
    lr_decay)."""

    arrays = {"sum": lambda p, g: full_like(p, _both_parts(p, g["initial_accumulator_value"]))}

    def __init__(
        self,
        params,
        lr=1e-2,
        lr_decay=0,
        weight_decay=0,
        initial_accumulator_value=0,
        eps=1e-10,
        foreach=None,
        *,
        maximize=False,
        differentiable=False,
        fused=None,
    ):
        for name, value in (
            ("learning rate", lr),
            ("lr_decay value", lr_decay),
            ("weight_decay value", weight_decay),
            ("initial_accumulator_value value", initial_accumulator_value),
            ("epsilon value", eps),
        ):
            check_range(name, value)
        _plain("Adagrad", differentiable=differentiable, fused=fused)
        super().__init__(
            params,
            dict(
                lr=lr,
                lr_decay=lr_decay,
                eps=eps,
                weight_decay=weight_decay,
                initial_accumulator_value=initial_accumulator_value,
                foreach=foreach,
                maximize=maximize,
                differentiable=False,
                fused=None,
            ),
        )
        for group in self.param_groups:  # torch makes Adagrad's state at construction
            for p in group["params"]:
                self._init_state(p, group)

    def _flags(self, group):
        return dict(weight_decay=float(group["weight_decay"]), maximize=bool(group["maximize"]))

    def _hyper(self, group, step, scalars):
        lr = float(group["lr"]) / (1 + (step - 1) * float(group["lr_decay"]))
        return (lr, float(group["eps"])), {}

    def _sparse_update(self, group, params):
        adagrad_sparse_update(self, group, params)

    @staticmethod
    def _rule(p, g, s, hyper, flags):
        clr, eps = hyper
        g = _decayed(g, p, flags["weight_decay"], flags["maximize"])
        total = s["sum"] + g * g
        return p + -clr * (g / (jnp.sqrt(total) + eps)), dict(s, sum=total)


class Adadelta(ElementwiseOptimizer):
    """Scales each step by the ratio of running root mean squares of past updates and of gradients."""

    arrays = {"square_avg": _zeros, "acc_delta": _zeros}

    def __init__(
        self,
        params,
        lr=1.0,
        rho=0.9,
        eps=1e-6,
        weight_decay=0,
        foreach=None,
        *,
        capturable=False,
        maximize=False,
        differentiable=False,
    ):
        check_range("learning rate", lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_range("epsilon value", eps)
        check_range("weight_decay value", weight_decay)
        _plain("Adadelta", capturable=capturable, differentiable=differentiable)
        super().__init__(
            params,
            dict(
                lr=lr,
                rho=rho,
                eps=eps,
                weight_decay=weight_decay,
                maximize=maximize,
                capturable=False,
                foreach=foreach,
                differentiable=False,
            ),
        )

    def _flags(self, group):
        return dict(weight_decay=float(group["weight_decay"]), maximize=bool(group["maximize"]))

    def _hyper(self, group, step, scalars):
        return (float(group["lr"]), float(group["rho"]), float(group["eps"])), {}

    @staticmethod
    def _rule(p, g, s, hyper, flags):
        lr, rho, eps = hyper
        g = _decayed(g, p, flags["weight_decay"], flags["maximize"])
        square_avg = s["square_avg"] * rho + (1 - rho) * g * g
        delta = jnp.sqrt(s["acc_delta"] + eps) / jnp.sqrt(square_avg + eps) * g
        acc_delta = s["acc_delta"] * rho + (1 - rho) * delta * delta
        return p + -lr * delta, dict(square_avg=square_avg, acc_delta=acc_delta)


class Adamax(ElementwiseOptimizer):
    """Adam with the infinity norm: the second moment is a running maximum of |g|."""

    arrays = {"exp_avg": _zeros, "exp_inf": _zeros}

    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        foreach=None,
        *,
        maximize=False,
        differentiable=False,
        capturable=False,
    ):
        _check_adam("Adamax", lr, betas, eps, weight_decay, capturable=capturable, differentiable=differentiable)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                foreach=foreach,
                maximize=maximize,
                differentiable=False,
                capturable=False,
            ),
        )

    def _flags(self, group):
        return dict(weight_decay=float(group["weight_decay"]), maximize=bool(group["maximize"]))

    def _hyper(self, group, step, scalars):
        beta1, beta2 = group["betas"]
        return (float(group["lr"]) / (1 - beta1**step), float(beta1), float(beta2), float(group["eps"])), {}

    @staticmethod
    def _rule(p, g, s, hyper, flags):
        clr, beta1, beta2, eps = hyper
        g = _decayed(g, p, flags["weight_decay"], flags["maximize"])
        exp_avg = s["exp_avg"] + (1 - beta1) * (g - s["exp_avg"])
        exp_inf = jnp.maximum(s["exp_inf"] * beta2, jnp.abs(g) + eps)
        return p + -clr * (exp_avg / exp_inf), dict(exp_avg=exp_avg, exp_inf=exp_inf)


def _check_adam(name, lr, betas, eps, weight_decay, **flags):
    check_range("learning rate", lr)
    check_range("epsilon value", eps)
    for i in (0, 1):
        check_range(f"beta parameter at index {i}", betas[i], high=1.0)
    check_range("weight_decay value", weight_decay)
    _plain(name, **flags)


class NAdam(ElementwiseOptimizer):
    """Adam with Nesterov momentum and torch's momentum schedule mu_t = beta1 (1 - 0.96 ** (t psi) / 2)."""

    arrays = {"exp_avg": _zeros, "exp_avg_sq": _zeros}
    scalars = {"mu_product": 1.0}

    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        momentum_decay=4e-3,
        decoupled_weight_decay=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
    ):
        _check_adam("NAdam", lr, betas, eps, weight_decay, capturable=capturable, differentiable=differentiable)
        check_range("momentum_decay value", momentum_decay)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                momentum_decay=momentum_decay,
                decoupled_weight_decay=decoupled_weight_decay,
                maximize=maximize,
                foreach=foreach,
                capturable=False,
                differentiable=False,
            ),
        )

    def _flags(self, group):
        return dict(
            weight_decay=float(group["weight_decay"]),
            maximize=bool(group["maximize"]),
            decoupled=bool(group["decoupled_weight_decay"]),
        )

    def _hyper(self, group, step, scalars):
        lr, (beta1, beta2), psi = float(group["lr"]), group["betas"], float(group["momentum_decay"])
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * psi))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * psi))
        # torch keeps mu_product in a float32 tensor and multiplies it in float32
        mu_product = float32_product(scalars["mu_product"], mu)
        return (
            lr,
            float(beta1),
            float(beta2),
            float(group["eps"]),
            1 - beta2**step,
            -lr * (1.0 - mu) / (1.0 - mu_product),
            -lr * mu_next / (1.0 - mu_product * mu_next),
        ), {"mu_product": mu_product}

    @staticmethod
    def _rule(p, g, s, hyper, flags):
        lr, beta1, beta2, eps, bias_correction2, grad_step, avg_step = hyper
        p, g, exp_avg, exp_avg_sq = _decayed_moments(p, g, s, lr, beta1, beta2, flags)
        denom = jnp.sqrt(exp_avg_sq / bias_correction2) + eps
        p = p + grad_step * (g / denom)
        return p + avg_step * (exp_avg / denom), dict(exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)


def _rectification(rho_t, rho_inf):
    """RAdam's variance rectification, 0 while the variance is not tractable (rho_t <= 5), where the formula's value
    may be a division by zero."""
    if isinstance(rho_t, jax.Array):
        squared = (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
        return jnp.where(rho_t > 5.0, jnp.sqrt(squared), 0.0)
    if rho_t <= 5.0:
        return 0.0
    return math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))


def _decayed_moments(p, g, s, lr, beta1, beta2, flags):
    """NAdam's and RAdam's common first phase: maximize, weight decay (decoupled from the gradient or added to it),
    then Adam's two moving averages; returns (p, g, exp_avg, exp_avg_sq)."""
    g = -g if flags["maximize"] else g
    if flags["weight_decay"]:
        if flags["decoupled"]:
            p = p * (1 - lr * flags["weight_decay"])
        else:
            g = g + flags["weight_decay"] * p
    exp_avg = s["exp_avg"] + (1 - beta1) * (g - s["exp_avg"])
    return p, g, exp_avg, s["exp_avg_sq"] * beta2 + (1 - beta2) * g * g


class RAdam(ElementwiseOptimizer):
    """Adam with the variance of its adaptive learning rate rectified (plain momentum SGD while rho_t <= 5)."""

    arrays = {"exp_avg": _zeros, "exp_avg_sq": _zeros}

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        decoupled_weight_decay=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
    ):
        _check_adam("RAdam", lr, betas, eps, weight_decay, capturable=capturable, differentiable=differentiable)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                maximize=maximize,
                foreach=foreach,
                capturable=False,
                decoupled_weight_decay=decoupled_weight_decay,
                differentiable=False,
            ),
        )

    def _flags(self, group):
        return dict(
            weight_decay=float(group["weight_decay"]),
            maximize=bool(group["maximize"]),
            decoupled=bool(group["decoupled_weight_decay"]),
        )

    def _hyper(self, group, step, scalars):
        lr, (beta1, beta2) = float(group["lr"]), group["betas"]
        bias_correction1, bias_correction2 = 1 - beta1**step, 1 - beta2**step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        rect = _rectification(rho_t, rho_inf)
        return (
            lr,
            float(beta1),
            float(beta2),
            float(group["eps"]),
            bias_correction1,
            sqrt(bias_correction2),
            rect,
        ), {}

    @staticmethod
    def _rule(p, g, s, hyper, flags):
        lr, beta1, beta2, eps, bias_correction1, bias_correction2_sqrt, rect = hyper
        p, g, exp_avg, exp_avg_sq = _decayed_moments(p, g, s, lr, beta1, beta2, flags)
        corrected = exp_avg / bias_correction1
        adaptive = bias_correction2_sqrt / (jnp.sqrt(exp_avg_sq) + eps)
        # rect is 0 while the variance is not tractable: then the step is momentum SGD
        step = jnp.where(rect > 0, corrected * lr * adaptive * rect, corrected * lr)
        return p + -step, dict(exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)


class Rprop(ElementwiseOptimizer):
    """Resilient backpropagation: per-element step sizes grow by etas[1] while the gradient keeps its sign and shrink
    by etas[0] when it flips (that step is skipped), within step_sizes."""

    arrays = {"prev": _zeros, "step_size": lambda p, g: full_like(p, _both_parts(p, g["lr"]))}

    def __init__(
        self,
        params,
        lr=1e-2,
        etas=(0.5, 1.2),
        step_sizes=(1e-6, 50),
        *,
        capturable=False,
        foreach=None,
        maximize=False,
        differentiable=False,
    ):
        check_range("learning rate", lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        _plain("Rprop", capturable=capturable, differentiable=differentiable)
        super().__init__(
            params,
            dict(
                lr=lr,
                etas=tuple(etas),
                step_sizes=tuple(step_sizes),
                foreach=foreach,
                maximize=maximize,
                differentiable=False,
                capturable=False,
            ),
        )

    def _flags(self, group):
        return dict(maximize=bool(group["maximize"]))

    def _hyper(self, group, step, scalars):
        (etaminus, etaplus), (smallest, largest) = group["etas"], group["step_sizes"]
        return (float(etaminus), float(etaplus), float(smallest), float(largest)), {}

    @staticmethod
    def _rule(p, g, s, hyper, flags):
        etaminus, etaplus, smallest, largest = hyper
        g = -g if flags["maximize"] else g
        sign = jnp.sign(g * s["prev"])
        factor = jnp.where(sign > 0, etaplus, jnp.where(sign < 0, etaminus, 1.0)).astype(p.dtype)
        step_size = jnp.clip(s["step_size"] * factor, smallest, largest)
        g = jnp.where(sign < 0, 0, g)
        return p - jnp.sign(g) * step_size, dict(prev=g, step_size=step_size)


class ASGD(ElementwiseOptimizer):
    """Averaged SGD: SGD with a decaying rate eta, and a running average `ax` of the iterates from step t0 on."""

    arrays = {"ax": _zeros}
    scalars = {"eta": lambda group: group["lr"], "mu": 1.0}

    def __init__(
        self,
        params,
        lr=1e-2,
        lambd=1e-4,
        alpha=0.75,
        t0=1e6,
        weight_decay=0,
        foreach=None,
        maximize=False,
        differentiable=False,
        capturable=False,
    ):
        check_range("learning rate", lr)
        check_range("weight_decay value", weight_decay)
        _plain("ASGD", capturable=capturable, differentiable=differentiable)
        super().__init__(
            params,
            dict(
                lr=lr,
                lambd=lambd,
                alpha=alpha,
                t0=t0,
                weight_decay=weight_decay,
                foreach=foreach,
                maximize=maximize,
                differentiable=False,
                capturable=False,
            ),
        )

    def _flags(self, group):
        return dict(weight_decay=float(group["weight_decay"]), maximize=bool(group["maximize"]))

    def _hyper(self, group, step, scalars):
        lr, lambd, alpha, t0 = (float(group[k]) for k in ("lr", "lambd", "alpha", "t0"))
        new = {"eta": lr / ((1 + lambd * lr * step) ** alpha), "mu": 1 / maximum(1, step - t0)}
        return (scalars["eta"], lambd, scalars["mu"]), new

    @staticmethod
    def _rule(p, g, s, hyper, flags):
        eta, lambd, mu = hyper
        g = _decayed(g, p, flags["weight_decay"], flags["maximize"])
        p = p * (1 - lambd * eta)
        p = p + -eta * g
        ax = jnp.where(mu != 1, s["ax"] + (p - s["ax"]) * mu, p)
        return p, dict(ax=ax)
