"""F.grid_sample and torch's grid_sampler forms against torch 2.13: values and gradients (input and grid) for every
interpolation mode, padding mode and align_corners, in 2-D and 3-D, with grid points inside, outside and exactly on
the borders (and on reflection folds and nearest-rounding ties); double backward; is_grads_batched Jacobians and
vmap; node names; argument errors and the align_corners warning."""

import itertools
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.nn.functional as F
import vmap
from oracle import FLOATS, assert_same, check_op, raises_like_torch, to_numpy, to_torch

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")
# coordinates on the borders (+-1), past them (reflection folds at +-1 and +-3 with align_corners, at -2 / 2.5
# without for a size-4 dim), at the centre and at half-pixel ties of nearest rounding
SPECIAL = (-3.0, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.5, 3.0)


def _fn(m):
    return torch.nn.functional if m is torch else F


def _grid(dims, dtype, seed):
    """A grid of random points in [-1.7, 1.7) followed by every special coordinate in each position."""
    rng = np.random.default_rng(seed)
    special = np.array(SPECIAL)
    points = [rng.uniform(-1.7, 1.7, (12, dims))]
    for d in range(dims):  # each special value along dim d, the others random
        block = rng.uniform(-0.9, 0.9, (len(special), dims))
        block[:, d] = special
        points.append(block)
    corners = np.array(list(itertools.product((-1.0, 1.0), repeat=dims)))
    points = np.concatenate(points + [corners])
    points = np.concatenate([points, points[: (-len(points)) % 4]])  # a multiple of 4 points: (N, ..., 4, dims)
    grid = np.stack([points, rng.permutation(points)])
    shape = (2, -1, 4, dims) if dims == 2 else (2, 2, -1, 4, dims)
    return bg.tensor(grid.reshape(shape), dtype=FLOATS[dtype][0], requires_grad=True)


def _input(dims, dtype, seed):
    shape = (2, 3, 3, 4) if dims == 2 else (2, 2, 3, 2, 4)
    values = np.random.default_rng(seed).standard_normal(shape)
    return bg.tensor(values, dtype=FLOATS[dtype][0], requires_grad=True)


CASES = [
    (dims, mode, padding, aligned)
    for dims in (2, 3)
    for mode in MODES
    for padding in PADDINGS
    for aligned in (False, True)
    if not (dims == 3 and mode == "bicubic")
]
DTYPES = ["float64", pytest.param("float32", marks=pytest.mark.slow)]
# a float32 grid gradient sums up to 16 taps' products, scaled by size / 2: near 0 it keeps ~1e-5 of rounding
TOLERANCES = {"float64": FLOATS["float64"][1], "float32": dict(rtol=1e-4, atol=5e-5)}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("dims", "mode", "padding", "aligned"), CASES)
def test_values_and_gradients_match_torch(dims, mode, padding, aligned, dtype):
    x, grid = _input(dims, dtype, seed=dims), _grid(dims, dtype, seed=dims + 10)
    check_op(
        lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=aligned),
        lambda x, g: torch.nn.functional.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=aligned),
        [x, grid],
        gradgrad=False,
        batched=False,
        **TOLERANCES[dtype],
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dims", "mode", "padding", "aligned"),
    [(2, "bilinear", "zeros", False), (2, "bicubic", "reflection", True), (3, "bilinear", "border", False)],
)
def test_double_backward_matches_torch(dims, mode, padding, aligned):
    x, grid = _input(dims, "float64", seed=1), _grid(dims, "float64", seed=2)
    check_op(
        lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=aligned),
        lambda x, g: torch.nn.functional.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=aligned),
        [x, grid],
        batched=(dims == 2 and mode == "bilinear"),
    )


def test_nearest_double_backward_links_like_torch():
    """Nearest sampling's grid gradient is zeros; differentiating the first gradients again gives zeros for the
    grid and nothing for the input, as torch's."""
    x, grid = _input(2, "float64", seed=3), _grid(2, "float64", seed=4)
    results = []
    for m, (a, g) in ((torch, to_torch([x, grid])), (bg, (x, grid))):
        out = _fn(m).grid_sample(a, g, mode="nearest", align_corners=False)
        gx, gg = m.autograd.grad((out**2).sum(), (a, g), create_graph=True)
        assert gx.requires_grad and gg.requires_grad
        assert gx.grad_fn.name() == "GridSampler2DBackwardBackward0"
        results.append((gg, m.autograd.grad((gx**2).sum() + gg.sum(), (a, g), allow_unused=True)))
    assert_same(results[1], results[0])


def test_is_grads_batched_jacobian_matches_torch():
    x, grid = _input(2, "float64", seed=5), _grid(2, "float64", seed=6)
    jacobians = []
    for m, (a, g) in ((torch, to_torch([x, grid])), (bg, (x, grid))):
        out = _fn(m).grid_sample(a, g, mode="bilinear", padding_mode="reflection", align_corners=False)
        eye = m.eye(out.numel(), dtype=m.float64).reshape((out.numel(),) + tuple(out.shape))
        jacobians.append(m.autograd.grad(out, (a, g), eye, is_grads_batched=True))
    assert_same(jacobians[1], jacobians[0], rtol=1e-12, atol=1e-12)


