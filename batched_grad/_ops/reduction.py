"""Reductions and scans: sum, mean, prod, amax/amin, max/min, arg*, var/std, norm, logsumexp, cum*, all/any."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._autocast import autocast_policy
from .._int_args import int_or_ints
from .._tensor import _wrap_dim, warn_at_caller
from . import _derivatives
from ._core import SAVES_BOTH, SAVES_INDICES, SAVES_INPUT, Op, apply
from ._mixed_dtype import HALF_ARRAY_DTYPES
from .return_types import return_type

values_indices = {name: return_type(name, ["values", "indices"]) for name in ("max", "min", "sort", "topk")}


def dims(dim, ndim):
    """Normalize an int / sequence / None `dim` into a sorted tuple of non-negative axes; None or an empty
    sequence means every axis, as in torch."""
    if dim is None:
        return tuple(range(ndim))
    axes = [_wrap_dim(d, ndim) for d in int_or_ints(dim)]
    for i, a in enumerate(axes):
        if a in axes[:i]:
            raise RuntimeError(f"dim {a} appears multiple times in the list of dims")
    return tuple(sorted(axes)) if ndim and axes else tuple(range(ndim))


def _reduce_op(name, f, linear=False, backward_name=None, torch_saves=SAVES_INPUT, host_vjp=None):
    return Op(
        name,
        lambda a, *, axis, keepdim, dtype: f(a.astype(dtype), axis=axis, keepdims=keepdim).astype(dtype),
        linear=linear,
        backward_name=backward_name,
        torch_saves=torch_saves,
        host_vjp=host_vjp,
    )


def sum_all_host(a):
    """x.sum() of a float32 or float64 array on the host (lean.total, the eager front of Tensor.sum): the reduction
    that the row's derived host form runs (_numpy_rows' reduce_sum: over every axis into a 0-d array, from 0),
    without tracing it. Not the row's own host form: a recorded graph's programs keep the derived one."""
    return np.add.reduce(a, tuple(range(a.ndim)), a.dtype, np.empty((), a.dtype), False, 0)


def _sum_host_vjp(ct, operands, avals, *, axis, keepdim, dtype):
    """The gradient of a sum, with NumPy: the cotangent broadcast back over the summed axes."""
    shape = avals[0][0]
    if not keepdim and shape:
        ct = np.expand_dims(ct, axis)
    return (np.broadcast_to(ct, shape),)


def _require_float(what, d):
    if _dtypes.category(d) < 2:
        raise RuntimeError(what.format(d.type_name))


# sum, mean and prod over every element (dim None) or over `dim`: torch's two overloads, Backward0 and Backward1
_SUM = [
    _reduce_op("sum", jnp.sum, linear=True, backward_name=f"SumBackward{k}", host_vjp=_sum_host_vjp) for k in (0, 1)
]
_MEAN = [_reduce_op("mean", jnp.mean, linear=True, backward_name=f"MeanBackward{k}") for k in (0, 1)]
# JAX's product rule is exact with zeros (no division by the result)
_PROD = [_reduce_op("prod", jnp.prod, backward_name=f"ProdBackward{k}", torch_saves=SAVES_BOTH) for k in (0, 1)]
# ties share the gradient evenly, as torch's amax and max(); max() and min() give it to nan elements as torch's
_AMAX = _reduce_op("amax", jnp.max, torch_saves=SAVES_BOTH)
_AMIN = _reduce_op("amin", jnp.min, torch_saves=SAVES_BOTH)
_MAX_ALL = _reduce_op("max", _derivatives.max_all, backward_name="MaxBackward1", torch_saves=SAVES_BOTH)
_MIN_ALL = _reduce_op("min", _derivatives.min_all, backward_name="MinBackward1", torch_saves=SAVES_BOTH)
_LOGSUMEXP = _reduce_op("logsumexp", jax.scipy.special.logsumexp, torch_saves=SAVES_BOTH)
_ALL = _reduce_op("all", jnp.all)
_ANY = _reduce_op("any", jnp.any)


def _accumulating_dtype(input, dtype):
    if dtype is not None:
        return _dtypes.to_dtype(dtype)
    return _ACCUMULATING[input._v.dtype]


# {NumPy dtype of an input: the dtype torch sums or multiplies it in}: integers and bool in int64
_ACCUMULATING = {d.np: _dtypes.int64 if _dtypes.category(d) < 2 else d for d in _dtypes.ALL}


class _AllDims:
    """The default `dim` of sum and mean: torch picks its all-elements overload (Backward0) only when no `dim` is
    passed; an explicit dim=None takes the dim overload (Backward1), over all dims as well."""

    def __repr__(self):
        return "None"


_ALL_DIMS = _AllDims()


def _dim_overload(dim):
    """(torch's overload: 0 without a dim argument, else 1; the dim, None for all)."""
    return (0, None) if dim is _ALL_DIMS else (1, dim)


def sum(input, dim=_ALL_DIMS, keepdim=False, *, dtype=None):  # noqa: A001
    """Sum over `dim` (all dims by default); integer and bool inputs sum in int64."""
    if dim is _ALL_DIMS and dtype is None:  # x.sum(): the overload, dims and dtype without a call for each
        return apply(
            _SUM[0], [input], axis=tuple(range(input.ndim)), keepdim=keepdim, dtype=_ACCUMULATING[input._v.dtype].np
        )
    overload, dim = _dim_overload(dim)
    return apply(
        _SUM[overload],
        [input],
        axis=dims(dim, input.ndim),
        keepdim=keepdim,
        dtype=_accumulating_dtype(input, dtype).np,
    )


def mean(input, dim=_ALL_DIMS, keepdim=False, *, dtype=None):
    """Mean over `dim`; the input (or `dtype`) must be floating point or complex."""
    overload, dim = _dim_overload(dim)
    d = _dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    _require_float(
        "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}", d
    )
    return apply(_MEAN[overload], [input], axis=dims(dim, input.ndim), keepdim=keepdim, dtype=d.np)


@autocast_policy("fp32")
def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product over one `dim` (or all elements)."""
    if dim is not None and not isinstance(dim, int):
        raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
    axis = dims(dim, input.ndim)
    return apply(
        _PROD[dim is not None],
        [input],
        axis=axis,
        keepdim=keepdim and dim is not None,
        dtype=_accumulating_dtype(input, dtype).np,
    )


def _require_elements(name, input, dim, axes):
    """torch's errors for a max- or min-like reduction over no elements (`dim` as given, `axes` normalized)."""
    if input.numel():
        return
    if dim is None or dim == ():
        if name.startswith("arg"):
            raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument."
        )
    for a in axes:
        if input.shape[a] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {a} to have non-zero size.")


