"""nn.init's other initializers (trunc_normal_, orthogonal_, sparse_, eye_, dirac_ and the deprecated names),
nn.utils' batch-norm fusion, skip_init and clip_grad_norm, autograd's grad-mode exports and increment_version,
torch's anomaly switches and default device, and func.replace_all_batch_norm_modules_, against torch 2.13."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import batched_grad.nn as nn
from oracle import assert_same, raises_like_torch, to_torch


def test_trunc_normal_orthogonal_sparse():
    bg.manual_seed(0)
    w = bg.empty(200, 300)
    values = nn.init.trunc_normal_(w, mean=0.5, std=2.0, a=-1.0, b=3.0).numpy()
    want = torch.nn.init.trunc_normal_(torch.empty(200, 300), mean=0.5, std=2.0, a=-1.0, b=3.0).numpy()
    assert values.min() >= -1 and values.max() <= 3
    assert abs(values.mean() - want.mean()) < 0.03 and abs(values.std() - want.std()) < 0.03
    for shape in ((5, 3), (3, 5), (4, 2, 3)):
        q = nn.init.orthogonal_(bg.empty(*shape), gain=2.0).numpy().reshape(shape[0], -1)
        small = q @ q.T if q.shape[0] <= q.shape[1] else q.T @ q
        assert np.allclose(small, 4 * np.eye(small.shape[0]), atol=1e-5)
    s = nn.init.sparse_(bg.empty(10, 6), sparsity=0.3, std=0.5).numpy()
    assert ((s == 0).sum(0) == 3).all() and s.std() > 0.1


@pytest.mark.parametrize(
    "call",
    [
        lambda m, i: i.eye_(m.empty(3, 5)),
        lambda m, i: i.dirac_(m.empty(4, 2, 3)),
        lambda m, i: i.dirac_(m.empty(6, 3, 3, 2), groups=2),
        lambda m, i: i.dirac_(m.empty(2, 2, 1, 3, 3)),
    ],
)
def test_eye_and_dirac(call):
    assert_same(call(bg, nn.init), call(torch, torch.nn.init))


@pytest.mark.parametrize(
    "name",
    [
        "constant",
        "normal",
        "uniform",
        "xavier_normal",
        "xavier_uniform",
        "kaiming_normal",
        "kaiming_uniform",
        "orthogonal",
        "sparse",
        "dirac",
        "eye",
    ],
)
def test_deprecated_names(name):
    args = {"constant": (0.5,), "sparse": (0.1,)}.get(name, ())
    shape = (2, 3, 3) if name == "dirac" else (3, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        getattr(nn.init, name)(bg.empty(*shape), *args)
    with warnings.catch_warnings(record=True) as wanted:
        warnings.simplefilter("always")
        getattr(torch.nn.init, name)(torch.empty(*shape), *args)
    assert [(w.category, str(w.message)) for w in caught] == [(w.category, str(w.message)) for w in wanted]


@pytest.mark.parametrize(
    "call",
    [
        lambda m, i: i.orthogonal_(m.empty(3)),
        lambda m, i: i.sparse_(m.empty(2, 2, 2), 0.1),
        lambda m, i: i.eye_(m.empty(3, 3, 3)),
        lambda m, i: i.dirac_(m.empty(3, 3)),
        lambda m, i: i.dirac_(m.empty(3, 2, 2), groups=2),
    ],
)
def test_init_errors(call):
    raises_like_torch(lambda m: call(m, m.nn.init))


def _trained_bn(m, bn):
    bn.train()
    with m.no_grad():
        for seed in range(3):
            shape = (6, bn.num_features) + (() if isinstance(bn, m.nn.BatchNorm1d) else (4, 4))
            bn(m.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=m.float32) * 2 + 1)
    return bn.eval()


@pytest.mark.parametrize("kind", ["conv", "conv-nobias", "conv_transpose", "linear"])
def test_fusion(kind):
    def build(m):
        m.manual_seed(0)
        layer = {
            "conv": lambda: m.nn.Conv2d(3, 4, 3),
            "conv-nobias": lambda: m.nn.Conv2d(3, 4, 3, bias=False),
            "conv_transpose": lambda: m.nn.ConvTranspose2d(3, 4, 3),
            "linear": lambda: m.nn.Linear(5, 4),
        }[kind]()
        bn = m.nn.BatchNorm1d(4) if kind == "linear" else m.nn.BatchNorm2d(4)
        return layer.eval(), _trained_bn(m, bn)

    (layer, bn), (t_layer, t_bn) = build(bg), build(torch)
    t_layer.load_state_dict({k: to_torch(v) for k, v in layer.state_dict().items()})
    t_bn.load_state_dict({k: to_torch(v) for k, v in bn.state_dict().items()})
    x = bg.tensor(
        np.random.default_rng(5).standard_normal((2, 5) if kind == "linear" else (2, 3, 6, 6)), dtype=bg.float32
    )
    if kind == "linear":
        fused, t_fused = nn.utils.fuse_linear_bn_eval(layer, bn), torch.nn.utils.fuse_linear_bn_eval(t_layer, t_bn)
    else:
        transpose = kind == "conv_transpose"
        fused = nn.utils.fuse_conv_bn_eval(layer, bn, transpose)
        t_fused = torch.nn.utils.fuse_conv_bn_eval(t_layer, t_bn, transpose)
    assert_same(fused(x), t_fused(to_torch(x)), rtol=1e-5, atol=1e-5)
    assert_same(fused(x), bn(layer(x)), rtol=1e-5, atol=1e-5)
    assert isinstance(fused.weight, nn.Parameter) and fused is not layer
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        nn.utils.fuse_conv_bn_eval(layer.train(), bn) if kind != "linear" else nn.utils.fuse_linear_bn_eval(
            layer.train(), bn
        )


def test_skip_init_and_clip_grad_norm():
    layer = nn.utils.skip_init(nn.Linear, 3, 4, bias=False)
    assert isinstance(layer, nn.Linear) and layer.weight.shape == (4, 3) and layer.bias is None
    raises_like_torch(lambda m: m.nn.utils.skip_init(m.nn.Identity))
    p, tp = bg.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    p.grad, tp.grad = bg.ones(3) * 4, torch.ones(3) * 4
    with pytest.warns(FutureWarning, match="`torch.nn.utils.clip_grad_norm` is now deprecated"):
        total = nn.utils.clip_grad_norm([p], 1.0)
    assert_same(total, torch.nn.utils.clip_grad_norm_([tp], 1.0))
    assert_same(p.grad, tp.grad)


def test_autograd_exports_anomaly_and_default_device():
    assert bg.autograd.no_grad is bg.no_grad and bg.autograd.enable_grad is bg.enable_grad
    assert bg.autograd.set_grad_enabled is bg.set_grad_enabled and bg.autograd.inference_mode is bg.inference_mode
    assert not bg.is_anomaly_enabled()
    bg.set_anomaly_enabled(True, check_nan=False)
    assert bg.is_anomaly_enabled() and not bg.is_anomaly_check_nan_enabled()
    bg.set_anomaly_enabled(False)
    assert not bg.is_anomaly_enabled() and bg.is_anomaly_check_nan_enabled()
    assert str(bg.get_default_device()) == str(torch.get_default_device())


def test_increment_version():
    def backward(m):
        x = m.ones(3, requires_grad=True)
        y = x.exp()
        m.autograd.graph.increment_version(y)
        y.sum().backward()

    raises_like_torch(backward)
    x = bg.ones(2)
    bg.autograd.graph.increment_version([x, x])
    assert x._version == 2


def test_replace_all_batch_norm_modules():
    def build(m):
        return m.nn.Sequential(
            m.nn.Linear(2, 3),
            m.nn.BatchNorm1d(3),
            m.nn.Sequential(m.nn.BatchNorm2d(3)),
            m.nn.InstanceNorm1d(3, track_running_stats=True),
            m.nn.BatchNorm1d(3, track_running_stats=False),
        )

    ours, theirs = build(bg), build(torch)
    assert bg.func.replace_all_batch_norm_modules_(ours) is ours
    torch.func.replace_all_batch_norm_modules_(theirs)
    for a, b in zip(ours.modules(), theirs.modules()):
        for name in ("running_mean", "running_var", "num_batches_tracked", "track_running_stats"):
            if hasattr(b, name):
                got, want = getattr(a, name), getattr(b, name)
                assert (got is None) == (want is None) and (
                    got is None or isinstance(want, bool) or tuple(got.shape) == tuple(want.shape)
                ), (a, name)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
