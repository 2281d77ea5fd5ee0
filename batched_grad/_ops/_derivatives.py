"""Elementwise functions whose derivative follows torch's formula where JAX's differs: at nan, at ties, at zeros
and where an intermediate over- or underflows. Each is the JAX function for its values, with a custom JVP that
is the sum over operands of torch's partial derivative (a function of the operands and the result) times the
operand's tangent; the JVP is itself differentiable, so higher orders follow torch's formulas too."""

import functools

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero


def with_partials(f, *partials):
    """f, differentiated as sum_i partials[i](*operands, result) * tangent_i."""
    g = jax.custom_jvp(f)

    def jvp(primals, tangents):
        out = g(*primals)
        tangent = jnp.zeros_like(out)
        for partial, t in zip(partials, tangents):
            if not isinstance(t, SymbolicZero):
                tangent = tangent + partial(*primals, out) * t
        return out, tangent

    g.defjvp(jvp, symbolic_zeros=True)
    return g


def _extreme(reduce):
    """torch's max() or min() of all elements: the gradient is shared evenly among the elements equal to the result,
    or among the nan elements when the result is nan."""

    @functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
    def f(a, axis, keepdims):
        return reduce(a, axis=axis, keepdims=keepdims)

    def jvp(axis, keepdims, primals, tangents):
        (a,), (t,) = primals, tangents
        out = f(a, axis, keepdims)
        hit = ((a == out) | (jnp.isnan(a) & jnp.isnan(out))).astype(a.dtype)
        return out, jnp.sum(hit * t, axis, keepdims=keepdims) / jnp.sum(hit, axis, keepdims=keepdims)

    f.defjvp(jvp)
    return lambda a, *, axis, keepdims: f(a, axis, keepdims)


def sign(a):
    """torch's sign: 0 at nan."""
    return jnp.where(jnp.isnan(a), 0, jnp.sign(a)).astype(a.dtype)


def digamma(a):
    """torch's digamma: -inf at +0 and inf at -0 (JAX gives nan at both)."""
    return jnp.where(a == 0, jnp.copysign(jnp.inf, -a).astype(a.dtype), jax.scipy.special.digamma(a))


def elu_like(a, *, alpha, scale=1.0, inner=1.0):
    """scale * (alpha (exp(x / inner) - 1) where x <= 0, else x): elu, selu and celu. torch's derivative takes the
    negative branch at 0 (scale alpha / inner there) but its second derivative is 0 at 0."""

    def value(a):  # the inner `where` keeps the unselected exp finite
        return scale * jnp.where(a <= 0, alpha * jnp.expm1(jnp.where(a <= 0, a, 0) / inner), a)

    def slope(a, out):
        return scale * jnp.where(a <= 0, alpha / inner * jnp.exp(jnp.where(a < 0, a, 0) / inner), 1).astype(a.dtype)

    return with_partials(value, slope)(a)


def _tie_split(loses, ties):
    # maximum/minimum: the whole gradient to each operand unless it loses, half at a tie (nan loses to nothing)
    return jnp.where(loses, 0, jnp.where(ties, 0.5, 1))


def _pow(x, y):
    return jax.lax.pow(x, y)


def _pow_dx(x, y, out):
    # torch: 0 where y == 0; the inner `where` keeps the unselected branch finite, so higher derivatives stay
    # nan-free too
    y0 = y == 0
    return jnp.where(y0, 0, y * pow_(jnp.where(y0, 1, x), y - 1))


def _pow_dy(x, y, out):
    # torch: 0 where x == 0 and y >= 0 (JAX gives 0 * log(0) = nan); log(x < 0) is nan, as in torch
    x0 = (x == 0) & (y >= 0)
    return jnp.where(x0, 0, out * jnp.log(jnp.where(x0, 1, x)))


def _softplus_neg(x):  # log(1 + exp(-x)), computed stably
    return jnp.log1p(jnp.exp(-jnp.abs(x))) + jnp.maximum(-x, 0)


def _atan2_scale(a, b):
    # torch masks the infinite reciprocal of a squared norm that underflows (or is zero) to 0
    r = 1 / (a * a + b * b)
    return jnp.where(jnp.isinf(r), 0, r)