def test_is_grads_batched_runs_without_fallback_3d():
    x, grid = _input(3, "float64", seed=7), _grid(3, "float64", seed=8)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=True)
    cotangents = bg.tensor(np.random.default_rng(0).standard_normal((3,) + tuple(out.shape)))
    with vmap.fallback_warnings(), warnings.catch_warnings():
        warnings.simplefilter("error", vmap.FallbackWarning)
        batched = bg.autograd.grad(out, (x, grid), cotangents, retain_graph=True, is_grads_batched=True)
    for row in range(3):
        rows = bg.autograd.grad(out, (x, grid), cotangents[row], retain_graph=True)
        for b, r in zip(batched, rows):
            np.testing.assert_allclose(to_numpy(b)[row], to_numpy(r), rtol=1e-12, atol=1e-12)


def test_vmap_over_a_batch_of_images_equals_the_loop():
    rng = np.random.default_rng(9)
    images = bg.tensor(rng.standard_normal((3, 2, 2, 4, 5)))
    grids = bg.tensor(rng.uniform(-1.2, 1.2, (3, 2, 3, 3, 2)))

    def sample(image, grid):
        return F.grid_sample(image, grid, mode="bicubic", padding_mode="border", align_corners=False)

    mapped = bg.vmap(sample)(images, grids)
    expected = np.stack([to_numpy(sample(images[i], grids[i])) for i in range(3)])
    np.testing.assert_allclose(to_numpy(mapped), expected, rtol=1e-12, atol=1e-12)


def test_nearest_rounds_half_to_even():
    # a width of 4 without align_corners: x = -0.5, 0, 0.5 fall on pixel coordinates 0.5, 1.5, 2.5
    image = bg.arange(4.0).reshape(1, 1, 1, 4)
    grid = bg.tensor([[[[-0.5, 0.0], [0.0, 0.0], [0.5, 0.0]]]])
    out = F.grid_sample(image, grid, mode="nearest", align_corners=False)
    assert out.flatten().tolist() == [0.0, 2.0, 2.0]
    expected = torch.nn.functional.grid_sample(to_torch(image), to_torch(grid), mode="nearest", align_corners=False)
    assert_same(out, expected)


def test_torch_namespace_forms_and_node_names():
    x, grid = _input(2, "float64", seed=11), _grid(2, "float64", seed=12)
    x3, grid3 = _input(3, "float64", seed=13), _grid(3, "float64", seed=14)
    t_x, t_grid, t_x3, t_grid3 = to_torch([x, grid, x3, grid3])
    for name, args, t_args in (
        ("grid_sampler", (x, grid, 2, 2, True), (t_x, t_grid, 2, 2, True)),
        ("grid_sampler", (x3, grid3, 1, 1, False), (t_x3, t_grid3, 1, 1, False)),
        ("grid_sampler_2d", (x, grid, 0, 1, False), (t_x, t_grid, 0, 1, False)),
        ("grid_sampler_3d", (x3, grid3, 0, 2, True), (t_x3, t_grid3, 0, 2, True)),
    ):
        out, expected = getattr(bg, name)(*args), getattr(torch, name)(*t_args)
        assert_same(out, expected)
        assert out.grad_fn.name() == expected.grad_fn.name()


def test_half_precision_inputs():
    x, grid = _input(2, "float64", seed=15), _grid(2, "float64", seed=16)
    for dtype in ("float16", "bfloat16"):
        a, g = x.detach().to(getattr(bg, dtype)), grid.detach().to(getattr(bg, dtype))
        t_a, t_g = (t.detach().to(getattr(torch, dtype)) for t in to_torch([x, grid]))
        out = F.grid_sample(a, g, align_corners=False)
        expected = torch.nn.functional.grid_sample(t_a, t_g, align_corners=False)
        assert repr(out.dtype) == repr(expected.dtype)
        assert_same(out.float(), expected.float(), rtol=2e-2, atol=2e-2)


def test_empty_batch_channels_and_points():
    for x_shape, g_shape in (((0, 2, 3, 4), (0, 2, 2, 2)), ((2, 0, 3, 4), (2, 2, 2, 2)), ((2, 2, 3, 4), (2, 0, 5, 2))):
        x, grid = bg.ones(x_shape), bg.zeros(g_shape)
        out = F.grid_sample(x, grid, align_corners=False)
        expected = torch.nn.functional.grid_sample(torch.ones(x_shape), torch.zeros(g_shape), align_corners=False)
        assert_same(out, expected)


