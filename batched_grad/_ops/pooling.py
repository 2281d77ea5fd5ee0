"""Pooling: max and average pooling over 1, 2 or 3 spatial dims (with torch's geometry, ceil_mode and indices),
their adaptive forms, and power-average (lp) pooling. 1-D pooling is torch's: 2-D pooling of an unsqueezed input."""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._autocast import autocast_policy
from .._int_args import int_or_ints
from ._core import Op, apply
from ._fused_backward import FUSED_ZEROS
from .nn import _check_tensor, _require_inexact, _tuple


def _pool_window(x, init, reducer, *, window, stride, padding, dilation):
    lead = x.ndim - len(window)
    return jax.lax.reduce_window(
        x,
        init,
        reducer,
        (1,) * lead + window,
        (1,) * lead + stride,
        ((0, 0),) * lead + padding,
        window_dilation=(1,) * lead + dilation,
    )


def _max_pool(x, *, window, stride, padding, dilation):
    return _max_pool_at(x, window, stride, padding, dilation)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3, 4))
def _max_pool_at(x, window, stride, padding, dilation):
    return _pool_window(x, -jnp.inf, jax.lax.max, window=window, stride=stride, padding=padding, dilation=dilation)


@_max_pool_at.defjvp
def _max_pool_jvp(window, stride, padding, dilation, primals, tangents):
    # The tangent at each window's chosen element, as torch's backward scatters to its indices: the first maximum
    # in the window's row-major order, or its last nan. JAX's own derivative of a max window, under a batch of
    # cotangents, chooses again for every cotangent (a CNN's batched per-sample gradients took twice as long).
    # Positions come from plain min/max reductions: argmax's two-operand reduction ran several times slower on
    # XLA's CPU backend (it took a third of a CNN's per-sample gradients).
    (x,), (t,) = primals, tangents
    values = _windows(x, -jnp.inf, window, stride, padding, dilation)
    out = _max_pool_at(x, window, stride, padding, dilation)
    position = jnp.arange(values.shape[-1])
    last_nan = jnp.where(jnp.isnan(values), position, -1).max(-1)
    first_max = jnp.where(values == out[..., None], position, values.shape[-1]).min(-1)
    picked = position == jnp.where(last_nan >= 0, last_nan, first_max)[..., None]
    return out, jnp.where(picked, _windows(t, 0, window, stride, padding, dilation), 0).sum(-1)


