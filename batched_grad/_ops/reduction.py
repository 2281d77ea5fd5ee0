"""Reductions and scans: sum, mean, prod, amax/amin, max/min, arg*, var/std, norm, logsumexp, cum*, all/any."""
from collections import namedtuple

import jax
import jax.numpy as jnp

from .. import _dtypes
from .._tensor import _wrap_dim
from ._core import Op, apply

values_indices = {name: namedtuple(name, ["values", "indices"]) for name in ("max", "min", "sort", "topk")}


def dims(dim, ndim):
    """Normalize an int / sequence / None `dim` argument into a sorted tuple of non-negative axes."""
    if dim is None or ndim == 0:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    return tuple(sorted({_wrap_dim(d, ndim) for d in dim}))


def _reduce_op(name, f, linear=False):
    return Op(name, lambda a, *, axis, keepdim, dtype: f(a.astype(dtype), axis=axis, keepdims=keepdim), linear=linear)


_SUM = _reduce_op("sum", jnp.sum, linear=True)
_MEAN = _reduce_op("mean", jnp.mean, linear=True)
_PROD = _reduce_op("prod", jnp.prod)
_AMAX = _reduce_op("amax", jnp.max)
_AMIN = _reduce_op("amin", jnp.min)
_LOGSUMEXP = _reduce_op("logsumexp", jax.scipy.special.logsumexp)
_ALL = _reduce_op("all", jnp.all)
_ANY = _reduce_op("any", jnp.any)


def _accumulating_dtype(input, dtype):
    if dtype is not None:
        return _dtypes.to_dtype(dtype)
    return _dtypes.int64 if _dtypes.category(input.dtype) < 2 else input.dtype


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    """Sum over `dim` (all dims by default); integer inputs sum in int64."""
    return apply(_SUM, [input], axis=dims(dim, input.ndim), keepdim=keepdim, dtype=_accumulating_dtype(input, dtype).np)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over `dim`; the input (or `dtype`) must be floating point or complex."""
    d = _dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    if _dtypes.category(d) < 2:
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {d.name.capitalize().replace('Int64', 'Long')}")
    return apply(_MEAN, [input], axis=dims(dim, input.ndim), keepdim=keepdim, dtype=d.np)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product over one `dim` (or all elements)."""
    return apply(_PROD, [input], axis=dims(dim, input.ndim), keepdim=keepdim, dtype=_accumulating_dtype(input, dtype).np)


def amax(input, dim=(), keepdim=False):
    """Maximum over `dim` (all dims for ()); gradient shared evenly among ties."""
    return apply(_AMAX, [input], axis=dims(dim or None, input.ndim), keepdim=keepdim, dtype=input.dtype.np)


def amin(input, dim=(), keepdim=False):
    """Minimum over `dim` (all dims for ())."""
    return apply(_AMIN, [input], axis=dims(dim or None, input.ndim), keepdim=keepdim, dtype=input.dtype.np)


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input))) over `dim`, computed stably."""
    dtype = _dtypes.float_result(input.dtype)
    return apply(_LOGSUMEXP, [input], axis=dims(dim, input.ndim), keepdim=keepdim, dtype=dtype.np)


def all(input, dim=None, keepdim=False):  # noqa: A001
    return apply(_ALL, [input], axis=dims(dim, input.ndim), keepdim=keepdim, dtype=_dtypes.bool.np)


def any(input, dim=None, keepdim=False):  # noqa: A001
    return apply(_ANY, [input], axis=dims(dim, input.ndim), keepdim=keepdim, dtype=_dtypes.bool.np)


def _select_extreme(a, *, axis, keepdim, largest):
    # gradient goes to the selected (first) index only, as torch's max(dim)/min(dim)
    idx = jnp.argmax(a, axis=axis, keepdims=True) if largest else jnp.argmin(a, axis=axis, keepdims=True)
    values = jnp.take_along_axis(a, idx, axis=axis)
    if not keepdim:
        values, idx = jnp.squeeze(values, axis), jnp.squeeze(idx, axis)
    return values, idx.astype(jnp.int64)


_SELECT_EXTREME = Op("max", _select_extreme, multi=True)
_ARG = Op("argmax", lambda a, *, axis, keepdim, largest: (jnp.argmax if largest else jnp.argmin)(
    a, axis=axis, keepdims=keepdim).astype(jnp.int64))


def _extreme(input, dim_or_other, keepdim, largest):
    from .elementwise import maximum, minimum

    name = "max" if largest else "min"
    if dim_or_other is None:
        return amax(input) if largest else amin(input)
    if not isinstance(dim_or_other, int):
        return (maximum if largest else minimum)(input, dim_or_other)
    if input.ndim == 0:
        return values_indices[name](input, apply(_ARG, [input], axis=None, keepdim=False, largest=largest))
    axis = _wrap_dim(dim_or_other, input.ndim)
    return values_indices[name](*apply(_SELECT_EXTREME, [input], axis=axis, keepdim=keepdim, largest=largest))


def max(input, dim=None, keepdim=False):  # noqa: A001
    """max(input) -> the maximum; max(input, dim) -> (values, indices); max(input, other) -> maximum."""
    return _extreme(input, dim, keepdim, True)


def min(input, dim=None, keepdim=False):  # noqa: A001
    """min(input) -> the minimum; min(input, dim) -> (values, indices); min(input, other) -> minimum."""
    return _extreme(input, dim, keepdim, False)


def argmax(input, dim=None, keepdim=False):
    """Index of the maximum (over the flattened input when dim is None)."""
    axis = None if dim is None else _wrap_dim(dim, input.ndim)
    return apply(_ARG, [input], axis=axis, keepdim=keepdim and dim is not None, largest=True)


def argmin(input, dim=None, keepdim=False):
    axis = None if dim is None else _wrap_dim(dim, input.ndim)
    return apply(_ARG, [input], axis=axis, keepdim=keepdim and dim is not None, largest=False)


_VAR = Op("var", lambda a, *, axis, keepdim, correction, sqrt: (jnp.std if sqrt else jnp.var)(
    a, axis=axis, keepdims=keepdim, ddof=correction))


def _var(input, dim, unbiased, keepdim, correction, sqrt):
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if isinstance(dim, bool):  # var(input, unbiased) positional form
        dim, correction = None, int(dim)
    return apply(_VAR, [input], axis=dims(dim, input.ndim), keepdim=keepdim, correction=correction, sqrt=sqrt)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over `dim` with Bessel's `correction` (1 by default)."""
    return _var(input, dim, unbiased, keepdim, correction, False)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over `dim` with Bessel's `correction` (1 by default)."""
    return _var(input, dim, unbiased, keepdim, correction, True)


