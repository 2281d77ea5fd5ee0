"""torch.stft and torch.istft against torch 2.13: spectra and inverses for windows, hops, centering, padding modes,
one- and two-sided output, normalization, batches, window alignment and lengths; gradients to the signal and the
window; torch's warnings and errors."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg

RNG = np.random.default_rng(0)
SIGNAL = RNG.standard_normal(100)
BATCH = RNG.standard_normal((3, 90))


def window(lib, kind, size):
    return None if kind is None else getattr(lib, kind)(size, dtype=lib.float64)


def call(lib, fn, data, win, **kwargs):
    """lib.fn(data, window=..., **kwargs): its result as NumPy and the warnings it gave (their first line)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = getattr(lib, fn)(lib.tensor(data), window=window(lib, *win) if win else None, **kwargs)
    return result.resolve_conj().numpy(), [str(w.message).split(" (Triggered")[0] for w in caught]


STFT_CASES = {
    "default": (SIGNAL, ("hann_window", 16), {"n_fft": 16}),
    "hop": (SIGNAL, ("hann_window", 16), {"n_fft": 16, "hop_length": 5}),
    "short-window": (BATCH, ("hann_window", 10), {"n_fft": 20, "win_length": 10, "normalized": True}),
    "two-sided": (SIGNAL, ("hamming_window", 16), {"n_fft": 16, "center": False, "onesided": False}),
    "aligned": (SIGNAL, ("hann_window", 8), {"n_fft": 16, "win_length": 8, "center": False, "align_to_window": True}),
    "constant-pad": (SIGNAL, ("hann_window", 16), {"n_fft": 16, "pad_mode": "constant"}),
    "complex-input": (SIGNAL + 1j * SIGNAL[::-1], ("hann_window", 16), {"n_fft": 16}),
}


@pytest.mark.parametrize("case", STFT_CASES)
def test_stft_as_torch(case):
    data, win, kwargs = STFT_CASES[case]
    (ours, _), (theirs, _) = (call(lib, "stft", data, win, return_complex=True, **kwargs) for lib in (bg, torch))
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_rectangular_window_and_real_output_warn_as_torch():
    for kwargs in ({"return_complex": True}, {"return_complex": False}):
        (ours, our_warnings), (theirs, their_warnings) = (
            call(lib, "stft", SIGNAL, None, n_fft=16, **kwargs) for lib in (bg, torch)
        )
        np.testing.assert_allclose(ours, theirs, atol=1e-12)
        assert set(our_warnings) <= set(their_warnings)


SPECTRUM = torch.stft(torch.tensor(BATCH), 16, window=torch.hann_window(16, dtype=torch.float64), return_complex=True)
ISTFT_CASES = {
    "default": (SPECTRUM, {}),
    "shorter": (SPECTRUM, {"length": 80}),
    "longer": (SPECTRUM, {"length": 120}),
    "one-signal-normalized": (SPECTRUM[0], {"normalized": True}),
}


@pytest.mark.parametrize("case", ISTFT_CASES)
def test_istft_as_torch(case):
    spectrum, kwargs = ISTFT_CASES[case]
    (ours, _), (theirs, _) = (
        call(lib, "istft", spectrum.numpy(), ("hann_window", 16), n_fft=16, **kwargs) for lib in (bg, torch)
    )
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_istft_inverts_stft():
    x = bg.tensor(BATCH)
    hann = bg.hann_window(16, dtype=bg.float64)
    spectrum = bg.stft(x, 16, hop_length=4, window=hann, return_complex=True)
    np.testing.assert_allclose(bg.istft(spectrum, 16, hop_length=4, window=hann, length=90).numpy(), BATCH, atol=1e-12)


