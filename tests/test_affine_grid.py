"""F.affine_grid and torch.affine_grid_generator against torch 2.13 (values, gradients, node name, errors and
warnings), and a small spatial transformer network in the style of PyTorch's tutorial (localization net ->
affine_grid -> grid_sample -> classifier) trained a few SGD steps alongside torch's, every loss and weight equal."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.nn.functional as F
from oracle import assert_same, check_op, raises_like_torch, to_torch


def _fn(m):
    return torch.nn.functional if m is torch else F


SIZES = [(2, 3, 4, 5), (2, 1, 3, 2, 4), (2, 3, 1, 5), (2, 1, 1, 1, 1), (1, 2, 1, 6)]


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("size", SIZES)
def test_values_and_gradient_match_torch(size, aligned):
    n = len(size) - 2
    theta = bg.tensor(np.random.default_rng(len(size)).standard_normal((size[0], n, n + 1)), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unit-size warning of aligned grids
        check_op(
            lambda t: F.affine_grid(t, size, align_corners=aligned),
            lambda t: torch.nn.functional.affine_grid(t, size, align_corners=aligned),
            [theta],
            rtol=1e-12,
            atol=1e-12,
        )


def test_float32_and_the_aten_form():
    theta = bg.tensor(np.random.default_rng(0).standard_normal((2, 2, 3)), dtype=bg.float32, requires_grad=True)
    for call in (
        lambda m, t: _fn(m).affine_grid(t, (2, 3, 4, 5), align_corners=False),
        lambda m, t: m.affine_grid_generator(t, [2, 3, 4, 5], True),
    ):
        out, expected = call(bg, theta), call(torch, to_torch(theta))
        assert_same(out, expected, rtol=1e-6, atol=1e-6)
        assert out.grad_fn.name() == expected.grad_fn.name() == "AffineGridGeneratorBackward0"


@pytest.mark.parametrize(
    "call",
    [
        lambda m: _fn(m).affine_grid(m.zeros(2, 2, 3, dtype=m.int32), (2, 3, 4, 5), align_corners=False),
        lambda m: _fn(m).affine_grid(m.zeros(2, 2, 3), (2, 3, 4, 5, 6), align_corners=False),
        lambda m: _fn(m).affine_grid(m.zeros(2, 3, 4), (2, 3, 4, 5), align_corners=False),
        lambda m: _fn(m).affine_grid(m.zeros(2, 3), [2, 3, 4, 5], align_corners=False),
        lambda m: _fn(m).affine_grid(m.zeros(2, 2, 3), (2, 3, 4), align_corners=False),
        lambda m: _fn(m).affine_grid(m.zeros(2, 2, 3), (2, 3, 0, 5), align_corners=True),
        lambda m: _fn(m).affine_grid(m.zeros(2, 2, 3), (2, 3, 0, 5), align_corners=False),
        lambda m: _fn(m).affine_grid(m.zeros(2, 2, 3), (3, 3, 4, 5), align_corners=False),
        lambda m: m.affine_grid_generator(m.zeros(2, 2, 3), [3, 3, 4, 5], False),
        lambda m: m.affine_grid_generator(m.zeros(2, 2, 3), [2, 3, 4], False),
    ],
)
def test_errors_match_torch(call):
    raises_like_torch(call)


def _warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [(w.category, str(w.message), w.filename) for w in caught]


def test_warnings_match_torch():
    for call in (
        lambda m: _fn(m).affine_grid(m.zeros(1, 2, 3), (1, 1, 2, 2)),  # align_corners not given
        lambda m: _fn(m).affine_grid(m.zeros(1, 2, 3), (1, 1, 1, 2), align_corners=True),  # a unit-size grid
        lambda m: _fn(m).affine_grid(m.zeros(1, 3, 4), (1, 1, 2, 1, 2), align_corners=True),
    ):
        got, expected = _warnings_of(lambda: call(bg)), _warnings_of(lambda: call(torch))
        assert len(expected) == 1 and [w[:2] for w in got] == [w[:2] for w in expected]
        assert got[0][2] == __file__  # pointed at the caller


# ---- a spatial transformer network, trained alongside torch's ---------------------------------------------------
def _network(m):
    nn = m.nn

    class SpatialTransformerNet(nn.Module):
        """The tutorial's shape, shrunk: a localization net regresses an affine map (starting at the identity),
        the input is resampled through it and classified."""

        def __init__(self):
            super().__init__()
            self.localization = nn.Sequential(
                nn.Conv2d(1, 4, kernel_size=3), nn.MaxPool2d(2, stride=2), nn.ReLU(True), nn.Conv2d(4, 6, 3), nn.ReLU()
            )
            self.fc_loc = nn.Sequential(nn.Linear(6 * 3 * 3, 8), nn.ReLU(True), nn.Linear(8, 3 * 2))
            self.conv = nn.Conv2d(1, 5, kernel_size=3)
            self.fc = nn.Linear(5 * 5 * 5, 3)

        def stn(self, x):
            xs = self.localization(x).view(-1, 6 * 3 * 3)
            theta = self.fc_loc(xs).view(-1, 2, 3)
            grid = _fn(m).affine_grid(theta, x.size(), align_corners=False)
            return _fn(m).grid_sample(x, grid, align_corners=False)

        def forward(self, x):
            x = self.stn(x)
            x = _fn(m).relu(_fn(m).max_pool2d(self.conv(x), 2))
            return _fn(m).log_softmax(self.fc(x.view(-1, 5 * 5 * 5)), dim=1)

    return SpatialTransformerNet()


def _same_start(net, t_net):
    """The torch net's initial weights copied into `net`; the affine map starts near the identity, as the
    tutorial's (at the identity itself every grid point sits on a pixel centre, where bilinear sampling's grid
    gradient is one-sided and float32 rounding of the base grid picks the side)."""
    with torch.no_grad():
        t_net.fc_loc[2].weight.zero_()
        t_net.fc_loc[2].bias.copy_(torch.tensor([0.9, 0.05, 0.02, -0.03, 1.1, -0.01], dtype=torch.float))
    with bg.no_grad():
        for (name, p), (t_name, t_p) in zip(net.named_parameters(), t_net.named_parameters(), strict=True):
            assert name == t_name
            p.copy_(bg.tensor(t_p.detach().numpy()))


@pytest.mark.slow
def test_spatial_transformer_training_matches_torch():
    torch.manual_seed(0)
    net, t_net = _network(bg), _network(torch)
    _same_start(net, t_net)
    rng = np.random.default_rng(0)
    images = rng.standard_normal((6, 4, 1, 12, 12)).astype(np.float32)
    labels = rng.integers(0, 3, (6, 4))
    optimizer = bg.optim.SGD(net.parameters(), lr=0.05, momentum=0.5)
    t_optimizer = torch.optim.SGD(t_net.parameters(), lr=0.05, momentum=0.5)
    for step in range(len(images)):
        losses = []
        for m, model, opt in ((bg, net, optimizer), (torch, t_net, t_optimizer)):
            opt.zero_grad()
            loss = _fn(m).nll_loss(model(m.tensor(images[step])), m.tensor(labels[step]))
            loss.backward()
            opt.step()
            losses.append(loss)
        assert_same(losses[0], losses[1].detach(), rtol=1e-5, atol=1e-6)
        for (name, p), (_, t_p) in zip(net.named_parameters(), t_net.named_parameters()):
            assert_same(p.detach(), t_p.detach(), rtol=1e-4, atol=1e-5), name
    # the affine map has moved away from the identity: the grid's gradient reached the localization net
    assert float(net.fc_loc[2].weight.detach().abs().sum()) > 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_base_grid_rounds_as_torchs_so_sampling_gradients_take_its_side(dtype, align_corners):
    """affine_grid's base coordinates are torch's linspace, scaled in theta's dtype: the grid equals torch's bit for
    bit, so points on pixel centres take the same one-sided derivative in grid_sample."""

    def run(m):
        theta = m.tensor([[[1.0, 0.0, 0.2], [0.0, 1.0, 0.0]]] * 2, dtype=getattr(m, dtype), requires_grad=True)
        image = m.tensor(np.random.default_rng(0).standard_normal((2, 1, 6, 7)), dtype=getattr(m, dtype))
        grid = m.nn.functional.affine_grid(theta, (2, 1, 6, 7), align_corners=align_corners)
        out = m.nn.functional.grid_sample(image, grid, align_corners=align_corners)
        (out * m.arange(out.numel(), dtype=out.dtype).view(out.shape)).sum().backward()
        return grid.detach(), theta.grad

    (grid, grad), (want_grid, want_grad) = run(bg), run(torch)
    np.testing.assert_array_equal(grid.numpy(), want_grid.numpy())
    assert_same(grad, want_grad, rtol=1e-5 if dtype == "float32" else 1e-10)
