"""The layer ops and modules beyond Linear/Conv2d/LayerNorm/BatchNorm1d against torch 2.13: conv3d and transposed
convolutions, group/instance/rms/local response norms, pixel and channel shuffles, unfold/fold, bilinear,
interpolate, scaled_dot_product_attention, the dropouts' distributions, and the modules' outputs, parameters and
reprs."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.nn as nn
import batched_grad.nn.functional as F
from oracle import FLOAT_TIERS, FLOATS, assert_same, check_both, raises_like_torch, to_torch


def _f(m):
    return torch.nn.functional if m is torch else F


def leaf(dtype, *shape, seed=0, low=-1.0, high=1.0):
    a = np.random.default_rng(seed).uniform(low, high, shape)
    return bg.tensor(a, dtype=FLOATS[dtype][0], requires_grad=True)


CALLS = {  # name: (call of (F, x, w), x shape, w shape)
    "conv3d": (lambda F, x, w: F.conv3d(x, w, stride=(1, 2, 1), padding=1), (2, 2, 4, 5, 4), (3, 2, 2, 3, 2)),
    "conv_transpose1d": (
        lambda F, x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1),
        (2, 4, 6),
        (4, 3, 3),
    ),
    "conv_transpose2d": (
        lambda F, x, w: F.conv_transpose2d(x, w, w[0, :, 0, 0] * 0 + 0.1, (2, 3), (0, 1), (1, 0), dilation=(1, 2)),
        (2, 4, 5, 6),
        (4, 3, 3, 2),
    ),
    "conv_transpose2d-groups": (
        lambda F, x, w: F.conv_transpose2d(x, w, groups=2, dilation=2),
        (2, 4, 5, 6),
        (4, 2, 3, 2),
    ),
    "conv_transpose3d": (lambda F, x, w: F.conv_transpose3d(x, w, stride=2), (1, 4, 3, 2, 3), (4, 2, 2, 2, 2)),
    "group_norm": (lambda F, x, w: F.group_norm(x, 2, w[0, :4, 0, 0], w[1, :4, 0, 0]), (3, 4, 5, 2), (2, 4, 1, 1)),
    "group_norm-plain": (lambda F, x, w: F.group_norm(x, 4), (3, 4, 5), (1,)),
    "instance_norm": (lambda F, x, w: F.instance_norm(x), (3, 4, 5, 2), (1,)),
    "instance_norm-affine": (lambda F, x, w: F.instance_norm(x, weight=w[0], bias=w[1]), (3, 4, 6), (2, 4)),
    "rms_norm": (lambda F, x, w: F.rms_norm(x, (5,), w[0]), (3, 4, 5), (2, 5)),
    "rms_norm-eps": (lambda F, x, w: F.rms_norm(x, (4, 5), eps=0.1), (3, 4, 5), (1,)),
    "local_response_norm": (lambda F, x, w: F.local_response_norm(x, 3), (2, 5, 4, 3), (1,)),
    "local_response_norm-3d": (lambda F, x, w: F.local_response_norm(x, 2, 0.1, 0.5, 2.0), (2, 5, 4), (1,)),
    "local_response_norm-5d": (lambda F, x, w: F.local_response_norm(x, 4), (2, 5, 3, 2, 2), (1,)),
    "pixel_shuffle": (lambda F, x, w: F.pixel_shuffle(x, 2), (2, 8, 3, 4), (1,)),
    "pixel_unshuffle": (lambda F, x, w: F.pixel_unshuffle(x, 2), (3, 4, 6), (1,)),
    "channel_shuffle": (lambda F, x, w: F.channel_shuffle(x, 3), (2, 6, 3), (1,)),
    "unfold": (lambda F, x, w: F.unfold(x, (2, 3), 1, 1, (2, 1)), (2, 3, 5, 6), (1,)),
    "fold": (lambda F, x, w: F.fold(x, (4, 5), 2), (2, 12, 12), (1,)),
    "fold-geometry": (lambda F, x, w: F.fold(x, (5, 5), (2, 3), 1, 1, 2), (3 * 6, 9), (1,)),
    "bilinear": (lambda F, x, w: F.bilinear(x, x[..., :3] * 2, w, w[:, 0, 0]), (2, 5, 4), (6, 4, 3)),
    "bilinear-nobias": (lambda F, x, w: F.bilinear(x, x, w), (5, 3), (2, 3, 3)),
    "interpolate-nearest": (lambda F, x, w: F.interpolate(x, scale_factor=2.5), (2, 3, 4, 5), (1,)),
    "interpolate-nearest-size": (lambda F, x, w: F.interpolate(x, size=(3, 7)), (2, 3, 4, 5), (1,)),
    "interpolate-nearest-exact": (lambda F, x, w: F.interpolate(x, size=7, mode="nearest-exact"), (2, 3, 5), (1,)),
    "interpolate-linear": (lambda F, x, w: F.interpolate(x, size=9, mode="linear"), (2, 3, 5), (1,)),
    "interpolate-linear-align": (
        lambda F, x, w: F.interpolate(x, scale_factor=1.5, mode="linear", align_corners=True),
        (2, 3, 5),
        (1,),
    ),
    "interpolate-bilinear": (lambda F, x, w: F.interpolate(x, size=(5, 3), mode="bilinear"), (2, 3, 4, 6), (1,)),
    "interpolate-bilinear-scale": (
        lambda F, x, w: F.interpolate(x, scale_factor=(1.7, 0.6), mode="bilinear"),
        (2, 3, 4, 6),
        (1,),
    ),
    "interpolate-bilinear-recompute": (
        lambda F, x, w: F.interpolate(x, scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
        (2, 3, 4, 6),
        (1,),
    ),
    "interpolate-bicubic": (lambda F, x, w: F.interpolate(x, size=(7, 4), mode="bicubic"), (2, 3, 4, 6), (1,)),
    "interpolate-bicubic-align": (
        lambda F, x, w: F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=True),
        (1, 2, 3, 4),
        (1,),
    ),
    "interpolate-trilinear": (
        lambda F, x, w: F.interpolate(x, size=(3, 5, 2), mode="trilinear"),
        (1, 2, 4, 3, 3),
        (1,),
    ),
    "interpolate-area": (lambda F, x, w: F.interpolate(x, size=(3, 4), mode="area"), (2, 3, 7, 9), (1,)),
    "interpolate-nearest-3d": (lambda F, x, w: F.interpolate(x, scale_factor=(2, 1, 3)), (1, 2, 2, 3, 2), (1,)),
    "interpolate-bilinear-antialias": (
        lambda F, x, w: F.interpolate(x, size=(3, 7), mode="bilinear", antialias=True),
        (2, 3, 9, 5),
        (1,),
    ),
    "interpolate-bicubic-antialias-align": (
        lambda F, x, w: F.interpolate(x, scale_factor=(0.4, 1.5), mode="bicubic", align_corners=True, antialias=True),
        (1, 2, 11, 4),
        (1,),
    ),
    "interpolate-lanczos": (
        lambda F, x, w: F.interpolate(x, size=(4, 2), mode="lanczos", antialias=True),
        (1, 2, 10, 9),
        (1,),
    ),
    "sdpa": (lambda F, x, w: F.scaled_dot_product_attention(x, x * 0.5, x + 1), (2, 3, 5, 4), (1,)),
    "sdpa-causal": (
        lambda F, x, w: F.scaled_dot_product_attention(x, x[..., :3, :], x[..., :3, :], is_causal=True, scale=0.3),
        (2, 3, 5, 4),
        (1,),
    ),
    "sdpa-bool-mask": (
        lambda F, x, w: F.scaled_dot_product_attention(x, x, x, attn_mask=x[0, 0, :, :1] > -0.5),
        (2, 3, 5, 4),
        (1,),
    ),
    "sdpa-float-mask": (lambda F, x, w: F.scaled_dot_product_attention(x, x, x, attn_mask=w), (2, 3, 5, 4), (5, 5)),
    "sdpa-gqa": (
        lambda F, x, w: F.scaled_dot_product_attention(x, x[:, :2], x[:, 2:], enable_gqa=True),
        (2, 4, 5, 3),
        (1,),
    ),
    "sdpa-3d": (lambda F, x, w: F.scaled_dot_product_attention(x, x * 2, x), (3, 5, 4), (1,)),
    "sdpa-2d": (lambda F, x, w: F.scaled_dot_product_attention(x, x, x, is_causal=True), (5, 4), (1,)),
    "sdpa-value-dim": (lambda F, x, w: F.scaled_dot_product_attention(x, x, x[..., :2]), (2, 3, 5, 4), (1,)),
}


@pytest.mark.parametrize(("dtype", "batched"), FLOAT_TIERS)
@pytest.mark.parametrize("name", CALLS)
def test_values_and_derivatives(name, dtype, batched):
    call, xs, ws = CALLS[name]
    tol = dict(FLOATS[dtype][1]) if dtype == "float64" else dict(rtol=5e-4, atol=5e-5)
    check_both(
        lambda m, x, w: call(_f(m), x, w),
        [leaf(dtype, *xs), leaf(dtype, *ws, seed=1)],
        batched=batched,
        gradgrad=name not in FLASH,
        **tol,
    )


# the calls torch's CPU flash-attention kernel serves (no double backward); the others compose differentiable ops
FLASH = {"sdpa", "sdpa-causal", "sdpa-bool-mask", "sdpa-gqa"}


def test_sdpa_has_no_double_backward():
    def double_backward(m):
        q = m.tensor(np.random.default_rng(0).uniform(-1, 1, (2, 2, 3, 4)), requires_grad=True)
        (g,) = m.autograd.grad(m.nn.functional.scaled_dot_product_attention(q, q, q).sum(), q, create_graph=True)
        m.autograd.grad(g.sum(), q)

    raises_like_torch(double_backward)


@pytest.mark.parametrize("name", CALLS)
def test_node_names(name):
    call, xs, ws = CALLS[name]
    x, w = leaf("float64", *xs), leaf("float64", *ws, seed=1)
    assert call(F, x, w).grad_fn.name() == call(torch.nn.functional, *to_torch([x, w])).grad_fn.name()


def test_instance_norm_running_statistics():
    x = leaf("float64", 3, 4, 5)
    means, variances = [bg.zeros(4, dtype=bg.float64), bg.ones(4, dtype=bg.float64)], []
    tm, tv = torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)
    out = F.instance_norm(x, means[0], means[1], momentum=0.3)
    want = torch.nn.functional.instance_norm(to_torch(x), tm, tv, momentum=0.3)
    assert_same(out, want)
    assert_same((means[0], means[1]), (tm, tv))
    assert_same(
        F.instance_norm(x, means[0], means[1], use_input_stats=False),
        torch.nn.functional.instance_norm(to_torch(x), tm, tv, use_input_stats=False),
    )
    del variances


@pytest.mark.parametrize(
    "call",
    [
        lambda F, m: F.group_norm(m.ones(2, 3, 4), 2),
        lambda F, m: F.conv_transpose2d(m.ones(1, 2, 3, 3), m.ones(3, 2, 2, 2)),
        lambda F, m: F.conv_transpose2d(m.ones(1, 2, 3, 3), m.ones(2, 2, 2, 2), stride=1, output_padding=1),
        lambda F, m: F.pixel_shuffle(m.ones(2, 3, 4, 4), 2),
        lambda F, m: F.pixel_unshuffle(m.ones(2, 3, 5, 4), 2),
        lambda F, m: F.channel_shuffle(m.ones(2, 5, 3), 2),
        lambda F, m: F.fold(m.ones(2, 5, 4), (3, 3), 2),
        lambda F, m: F.fold(m.ones(2, 8, 3), (3, 3), 2),
        lambda F, m: F.bilinear(m.ones(2, 3), m.ones(2, 4), m.ones(5, 3, 3)),
        lambda F, m: F.interpolate(m.ones(1, 2, 3), scale_factor=2, mode="bilinear"),
        lambda F, m: F.interpolate(m.ones(1, 2, 3), size=4, scale_factor=2),
        lambda F, m: F.interpolate(m.ones(1, 2, 3), size=4, mode="nearest", align_corners=True),
        lambda F, m: F.interpolate(m.ones(1, 2, 3)),
        lambda F, m: F.interpolate(m.ones(1, 2, 3, 3), size=(2, 3, 4)),
        lambda F, m: F.interpolate(m.ones(1, 2, 3, 3), size=2, mode="nearest", antialias=True),
        lambda F, m: F.interpolate(m.ones(1, 2, 3), size=2, mode="linear", antialias=True),
        lambda F, m: F.interpolate(m.ones(1, 2, 3, 3), size=2, mode="lanczos"),
        lambda F, m: F.interpolate(m.ones(1, 2, 3, 3), size=2, mode="lanczos", antialias=True, align_corners=True),
        lambda F, m: F.interpolate(m.ones(1, 2, 3), size=2, mode="lanczos"),
        lambda F, m: F.scaled_dot_product_attention(
            m.ones(2, 3), m.ones(2, 3), m.ones(2, 3), attn_mask=m.ones(2, 2, dtype=m.bool), is_causal=True
        ),
        lambda F, m: F.rms_norm(m.ones(2, 3), (4,)),
        lambda F, m: F.local_response_norm(m.ones(2, 3), 2),
        lambda F, m: F.dropout1d(m.ones(2, 3, 4, 5)),
        lambda F, m: F.alpha_dropout(m.ones(2), 1.5),
    ],
    ids=[
        "group-channels",
        "transpose-channels",
        "output-padding",
        "shuffle-channels",
        "unshuffle-height",
        "channel-shuffle",
        "fold-kernel",
        "fold-blocks",
        "bilinear-size",
        "interpolate-mode-dims",
        "interpolate-both",
        "interpolate-align",
        "interpolate-neither",
        "interpolate-size-dims",
        "antialias-mode",
        "antialias-dims",
        "lanczos-needs-antialias",
        "lanczos-align",
        "lanczos-dims",
        "sdpa-causal-mask",
        "rms-shape",
        "lrn-dims",
        "dropout1d-dims",
        "alpha-p",
    ],
)
def test_errors(call):
    raises_like_torch(lambda m: call(_f(m), m))


@pytest.mark.parametrize(
    "fn,shape,per_channel",
    [
        ("dropout1d", (20, 30, 4), True),
        ("dropout2d", (20, 30, 3, 2), True),
        ("dropout3d", (20, 30, 2, 2, 2), True),
        ("dropout3d", (30, 2, 2, 2), True),
        ("alpha_dropout", (40, 50), False),
        ("feature_alpha_dropout", (30, 40, 3), True),
    ],
)
def test_dropout_distributions(fn, shape, per_channel):
    bg.manual_seed(1)
    x = bg.tensor(np.random.default_rng(0).uniform(0.5, 1.5, shape), requires_grad=True)
    kwargs = {"training": True}
    y = getattr(F, fn)(x, 0.3, **kwargs)
    ratio = (y / x).detach().numpy()
    if fn.startswith("dropout"):
        assert set(np.round(np.unique(ratio), 6)) <= {0.0, round(1 / 0.7, 6)}
        dropped = ratio == 0
    else:
        alpha = 1.7580993408473766
        a = 1 / np.sqrt((alpha**2 * 0.3 + 1) * 0.7)
        kept = np.isclose(y.detach().numpy(), x.detach().numpy() * a + alpha * a * 0.3)
        assert (kept | np.isclose(y.detach().numpy(), -alpha * a + alpha * a * 0.3)).all()
        dropped = ~kept
    assert 0.2 < dropped.mean() < 0.4
    if per_channel:  # a channel is dropped as a whole
        lead = 2 if len(shape) > 3 or fn != "dropout3d" else 1
        per = dropped.reshape(shape[:lead] + (-1,))
        assert (per.all(-1) | ~per.any(-1)).all()
    (g,) = bg.autograd.grad(y.sum(), x)
    assert np.allclose(g.numpy()[dropped], 0)
    assert_same(getattr(F, fn)(x, 0.3, training=False), to_torch(x))


def test_dropout2d_warnings_and_gumbel_softmax():
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        F.dropout2d(bg.ones(2, 3, 4))
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout3d"):
        F.dropout3d(bg.ones(2, 3))
    bg.manual_seed(0)
    logits = bg.tensor(np.log([[0.7, 0.2, 0.1]] * 2000), requires_grad=True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    assert np.allclose(soft.sum(-1).detach().numpy(), 1)
    hard = F.gumbel_softmax(logits, hard=True)
    picks = hard.detach().numpy()
    assert set(np.unique(picks)) == {0.0, 1.0} and np.allclose(picks.sum(-1), 1)
    assert abs(picks[:, 0].mean() - 0.7) < 0.05
    (g,) = bg.autograd.grad((hard * bg.tensor([1.0, 2.0, 3.0])).sum(), logits)
    assert np.isfinite(g.numpy()).all() and np.abs(g.numpy()).sum() > 0


def test_sdpa_dropout_drops_attention_weights():
    bg.manual_seed(3)
    q = leaf("float64", 2, 8, 6)
    v = bg.eye(8, dtype=bg.float64).expand(2, 8, 8)
    weights = F.scaled_dot_product_attention(q, q, v, dropout_p=0.4).detach().numpy()
    full = F.scaled_dot_product_attention(q, q, v).detach().numpy()
    ratio = weights / full
    assert set(np.round(np.unique(ratio), 6)) <= {0.0, round(1 / 0.6, 6)}
    assert 0.3 < (ratio == 0).mean() < 0.5


MODULES = {  # name: (args, kwargs, input shape)
    "Conv1d": ((3, 4, 3), {"padding": 1, "bias": False}, (2, 3, 7)),
    "Conv3d": ((2, 4, (1, 2, 3)), {"padding": "same"}, (2, 2, 3, 4, 5)),
    "Conv1d-reflect": ((2, 3, 3), {"padding": 2, "padding_mode": "reflect"}, (2, 2, 6)),
    "Conv3d-circular": ((2, 3, 2), {"padding": 1, "padding_mode": "circular"}, (1, 2, 3, 3, 3)),
    "ConvTranspose1d": ((2, 3, 2), {}, (2, 2, 5)),
    "ConvTranspose2d": ((4, 6, 3, 2, 1, 1, 2, False, 2), {}, (2, 4, 3, 3)),
    "ConvTranspose3d": ((2, 2, 2), {"stride": 2}, (1, 2, 2, 3, 2)),
    "BatchNorm2d": ((3,), {}, (4, 3, 2, 2)),
    "BatchNorm3d": ((3,), {"momentum": None}, (4, 3, 2, 2, 2)),
    "GroupNorm": ((2, 4), {}, (3, 4, 5)),
    "GroupNorm-plain": ((1, 4), {"affine": False}, (3, 4, 2, 2)),
    "InstanceNorm1d": ((3,), {"affine": True, "track_running_stats": True}, (2, 3, 5)),
    "InstanceNorm2d": ((3,), {}, (3, 4, 5)),
    "InstanceNorm3d": ((2,), {"affine": True}, (2, 2, 3, 2, 2)),
    "RMSNorm": ((5,), {}, (3, 5)),
    "RMSNorm-shape": (([4, 5],), {"eps": 1e-3, "elementwise_affine": False}, (2, 4, 5)),
    "LocalResponseNorm": ((3,), {}, (2, 5, 3, 3)),
    "ZeroPad2d": ((2,), {}, (2, 3, 4)),
    "ConstantPad1d": (((1, 2), 3.5), {}, (2, 3)),
    "ConstantPad3d": ((1, 0.0), {}, (1, 2, 2, 2)),
    "ReflectionPad1d": ((2,), {}, (2, 3, 4)),
    "ReflectionPad2d": (((1, 0, 2, 1),), {}, (1, 2, 3, 4)),
    "ReplicationPad3d": (((1, 1, 2, 2, 0, 1),), {}, (1, 2, 2, 3, 2)),
    "CircularPad1d": ((2,), {}, (2, 2, 4)),
    "CircularPad2d": ((1,), {}, (1, 2, 3, 3)),
    "ZeroPad1d": (((1, 0),), {}, (2, 3)),
    "ReflectionPad3d": ((1,), {}, (1, 1, 2, 3, 2)),
    "ReplicationPad1d": ((2,), {}, (2, 3)),
    "ReplicationPad2d": ((1,), {}, (1, 2, 3)),
    "CircularPad3d": ((1,), {}, (1, 1, 2, 2, 2)),
    "ZeroPad3d": ((1,), {}, (1, 1, 2, 2, 2)),
    "ConstantPad2d": ((1, -1.0), {}, (1, 2, 2)),
    "PixelShuffle": ((2,), {}, (1, 8, 2, 3)),
    "PixelUnshuffle": ((2,), {}, (1, 2, 4, 6)),
    "ChannelShuffle": ((2,), {}, (2, 4, 3)),
    "Unfold": ((2,), {}, (2, 3, 4, 4)),
    "Fold": (((3, 4), 2), {}, (2, 8, 6)),
    "Unflatten": ((1, (2, 4)), {}, (3, 8)),
    "Upsample": ((), {"scale_factor": 2}, (1, 2, 3, 3)),
    "Upsample-bilinear": (((5, 4),), {"mode": "bilinear", "align_corners": True}, (1, 2, 3, 3)),
    "UpsamplingNearest2d": ((), {"scale_factor": 2}, (1, 2, 3, 3)),
    "UpsamplingBilinear2d": ((4,), {}, (1, 2, 3, 3)),
    "Dropout1d": ((), {}, (2, 3, 4)),
    "Dropout2d": ((0.2,), {}, (2, 3, 4, 4)),
    "Dropout3d": ((), {}, (2, 3, 2, 2, 2)),
    "AlphaDropout": ((0.2,), {}, (2, 3)),
    "FeatureAlphaDropout": ((), {}, (2, 3, 4)),
}


def _copy_parameters(ours, theirs):
    for (_, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        with torch.no_grad():
            q.copy_(to_torch(p.detach()))


@pytest.mark.parametrize("name", MODULES)
def test_modules(name):
    args, kwargs, shape = MODULES[name]
    cls = name.split("-")[0]
    ours, theirs = getattr(nn, cls)(*args, **kwargs), getattr(torch.nn, cls)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in theirs.named_parameters()
    ]
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    _copy_parameters(ours, theirs)
    if "Dropout" in cls:
        ours.eval()
        theirs.eval()
    x = leaf("float32", *shape, seed=3)
    got, want = ours(x), theirs(to_torch(x))
    assert_same(got, want, rtol=1e-4, atol=1e-5)
    got.sum().backward()
    want.sum().backward()
    for (_, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert_same(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    for (_, b), (_, c) in zip(ours.named_buffers(), theirs.named_buffers()):
        assert_same(b, c, rtol=1e-5, atol=1e-6)


def test_module_initialization_statistics():
    bg.manual_seed(0)
    for layer in (nn.ConvTranspose2d(20, 30, 3), nn.Conv3d(10, 20, 3), nn.Bilinear(40, 10, 30)):
        w = layer.weight.detach().numpy()
        fan = w.shape[1] * np.prod(w.shape[2:]) if not isinstance(layer, nn.Bilinear) else w.shape[1]
        bound = 1 / np.sqrt(fan)
        assert np.abs(w).max() <= bound + 1e-6 and np.abs(w).max() > 0.9 * bound
    assert_same(nn.GroupNorm(2, 4).weight.detach(), torch.ones(4))


def test_conv_transpose_output_size():
    layer, tlayer = nn.ConvTranspose2d(2, 3, 3, stride=2), torch.nn.ConvTranspose2d(2, 3, 3, stride=2)
    _copy_parameters(layer, tlayer)
    x = leaf("float32", 1, 2, 4, 4)
    assert_same(layer(x, output_size=(10, 9)), tlayer(to_torch(x), output_size=(10, 9)), rtol=1e-5, atol=1e-6)
    raises_like_torch(lambda m: (layer if m is bg else tlayer)(m.ones(1, 2, 4, 4), output_size=(12, 9)))
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose1d(2, 3, 2, padding_mode="reflect")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert nn.InstanceNorm1d(5)(bg.ones(2, 3, 4)).shape == (2, 3, 4)


def _standardized_conv(lib, n, **kwargs):
    """A conv layer whose forward standardizes its weight and hands it to _conv_forward (a weight-standardized
    or quantization-aware layer's way), built from seed 0 in float64."""
    base = (lib.nn.Conv1d, lib.nn.Conv2d, lib.nn.Conv3d)[n - 1]

    class Standardized(base):
        def forward(self, x):
            w = self.weight
            w = (w - w.mean(dim=list(range(1, w.dim())), keepdim=True)) / (w.std() + 1e-5)
            return self._conv_forward(x, w, self.bias)

    lib.manual_seed(0)
    return Standardized(2, 3, dtype=lib.float64, **kwargs)


@pytest.mark.parametrize(
    "n, kwargs",
    [
        (1, {"kernel_size": 3, "padding": 2, "dilation": 2, "padding_mode": "reflect"}),
        (2, {"kernel_size": (4, 3), "padding": "same", "dilation": (2, 1), "padding_mode": "circular"}),
        (2, {"kernel_size": 3, "padding": (1, 0), "stride": 2}),
        (3, {"kernel_size": 2, "padding": "valid", "padding_mode": "replicate", "bias": False}),
    ],
    ids=["1d-reflect", "2d-same-circular", "2d-zeros", "3d-valid"],
)
def test_conv_forward_takes_a_replaced_weight_under_the_layers_padding(n, kwargs):
    """_conv_forward(input, weight, bias) convolves with the weight given, padding as the layer does (padding_mode
    by _reversed_padding_repeated_twice, 'same' included), with gradients to the layer's parameters."""
    x = np.random.default_rng(3).standard_normal((2, 2) + (7, 6, 5)[:n])
    results = []
    for lib in (bg, torch):
        layer = _standardized_conv(lib, n, **kwargs)
        out = layer(lib.tensor(x))
        out.square().sum().backward()
        results.append((layer._reversed_padding_repeated_twice, out, [p.grad for p in layer.parameters()]))
    assert list(results[0][0]) == list(results[1][0])
    assert_same(results[0][1], results[1][1], rtol=1e-10, atol=1e-12)
    for got, want in zip(results[0][2], results[1][2]):
        assert_same(got, want, rtol=1e-10, atol=1e-12)
