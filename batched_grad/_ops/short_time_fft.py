"""torch.stft and torch.istft, composed of differentiable ops: frames by unfold, the window, an FFT per frame; the
inverse by an inverse FFT per frame, the window again, overlap-add (fold) and the division by the summed squared
window. Arguments, defaults, shapes, warnings and errors are torch's."""

import warnings

from .. import _factories
from .._autocast import autocast_policy, wrapped_stacklevel
from .._tensor import Tensor, type_string, warn_once
from .arrange import unfold as _frames_of
from .conveniences import view_as_real
from .fft import FUNCTIONS as _FFT
from .layers import fold
from .nn import pad
from .shape import cat

RECTANGULAR_STFT = (
    "A window was not provided. A rectangular window will be applied,which is known to cause spectral leakage. "
    "Other windows such as torch.hann_window or torch.hamming_window are recommended to reduce spectral leakage.To "
    "suppress this warning and use a rectangular window, explicitly set `window=torch.ones(n_fft, device=<device>)`."
)
RECTANGULAR_ISTFT = (
    "A window was not provided. A rectangular window will be applied.Please provide the same window used by stft to "
    "make the inversion lossless.To suppress this warning and use a rectangular window, explicitly set "
    "`window=torch.ones(n_fft, device=<device>)`."
)
REAL_NEEDS_RETURN_COMPLEX = (
    "stft requires the return_complex parameter be given for real inputs, and will further require that "
    "return_complex=True in a future PyTorch release."
)
RETURN_REAL_DEPRECATED = (
    "stft with return_complex=False is deprecated. In a future pytorch release, stft will return complex tensors for "
    "all inputs, and return_complex=False will raise an error.\nNote: you can still call torch.view_as_real on the "
    "complex output to recover the old return format."
)
SHORTER_THAN_LENGTH = (
    "The length of signal is shorter than the length parameter. Result is being padded with zeros in the tail. "
    "Please check your center and hop_length settings."
)


def _padded_window(name, window, win_length, n_fft, dtype):
    """The window over a whole frame: `window` (ones if None) centered in n_fft samples."""
    if window is None:
        window = _factories.ones(win_length, dtype=dtype)
    elif window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(
            f"{name}: expected a 1D window tensor of size equal to win_length={win_length}, but got window with size "
            f"{list(window.shape)}"
        )
    left = (n_fft - win_length) // 2
    if win_length == n_fft:
        return window
    zeros = _factories.zeros
    return cat([zeros(left, dtype=window.dtype), window, zeros(n_fft - win_length - left, dtype=window.dtype)])


def _istft_repr(input, n_fft, hop_length, win_length, window, center, normalized, onesided, length, return_complex):
    """The call as torch's istft errors spell it out before their reason."""
    return (
        f"istft({type_string(input.dtype.np)}{list(input.shape)}, n_fft={n_fft}, hop_length={hop_length}, "
        f"win_length={win_length}, window={_shown_window(window)}, center={int(center)}, normalized={int(normalized)}, "
        f"onesided={_flag(onesided)}, length={_flag(length)}, return_complex={int(return_complex)}) "
    )