def _vector_norm(a, *, ord, axis, keepdim):
    if ord == 2 and not jnp.iscomplexobj(a):
        # the gradient of a 2-norm at 0 is 0 in torch (JAX's sqrt(sum(x^2)) gives nan)
        sq = jnp.sum(a * a, axis=axis, keepdims=keepdim)
        safe = jnp.where(sq == 0, 1.0, sq)
        return jnp.where(sq == 0, 0.0, jnp.sqrt(safe)).astype(a.dtype)
    return jnp.linalg.vector_norm(a, ord=ord, axis=axis, keepdims=keepdim)


_VECTOR_NORM = Op("linalg_vector_norm", _vector_norm)
_MATRIX_NORM = Op("linalg_matrix_norm", lambda a, *, ord, axis, keepdim: jnp.linalg.matrix_norm(
    a, ord=ord, keepdims=keepdim) if axis == (a.ndim - 2, a.ndim - 1) else jnp.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdim))


def vector_norm(input, ord=2, dim=None, keepdim=False, *, dtype=None):
    x = input if dtype is None else input.to(dtype)
    axis = None if dim is None else dims(dim, x.ndim)
    return apply(_VECTOR_NORM, [x], ord=float(ord), axis=axis, keepdim=keepdim)


def matrix_norm(input, ord="fro", dim=(-2, -1), keepdim=False):
    return apply(_MATRIX_NORM, [input], ord=ord, axis=dims(dim, input.ndim), keepdim=keepdim)


def linalg_norm(input, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm for 1 dim (or flattened when ord and dim are None), else a matrix norm."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or (dim is None and ord is not None and input.ndim == 2):
        return matrix_norm(input if dtype is None else input.to(dtype), "fro" if ord is None else ord,
                           dim if dim is not None else (-2, -1), keepdim)
    return vector_norm(input, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: the Frobenius / p-norm over `dim` (all elements by default)."""
    if p == "fro" or p is None:
        p = 2
    if p == "nuc":
        return matrix_norm(input, "nuc", dim if dim is not None else (-2, -1), keepdim)
    return vector_norm(input, p, dim, keepdim, dtype=dtype)


_CUMSUM = Op("cumsum", lambda a, *, axis, dtype: jnp.cumsum(a.astype(dtype), axis=axis), linear=True)
_CUMPROD = Op("cumprod", lambda a, *, axis, dtype: jnp.cumprod(a.astype(dtype), axis=axis))


def cumsum(input, dim, *, dtype=None):
    """Cumulative sum along `dim`."""
    return apply(_CUMSUM, [input], axis=_wrap_dim(dim, input.ndim), dtype=_accumulating_dtype(input, dtype).np)


def cumprod(input, dim, *, dtype=None):
    """Cumulative product along `dim`."""
    return apply(_CUMPROD, [input], axis=_wrap_dim(dim, input.ndim), dtype=_accumulating_dtype(input, dtype).np)