def amax(input, dim=(), keepdim=False):
    """Maximum over `dim` (all dims for ()); the gradient is shared evenly among ties."""
    axis = dims(dim, input.ndim)
    _require_elements("amax", input, dim, axis)
    return apply(_AMAX, [input], axis=axis, keepdim=keepdim, dtype=input.dtype.np)


def amin(input, dim=(), keepdim=False):
    """Minimum over `dim` (all dims for ())."""
    axis = dims(dim, input.ndim)
    _require_elements("amin", input, dim, axis)
    return apply(_AMIN, [input], axis=axis, keepdim=keepdim, dtype=input.dtype.np)


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input))) over `dim`, computed stably."""
    dtype = _dtypes.float_result(input.dtype)
    return apply(_LOGSUMEXP, [input], axis=dims(dim, input.ndim), keepdim=keepdim, dtype=dtype.np)


def _logical_reduction(op, input, dim, keepdim):
    out = _dtypes.uint8 if input.dtype is _dtypes.uint8 else _dtypes.bool  # torch keeps uint8
    return apply(op, [input], axis=dims(dim, input.ndim), keepdim=keepdim, dtype=out.np)


def all(input, dim=None, keepdim=False):  # noqa: A001
    """Whether all elements (over `dim`, or all of them) are nonzero; bool, or uint8 for uint8 input."""
    return _logical_reduction(_ALL, input, dim, keepdim)


def any(input, dim=None, keepdim=False):  # noqa: A001
    """Whether any element (over `dim`, or any at all) is nonzero; bool, or uint8 for uint8 input."""
    return _logical_reduction(_ANY, input, dim, keepdim)


# ---- max/min with indices, argmax/argmin -------------------------------------------------------------------
def _select_extreme(a, *, axis, keepdim, largest):
    # the gradient goes to the selected (first) index only, as torch's max(dim)/min(dim)
    idx = jnp.argmax(a, axis=axis, keepdims=True) if largest else jnp.argmin(a, axis=axis, keepdims=True)
    values = jnp.take_along_axis(a, idx, axis=axis)
    if not keepdim:
        values, idx = jnp.squeeze(values, axis), jnp.squeeze(idx, axis)
    return values, idx.astype(jnp.int64)


_SELECT = {
    largest: Op("max" if largest else "min", _select_extreme, multi=True, torch_saves=SAVES_INDICES)
    for largest in (True, False)
}
_ARG = Op(
    "argmax",
    lambda a, *, axis, keepdim, largest: (jnp.argmax if largest else jnp.argmin)(a, axis=axis, keepdims=keepdim).astype(
        jnp.int64
    ),
)


def _extreme(input, dim_or_other, keepdim, largest):
    from .elementwise import maximum, minimum

    name = "max" if largest else "min"
    if dim_or_other is not None and not isinstance(dim_or_other, int):
        return (maximum if largest else minimum)(input, dim_or_other)
    axis = None if dim_or_other is None else _wrap_dim(dim_or_other, input.ndim)
    _require_elements(name, input, dim_or_other, [axis] if input.ndim else [])
    if dim_or_other is None:
        return apply(_MAX_ALL if largest else _MIN_ALL, [input], axis=None, keepdim=False, dtype=input.dtype.np)
    if input.ndim == 0:  # torch allows dim 0 (or -1) on a 0-dim tensor
        return values_indices[name](
            *apply(_SELECT[largest], [input.reshape(1)], axis=0, keepdim=False, largest=largest)
        )
    return values_indices[name](*apply(_SELECT[largest], [input], axis=axis, keepdim=keepdim, largest=largest))


def max(input, dim=None, keepdim=False):  # noqa: A001
    """max(input) -> the maximum; max(input, dim) -> (values, indices); max(input, other) -> maximum."""
    return _extreme(input, dim, keepdim, True)


def min(input, dim=None, keepdim=False):  # noqa: A001
    """min(input) -> the minimum; min(input, dim) -> (values, indices); min(input, other) -> minimum."""
    return _extreme(input, dim, keepdim, False)


def _arg(name, input, dim, keepdim, largest):
    if input.dtype is _dtypes.bool:
        raise RuntimeError(f"{name}(): does not support bool input")
    axis = None if dim is None else _wrap_dim(dim, input.ndim)
    _require_elements(name, input, dim, [axis] if input.ndim else [])
    return apply(_ARG, [input], axis=axis if input.ndim else None, keepdim=keepdim, largest=largest)


def argmax(input, dim=None, keepdim=False):
    """Index of the maximum (over the flattened input when dim is None)."""
    return _arg("argmax", input, dim, keepdim, True)


def argmin(input, dim=None, keepdim=False):
    """Index of the minimum (over the flattened input when dim is None)."""
    return _arg("argmin", input, dim, keepdim, False)


# ---- var/std -----------------------------------------------------------------------------------------------
def _var_fn(a, *, axis, keepdim, correction, sqrt):
    if a.dtype in HALF_ARRAY_DTYPES:  # torch accumulates a bfloat16 or float16 input in float32 and rounds once
        return _var_fn(a.astype(jnp.float32), axis=axis, keepdim=keepdim, correction=correction, sqrt=sqrt).astype(
            a.dtype
        )
    n = math.prod(a.shape[i] for i in axis)
    centered = a - jnp.mean(a, axis=axis, keepdims=True)
    sq = jnp.real(centered * jnp.conj(centered)) if jnp.iscomplexobj(a) else centered * centered
    # torch divides by max(n - correction, 0): inf (or nan) rather than a negative variance
    v = jnp.sum(sq, axis=axis, keepdims=keepdim) / jnp.maximum(n - correction, 0)
    return _derivatives.std_sqrt(v) if sqrt else v


_VAR = {False: Op("var", _var_fn), True: Op("std", _var_fn, torch_saves=SAVES_BOTH)}  # std's reads the result


def _var_mean_fn(a, *, axis, keepdim, correction, sqrt):
    return (
        _var_fn(a, axis=axis, keepdim=keepdim, correction=correction, sqrt=sqrt),
        jnp.mean(a, axis=axis, keepdims=keepdim),
    )


_VAR_MEAN = {
    False: Op("var_mean", _var_mean_fn, multi=True),
    True: Op("std_mean", _var_mean_fn, multi=True, torch_saves=SAVES_BOTH),
}


def _var(input, dim, unbiased, keepdim, correction, sqrt, name=None):
    """var or std (with `name`: var_mean or std_mean, which also give the mean)."""
    what = name or "std and var"
    _require_float(f"{what} only support floating point and complex dtypes", input.dtype)
    if isinstance(dim, bool):  # the var(input, unbiased) positional form
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    axis = dims(dim, input.ndim)
    n = math.prod(input.shape[i] for i in axis)
    if n - correction <= 0:
        warn_at_caller(
            f"{name or ('std' if sqrt else 'var')}(): degrees of freedom is <= 0. Correction should be "
            "strictly less than the reduction factor (input numel divided by output numel)."
        )
    op = _VAR_MEAN[sqrt] if name else _VAR[sqrt]
    return apply(op, [input], axis=axis, keepdim=keepdim, correction=correction, sqrt=sqrt)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over `dim` with Bessel's `correction` (1 by default)."""
    return _var(input, dim, unbiased, keepdim, correction, False)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over `dim` with Bessel's `correction` (1 by default)."""
    return _var(input, dim, unbiased, keepdim, correction, True)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(variance, mean) over `dim`, as var() and mean() give them, in one op."""
    return _var(input, dim, unbiased, keepdim, correction, False, "var_mean")


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(standard deviation, mean) over `dim`, as std() and mean() give them, in one op."""
    return _var(input, dim, unbiased, keepdim, correction, True, "std_mean")