def _call(m, x_shape, g_shape, *args, dtypes=("float32", "float32"), **kw):
    x = m.ones(x_shape, dtype=getattr(m, dtypes[0]))
    grid = m.zeros(g_shape, dtype=getattr(m, dtypes[1]))
    return _fn(m).grid_sample(x, grid, *args, **kw)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: _call(m, (2, 3, 4, 5), (2, 6, 7, 2), mode="linear", align_corners=False),
        lambda m: _call(m, (2, 3, 4, 5), (2, 6, 7, 2), padding_mode="zero", align_corners=False),
        lambda m: _call(m, (2, 3, 4, 5), (1, 6, 7, 2), align_corners=False),
        lambda m: _call(m, (2, 3, 4, 5), (2, 6, 7, 3), align_corners=False),
        lambda m: _call(m, (3, 4, 5), (6, 7, 2), align_corners=False),
        lambda m: _call(m, (2, 3, 4), (2, 4, 1), align_corners=False),
        lambda m: _call(m, (2, 3, 0, 5), (2, 6, 7, 2), align_corners=False),
        lambda m: _call(m, (2, 3, 4, 5, 6), (2, 1, 6, 7, 3), mode="bicubic", align_corners=False),
        lambda m: _call(m, (2, 3, 4, 5, 6), (2, 6, 7, 3), align_corners=False),
        lambda m: _call(m, (2, 3, 4, 5), (2, 6, 7, 2), dtypes=("float32", "float64"), align_corners=False),
        lambda m: _call(m, (2, 3, 4, 5), (2, 6, 7, 2), dtypes=("float64", "float32"), align_corners=False),
        lambda m: _call(m, (2, 3, 4, 5), (2, 6, 7, 2), dtypes=("int32", "int32"), align_corners=False),
        lambda m: m.grid_sampler_2d(m.ones(2, 3, 4, 5, 6), m.zeros(2, 1, 6, 7, 3), 0, 0, False),
        lambda m: m.grid_sampler_3d(m.ones(2, 3, 4, 5), m.zeros(2, 6, 7, 2), 0, 0, False),
        lambda m: m.grid_sampler_3d(m.ones(2, 3, 4, 5, 6), m.zeros(2, 1, 6, 7, 3), 2, 0, False),
        lambda m: _fn(m).grid_sample([[1.0]], m.zeros(1, 1, 1, 2), align_corners=False),
    ],
)
def test_errors_match_torch(call):
    raises_like_torch(call)


def test_unknown_mode_numbers_name_the_argument():
    # torch's ATen forms do not check the numbers; here an unknown one is refused
    x, grid = bg.ones(1, 1, 2, 2), bg.zeros(1, 1, 1, 2)
    with pytest.raises(ValueError, match="interpolation_mode .* but got 3"):
        bg.grid_sampler(x, grid, 3, 0, False)
    with pytest.raises(ValueError, match="padding_mode .* but got 5"):
        bg.grid_sampler_2d(x, grid, 0, 5, False)


def test_align_corners_default_warns_as_torch():
    messages = []
    for m in (torch, bg):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = _call(m, (1, 1, 3, 3), (1, 2, 2, 2))
        messages.append([(w.category, str(w.message), w.filename) for w in caught])
        assert tuple(out.shape) == (1, 1, 2, 2)
    assert [m[:2] for m in messages[1]] == [m[:2] for m in messages[0]] and len(messages[0]) == 1
    assert messages[1][0][2] == __file__  # pointed at the caller


def test_node_shows_what_it_saved_as_torch():
    x, grid = _input(2, "float64", seed=17), _grid(2, "float64", seed=18)
    out = F.grid_sample(x, grid, mode="nearest", padding_mode="reflection", align_corners=True)
    expected = torch.nn.functional.grid_sample(*to_torch([x, grid]), "nearest", "reflection", True)
    node, t_node = out.grad_fn, expected.grad_fn
    for name in ("interpolation_mode", "padding_mode", "align_corners"):
        assert getattr(node, f"_saved_{name}") == getattr(t_node, f"_saved_{name}")
    assert_same(node._saved_input, t_node._saved_input)
    assert_same(node._saved_grid, t_node._saved_grid)


@pytest.mark.parametrize("dims", [2, 3])
def test_non_finite_and_huge_points_as_torch(dims):
    """nan, +-inf and +-1e10 coordinates: torch's 2-D kernel clips a nan to 0 and lets a non-finite weight through
    zeros padding; its 3-D kernel clips a nan to the upper border and reads non-finite points as outside."""
    special = [float("nan"), float("inf"), -float("inf"), 1e10, -1e10]
    points = []
    for d in range(dims):
        for v in special:
            p = [0.3] * dims
            p[d] = v
            points.append(p)
    shape = (1, len(points), 1, dims) if dims == 2 else (1, 1, len(points), 1, dims)
    grid = bg.tensor(np.array(points).reshape(shape))
    x = bg.tensor(
        np.arange(1.0, 1 + 3 * 4 * (2 if dims == 3 else 1)).reshape((1, 1) + ((2,) if dims == 3 else ()) + (3, 4))
    )
    for mode in MODES if dims == 2 else MODES[:2]:
        for padding in PADDINGS:
            for aligned in (False, True):
                out = F.grid_sample(x, grid, mode, padding, aligned)
                expected = torch.nn.functional.grid_sample(*to_torch([x, grid]), mode, padding, aligned)
                assert_same(out, expected)