def _windows(a, fill, window, stride, padding, dilation):
    """The pooling windows' elements along a new last axis, (..., *out_spatial, prod(window)), in row-major
    window order; padding is `fill`."""
    lead = a.ndim - len(window)
    a = jnp.pad(a, ((0, 0),) * lead + padding, constant_values=fill)
    spatial = a.shape[lead:]
    out = [(n - d * (w - 1) - 1) // s + 1 for n, w, s, d in zip(spatial, window, stride, dilation)]
    if stride == window and set(dilation) == {1}:  # windows that tile the input: a reshape, whose transpose is one
        a = a[(...,) + tuple(slice(0, m * w) for m, w in zip(out, window))]
        a = a.reshape(a.shape[:lead] + tuple(x for m, w in zip(out, window) for x in (m, w)))
        n = len(window)
        a = a.transpose(
            tuple(range(lead)) + tuple(lead + 2 * i for i in range(n)) + tuple(lead + 2 * i + 1 for i in range(n))
        )
        return a.reshape(a.shape[: lead + n] + (math.prod(a.shape[lead + n :]),))  # not -1: zero-size batches
    taps = []
    for offset in itertools.product(*[range(w) for w in window]):
        start = [o * d for o, d in zip(offset, dilation)]
        limit = [b + (m - 1) * s + 1 for b, m, s in zip(start, out, stride)]
        taps.append(
            jax.lax.slice(a, (0,) * lead + tuple(start), a.shape[:lead] + tuple(limit), (1,) * lead + tuple(stride))
        )
    return jnp.stack(taps, -1)


def _avg_pool(x, *, divisor, count_pad, **geometry):
    total = _pool_window(x, 0.0, jax.lax.add, **geometry)
    if divisor:
        return total / divisor
    # the window sizes torch divides by: pad with ones where padding counts, zeros beyond (ceil_mode's overhang)
    lead, pads = x.ndim - len(geometry["window"]), geometry["padding"]
    ones = jnp.pad(jnp.ones(x.shape[lead:], x.dtype), [(p, p) for p, _ in pads] if count_pad else 0, constant_values=1)
    inner = tuple((0, hi - lo) for lo, hi in pads) if count_pad else pads
    counts = _pool_window(ones, 0.0, jax.lax.add, **dict(geometry, padding=inner))
    return total / counts


# torch's backward of a pooling is a kernel that reads the input (max_pool2d_with_indices_backward, ...); its
# derivative in the input is zeros
_MAX_POOL = {
    n: Op(f"max_pool{n}d", _max_pool, backward_name=f"MaxPool{n}DWithIndicesBackward0", fused=FUSED_ZEROS)
    for n in (2, 3)
}
_AVG_POOL = {
    n: Op(f"avg_pool{n}d", _avg_pool, linear=True, backward_name=f"AvgPool{n}DBackward0", fused=FUSED_ZEROS)
    for n in (2, 3)
}


def _max_pool_indices(x, *, window, stride, padding, dilation):
    """The flat index (within its spatial plane) of the element each max-pool window picks: its first maximum in
    row-major window order, or its last nan, as torch's."""
    values = _windows(x, -jnp.inf, window, stride, padding, dilation)
    position = jnp.arange(values.shape[-1])
    out = jnp.max(values, -1, keepdims=True)
    last_nan = jnp.where(jnp.isnan(values), position, -1).max(-1)
    first_max = jnp.where(values == out, position, values.shape[-1]).min(-1)
    picked = jnp.where(last_nan >= 0, last_nan, first_max)
    n, spatial = len(window), x.shape[x.ndim - len(window) :]
    offsets = np.unravel_index(np.arange(math.prod(window)), window)
    flat = 0
    for d in range(n):
        axis = x.ndim - n + d
        start = jnp.arange(values.shape[axis]).reshape((-1,) + (1,) * (n - 1 - d)) * stride[d] - padding[d][0]
        flat = flat * spatial[d] + start + jnp.asarray(offsets[d])[picked] * dilation[d]
    return flat.astype(jnp.int64)


_MAX_POOL_INDICES = Op("max_pool_indices", _max_pool_indices)


def _pool_geometry(fn, n, input, kernel_size, stride, padding, dilation, ceil_mode):
    _check_tensor(fn, "input", input)
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"non-empty {n + 1}D or {n + 2}D (batch mode) tensor expected for input, but got {list(input.shape)}"
            if n == 2
            else f"non-empty {n + 1}D or {n + 2}D (batch mode) tensor expected for input"
        )
    kernel = _tuple(kernel_size, n, "kernel_size")
    stride = kernel if stride is None or stride == [] else _tuple(stride, n, "stride")
    padding, dilation = _tuple(padding, n, "padding"), _tuple(dilation, n, "dilation")
    pads, sizes = [], []
    for size, k, s, p, d in zip(input.shape[-n:], kernel, stride, padding, dilation):
        if p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(
                f"pad should be at most half of effective kernel size, but got pad={p}, "
                f"kernel_size={k} and dilation={d}"
            )
        span = size + 2 * p - d * (k - 1) - 1
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= size + p:  # the last window must start inside the input or left padding
            out -= 1
        sizes.append(out)
        pads.append((p, max(p, (out - 1) * s + d * (k - 1) + 1 - size - p)))
    if min(sizes) < 1:
        shape = input.shape[-(n + 1) :]
        raise RuntimeError(
            f"Given input size: ({'x'.join(map(str, shape))}). Calculated output size: "
            f"({shape[0]}x{'x'.join(map(str, sizes))}). Output size is too small"
        )
    return dict(window=kernel, stride=stride, padding=tuple(pads), dilation=dilation)


