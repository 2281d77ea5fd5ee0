"""The von Mises distribution on the circle: densities through torch's polynomial approximations of the modified
Bessel functions I0 and I1, draws by Best and Fisher's rejection sampler on torch's uniform stream."""

import math

import batched_grad as bg

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, uniform

__all__ = ["VonMises"]


def _eval_poly(y, coefficients):
    """sum_k coefficients[k] y^k by Horner's rule."""
    result = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        result = c + y * result
    return result


# Abramowitz and Stegun 9.8.1-9.8.4: I0 and I1 below x = 3.75 in (x / 3.75)^2, above it in 3.75 / x
_I0_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813]
_I0_LARGE = [
    0.39894228,
    0.01328592,
    0.00225319,
    -0.00157565,
    0.00916281,
    -0.02057706,
    0.02635537,
    -0.01647633,
    0.00392377,
]
_I1_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411]
_I1_LARGE = [
    0.39894228,
    -0.03988024,
    -0.00362018,
    0.00163801,
    -0.01031555,
    0.02282967,
    -0.02895312,
    0.01787654,
    -0.00420059,
]


def _log_modified_bessel_fn(x, order=0):
    """log I_order(x) for order 0 or 1 and x > 0."""
    if order not in (0, 1):
        raise AssertionError(f"order must be 0 or 1, got {order}")
    small_coefficients, large_coefficients = (_I0_SMALL, _I0_LARGE) if order == 0 else (_I1_SMALL, _I1_LARGE)
    small = _eval_poly((x / 3.75) ** 2, small_coefficients)
    if order == 1:
        small = x.abs() * small
    large = x - 0.5 * x.log() + _eval_poly(3.75 / x, large_coefficients).log()
    return bg.where(x < 3.75, small.log(), large)


def _rejection_sample(loc, concentration, proposal_r, shape):
    """Best and Fisher's sampler in double: uniform triples until each entry accepts its proposal, the angle
    then wrapped into [-pi, pi) around loc."""
    x = bg.zeros(shape, dtype=loc.dtype)
    done = bg.zeros(shape, dtype=bg.bool)
    while not bool(done.all()):
        u1, u2, u3 = uniform((3,) + tuple(shape), loc.dtype).unbind()
        z = bg.cos(math.pi * u1)
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = (c * (2 - c) - u2 > 0) | ((c / u2).log() + 1 - c >= 0)
        x = bg.where(accept, (u3 - 0.5).sign() * f.acos(), x)  # a later acceptance replaces an earlier (as torch)
        done = done | accept
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(Distribution):
    """The von Mises (circular normal) distribution of mean direction loc and concentration kappa; values are
    angles (log_prob is periodic), draws lie in [-pi, pi)."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, bg.Size(), validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * bg.cos(value - self.loc)
        return log_prob - math.log(2 * math.pi) - _log_modified_bessel_fn(self.concentration, order=0)

    @lazy_property
    def _loc(self):
        return self.loc.to(bg.double)

    @lazy_property
    def _concentration(self):
        return self.concentration.to(bg.double)

    @lazy_property
    def _proposal_r(self):
        """The wrapped Cauchy proposal's parameter r = (1 + rho^2) / (2 rho) (1 / kappa + kappa for tiny kappa)."""
        kappa = self._concentration
        tau = 1 + (1 + 4 * kappa**2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        return bg.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho**2) / (2 * rho))

    def sample(self, sample_shape=()):
        """Draws in double (torch's draws for the same seed), returned in loc's dtype; the parameters' values must
        be known (the loop runs until every entry accepts)."""
        with bg.no_grad():
            shape = self._extended_shape(sample_shape)
            drawn = _rejection_sample(self._loc, self._concentration, self._proposal_r, shape)
            return drawn.to(self.loc.dtype)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = bg.Size(batch_shape)
        new.loc, new.concentration = self.loc.expand(batch_shape), self.concentration.expand(batch_shape)
        Distribution.__init__(new, batch_shape, bg.Size(), validate_args=False)
        new._validate_args = self._validate_args
        return new

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @lazy_property
    def variance(self):
        """The circular variance 1 - I1(kappa) / I0(kappa)."""
        log_ratio = _log_modified_bessel_fn(self.concentration, 1) - _log_modified_bessel_fn(self.concentration, 0)
        return 1 - log_ratio.exp()