def _checked_istft(input, n_fft, hop_length, win_length, window, center, normalized, onesided, length, return_complex):
    """torch's checks of istft's arguments, in its order and words; the onesided flag in effect."""
    given = (n_fft, hop_length, win_length, window, center, normalized, onesided, length, return_complex)
    reason = None
    bins = input.shape[-2] if input.ndim >= 2 else None
    in_effect = bins != n_fft if onesided is None else onesided
    if input.numel() == 0:
        reason = ": input tensor cannot be empty."
    elif input.ndim not in (2, 3):
        reason = f": expected a tensor with 3 or 4 dimensions, but got {input.ndim + 1}"
    elif in_effect and n_fft // 2 + 1 != bins:
        reason = (
            ": expected the frequency dimension (3rd to the last) of the input tensor to match n_fft / 2 + 1 when "
            f"onesided=True, but got {bins}"
        )
    elif not in_effect and n_fft != bins:
        reason = (
            ": expected the frequency dimension (3rd to the last) of the input tensor to match n_fft when "
            f"onesided=False, but got {bins}"
        )
    elif not 0 < hop_length <= win_length:
        reason = ": expected 0 < hop_length <= win_length"
    elif not 0 < win_length <= n_fft:
        reason = ": expected 0 < win_length <= n_fft"
    elif window is not None and (window.ndim != 1 or window.shape[0] != win_length):
        reason = ": Invalid window shape. window has to be 1D and length of `win_length`"
    if reason is not None:
        raise RuntimeError(_istft_repr(input, *given) + reason)
    if return_complex and in_effect:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    if not return_complex and window is not None and window.is_complex():
        raise RuntimeError("Complex windows are incompatible with return_complex=False")
    return in_effect


def _shown_window(window):
    return "None" if window is None else f"{type_string(window.dtype.np)}{{{list(window.shape)}}}"


def _flag(value):
    return "None" if value is None else int(value)


def _stft_repr(shape, input, n_fft, hop_length, win_length, window, normalized, onesided, return_complex, align):
    """The call as torch's stft errors spell it out before their reason (the signal as padded for center)."""
    return (
        f"stft({type_string(input.dtype.np)}{list(shape)}, n_fft={n_fft}, hop_length={hop_length}, "
        f"win_length={win_length}, window={_shown_window(window)}, normalized={int(normalized)}, "
        f"onesided={_flag(onesided)}, return_complex={_flag(return_complex)}, align_to_window={_flag(align)}) "
    )


def _check_stft_sizes(x, *given):
    """torch's checks of stft's sizes against the (padded) signal x, in its order and words."""
    n_fft, hop_length, win_length, window = given[:4]
    reason = None
    if not 0 < n_fft <= x.shape[-1]:
        reason = f": expected 0 < n_fft < {x.shape[-1]}, but got n_fft={win_length}"  # torch shows win_length
    elif hop_length <= 0:
        reason = f": expected hop_length > 0, but got hop_length={hop_length}"
    elif not 0 < win_length <= n_fft:
        reason = f": expected 0 < win_length <= n_fft, but got win_length={win_length}"
    elif window is not None and (window.ndim != 1 or window.shape[0] != win_length):
        reason = (
            f": expected a 1D window tensor of size equal to win_length={win_length}, but got window with size "
            f"{list(window.shape)}"
        )
    if reason is not None:
        raise RuntimeError(_stft_repr(x.shape, x, *given) + reason)


def _real_dtype(t):
    return t.real.dtype if t.is_complex() else t.dtype


