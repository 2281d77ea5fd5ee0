"""batched_grad.fft against torch.fft 2.13: values and dtypes of every transform with its n / s, dim and norm
arguments, gradients of real and complex inputs under complex cotangents (torch's conjugate convention),
is_grads_batched, the frequency and shift helpers, and torch's errors."""

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.fft  # noqa: F401  (the module import torch code writes)
from oracle import assert_same, check_both, raises_like_torch, to_torch

RNG = np.random.default_rng(7)
REAL = bg.tensor(RNG.standard_normal((3, 4, 6)), requires_grad=True)
COMPLEX = bg.tensor(RNG.standard_normal((3, 4, 6)) + 1j * RNG.standard_normal((3, 4, 6)), requires_grad=True)

# (transform, keyword arguments): each case runs on a real and a complex input where torch takes both
CASES = [
    ("fft", {}),
    ("fft", dict(n=9, dim=1, norm="ortho")),
    ("fft", dict(n=3, norm="forward")),
    ("ifft", dict(dim=0)),
    ("ifft", dict(n=8, norm="ortho")),
    ("fft2", {}),
    ("ifft2", dict(s=(5, 3), norm="forward")),
    ("fftn", {}),
    ("fftn", dict(s=(2, 7), dim=(0, 2))),
    ("ifftn", dict(dim=(1,), norm="ortho")),
    ("rfft", {}),
    ("rfft", dict(n=7, dim=0, norm="ortho")),
    ("rfft2", dict(norm="forward")),
    ("rfftn", dict(s=(5, 8))),
    ("irfft", {}),
    ("irfft", dict(n=7, dim=1, norm="ortho")),
    ("irfft2", {}),
    ("irfftn", dict(s=(3, 5, 9), norm="forward")),
    ("hfft", {}),
    ("hfft", dict(n=5, norm="ortho")),
    ("ihfft", dict(dim=1, norm="forward")),
    ("hfft2", dict(s=(4, 6))),
    ("ihfftn", {}),
]
REAL_ONLY = {"rfft", "rfft2", "rfftn", "ihfft", "ihfft2", "ihfftn"}


def _inputs(name):
    return [REAL] if name in REAL_ONLY else [REAL, COMPLEX]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{'-'.join(map(str, k.values()))}" for n, k in CASES])
def test_transform_values_dtypes_and_gradients_as_torch(name, kwargs):
    for x in _inputs(name):
        check_both(lambda m, x: getattr(m.fft, name)(x, **kwargs), [x], gradgrad=False)


@pytest.mark.parametrize("name,kwargs", CASES[::3], ids=[n for n, _ in CASES[::3]])
def test_gradients_of_complex_cotangents_follow_torchs_convention(name, kwargs):
    for x in _inputs(name):
        tx = to_torch(x)
        y, ty = getattr(bg.fft, name)(x, **kwargs), getattr(torch.fft, name)(tx, **kwargs)
        shape = tuple(y.shape)
        ct = RNG.standard_normal(shape) + (1j * RNG.standard_normal(shape) if y.is_complex() else 0)
        ct = ct.astype(y.detach().numpy().dtype)
        (g,) = bg.autograd.grad(y, x, bg.tensor(ct))
        (tg,) = torch.autograd.grad(ty, tx, torch.from_numpy(ct))
        assert_same(g, tg)


def test_float32_gives_complex64_and_back():
    x = bg.randn(2, 8)
    assert bg.fft.fft(x).dtype is bg.complex64 and bg.fft.rfft(x).dtype is bg.complex64
    assert bg.fft.irfft(bg.fft.rfft(x)).dtype is bg.float32
    assert bg.fft.fft(bg.arange(4)).dtype is bg.complex64
    np.testing.assert_allclose(bg.fft.irfft(bg.fft.rfft(x), n=8).numpy(), x.numpy(), atol=1e-5)


def test_grads_batched_equals_rows():
    for name, kwargs in [("fft", dict(n=5)), ("rfft2", {}), ("irfftn", dict(norm="ortho")), ("ihfft", {})]:
        x = REAL if name in REAL_ONLY or name == "irfftn" else COMPLEX
        check_both(lambda m, x: getattr(m.fft, name)(x, **kwargs), [x], gradgrad=False, batched=True)


def test_double_backward_through_abs_of_transform():
    check_both(lambda m, x: m.fft.rfft(x * x).abs().sum(-1), [REAL])


def test_under_vmap():
    x = bg.randn(4, 3, 8)
    out = bg.vmap(lambda r: bg.fft.fft2(r, norm="ortho"))(x)
    assert_same(out, torch.fft.fft2(to_torch(x), norm="ortho"), rtol=1e-5, atol=1e-5)


def test_frequencies_and_shifts():
    for n, d in [(5, 1.0), (8, 0.25), (1, 2.0)]:
        assert_same(bg.fft.fftfreq(n, d), torch.fft.fftfreq(n, d))
        assert_same(bg.fft.rfftfreq(n, d), torch.fft.rfftfreq(n, d))
    assert_same(bg.fft.fftfreq(4, dtype=bg.float64), torch.fft.fftfreq(4, dtype=torch.float64))
    x = bg.arange(30).reshape(5, 6)
    for dim in [None, 0, (1,), (-1, 0)]:
        assert_same(bg.fft.fftshift(x, dim), torch.fft.fftshift(to_torch(x), dim))
        assert_same(bg.fft.ifftshift(x, dim), torch.fft.ifftshift(to_torch(x), dim))
    check_both(lambda m, x: m.fft.ifftshift(m.fft.fftshift(x, dim=(0, 2)) * x), [REAL])


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.fft.fft(m.ones(4), norm="bad"),
        lambda m: m.fft.fft(m.ones(4), n=0),
        lambda m: m.fft.fft(m.ones(4), dim=2),
        lambda m: m.fft.fftn(m.ones(2, 3), s=(3,), dim=(0, 1)),
        lambda m: m.fft.fftn(m.ones(2, 3), dim=(0, -2)),
        lambda m: m.fft.rfft(m.ones(4, dtype=m.complex64)),
        lambda m: m.fft.ihfft(m.ones(4, dtype=m.complex64)),
        lambda m: m.fft.irfft(m.ones(1, dtype=m.complex64)),
        lambda m: m.fft.fft2(m.ones(3)),
        lambda m: m.fft.fft(m.tensor(1.0)),
        lambda m: m.fft.fft(m.ones(4, dtype=m.float16)),
    ],
)
def test_errors_as_torch(call):
    raises_like_torch(call)
