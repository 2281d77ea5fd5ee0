"""Special functions where their values are easy to get wrong, against torch 2.13: the Bessel functions J0 and J1
over the whole real line (near 0, across the regimes of their computation, at +-inf and nan), spherical j0 at
+-inf, the Hurwitz zeta outside its usual domain, angle and floor division at signed zeros, and digamma (through
Dirichlet's entropy) of 0-dim operands. torch's own J0 and J1 are off by up to 4e-7 between 2 and 10 (their float64
approximations are that coarse there), so those are also held to SciPy's values (within 1e-13: near 1e6 SciPy's
Cephes forms lose that much, as a multiple-precision evaluation shows)."""

import itertools

import numpy as np
import pytest
import scipy.special
import torch

import batched_grad as bg
from oracle import assert_same

LINE = np.concatenate(
    [
        np.logspace(-300, 6, 400),
        -np.logspace(-300, 6, 400),
        np.linspace(-40, 40, 801),
        [0.0, -0.0, 2.0, 25.0, -25.0, np.nextafter(25.0, 30.0), np.inf, -np.inf, np.nan],
    ]
)


@pytest.mark.parametrize("order", [0, 1])
def test_bessel_first_kind_over_the_real_line(order):
    name = f"bessel_j{order}"
    got = getattr(bg.special, name)(bg.tensor(LINE)).numpy()
    expected = getattr(torch.special, name)(torch.tensor(LINE)).numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6, equal_nan=True)
    finite = np.isfinite(LINE)
    exact = getattr(scipy.special, f"j{order}")(LINE[finite])
    np.testing.assert_allclose(got[finite], exact, rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(np.signbit(got[LINE == 0]), np.signbit(expected[LINE == 0]))  # J1(-0.0) = -0.0


def test_bessel_first_kind_in_float32_and_outside_the_graph():
    x = np.linspace(-30, 30, 241)
    for name in ("bessel_j0", "bessel_j1"):
        got = getattr(bg.special, name)(bg.tensor(x, dtype=bg.float32, requires_grad=True))
        expected = getattr(torch.special, name)(torch.tensor(x, dtype=torch.float32, requires_grad=True))
        assert_same(got, expected, rtol=0, atol=2e-6)
        assert not got.requires_grad


def test_spherical_bessel_j0_vanishes_at_infinity():
    x = [np.inf, -np.inf, np.nan, 0.0, 1e-9, 3.0]
    for dtype in ("float64", "float32"):
        got = bg.special.spherical_bessel_j0(bg.tensor(x, dtype=getattr(bg, dtype)))
        assert_same(got, torch.special.spherical_bessel_j0(torch.tensor(x, dtype=getattr(torch, dtype))))


def test_hurwitz_zeta_outside_its_usual_domain():
    orders = [-2.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 7.0, np.inf, np.nan]
    shifts = [-2.0, -1.5, -1.0, -0.3, 0.0, -0.0, 0.5, 1.0, 2.5, 1e5, np.inf, np.nan]
    x, q = (list(v) for v in zip(*itertools.product(orders, shifts)))
    got = bg.special.zeta(bg.tensor(x, dtype=bg.float64), bg.tensor(q, dtype=bg.float64))
    assert_same(got, torch.special.zeta(torch.tensor(x, dtype=torch.float64), torch.tensor(q, dtype=torch.float64)))


def test_angle_at_signed_zeros_nan_and_infinities():
    reals = [0.0, -0.0, 1e-30, -2.0, np.nan, np.inf, -np.inf]
    for dtype in ("float64", "float32"):
        got = bg.angle(bg.tensor(reals, dtype=getattr(bg, dtype)))
        assert_same(got, torch.angle(torch.tensor(reals, dtype=getattr(torch, dtype))))
    complexes = [0j, complex(-0.0, 0.0), complex(-0.0, -0.0), complex(0.0, -0.0), -1 + 0j, complex(-1, -0.0)]
    got, expected = bg.angle(bg.tensor(complexes)), torch.angle(torch.tensor(complexes))
    assert_same(got, expected)
    np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(expected.numpy()))
    z = bg.tensor(complexes[:3] + [1 + 1j], requires_grad=True)
    tz = torch.tensor(complexes[:3] + [1 + 1j], requires_grad=True)
    bg.angle(z).sum().backward()
    torch.angle(tz).sum().backward()
    assert_same(z.grad, tz.grad)  # 0 at 0, as torch's


def test_floor_division_keeps_the_sign_of_a_zero_quotient():
    a = [-0.0, 0.0, 0.3, -0.3, 5.0, -5.0, 1e-300, -0.0, np.nan, np.inf]
    b = [2.0, -2.0, 2.0, 2.0, -2.0, 2.0, 1e300, -3.0, 1.0, 2.0]
    for dtype in ("float64", "float32"):
        for repeat in (1, 500):  # the host form and the kernel
            got = bg.floor_divide(
                bg.tensor(a * repeat, dtype=getattr(bg, dtype)), bg.tensor(b * repeat, dtype=getattr(bg, dtype))
            )
            expected = torch.floor_divide(
                torch.tensor(a * repeat, dtype=getattr(torch, dtype)),
                torch.tensor(b * repeat, dtype=getattr(torch, dtype)),
            )
            assert_same(got, expected)
            np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(expected.numpy()))
    assert_same(bg.tensor(-0.0) // 2, torch.tensor(-0.0) // 2)
    assert_same(
        bg.div(bg.tensor([-0.0]), 3.0, rounding_mode="floor"),
        torch.div(torch.tensor([-0.0]), 3.0, rounding_mode="floor"),
    )


def test_digamma_of_zero_dim_operands():
    concentration = [0.5, 1.5, 3.0]
    for lib in (bg, torch):
        lib.manual_seed(0)
    got = bg.distributions.Dirichlet(bg.tensor(concentration, dtype=bg.float64)).entropy()
    expected = torch.distributions.Dirichlet(torch.tensor(concentration, dtype=torch.float64)).entropy()
    assert_same(got, expected, rtol=1e-12)
    for value in (5.5, 0.0, -0.0, -2.0, -2.5):
        for dtype in ("float64", "float32"):
            a, t = bg.tensor(value, dtype=getattr(bg, dtype)), torch.tensor(value, dtype=getattr(torch, dtype))
            assert_same(bg.digamma(a), torch.digamma(t), rtol=1e-6)
            assert_same(bg.special.polygamma(0, a), torch.special.polygamma(0, t), rtol=1e-6)