pow_ = with_partials(_pow, _pow_dx, _pow_dy)
abs_ = with_partials(jnp.abs, lambda a, out: sign(a))
relu = with_partials(jax.nn.relu, lambda a, out: jnp.where(out <= 0, 0, 1).astype(out.dtype))
rsqrt = with_partials(jax.lax.rsqrt, lambda a, out: -0.5 * out * out * out)
hypot = with_partials(jnp.hypot, lambda a, b, out: a / out, lambda a, b, out: b / out)
atan2 = with_partials(jnp.arctan2, lambda a, b, out: b * _atan2_scale(a, b), lambda a, b, out: -a * _atan2_scale(a, b))
maximum = with_partials(
    jnp.maximum, lambda a, b, out: _tie_split(a < b, a == b), lambda a, b, out: _tie_split(a > b, a == b)
)
minimum = with_partials(
    jnp.minimum, lambda a, b, out: _tie_split(a > b, a == b), lambda a, b, out: _tie_split(a < b, a == b)
)
max_all, min_all = _extreme(jnp.max), _extreme(jnp.min)
# std: a zero standard deviation has derivative 0 (torch masks it), not 0.5 / 0
std_sqrt = with_partials(jnp.sqrt, lambda v, out: jnp.where(out == 0, 0, 0.5 / jnp.where(out == 0, 1, out)))
# binary cross entropy, elementwise: of probabilities x (each log clamped at -100), whose derivative torch bounds by
# dividing by max(x (1 - x), 1e-12); of logits x with log_weight lw (pos_weight's), whose derivative is
# lw sigmoid(x) - (lw - 1 + t) even at x = 0, where the stable formula has a kink
bce = with_partials(
    lambda x, t: (t - 1) * jnp.maximum(jnp.log1p(-x), -100) - t * jnp.maximum(jnp.log(x), -100),
    lambda x, t, out: (x - t) / jnp.maximum((1 - x) * x, 1e-12),
    lambda x, t, out: jnp.log1p(-x) - jnp.log(x),
)
bce_with_logits = with_partials(
    lambda x, t, lw: (1 - t) * x + lw * _softplus_neg(x),
    lambda x, t, lw, out: lw * jax.nn.sigmoid(x) - (lw - 1 + t),
    lambda x, t, lw, out: -x,
    lambda x, t, lw, out: jax.nn.softplus(-x),
)  # smooth, for higher orders


def with_derivative_of(value, d):
    """`value`, differentiated as `d` (an expression of the operands with the derivative torch gives): exact in
    value, since d - stop_gradient(d) is 0 (where d is finite; elsewhere the derivative is 0)."""
    return jax.lax.stop_gradient(value) + jnp.where(jnp.isfinite(d), d - jax.lax.stop_gradient(d), 0).astype(
        value.dtype
    )


def with_gradient_scaled(value, scale):
    """`value`, whose gradient is multiplied by `scale` (exact in value: value - stop_gradient(value) is 0)."""
    return jax.lax.stop_gradient(value) + (value - jax.lax.stop_gradient(value)) * scale


def first_order_only(f, error):
    """f, differentiated by JAX once; differentiating that derivative again raises error() (torch's error for an op
    whose backward has no derivative). The JVP reads the floating operands through an identity whose own VJP
    raises: a first derivative never differentiates it, a second one does."""

    @jax.custom_vjp
    def mark(x):
        return x

    def refuse(_, g):
        raise error()

    mark.defvjp(lambda x: (x, None), refuse)
    g = jax.custom_jvp(f)

    def jvp(primals, tangents):
        marked = [mark(p) if jnp.issubdtype(p.dtype, jnp.inexact) else p for p in primals]
        out, tangent = jax.jvp(f, marked, list(tangents))
        # a tangent that is piecewise linear in the operands would not read them differentiably: scale it by an
        # exact 1 that does. Each finite value times 0 is 0, so the sum is 0 for any magnitudes (a sum of the
        # values themselves overflows for large ones, such as a -finfo.max attention mask, and 0 * inf is nan)
        touch = sum(
            jnp.sum(jnp.where(jnp.isfinite(m), m, 0) * 0)
            for m in marked
            if m is not None and jnp.issubdtype(m.dtype, jnp.inexact)
        )
        return out, tangent * (1 + touch).astype(tangent.dtype)

    g.defjvp(jvp)
    return g


def without_derivative(fn, error):
    """fn (of any operands), whose backward raises error() for every operand (torch's NotImplemented nodes)."""

    @jax.custom_vjp
    def f(*args):
        return fn(*args)

    def backward(_, g):
        raise error()

    f.defvjp(lambda *args: (fn(*args), None), backward)
    return f


def raises_in_backward(x, error):
    """x, whose backward raises error() (torch's error for an op without a derivative); `error` makes the exception."""

    @jax.custom_vjp
    def f(y):
        return y

    def backward(_, g):
        raise error()

    f.defvjp(lambda y: (y, None), backward)
    return f(x)
