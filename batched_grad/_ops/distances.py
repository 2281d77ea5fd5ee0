"""Distances and similarities: dist, cdist, pdist, pairwise_distance, cosine_similarity and F.normalize, each one op
whose norms have torch's derivatives at zero distance (0, not nan)."""

import jax
import jax.numpy as jnp
import numpy as np

from .. import _dtypes
from .._autocast import autocast_policy
from .._tensor import _wrap_dim
from ._core import Op, apply
from ._derivatives import first_order_only
from ._forward_refused import not_implemented_forward
from ._public import write_out
from .elementwise import broadcast_shape
from .nn import _check_tensor
from .reduction import _vector_norm


def _norm(a, p, axis, keepdim=False):
    return _vector_norm(a, ord=p, axis=axis, keepdim=keepdim)


def _no_double_backward(name):
    return lambda: NotImplementedError(f"the derivative for '_{name}_backward' is not implemented.")


def _cdist(a, b, *, p, by_matmul):  # by_matmul: torch's kernel (_cdist_forward_error)
    # every row of a against every row of b: (..., P, M) and (..., R, M) give (..., P, R)
    return first_order_only(
        lambda a, b: _norm(a[..., :, None, :] - b[..., None, :, :], p, -1), _no_double_backward("cdist")
    )(a, b)


def _pdist(a, *, p):
    rows, cols = np.triu_indices(a.shape[0], 1)
    return first_order_only(lambda a: _norm(a[rows] - a[cols], p, -1), _no_double_backward("pdist"))(a)


def _cosine_similarity(a, b, *, axis, eps):
    # torch clamps each norm at eps outside the graph: the derivative is that of the unclamped norm
    def unit(x):
        n = _norm(x, 2.0, axis, keepdim=True)
        return x / (n + jax.lax.stop_gradient(jnp.maximum(n, eps) - n))

    a, b = jnp.broadcast_arrays(a, b)
    return jnp.sum(unit(a) * unit(b), axis)


def _normalize(a, *, p, axis, eps):
    n = _norm(a, p, axis, keepdim=True)
    return a / jnp.maximum(n, eps)


_DIST = Op("dist", lambda a, b, *, p: _norm(a - b, p, None))


def _cdist_forward_error(a, b, *, p, by_matmul):
    return not_implemented_forward("_euclidean_dist" if by_matmul else "_cdist_forward")()


_CDIST = Op("cdist", _cdist, forward_error=_cdist_forward_error)
_PDIST = Op("pdist", _pdist, "PdistBackward0", forward_error=not_implemented_forward("_pdist_forward"))


def _pairwise(a, b, *, p, eps, keepdim):
    d = a - b + eps
    return _norm(d, p, -1 if d.ndim else None, keepdim)  # scalars: their own distance, as torch's dim -1 of one


_PAIRWISE = Op("pairwise_distance", _pairwise, "NormBackward1")
_COSINE = Op("cosine_similarity", _cosine_similarity, "SumBackward1")
_NORMALIZE = Op("normalize", _normalize, "DivBackward0")


def _floating(fn, *tensors):
    for x in tensors:
        if not (x.dtype.is_floating_point or x.dtype.is_complex):
            raise RuntimeError(f"{fn} only supports floating-point dtypes, {x.dtype.type_name} given")


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast)."""
    _check_tensor("dist", "input", input)
    _check_tensor("dist", "other", other, 2)
    broadcast_shape(tuple(input.shape), tuple(other.shape))
    d = _dtypes.result_type(input, other)
    if not (d.is_floating_point or d.is_complex):
        raise RuntimeError(
            f"norm(): input dtype should be either floating point or complex. Got {d.type_name} instead."
        )
    return apply(_DIST, [input.to(d), other.to(d)], p=float(p))


@autocast_policy("fp32")
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M): (..., P, R)."""
    if compute_mode not in (
        "use_mm_for_euclid_dist_if_necessary",
        "use_mm_for_euclid_dist",
        "donot_use_mm_for_euclid_dist",
    ):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(
            f"cdist only supports at least 2D tensors, X{1 if x1.ndim < 2 else 2} got: {min(x1.ndim, x2.ndim)}D"
        )
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    _floating("cdist", x1, x2)
    # torch computes Euclidean distances through a matrix product (its _euclidean_dist) when asked to, or by default
    # for more than 25 rows on either side
    by_matmul = p == 2 and (
        compute_mode == "use_mm_for_euclid_dist"
        or (compute_mode == "use_mm_for_euclid_dist_if_necessary" and max(x1.shape[-2], x2.shape[-2]) > 25)
    )
    return apply(_CDIST, [x1, x2], p=float(p), by_matmul=by_matmul)


def pdist(input, p=2):
    """The p-norm distances between the rows of a 2-D input, for each pair i < j in order (N (N - 1) / 2 of them)."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    _floating("pdist", input)
    return apply(_PDIST, [input], p=float(p))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps over the last dimension."""
    _check_tensor("pairwise_distance", "x1", x1)
    _check_tensor("pairwise_distance", "x2", x2, 2)
    broadcast_shape(tuple(x1.shape), tuple(x2.shape))
    d = _dtypes.float_result(_dtypes.result_type(x1, x2))
    return apply(_PAIRWISE, [x1.to(d), x2.to(d)], p=float(p), eps=float(eps), keepdim=bool(keepdim))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """The cosine of the angle between x1 and x2 (broadcast) along `dim`, each norm at least eps."""
    _check_tensor("cosine_similarity", "x1", x1)
    _check_tensor("cosine_similarity", "x2", x2, 2)
    shape = broadcast_shape(tuple(x1.shape), tuple(x2.shape))
    d = _dtypes.float_result(_dtypes.result_type(x1, x2))
    return apply(_COSINE, [x1.to(d), x2.to(d)], axis=_wrap_dim(dim, len(shape)), eps=float(eps))


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input divided by its p-norm along `dim` (at least eps)."""
    _check_tensor("normalize", "input", input)
    if out is not None:
        return write_out("normalize", out, normalize, (input, p, dim, eps), {})
    return apply(_NORMALIZE, [input], p=float(p), axis=_wrap_dim(dim, input.ndim), eps=float(eps))


TORCH = {f.__name__: f for f in (dist, cdist, pdist, pairwise_distance, cosine_similarity)}