@autocast_policy("fp32")
def stft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    pad_mode="reflect",
    normalized=False,
    onesided=None,
    return_complex=None,
    align_to_window=None,
):
    """The short-time Fourier transform of a 1-D signal or a batch of them (B, L): (B?, n_fft // 2 + 1 or n_fft,
    frames), each column the FFT of a windowed frame of n_fft samples, frames hop_length apart. center pads the
    signal by n_fft // 2 on both sides (pad_mode); normalized scales by n_fft**-0.5; onesided keeps the
    non-negative frequencies (the default for real input and window)."""
    if window is None:
        warn_once(RECTANGULAR_STFT, stacklevel=wrapped_stacklevel(2) + 1)
    complex_in = input.is_complex() or (window is not None and window.is_complex())
    if return_complex is None:
        if not complex_in:
            raise RuntimeError(REAL_NEEDS_RETURN_COMPLEX)
        return_complex = True
    elif not return_complex:
        warnings.warn(RETURN_REAL_DEPRECATED, UserWarning, stacklevel=wrapped_stacklevel(2))
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    hop_length = n_fft >> 2 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    given = (n_fft, hop_length, win_length, window, normalized, onesided, return_complex, align_to_window)
    padded = tuple(input.shape[:-1]) + (input.shape[-1] + 2 * (n_fft // 2) if center else input.shape[-1],)
    reason = None
    if not (input.is_floating_point() or input.is_complex()):
        reason = ": expected a tensor of floating point or complex values"
    elif input.ndim not in (1, 2):
        reason = ": expected a 1D or 2D tensor"
    if reason is not None:
        raise RuntimeError(_stft_repr(padded, input, *given) + reason)
    x = input
    if center:
        half = n_fft // 2
        x = pad(x.view((1,) * (3 - x.ndim) + tuple(x.shape)), [half, half], pad_mode).view(x.shape[:-1] + (-1,))
    _check_stft_sizes(x, *given)
    window = _padded_window("stft", window, win_length, n_fft, _real_dtype(input))
    if align_to_window:  # each frame's window starts at a multiple of hop_length in the signal
        left = (n_fft - win_length) // 2
        x = pad(x, [left, left])
    onesided = not complex_in if onesided is None else onesided
    if onesided and complex_in:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    frames = _frames_of(x, -1, n_fft, hop_length) * window
    spectrum = (_FFT["rfft"] if onesided else _FFT["fft"])(frames, dim=-1, norm="ortho" if normalized else None)
    spectrum = spectrum.transpose(-1, -2)
    return spectrum if return_complex else view_as_real(spectrum)


def _overlap_add(frames, hop_length, size):
    """Frames (B, n_frames, n_fft) added into (B, size) at multiples of hop_length."""
    columns = frames.transpose(1, 2)
    return fold(columns, (1, size), (1, frames.shape[-1]), stride=(1, hop_length))[:, 0, 0]


def istft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    normalized=False,
    onesided=None,
    length=None,
    return_complex=False,
):
    """The inverse of stft: the frames' inverse FFTs, windowed, overlap-added and divided by the overlap-added
    squared window (which must not vanish: torch's NOLA check). `length` trims or zero-pads the signal."""
    if not isinstance(input, Tensor) or not input.is_complex():
        raise RuntimeError(
            "istft requires a complex-valued input tensor matching the output from stft with return_complex=True."
        )
    hop_length = n_fft >> 2 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    given = (n_fft, hop_length, win_length, window, center, normalized, onesided, length, return_complex)
    if window is None:
        warn_once(RECTANGULAR_ISTFT)
    onesided = _checked_istft(input, *given)
    window = _padded_window("istft", window, win_length, n_fft, _real_dtype(input))
    batched = input if input.ndim == 3 else input.unsqueeze(0)
    spectra = batched.transpose(1, 2)  # (B, n_frames, frequencies)
    norm = "ortho" if normalized else "backward"
    if onesided:
        frames = _FFT["irfft"](spectra, n=n_fft, dim=-1, norm=norm)
    else:
        frames = _FFT["ifft"](spectra, n=n_fft, dim=-1, norm=norm)
        frames = frames if return_complex else frames.real
    n_frames = frames.shape[1]
    size = n_fft + hop_length * (n_frames - 1)
    if frames.is_complex():
        signal = _overlap_add((frames * window).real, hop_length, size)
        signal = signal + 1j * _overlap_add((frames * window).imag, hop_length, size)
    else:
        signal = _overlap_add(frames * window, hop_length, size)
    envelope = _overlap_add((window * window).abs().expand(1, n_frames, n_fft), hop_length, size)[0]
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (size - n_fft // 2 if center else size)
    signal, envelope = signal[:, start : min(end, size)], envelope[start : min(end, size)]
    if bool((envelope.abs() < 1e-11).any()):
        raise RuntimeError(_istft_repr(input, *given) + "window overlap add min: 1\n[ CPUBoolType{} ]")
    signal = signal / envelope
    if end > size:
        warn_once(SHORTER_THAN_LENGTH)
        signal = pad(signal, [0, end - size])
    return signal if input.ndim == 3 else signal[0]


FUNCTIONS = {"stft": stft, "istft": istft}
METHODS = dict(FUNCTIONS)
