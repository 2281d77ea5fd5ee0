"""torch.nn.init's in-place initializers, drawing from batched_grad's generator (or the one given), with torch's
fan computations, gains and errors."""

import math
import warnings

from .. import _factories
from .._factories import randn
from .._generator import resolve
from .._grad_mode import no_grad
from .._ops import sampling
from .._ops.linalg import diag, qr
from .._ops.sampling import randperm
from .._ops.ternary import where

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
_GAINS = {**dict.fromkeys(_LINEAR, 1), "sigmoid": 1, "tanh": 5.0 / 3, "relu": math.sqrt(2.0), "selu": 3.0 / 4}


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for `nonlinearity` (torch's table)."""
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"negative_slope {slope} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity not in _GAINS:
        raise ValueError(f"Unsupported nonlinearity {nonlinearity}")
    return _GAINS[nonlinearity]


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fill(tensor, value):
    with no_grad():
        return tensor.copy_(value)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with samples of U(a, b), drawn from `generator` (the default one if None)."""
    generator = resolve(generator, "uniform_")
    with no_grad():
        return sampling.uniform_(tensor, a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with samples of N(mean, std^2), drawn from `generator` (the default one if None)."""
    generator = resolve(generator, "normal_")
    with no_grad():
        return sampling.normal_(tensor, mean, std, generator=generator)


def constant_(tensor, val):
    """Fill with `val`."""
    return _fill(tensor, _factories.full(tuple(tensor.shape), val, dtype=tensor.dtype))


def zeros_(tensor):
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def ones_(tensor):
    """Fill with ones."""
    return constant_(tensor, 1.0)


def _zero_elements(tensor):
    """torch's no-op (with a warning) for a tensor with a zero dimension."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", UserWarning, stacklevel=3)
        return True
    return False


def _kaiming_std(tensor, a, mode, nonlinearity):
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan = _calculate_fan_in_and_fan_out(tensor)[mode == "fan_out"]
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al.), torch's default for Linear and Conv."""
    if _zero_elements(tensor):
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan) (He et al.)."""
    if _zero_elements(tensor):
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def _xavier_std(tensor, gain):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return gain * math.sqrt(2.0 / float(fan_in + fan_out))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-bound, bound) with bound = gain * sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio)."""
    bound = math.sqrt(3.0) * _xavier_std(tensor, gain)
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot and Bengio)."""
    return normal_(tensor, 0.0, _xavier_std(tensor, gain), generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with samples of N(mean, std^2) truncated to [a, b], by rejection as torch: when [a, b] holds more than
    30% of the mass, normal draws redrawn (all elements, kept where in range) until all fall in [a, b]; otherwise
    uniform candidates in [a, b] accepted with probability pdf / peak pdf, the rejected ones drawn again."""

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may "
            "be incorrect.",
            stacklevel=2,
        )
    generator = resolve(generator, "trunc_normal_")

    def cdf(x):
        return (1 + math.erf(x / math.sqrt(2.0))) / 2

    shape, dtype = tuple(tensor.shape), tensor.dtype
    with no_grad():
        if cdf((b - mean) / std) - cdf((a - mean) / std) > 0.3:
            low, high = (_factories.tensor(v, dtype=dtype).item() for v in (a, b))
            result = sampling.normal_(_factories.empty(shape, dtype=dtype), mean, std, generator=generator)
            while bool(((result < low) | (result > high)).any()):
                redrawn = sampling.normal_(_factories.empty(shape, dtype=dtype), mean, std, generator=generator)
                result = where((result < low) | (result > high), redrawn, result)
            return _fill(tensor, result)
        log_peak = -0.5 * ((max(a, min(mean, b)) - mean) / std) ** 2

        def candidates():
            drawn = sampling.uniform_(_factories.empty(shape, dtype=dtype), a, b, generator=generator)
            return drawn, ((drawn - mean) / std) ** 2 * -0.5 - log_peak

        def rejected(log_pdf):
            return sampling.uniform_(_factories.empty(shape, dtype=dtype), generator=generator).log() > log_pdf

        result, log_pdf = candidates()
        pending = rejected(log_pdf)
        while bool(pending.any()):
            drawn, log_pdf = candidates()
            result = where(pending, drawn, result)
            pending = where(pending, rejected(log_pdf), pending)
        return _fill(tensor, result)


def orthogonal_(tensor, gain=1, generator=None):
    """Fill with a (semi-)orthogonal matrix (of the tensor flattened to (rows, rest)): Q of the QR decomposition of
    a normal matrix, its columns' signs fixed by R's diagonal, times gain."""

    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows, cols = tensor.shape[0], tensor.numel() // tensor.shape[0]
    flattened = randn(rows, cols, dtype=tensor.dtype, generator=resolve(generator, "orthogonal_"))
    if rows < cols:
        flattened = flattened.t()
    q, r = qr(flattened)
    q = q * diag(r, 0).sign()
    if rows < cols:
        q = q.t()
    return _fill(tensor, (q * gain).reshape(tensor.shape))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill a 2-D tensor with N(0, std^2) samples and zero ceil(sparsity * rows) random rows of each column."""

    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    generator = resolve(generator, "sparse_")
    values = randn(rows, cols, dtype=tensor.dtype, generator=generator) * std
    zeros = math.ceil(sparsity * rows)
    with no_grad():
        for column in range(cols):
            values[randperm(rows, generator=generator)[:zeros], column] = 0
    return _fill(tensor, values)


def eye_(tensor):
    """Fill a 2-D tensor with the identity matrix (ones on the main diagonal)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, _factories.eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-D convolution weight with the Dirac delta: each of the first in-channels of every group
    passes through unchanged (a 1 at the kernel's centre)."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = tensor.shape[0] // groups
    values = _factories.zeros(*tensor.shape, dtype=tensor.dtype)
    centre = tuple(n // 2 for n in tensor.shape[2:])
    with no_grad():
        for g in range(groups):
            for d in range(min(out_per_group, tensor.shape[1])):
                values[(g * out_per_group + d, d) + centre] = 1
    return _fill(tensor, values)


def _deprecated(new):
    old = new.__name__[:-1]

    def function(*args, **kwargs):
        warnings.warn(
            f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.", FutureWarning, stacklevel=2
        )
        return new(*args, **kwargs)

    function.__name__ = function.__qualname__ = old
    function.__doc__ = f"{new.__name__} under its deprecated name (with torch's FutureWarning)."
    return function


(
    constant,
    normal,
    uniform,
    xavier_normal,
    xavier_uniform,
    kaiming_normal,
    kaiming_uniform,
    orthogonal,
    sparse,
    dirac,
    eye,
) = (
    _deprecated(f)
    for f in (
        constant_,
        normal_,
        uniform_,
        xavier_normal_,
        xavier_uniform_,
        kaiming_normal_,
        kaiming_uniform_,
        orthogonal_,
        sparse_,
        dirac_,
        eye_,
    )
)