# ---- norms -------------------------------------------------------------------------------------------------
def _vector_norm(a, *, ord, axis, keepdim):
    if jnp.iscomplexobj(a):
        return jnp.linalg.vector_norm(a, ord=ord, axis=axis, keepdims=keepdim)
    # torch's conventions at 0: |x| has derivative sign(x) (0 at 0), and the gradient of sum(|x|^p)^(1/p) is 0
    # where the norm is 0; the inner `where` keeps the unselected branch (and so higher derivatives) finite
    absa = _derivatives.abs_(a)
    if ord == math.inf:
        return jnp.max(absa, axis=axis, keepdims=keepdim)
    if ord == -math.inf:
        return jnp.min(absa, axis=axis, keepdims=keepdim)
    if ord == 0:
        return jnp.sum(absa != 0, axis=axis, keepdims=keepdim).astype(a.dtype)
    if ord == 1:
        return jnp.sum(absa, axis=axis, keepdims=keepdim)
    s = jnp.sum(a * a if ord == 2 else absa**ord, axis=axis, keepdims=keepdim)
    zero = s == 0
    return jnp.where(zero, 0, jnp.where(zero, 1, s) ** (1 / ord)).astype(a.dtype)


_VECTOR_NORM = Op("linalg_vector_norm", _vector_norm, torch_saves=SAVES_BOTH)


