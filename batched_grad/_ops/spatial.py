"""Spatial transformer sampling: F.affine_grid (torch.affine_grid_generator), a batch of affine maps applied to a
base grid of normalized coordinates, and F.grid_sample (torch.grid_sampler, grid_sampler_2d, grid_sampler_3d), the
input read at the grid's points with ATen's GridSampler semantics: a point in [-1, 1] unnormalized to pixel
coordinates (by align_corners), moved inside by the padding mode (zeros, border, reflection) and read by the
interpolation mode (bilinear, nearest, bicubic). Each is one pure-JAX op, so its gradients (input and grid), double
backward and vectorized (is_grads_batched, vmap) forms are JAX's."""

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .._autocast import autocast_policy, wrapped_stacklevel
from .._dtypes import not_implemented
from .._factories import linspace_values
from ._core import Op, apply
from ._fused_backward import FUSED
from .nn import _check_tensor

_MODES = ("bilinear", "nearest", "bicubic")  # torch's enum values, in order
_PADDINGS = ("zeros", "border", "reflection")
_CUBIC_A = -0.75
_ALIGN_CORNERS_DEFAULT = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. Please specify "
    "align_corners=True if the old behavior is desired. See the documentation of grid_sample for details."
)
_UNIT_SIZE_ALIGNED = (
    "Since version 1.3.0, affine_grid behavior has changed for unit-size grids when align_corners=True. This is not "
    "an intended use case of affine_grid. See the documentation of affine_grid for details."
)


# ---- grid_sample --------------------------------------------------------------------------------------------------
def _unnormalize(g, size, align_corners, dims):
    """[-1, 1] to pixel coordinates: the corner pixels' centres (align_corners) or their outer edges. Written as
    ATen's kernels round it: its 2-D kernel scales g + 1, its 3-D one the other way round."""
    if dims == 2:
        return (g + 1) * ((size - 1) / 2) if align_corners else (g + 1) * (size / 2) - 0.5
    if align_corners:
        return (g + 1) / 2 * (size - 1)
    return ((g + 1) * size - 1) / 2


def _clip(c, size, dims):
    # ATen's derivative: the borders count as outside, where it is 0. A nan goes to 0 in its 2-D kernel, to the
    # upper border in its 3-D one.
    zero, high = jnp.zeros_like(c), jnp.full_like(c, size - 1)
    if dims == 2:
        return jnp.where(c > 0, jnp.where(c < size - 1, c, high), zero)
    return jnp.where(c <= 0, zero, jnp.where(c < size - 1, c, high))


def _reflect(c, twice_low, twice_high):
    """c reflected about the bounds twice_low / 2 and twice_high / 2 until inside, with ATen's derivative (+-1 by
    the parity of the reflections, and the sign of c - low taken as + at 0)."""
    if twice_low == twice_high:
        return c * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    c = c - low
    c = c * jnp.where(c < 0, -1, 1).astype(c.dtype)
    extra = jnp.fmod(c, span)
    even = jnp.fmod(jnp.floor(c / span), 2) == 0
    return jnp.where(even, extra + low, span - extra + low)


def _padded(c, size, padding_mode, align_corners, dims):
    """A pixel coordinate moved inside [0, size - 1] as the padding mode does (zeros leaves it: reads outside are 0)."""
    if padding_mode == "border":
        return _clip(c, size, dims)
    if padding_mode == "reflection":
        bounds = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        return _clip(_reflect(c, *bounds), size, dims)
    return c


def _cubic_coefficients(t):
    """The cubic convolution weights (A = -0.75) of the 4 taps at floor(x) - 1 .. floor(x) + 2, t = x - floor(x)."""

    def near(x):
        return ((_CUBIC_A + 2) * x - (_CUBIC_A + 3)) * x * x + 1

    def far(x):
        return ((_CUBIC_A * x - 5 * _CUBIC_A) * x + 8 * _CUBIC_A) * x - 4 * _CUBIC_A

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(g, size, mode, padding_mode, align_corners, dims):
    """The points one spatial dim reads for grid coordinates g: a list of (position, weight), positions being
    integer-valued floats (possibly outside [0, size - 1], where the read is 0)."""
    c = _unnormalize(g, size, align_corners, dims)
    if mode == "bicubic":  # the taps are padded, not the point
        low = jnp.floor(c)
        weights = _cubic_coefficients(c - low)
        return [(_padded(low - 1 + k, size, padding_mode, align_corners, dims), w) for k, w in enumerate(weights)]
    c = _padded(c, size, padding_mode, align_corners, dims)
    if dims == 3:  # ATen's 3-D kernel reads a non-finite or int-overflowing coordinate as -100 (outside)
        c = jnp.where(jnp.isfinite(c) & (jnp.abs(c) < 2.0**31), c, jnp.full_like(c, -100))
    if mode == "nearest":
        return [(jnp.round(c), jnp.ones_like(c))]  # half to even, as nearbyint
    low = jnp.floor(c)
    return [(low, low + 1 - c), (low + 1, c - low)]


