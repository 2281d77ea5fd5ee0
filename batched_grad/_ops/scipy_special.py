"""The functions of torch.special that have no torch.<name> form: scaled error and Bessel functions, the normal
distribution's functions, entr, xlog1py and zeta, each a row computed by jax.scipy.special (in float64 for float32
operands, so accurate to the rounding) and differentiated by JAX, but for J0 and J1 (bessel.py); torch's Bessel
functions of the first kind and spherical j0 have no derivative in torch, so their results never require grad."""

import jax.numpy as jnp
import jax.scipy.special as jsp

from .._grad_mode import no_grad
from ._derivatives import without_derivative
from ._forward_refused import not_implemented_forward
from .bessel import bessel_j
from .elementwise import Unary, _binary_op, _named, _unary_op, in_float64


def _xlog1py(a, b):
    # torch: 0 where a == 0 unless b is nan; the inner `where` keeps log1p's unselected branch out of the gradient
    zero = (a == 0) & ~jnp.isnan(b)
    return jnp.where(zero, 0, a * jnp.log1p(jnp.where(zero, 0, b)))


def _ndtri(a):
    return jsp.ndtri(a)


def _spherical_j0(a):
    small = jnp.abs(a) < 1e-8
    value = jnp.where(small, 1 - a * a / 6, jnp.sin(a) / jnp.where(small, 1, a))
    return jnp.where(jnp.isinf(a), 0, value)  # torch's limit at +-inf


def _hurwitz_zeta(x, q):
    """zeta(x, q) with torch's (Cephes') values outside JAX's domain: inf at x == 1 and at the poles q = 0, -1, ...;
    nan for x < 1, and for q < 0 unless x is an integer; at x = inf, 1 for q == 1 and inf for q < 1."""
    pole = (q <= 0) & (q == jnp.floor(q))
    value = jnp.where((q <= 0) & ~pole & (x != jnp.floor(x)), jnp.nan, jsp.zeta(x, q))
    value = jnp.where(x == jnp.inf, jnp.where(q == 1, 1.0, jnp.where(q < 1, jnp.inf, value)), value)
    value = jnp.where(pole, jnp.inf, value)
    return jnp.where(x == 1, jnp.inf, jnp.where(x < 1, jnp.nan, value))


_zeta = without_derivative(_hurwitz_zeta, lambda: NotImplementedError("the derivative for 'zeta' is not implemented."))

# name: (function, torch's node name)
_DIFFERENTIABLE = {
    "entr": (jsp.entr, "SpecialEntrBackward0"),
    "erfcx": (jsp.erfcx, "SpecialErfcxBackward0"),
    "i0e": (jsp.i0e, "SpecialI0EBackward0"),
    "i1": (jsp.i1, "SpecialI1Backward0"),
    "i1e": (jsp.i1e, "SpecialI1EBackward0"),
    "ndtr": (jsp.ndtr, "MulBackward1"),
    "ndtri": (_ndtri, "SpecialNdtriBackward0"),
    "log_ndtr": (jsp.log_ndtr, "SpecialLogNdtrBackward0"),
}
_WITHOUT_DERIVATIVE = {
    "bessel_j0": bessel_j(0),
    "bessel_j1": bessel_j(1),
    "modified_bessel_i0": jsp.i0,
    "modified_bessel_i1": jsp.i1,
    "spherical_bessel_j0": _spherical_j0,
}

FUNCTIONS = {
    name: _unary_op(name, Unary(in_float64(fn), backward_name=backward_name))
    for name, (fn, backward_name) in _DIFFERENTIABLE.items()
}


def _outside_the_graph(name, fn):
    op = _unary_op(name, Unary(in_float64(fn)))

    def public(input):
        with no_grad():  # torch has no derivative for it: the result does not require grad
            return op(input)

    return _named(public, name, f"Elementwise {name} of `input` (torch.special.{name}); not differentiable.")


FUNCTIONS.update({name: _outside_the_graph(name, fn) for name, fn in _WITHOUT_DERIVATIVE.items()})
FUNCTIONS["xlog1py"] = _binary_op(
    "xlog1py",
    _xlog1py,
    "input * log1p(other), and 0 where input is 0 (unless other is nan).",
    float_result=True,
)
FUNCTIONS["zeta"] = _binary_op(
    "zeta",
    _zeta,
    "The Hurwitz zeta function zeta(input, other) (no derivative, as torch).",
    float_result=True,
    forward_error=not_implemented_forward("special_zeta"),
)