def _matrix_norm(a, *, ord, axis, keepdim):
    out = jnp.linalg.matrix_norm(jnp.moveaxis(a, axis, (-2, -1)), ord=ord)
    return jnp.expand_dims(out, axis) if keepdim else out


_MATRIX_NORM = Op("linalg_matrix_norm", _matrix_norm)


def vector_norm(input, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector `ord`-norm over `dim` (all elements by default)."""
    _require_float("linalg.vector_norm: Expected a floating point or complex tensor as input. Got {}", input.dtype)
    x = input if dtype is None else input.to(dtype)
    return apply(_VECTOR_NORM, [x], ord=float(ord), axis=dims(dim, x.ndim), keepdim=keepdim)


def matrix_norm(input, ord="fro", dim=(-2, -1), keepdim=False):
    """The matrix norm over the two dims `dim`; "fro" is the vector 2-norm over them."""
    _require_float("linalg.matrix_norm: Expected a floating point or complex tensor as input. Got {}", input.dtype)
    if ord == "fro":
        return vector_norm(input, 2, dim, keepdim)
    axis = tuple(_wrap_dim(d, input.ndim) for d in dim)
    return apply(_MATRIX_NORM, [input], ord=ord, axis=axis, keepdim=keepdim)


def linalg_norm(input, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm for 1 dim (or flattened when ord and dim are None), else a matrix norm."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or (dim is None and ord is not None and input.ndim == 2):
        return matrix_norm(
            input if dtype is None else input.to(dtype),
            "fro" if ord is None else ord,
            dim if dim is not None else (-2, -1),
            keepdim,
        )
    return vector_norm(input, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: the Frobenius / p-norm over `dim` (all elements by default)."""
    if p == "nuc":
        return matrix_norm(input, "nuc", dim if dim is not None else (-2, -1), keepdim)
    return vector_norm(input, 2 if p == "fro" or p is None else p, dim, keepdim, dtype=dtype)


# ---- scans -------------------------------------------------------------------------------------------------
def _scan_op(name, f, linear=False, torch_saves=SAVES_INPUT):
    # axis None: a 0-dim input, returned as is
    return Op(
        name,
        lambda a, *, axis, dtype: a.astype(dtype) if axis is None else f(a.astype(dtype), axis=axis),
        linear=linear,
        torch_saves=torch_saves,
    )


_CUMSUM = _scan_op("cumsum", jnp.cumsum, linear=True)
_CUMPROD = _scan_op("cumprod", jnp.cumprod, torch_saves=SAVES_BOTH)  # JAX's scan derivative is exact with 0s


def _scan(op, input, dim, dtype):
    axis = _wrap_dim(dim, input.ndim)
    return apply(op, [input], axis=axis if input.ndim else None, dtype=_accumulating_dtype(input, dtype).np)


def cumsum(input, dim, *, dtype=None):
    """Cumulative sum along `dim`; integer and bool inputs accumulate in int64."""
    return _scan(_CUMSUM, input, dim, dtype)


def cumprod(input, dim, *, dtype=None):
    """Cumulative product along `dim`."""
    return _scan(_CUMPROD, input, dim, dtype)
