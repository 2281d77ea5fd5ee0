"""Tensor factories: tensor, as_tensor, from_numpy, zeros/ones/full/eye/arange/linspace, *_like, random."""
import builtins

import jax
import jax.numpy as jnp
import numpy as np

from . import _dtypes
from ._tensor import Tensor

_rng = [np.random.default_rng(0)]


def manual_seed(seed):
    """Seed the generator behind rand/randn/randint and friends."""
    _rng[0] = np.random.default_rng(int(seed))


def _finish(value, requires_grad):
    t = Tensor._wrap(value)
    if requires_grad:
        t.requires_grad = True
    return t


def _infer_dtype(a):
    """torch's dtype for data given as Python numbers / nested lists (NumPy arrays keep their dtype)."""
    return {"b": _dtypes.bool, "i": _dtypes.int64, "u": _dtypes.int64, "f": _dtypes.get_default_dtype(),
            "c": _dtypes._to_complex(_dtypes.get_default_dtype())}[a.dtype.kind]


def _to_array(data):
    """(array, keeps_dtype): arrays and Tensors keep their dtype, Python numbers get torch's defaults."""
    if isinstance(data, Tensor):
        return data._value, True
    if isinstance(data, (np.ndarray, np.generic, jax.Array)):
        return data, True
    if isinstance(data, (list, tuple)):
        items = [_to_array(x) for x in data]
        arr = np.array([np.asarray(a) for a, _ in items]) if items else np.zeros((0,), np.float32)
        return arr, builtins.any(keep for _, keep in items)
    if isinstance(data, (bool, int, float, complex)):
        return np.asarray(data), False
    raise TypeError(f"tensor(): data must be a number, a nested list, a NumPy array, a JAX array or a Tensor, "
                    f"but got {type(data).__name__}")


def tensor(data, dtype=None, requires_grad=False, device=None):
    """A new leaf tensor holding a copy of `data` (number, nested list, NumPy/JAX array or Tensor)."""
    arr, keeps_dtype = _to_array(data)
    if dtype is not None:
        d = _dtypes.to_dtype(dtype)
    else:
        d = _dtypes.from_numpy_dtype(arr.dtype) if keeps_dtype else _infer_dtype(arr)
    return _finish(jnp.asarray(arr, dtype=d.np), requires_grad)


def as_tensor(data, dtype=None, device=None):
    """`data` as a tensor, sharing it when it already is a Tensor of the right dtype."""
    if isinstance(data, Tensor) and (dtype is None or _dtypes.to_dtype(dtype) is data.dtype):
        return data
    return tensor(data, dtype)


def from_numpy(ndarray):
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return Tensor._wrap(jnp.asarray(ndarray))


def from_jax(array):
    """Wrap a JAX array (no copy)."""
    return Tensor._wrap(jnp.asarray(array))


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    for s in size:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"size must be a sequence of ints, but got an element of type {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
    return tuple(int(s) for s in size)


def _dtype_or_default(dtype):
    return _dtypes.to_dtype(dtype) if dtype is not None else _dtypes.get_default_dtype()


def zeros(*size, dtype=None, requires_grad=False, device=None):
    return _finish(jnp.zeros(_size(size), _dtype_or_default(dtype).np), requires_grad)


def ones(*size, dtype=None, requires_grad=False, device=None):
    return _finish(jnp.ones(_size(size), _dtype_or_default(dtype).np), requires_grad)


empty = zeros


def full(size, fill_value, *, dtype=None, requires_grad=False, device=None):
    d = _dtypes.to_dtype(dtype) if dtype is not None else _dtypes.scalar_dtype(fill_value)
    return _finish(jnp.full(_size((size,)), fill_value, d.np), requires_grad)


def eye(n, m=None, *, dtype=None, requires_grad=False, device=None):
    return _finish(jnp.eye(n, n if m is None else m, dtype=_dtype_or_default(dtype).np), requires_grad)


def arange(start, end=None, step=1, *, dtype=None, requires_grad=False, device=None):
    """Values from `start` to `end` (exclusive) by `step`; int64 when all are integers."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    values = (start, end, step)
    if dtype is None:
        dtype = _dtypes.int64 if builtins.all(isinstance(v, int) for v in values) else _dtypes.get_default_dtype()
    d = _dtypes.to_dtype(dtype)
    n = builtins.max(int(np.ceil((end - start) / step)), 0)
    return _finish(jnp.asarray((start + step * np.arange(n)).astype(d.np)), requires_grad)


def linspace(start, end, steps, *, dtype=None, requires_grad=False, device=None):
    d = _dtype_or_default(dtype)
    return _finish(jnp.asarray(np.linspace(start, end, steps).astype(d.np)), requires_grad)


def _like(input, dtype):
    return tuple(input.shape), (_dtypes.to_dtype(dtype) if dtype is not None else input.dtype)


def zeros_like(input, *, dtype=None, requires_grad=False, device=None):
    shape, d = _like(input, dtype)
    return zeros(shape, dtype=d, requires_grad=requires_grad)


def ones_like(input, *, dtype=None, requires_grad=False, device=None):
    shape, d = _like(input, dtype)
    return ones(shape, dtype=d, requires_grad=requires_grad)


empty_like = zeros_like


def full_like(input, fill_value, *, dtype=None, requires_grad=False, device=None):
    shape, d = _like(input, dtype)
    return full(shape, fill_value, dtype=d, requires_grad=requires_grad)


def _float_dtype(dtype, fn):
    d = _dtype_or_default(dtype)
    if not (d.is_floating_point or d.is_complex):
        raise RuntimeError(f'"{fn}" not implemented for \'{d.name}\'')
    return d


def rand(*size, dtype=None, requires_grad=False, generator=None, device=None):
    """Uniform samples in [0, 1)."""
    d = _float_dtype(dtype, "check_uniform_bounds")
    return _finish(jnp.asarray(_rng[0].random(_size(size)).astype(d.np)), requires_grad)


def randn(*size, dtype=None, requires_grad=False, generator=None, device=None):
    """Standard normal samples."""
    d = _float_dtype(dtype, "normal_kernel_cpu")
    return _finish(jnp.asarray(_rng[0].standard_normal(_size(size)).astype(d.np)), requires_grad)


def randint(low=0, high=None, size=None, *, dtype=None, requires_grad=False, generator=None, device=None):
    """Integers in [low, high); randint(high, size) also works."""
    if size is None:
        low, high, size = 0, low, high
    d = _dtypes.to_dtype(dtype) if dtype is not None else _dtypes.int64
    return _finish(jnp.asarray(_rng[0].integers(low, high, _size((size,))).astype(d.np)), requires_grad)


def rand_like(input, *, dtype=None, requires_grad=False, device=None):
    shape, d = _like(input, dtype)
    return rand(shape, dtype=d, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, requires_grad=False, device=None):
    shape, d = _like(input, dtype)
    return randn(shape, dtype=d, requires_grad=requires_grad)