def _max_pool_nd(n, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    _require_inexact(f"max_pool{n}d", input.dtype)
    geometry = _pool_geometry(f"max_pool{n}d", n, input, kernel_size, stride, padding, dilation, ceil_mode)
    out = apply(_MAX_POOL[n], [input], **geometry)
    return (out, apply(_MAX_POOL_INDICES, [input.detach()], **geometry)) if return_indices else out


_ONE_D_DIMS = {
    "max_pool1d": "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but "
    "got:{}",
    "avg_pool1d": "Expected 2 to 3 dimensions, but got {ndim}-dimensional tensor for argument #1 'self' (while "
    "checking arguments for avg_pool1d)",
}


def _one_d(pool, input, *args):
    """A 1-D pooling as torch computes it: the 2-D pooling of input with a unit dim before the last."""
    fn = pool.__name__.replace("2d", "1d")
    _check_tensor(fn, "input", input)
    if input.ndim not in (2, 3):
        raise RuntimeError(_ONE_D_DIMS[fn].format(list(input.shape), ndim=input.ndim))
    if fn == "max_pool1d":
        _require_inexact("max_pool1d_impl", input.dtype)
    out = pool(input.unsqueeze(-2), *args)
    return tuple(o.squeeze(-2) for o in out) if isinstance(out, tuple) else out.squeeze(-2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum over each (dilated) window of the last dim; padding counts as -inf."""
    one = lambda v: v if v is None or isinstance(v, int) else tuple(v)[0]  # noqa: E731
    return _one_d(
        max_pool2d,
        input,
        (1, one(kernel_size)),
        None if stride is None else (1, one(stride)),
        (0, one(padding)),
        (1, one(dilation)),
        ceil_mode,
        return_indices,
    )


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum over each (dilated) window of the last two dims; padding counts as -inf. With return_indices,
    also each maximum's flat index within its plane."""
    return _max_pool_nd(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@autocast_policy("fp32")
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum over each (dilated) window of the last three dims; padding counts as -inf."""
    return _max_pool_nd(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_pool_nd(n, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    _require_inexact(f"avg_pool{n}d", input.dtype)
    if divisor_override is not None and (not isinstance(divisor_override, int) or divisor_override <= 0):
        raise RuntimeError("divisor must be not zero")
    geometry = _pool_geometry(f"avg_pool{n}d", n, input, kernel_size, stride, padding, 1, ceil_mode)
    return apply(_AVG_POOL[n], [input], divisor=divisor_override or 0, count_pad=bool(count_include_pad), **geometry)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """The mean over each window of the last dim (padding counted when `count_include_pad`)."""
    one = lambda v: v if v is None or isinstance(v, int) else tuple(v)[0]  # noqa: E731
    return _one_d(
        avg_pool2d,
        input,
        (1, one(kernel_size)),
        None if stride is None else (1, one(stride)),
        (0, one(padding)),
        ceil_mode,
        count_include_pad,
    )


def avg_pool2d(
    input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    """The mean over each window of the last two dims (padding counted when `count_include_pad`)."""
    return _avg_pool_nd(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@autocast_policy("fp32")
def avg_pool3d(
    input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    """The mean over each window of the last three dims (padding counted when `count_include_pad`)."""
    return _avg_pool_nd(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


# ---- adaptive pooling -----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _adaptive_windows(sizes, outs):
    """(O, L) membership of the flattened input positions (L) in each flattened output's window (O): torch's window
    for output i of a dim of size L is [floor(i L / O), ceil((i + 1) L / O))."""
    per_dim = []
    for size, out in zip(sizes, outs):
        i = np.arange(out)
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        position = np.arange(size)
        per_dim.append((position >= start[:, None]) & (position < end[:, None]))
    member = per_dim[0]
    for m in per_dim[1:]:
        member = (member[:, None, :, None] & m[None, :, None, :]).reshape(member.shape[0] * m.shape[0], -1)
    return member


def _adaptive_avg(x, *, outs):
    n = len(outs)
    member = _adaptive_windows(x.shape[-n:], outs)
    weights = (member / member.sum(1, keepdims=True)).astype(x.dtype)
    flat = x.reshape(x.shape[:-n] + (math.prod(x.shape[-n:]),))
    return (flat @ weights.T).reshape(x.shape[:-n] + outs)


def _adaptive_max_picks(x, outs):
    n = len(outs)
    member = _adaptive_windows(x.shape[-n:], outs)
    flat = x.reshape(x.shape[:-n] + (1, math.prod(x.shape[-n:])))
    # torch picks each window's first maximum, or its last nan
    masked = jnp.where(member, flat, -jnp.inf)
    nan = jnp.isnan(masked)
    position = jnp.arange(masked.shape[-1])
    last_nan = jnp.where(nan, position, -1).max(-1)
    first_max = jnp.argmax(jnp.where(nan, -jnp.inf, masked), -1)
    return jnp.where(last_nan >= 0, last_nan, first_max), flat


def _adaptive_max(x, *, outs):
    picks, flat = _adaptive_max_picks(x, outs)
    n = len(outs)
    return jnp.take_along_axis(flat[..., 0, :], picks, -1).reshape(x.shape[:-n] + outs)


def _adaptive_max_indices(x, *, outs):
    return _adaptive_max_picks(x, outs)[0].reshape(x.shape[: -len(outs)] + outs).astype(jnp.int64)


_ADAPTIVE_AVG = {
    n: Op(f"adaptive_avg_pool{n}d", _adaptive_avg, f"AdaptiveAvgPool{n}DBackward0", linear=True, fused=FUSED_ZEROS)
    for n in (2, 3)
}
_ADAPTIVE_MAX = {
    n: Op(f"adaptive_max_pool{n}d", _adaptive_max, f"AdaptiveMaxPool{n}DBackward0", fused=FUSED_ZEROS) for n in (2, 3)
}
_ADAPTIVE_MAX_INDICES = Op("adaptive_max_pool_indices", _adaptive_max_indices)


def _output_size(fn, n, input, output_size):
    _check_tensor(fn, "input", input)
    if input.ndim not in (n + 1, n + 2):
        if n == 1:
            raise RuntimeError(
                f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for argument #1 "
                f"'self' (while checking arguments for {fn})"
            )
        colon = ":" if "max" in fn else ""
        raise RuntimeError(f"{fn}(): Expected {n + 1}D or {n + 2}D tensor, but got{colon} {list(input.shape)}")
    sizes = int_or_ints(output_size, n)
    if len(sizes) != n:
        raise RuntimeError(f"{fn}: output_size must be {n}")
    return tuple(s if s is not None else d for s, d in zip(sizes, input.shape[-n:]))


def _adaptive_avg_nd(n, input, output_size):
    outs = _output_size(f"adaptive_avg_pool{n}d", n, input, output_size)
    _require_inexact("adaptive_avg_pool2d" if n == 2 else "adaptive_avg_pool3d_cpu", input.dtype)
    if set(outs) == {1}:  # torch takes the mean
        return input.mean(tuple(range(-n, 0)), keepdim=True)
    return apply(_ADAPTIVE_AVG[n], [input], outs=outs)


def adaptive_avg_pool1d(input, output_size):
    """The mean over each of output_size windows that tile the last dim as evenly as possible."""
    outs = _output_size("adaptive_avg_pool1d", 1, input, output_size)
    return _adaptive_avg_nd(2, input.unsqueeze(-2), (1,) + outs).squeeze(-2)


def adaptive_avg_pool2d(input, output_size):
    """The mean over each window of an output_size grid over the last two dims (None keeps a dim's size)."""
    return _adaptive_avg_nd(2, input, output_size)


@autocast_policy("fp32")
def adaptive_avg_pool3d(input, output_size):
    """The mean over each window of an output_size grid over the last three dims."""
    return _adaptive_avg_nd(3, input, output_size)


def _adaptive_max_nd(n, input, output_size, return_indices):
    outs = _output_size(f"adaptive_max_pool{n}d", n, input, output_size)
    _require_inexact("adaptive_max_pool2d" if n == 2 else "adaptive_max_pool3d_cpu", input.dtype)
    out = apply(_ADAPTIVE_MAX[n], [input], outs=outs)
    return (out, apply(_ADAPTIVE_MAX_INDICES, [input.detach()], outs=outs)) if return_indices else out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """The maximum over each of output_size windows that tile the last dim as evenly as possible."""
    outs = _output_size("adaptive_max_pool1d", 1, input, output_size)
    out = _adaptive_max_nd(2, input.unsqueeze(-2), (1,) + outs, return_indices)
    return tuple(o.squeeze(-2) for o in out) if return_indices else out.squeeze(-2)


def _torch_adaptive_max_pool1d(input, output_size):
    """The maximum over each of output_size windows that tile the last dim, and its index: torch's function returns
    both (nn.functional's returns the values unless return_indices)."""
    return adaptive_max_pool1d(input, output_size, return_indices=True)


_torch_adaptive_max_pool1d.__name__ = _torch_adaptive_max_pool1d.__qualname__ = "adaptive_max_pool1d"


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The maximum over each window of an output_size grid over the last two dims."""
    return _adaptive_max_nd(2, input, output_size, return_indices)


@autocast_policy("fp32")
def adaptive_max_pool3d(input, output_size, return_indices=False):
    """The maximum over each window of an output_size grid over the last three dims."""
    return _adaptive_max_nd(3, input, output_size, return_indices)


def _lp_pool(n, input, norm_type, kernel_size, stride, ceil_mode):
    kernel = _tuple(kernel_size, n, "kernel_size")
    pool = (avg_pool1d, avg_pool2d, avg_pool3d)[n - 1]
    out = pool(input**norm_type, kernel if n > 1 else kernel[0], stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu() * math.prod(kernel)) ** (1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x ** p) ** (1 / p) along the last dim."""
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x ** p) ** (1 / p) over the last two dims."""
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x ** p) ** (1 / p) over the last three dims."""
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


# ---- unpooling -----------------------------------------------------------------------------------------------
def _max_unpool(x, idx, *, size):
    n = len(size)
    lead = x.shape[:-n]
    values, positions = (t.reshape(lead + (math.prod(t.shape[len(lead) :]),)) for t in (x, idx))
    where = tuple(np.indices(positions.shape, sparse=True)[:-1]) + (positions,)
    zeros = jnp.zeros(lead + (math.prod(size),), x.dtype)
    # torch writes each value at its index, and its backward gathers the gradient at every index (a position picked
    # by two overlapping windows sends its gradient to both): the value of a scatter, the derivative of a
    # scatter-add
    added = zeros.at[where].add(values)
    out = jax.lax.stop_gradient(zeros.at[where].set(values) - added) + added
    return out.reshape(lead + size)


_MAX_UNPOOL = {n: Op(f"max_unpool{n}d", _max_unpool, f"MaxUnpool{n}DBackward0", linear=True) for n in (2, 3)}


def _max_unpool_nd(n, input, indices, kernel_size, stride, padding, output_size):
    kernel = _tuple(kernel_size, n, "kernel_size")
    stride = kernel if stride is None else _tuple(stride, n, "stride")
    padding = _tuple(padding, n, "padding")
    if output_size is None:
        size = tuple((i - 1) * s - 2 * p + k for i, s, p, k in zip(input.shape[-n:], stride, padding, kernel))
    else:
        size = tuple(output_size)[-n:]
        if len(size) != n:
            raise ValueError(
                f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a "
                f"length of '{len(tuple(output_size))}'"
            )
    if indices.shape != input.shape:
        raise RuntimeError(
            f"Expected shape of indices to be same as that of the input tensor "
            f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}"
        )
    return apply(_MAX_UNPOOL[n], [input, indices], size=size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d: each value written at its index (from return_indices), zeros elsewhere."""
    one = lambda v: v if v is None or isinstance(v, int) else tuple(v)[0]  # noqa: E731
    size = None if output_size is None else (1, tuple(output_size)[-1])
    return _max_unpool_nd(
        2,
        input.unsqueeze(-2),
        indices.unsqueeze(-2),
        (1, one(kernel_size)),
        None if stride is None else (1, one(stride)),
        (0, one(padding)),
        size,
    ).squeeze(-2)


@autocast_policy("fp32")
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d: each value written at its index (from return_indices), zeros elsewhere."""
    return _max_unpool_nd(2, input, indices, kernel_size, stride, padding, output_size)


@autocast_policy("fp32")
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool3d: each value written at its index (from return_indices), zeros elsewhere."""
    return _max_unpool_nd(3, input, indices, kernel_size, stride, padding, output_size)


def _with_indices(pool):
    def with_indices(*args, **kwargs):
        return pool(*args, **dict(kwargs, return_indices=True))

    with_indices.__name__ = with_indices.__qualname__ = f"{pool.__name__}_with_indices"
    with_indices.__doc__ = f"{pool.__name__} with return_indices=True: (values, indices)."
    return with_indices


FUNCTIONAL = {
    f.__name__: f
    for f in (
        max_pool1d,
        max_pool2d,
        max_pool3d,
        avg_pool1d,
        avg_pool2d,
        avg_pool3d,
        adaptive_avg_pool1d,
        adaptive_avg_pool2d,
        adaptive_avg_pool3d,
        adaptive_max_pool1d,
        adaptive_max_pool2d,
        adaptive_max_pool3d,
        lp_pool1d,
        lp_pool2d,
        lp_pool3d,
        max_unpool1d,
        max_unpool2d,
        max_unpool3d,
    )
}
FUNCTIONAL.update(
    {
        f"{name}_with_indices": _with_indices(FUNCTIONAL[name])
        for name in (
            "max_pool1d",
            "max_pool2d",
            "max_pool3d",
            "adaptive_max_pool1d",
            "adaptive_max_pool2d",
            "adaptive_max_pool3d",
        )
    }
)
# torch's own pooling functions
TORCH = {
    name: FUNCTIONAL[name]
    for name in (
        "max_pool1d",
        "max_pool2d",
        "max_pool3d",
        "avg_pool1d",
        "adaptive_avg_pool1d",
        "max_pool1d_with_indices",
    )
}
TORCH["adaptive_max_pool1d"] = _torch_adaptive_max_pool1d