def test_gradients_to_signal_and_window_as_torch():
    grads = []
    for lib in (torch, bg):
        x = lib.tensor(SIGNAL, requires_grad=True)
        w = lib.hann_window(16, dtype=lib.float64).requires_grad_()
        spectrum = lib.stft(x, 16, hop_length=3, window=w, return_complex=True)
        y = lib.istft(spectrum * spectrum.abs(), 16, hop_length=3, window=w)
        (spectrum.abs().pow(2).sum() + y.pow(2).sum()).backward()
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for ours, theirs in zip(grads[1], grads[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "fn, kwargs",
    [
        ("stft", {"n_fft": 16}),
        ("stft", {"n_fft": 16, "hop_length": 0, "return_complex": True}),
        ("stft", {"n_fft": 16, "win_length": 20, "return_complex": True}),
        ("stft", {"n_fft": 200, "return_complex": True}),
        ("stft", {"n_fft": 16, "align_to_window": True, "return_complex": True}),
        ("istft", {"n_fft": 16}),
    ],
)
def test_errors_as_torch(fn, kwargs):
    messages = []
    for lib in (torch, bg):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError) as caught:
                getattr(lib, fn)(lib.tensor(SIGNAL), **kwargs)
        messages.append(str(caught.value).split(" : ")[-1].split(": ", 1)[-1])
    assert messages[1] == messages[0]


def test_istft_checks_the_window_overlap_as_torch():
    for lib in (torch, bg):
        with pytest.raises(RuntimeError, match="window overlap add min: 1"):
            lib.istft(lib.tensor(SPECTRUM.numpy()), 16, window=lib.hann_window(16, dtype=lib.float64), center=False)


def _complex(lib, *shape, dtype="complex64"):
    return lib.tensor(RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).to(getattr(lib, dtype))


MISUSE = {
    "no window overlap": lambda m: m.istft(_complex(m, 2, 33, 5), 64, 16, window=m.hann_window(64), center=False),
    "no overlap, length": lambda m: m.istft(
        _complex(m, 33, 5, dtype="complex128"),
        64,
        16,
        window=window(m, "hann_window", 64),
        center=False,
        length=100,
        onesided=True,
    ),
    "four dims": lambda m: m.istft(_complex(m, 2, 2, 33, 5), 64, 16),
    "one-sided bins": lambda m: m.istft(_complex(m, 30, 5), 64, 16, window=m.ones(64)),
    "two-sided bins": lambda m: m.istft(_complex(m, 30, 5), 64, 16, onesided=False),
    "hop above window": lambda m: m.istft(_complex(m, 33, 5), 64, 40, win_length=32),
    "negative hop": lambda m: m.istft(_complex(m, 33, 5), 64, -3),
    "window above n_fft": lambda m: m.istft(_complex(m, 33, 5), 64, 16, win_length=70),
    "window shape": lambda m: m.istft(_complex(m, 33, 5), 64, 16, window=m.ones(2, 32)),
    "empty": lambda m: m.istft(_complex(m, 33, 0), 64, 16, window=m.ones(64)),
    "one-sided complex": lambda m: m.istft(_complex(m, 33, 5), 64, 16, window=m.ones(64), return_complex=True),
    "complex window": lambda m: m.istft(_complex(m, 33, 5), 64, 16, window=m.ones(64, dtype=m.complex64)),
    "stft of integers": lambda m: m.stft(m.arange(100), 16, return_complex=True),
    "stft of three dims": lambda m: m.stft(m.zeros(2, 2, 100), 16, return_complex=True),
    "stft n_fft zero": lambda m: m.stft(m.zeros(100), 0, win_length=5, return_complex=True),
    "stft n_fft too long": lambda m: m.stft(m.zeros(3, 100, dtype=m.float64), 200, center=False, return_complex=True),
    "stft negative hop": lambda m: m.stft(m.zeros(100), 16, -2, return_complex=True),
    "stft window too long": lambda m: m.stft(m.zeros(100), 16, 4, 20, return_complex=True),
    "stft window shape": lambda m: m.stft(m.zeros(100), 16, window=m.ones(2, 8), return_complex=True),
}


@pytest.mark.parametrize("case", MISUSE)
def test_misuse_raises_torchs_whole_message(case):
    """torch's stft and istft spell the call out before the reason (istft(CPUComplexFloatType[...], n_fft=..., ...));
    code that reports or matches these messages sees the same text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as expected:
            MISUSE[case](torch)
        with pytest.raises(RuntimeError) as got:
            MISUSE[case](bg)
    assert str(got.value) == str(expected.value)