def _grid_sample(input, grid, *, interpolation_mode, padding_mode, align_corners):
    """input (N, C, *spatial) read at grid (N, *out, n), whose last axis holds (x, y[, z]): the coordinate of the
    last spatial dim first. The modes are torch's enum values."""
    mode, padding_mode = _MODES[interpolation_mode], _PADDINGS[padding_mode]
    dtype = input.dtype
    if dtype in (jnp.float16, jnp.bfloat16):  # coordinates and sums in float32, the result rounded once
        input, grid = input.astype(jnp.float32), grid.astype(jnp.float32)
    n, (batch, channels), spatial = grid.shape[-1], input.shape[:2], input.shape[2:]
    out_spatial = grid.shape[1:-1]
    points = int(np.prod(out_spatial))
    flat = input.reshape(batch, channels, int(np.prod(spatial)))
    per_dim = [
        _taps(grid[..., n - 1 - d].reshape(batch, points), size, mode, padding_mode, align_corners, n)
        for d, size in enumerate(spatial)
    ]
    out = jnp.zeros((batch, channels, points), input.dtype)
    for corner in itertools.product(*per_dim):
        weight, index, inside = 1, 0, True
        for (position, w), size in zip(corner, spatial):
            weight = weight * w
            inside = inside & (position >= 0) & (position <= size - 1)
            index = index * size + jnp.where(inside, position, 0).astype(jnp.int32)  # 0 where unread (or nan)
        values = jax.vmap(lambda a, i: a[:, i])(flat, index)
        out = out + weight[:, None, :] * jnp.where(inside[:, None, :], values, 0)
    return out.reshape((batch, channels) + out_spatial).astype(dtype)


def _sampler_backward_name(sig):
    return f"GridSampler{sig.avals[1][0][-1]}DBackward0"  # the grid's last dim: 2 or 3


# torch's backward is one kernel (grid_sampler_2d_backward) reading the input, the grid and the cotangent: a recorded
# gradient links to them all
_GRID_SAMPLER = Op(
    "grid_sampler",
    _grid_sample,
    backward_name=_sampler_backward_name,
    fused=FUSED,
    saved_names=("input", "grid"),
    saved_static=("interpolation_mode", "padding_mode", "align_corners"),
)


def _sizes(t):
    return list(t.shape)


def _check_sampler(input, grid, interpolation_mode, padding_mode, dims=None):
    """ATen's checks of grid_sampler's arguments (check_grid_sampler_common, then the 2-D or 3-D one by the input's
    rank, or by `dims` for grid_sampler_2d / grid_sampler_3d)."""
    for name, value, choices in (
        ("interpolation_mode", interpolation_mode, _MODES),
        ("padding_mode", padding_mode, _PADDINGS),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < len(choices):
            options = ", ".join(f"{k} ({c})" for k, c in enumerate(choices))
            raise ValueError(f"grid_sampler(): expected {name} to be one of {options}, but got {value!r}")
    if input.ndim == 0 or grid.ndim == 0 or input.shape[0] != grid.shape[0]:
        raise RuntimeError(
            f"grid_sampler(): expected grid and input to have same batch size, but got input with sizes "
            f"{_sizes(input)} and grid with sizes {_sizes(grid)}"
        )
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError(
            f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, but got grid with sizes "
            f"{_sizes(grid)}"
        )
    for d in range(2, input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(
                f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes "
                f"{_sizes(input)} with dimension {d} being empty"
            )
    dims = dims or (2 if input.ndim == 4 else 3)
    if input.ndim != dims + 2 or grid.ndim != input.ndim:
        raise RuntimeError(
            f"grid_sampler(): expected {dims + 2}D input and grid with same number of dimensions, but got input "
            f"with sizes {_sizes(input)} and grid with sizes {_sizes(grid)}"
        )
    if dims == 3 and _MODES[interpolation_mode] == "bicubic":
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    kernel = f"grid_sampler_{dims}d_cpu"
    if not input.dtype.is_floating_point:
        raise not_implemented(kernel + "_kernel_impl" if dims == 2 else kernel, input.dtype)
    if grid.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {input.dtype.type_name} but found {grid.dtype.type_name}")


def _sample(input, grid, interpolation_mode, padding_mode, align_corners, dims=None):
    _check_tensor("grid_sampler", "input", input)
    _check_tensor("grid_sampler", "grid", grid, 2)
    _check_sampler(input, grid, interpolation_mode, padding_mode, dims)
    return apply(
        _GRID_SAMPLER,
        [input, grid],
        interpolation_mode=int(interpolation_mode),
        padding_mode=int(padding_mode),
        align_corners=bool(align_corners),
    )


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """ATen's grid_sampler: grid_sample with the modes as torch's enum values (interpolation 0 bilinear, 1 nearest,
    2 bicubic; padding 0 zeros, 1 border, 2 reflection)."""
    return _sample(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler for a 4-D input and grid."""
    return _sample(input, grid, interpolation_mode, padding_mode, align_corners, dims=2)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler for a 5-D input and grid."""
    return _sample(input, grid, interpolation_mode, padding_mode, align_corners, dims=3)


@autocast_policy("fp32")
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """The input (N, C, H, W) or (N, C, D, H, W) read at the grid's points (N, H_out, W_out, 2) or
    (N, D_out, H_out, W_out, 3), given as (x, y[, z]) in [-1, 1] (further out, the padding mode decides)."""
    if mode not in _MODES:
        raise ValueError(
            f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '{mode}'"
        )
    if padding_mode not in _PADDINGS:
        raise ValueError(
            "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', "
            f"but got: '{padding_mode}'"
        )
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_DEFAULT, UserWarning, stacklevel=wrapped_stacklevel(2))
        align_corners = False
    return grid_sampler(input, grid, _MODES.index(mode), _PADDINGS.index(padding_mode), align_corners)


# ---- affine_grid --------------------------------------------------------------------------------------------------
def _base_coordinates(steps, align_corners, work):
    """The normalized coordinates of `steps` pixel centres: -1 .. 1, or the centres of equal cells when not aligned
    to the corners; 0 for one pixel. Rounded as torch's: its linspace, scaled by steps - 1 then divided by steps,
    in the NumPy float type `work` (theta's)."""
    if steps <= 1:
        return np.zeros(max(steps, 0), work)
    line = linspace_values(-1.0, 1.0, steps, work)
    return line if align_corners else line * work(steps - 1) / work(steps)


def _affine_grid(theta, *, spatial, align_corners):
    """theta (N, n, n + 1) applied to the homogeneous base grid (*spatial, n + 1), whose last axis holds
    (x, y[, z], 1): (N, *spatial, n)."""
    work = np.float64 if theta.dtype == jnp.float64 else np.float32
    lines = [_base_coordinates(s, align_corners, work) for s in reversed(spatial)]  # x first: the last dim's
    points = list(np.meshgrid(*lines[::-1], indexing="ij"))[::-1]
    base = np.stack(points + [np.ones(spatial)], -1).astype(theta.dtype)
    return jnp.einsum("...k,njk->n...j", jnp.asarray(base), theta)


_AFFINE_GRID = Op(
    "affine_grid_generator",
    _affine_grid,
    linear=True,
    backward_name="AffineGridGeneratorBackward0",
    saved_names=(),
    saved_static=("align_corners",),
)


def affine_grid_generator(theta, size, align_corners):
    """ATen's affine_grid_generator: the sampling grid (N, *spatial, n) of the affine maps theta (N, n, n + 1) for
    an output of `size` (N, C, *spatial)."""
    _check_tensor("affine_grid_generator", "theta", theta)
    size = [int(s) for s in size]
    if len(size) not in (4, 5):
        raise RuntimeError("AffineGridGenerator needs 4d (spatial) or 5d (volumetric) inputs.")
    n = len(size) - 2
    if theta.ndim != 3:
        raise RuntimeError(f"affine_grid_generator: expected a 3-D theta (N, {n}, {n + 1}), but got {_sizes(theta)}")
    if theta.shape[0] != size[0] or theta.shape[2] != n + 1:  # torch's bmm of the base grid with theta refuses it
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{size[0]}, {n + 1}] but got: "
            f"[{theta.shape[0]}, {theta.shape[2]}]."
        )
    if theta.shape[1] != n:
        raise RuntimeError(
            f"affine_grid_generator: expected theta of shape {[size[0], n, n + 1]}, but got {_sizes(theta)}"
        )
    if not theta.dtype.is_floating_point:
        raise not_implemented("bmm", theta.dtype)
    return apply(_AFFINE_GRID, [theta], spatial=tuple(size[2:]), align_corners=bool(align_corners))


def affine_grid(theta, size, align_corners=None):
    """The sampling grid for grid_sample of a batch of affine maps theta (N, 2, 3) or (N, 3, 4), for an output of
    `size` (N, C, H, W) or (N, C, D, H, W): each output pixel's normalized coordinates mapped by theta."""
    _check_tensor("affine_grid", "theta", theta)
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_DEFAULT, UserWarning, stacklevel=2)
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    if len(size) == 4:
        if theta.ndim != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(
                f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got {theta.shape}."
            )
    elif len(size) == 5:
        if theta.ndim != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(
                f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got {theta.shape}."
            )
    else:
        raise NotImplementedError(
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, respectively. "
            f"Got size {size}."
        )
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn(_UNIT_SIZE_ALIGNED, UserWarning, stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    return affine_grid_generator(theta, size, align_corners)


FUNCTIONAL = {f.__name__: f for f in (grid_sample, affine_grid)}
TORCH = {f.__name__: f for f in (grid_sampler, grid_sampler_2d, grid_sampler_3d, affine_grid_generator)}
