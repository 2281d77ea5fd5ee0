"""bg.nn against torch.nn: every functional op (values, grad, double backward, batched grad), the layers with the
same weights, Module's registration, state and modes, a small CNN trained a few steps, and per-sample gradients."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from batched_grad import _lazy
from oracle import assert_same, check_batched, check_both, raises_like_torch, rand, to_torch


def _idx(*values):
    return bg.tensor(values)


def _probs(*shape, seed=0):
    return bg.tensor(np.random.default_rng(seed).dirichlet(np.ones(shape[-1]), shape[:-1]))


F = lambda m: m.nn.functional  # noqa: E731
FUNCTIONAL = {  # name: (fn(module, *inputs), inputs)
    "relu": (lambda m, x: F(m).relu(x), [rand(3, 4)]),
    "leaky_relu": (lambda m, x: F(m).leaky_relu(x, 0.2), [rand(3, 4)]),
    "elu": (lambda m, x: F(m).elu(x, alpha=0.7), [rand(3, 4)]),
    "gelu": (lambda m, x: F(m).gelu(x), [rand(3, 4)]),
    "gelu_tanh": (lambda m, x: F(m).gelu(x, approximate="tanh"), [rand(3, 4)]),
    "silu": (lambda m, x: F(m).silu(x), [rand(3, 4)]),
    "softplus": (lambda m, x: F(m).softplus(x, beta=2.0, threshold=1.0), [rand(3, 4)]),
    "tanh": (lambda m, x: F(m).tanh(x), [rand(3, 4)]),
    "sigmoid": (lambda m, x: F(m).sigmoid(x), [rand(3, 4)]),
    "softmax": (lambda m, x: F(m).softmax(x, dim=1), [rand(3, 4)]),
    "log_softmax": (lambda m, x: F(m).log_softmax(x, 0), [rand(3, 4)]),
    "linear": (lambda m, x, w, b: F(m).linear(x, w, b), [rand(2, 3), rand(4, 3), rand(4)]),
    "linear_3d_no_bias": (lambda m, x, w: F(m).linear(x, w), [rand(2, 2, 3), rand(4, 3)]),
    "conv1d": (lambda m, x, w, b: F(m).conv1d(x, w, b, stride=2, padding=1), [rand(2, 2, 7), rand(3, 2, 3), rand(3)]),
    "conv2d_groups": (
        lambda m, x, w: F(m).conv2d(x, w, padding=1, groups=2, dilation=(1, 2)),
        [rand(1, 2, 5, 5), rand(4, 1, 3, 2)],
    ),
    "conv2d_same_unbatched": (
        lambda m, x, w, b: F(m).conv2d(x, w, b, padding="same"),
        [rand(2, 4, 4), rand(3, 2, 2, 3), rand(3)],
    ),
    # the two CPU forms of a convolution: by kernel taps (<= 4 input channels per group), else channels-last
    "conv2d_taps_strided": (
        lambda m, x, w, b: F(m).conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(2, 1)),
        [rand(2, 3, 7, 6), rand(4, 3, 3, 2), rand(4)],
    ),
    "conv2d_channels_last": (
        lambda m, x, w, b: F(m).conv2d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
        [rand(2, 10, 7, 7), rand(4, 5, 3, 3), rand(4)],
    ),
    "conv1d_channels_last": (lambda m, x, w: F(m).conv1d(x, w, padding="same"), [rand(2, 6, 9), rand(3, 6, 4)]),
    "max_pool2d": (lambda m, x: F(m).max_pool2d(x, 2), [rand(1, 2, 5, 5)]),
    "max_pool2d_ceil": (lambda m, x: F(m).max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), [rand(2, 6, 6)]),
    "avg_pool2d": (lambda m, x: F(m).avg_pool2d(x, 2), [rand(1, 2, 5, 5)]),
    "avg_pool2d_pad": (
        lambda m, x: F(m).avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        [rand(1, 2, 6, 5)],
    ),
    "layer_norm": (lambda m, x, w, b: F(m).layer_norm(x, (3, 4), w, b), [rand(2, 3, 4), rand(3, 4), rand(3, 4)]),
    "layer_norm_plain": (lambda m, x: F(m).layer_norm(x, [4], eps=1e-3), [rand(3, 4)]),
    "embedding": (lambda m, i, w: F(m).embedding(i, w, padding_idx=1), [_idx([0, 1], [4, 1]), rand(5, 3)]),
    "pad_constant": (lambda m, x: F(m).pad(x, (1, 2, -1, 1), value=0.5), [rand(2, 3, 4)]),
    "pad_reflect": (lambda m, x: F(m).pad(x, (2, 1), mode="reflect"), [rand(1, 2, 4)]),
    "pad_replicate": (lambda m, x: F(m).pad(x, (1, 1, 2, 0), mode="replicate"), [rand(1, 2, 3, 3)]),
    "pad_circular": (lambda m, x: F(m).pad(x, (2, 1), mode="circular"), [rand(1, 2, 4)]),
    "pad_reflect_crop": (lambda m, x: F(m).pad(x, (-1, 2), mode="reflect"), [rand(1, 2, 6)]),
    "pad_replicate_wide": (lambda m, x: F(m).pad(x, (5, -2, 0, 7), mode="replicate"), [rand(1, 2, 3, 4)]),
    "pad_circular_crop": (lambda m, x: F(m).pad(x, (2, -1), mode="circular"), [rand(1, 2, 5)]),
    "mse_loss": (lambda m, x, y: F(m).mse_loss(x, y), [rand(3, 4), rand(3, 4, seed=1)]),
    "l1_loss_sum": (lambda m, x, y: F(m).l1_loss(x, y, reduction="sum"), [rand(3, 4), rand(3, 4, seed=1)]),
    "smooth_l1_loss": (
        lambda m, x, y: F(m).smooth_l1_loss(x, y, reduction="none", beta=0.5),
        [rand(3, 4), rand(3, 4, seed=1)],
    ),
    "cross_entropy": (lambda m, x, t: F(m).cross_entropy(x, t), [rand(3, 4), _idx(0, 3, 1)]),
    "cross_entropy_options": (
        lambda m, x, t, w: F(m).cross_entropy(x, t, w, ignore_index=1, label_smoothing=0.2),
        [rand(4, 3), _idx(0, 1, 2, 2), rand(3, low=0.5, high=2, requires_grad=False)],
    ),
    "cross_entropy_probs": (
        lambda m, x, p: F(m).cross_entropy(x, p, label_smoothing=0.1, reduction="sum"),
        [rand(2, 3, 2), _probs(2, 2, 3).permute(0, 2, 1)],
    ),
    "cross_entropy_kdim": (
        lambda m, x, t: F(m).cross_entropy(x, t, reduction="none"),
        [rand(2, 3, 2), _idx([0, 2], [1, 1])],
    ),
    "nll_loss": (
        lambda m, x, t, w: F(m).nll_loss(x, t, w, reduction="sum"),
        [rand(3, 4), _idx(1, 0, 3), rand(4, low=0.5, high=2, requires_grad=False)],
    ),
    "binary_cross_entropy": (
        lambda m, x, y, w: F(m).binary_cross_entropy(x, y, w),
        [rand(2, 3, low=0.05, high=0.95), rand(2, 3, low=0, high=1, seed=2), rand(2, 3, seed=3, requires_grad=False)],
    ),
    "bce_with_logits": (
        lambda m, x, y, w, pw: F(m).binary_cross_entropy_with_logits(x, y, w, pos_weight=pw),
        [
            rand(2, 3),
            rand(2, 3, low=0, high=1, seed=2),
            rand(3, seed=3, requires_grad=False),
            rand(3, low=0.5, high=2, requires_grad=False),
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional_matches_torch_with_grad_and_double_backward(name):
    fn, inputs = FUNCTIONAL[name]
    check_both(fn, inputs, rtol=1e-9, atol=1e-12)


def _kinks(values, requires_grad=True):
    return bg.tensor(values, dtype=bg.float64, requires_grad=requires_grad)


KINKS = {  # name: (fn(module, *inputs), inputs): torch's derivatives where the formulas have kinks
    "elu_at_0_and_nan": (lambda m, x: F(m).elu(x, 0.5), [_kinks([0.0, -1.0, 2.0, float("nan"), -0.0, 1e-300])]),
    "l1_loss_at_equal": (
        lambda m, x, y: F(m).l1_loss(x, y, reduction="none"),
        [_kinks([0.5, -1.0, 2.0, 0.0]), _kinks([0.5, 1.0, 2.0, 0.0])],
    ),
    "bce_with_logits_at_0": (
        lambda m, x, y, pw: (
            F(m).binary_cross_entropy_with_logits(x, y, pos_weight=pw)
            + F(m).binary_cross_entropy_with_logits(x, y, reduction="sum")
        ),
        [
            _kinks([0.0, 0.0, -0.0, 1.5]),
            _kinks([0.5, 0.0, 1.0, 0.25]),
            _kinks([2.0, 0.5, 1.0, 3.0], requires_grad=False),
        ],
    ),
    "bce_at_0_and_1": (
        lambda m, x, y: F(m).binary_cross_entropy(x, y, reduction="none"),
        [_kinks([0.0, 1.0, 0.5, 1.0]), _kinks([0.5, 0.5, 0.0, 1.0])],
    ),
}


@pytest.mark.parametrize("name", sorted(KINKS))
def test_functional_kinks_match_torch(name):
    fn, inputs = KINKS[name]
    # torch's second derivative of elu at 0 is 0 (its double backward tests x < 0, its backward x <= 0)
    check_both(fn, inputs, gradgrad=name != "elu_at_0_and_nan")


@pytest.mark.slow
def test_functional_batched_grads_equal_the_per_row_loop_without_fallback(monkeypatch):
    """Every op above in one output (one fused program, to bound compile time): is_grads_batched=True equals the
    per-row loop, and no op falls back to it (second derivatives are checked op by op above)."""
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 0)
    outputs, leaves = [], []
    for fn, inputs in FUNCTIONAL.values():
        outputs.append(fn(bg, *inputs).reshape(-1))
        leaves += [x for x in inputs if x.requires_grad]
    check_batched([bg.cat(outputs)], leaves, np.random.default_rng(0), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "geometry",
    [
        dict(kernel_size=2),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
        dict(kernel_size=3, stride=1, dilation=2),
        dict(kernel_size=2, stride=1),
    ],
)
def test_max_pool_gradient_goes_where_torchs_does_on_ties_and_nan(geometry, engine_tier):
    """torch's backward scatters to the first maximum of a window (row-major), or to its last nan."""
    rng = np.random.default_rng(0)
    data = np.round(rng.standard_normal((2, 2, 8, 8)))  # many ties
    data[0, 0, :4, :4] = 0.0
    data[1, 1, [0, 1, 3, 5], [0, 1, 2, 5]] = np.nan
    x, tx = bg.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    weights = rng.standard_normal(tuple(torch.nn.functional.max_pool2d(tx, **geometry).shape))
    (want,) = torch.autograd.grad((torch.nn.functional.max_pool2d(tx, **geometry) * torch.tensor(weights)).sum(), tx)
    (got,) = bg.autograd.grad((F(bg).max_pool2d(x, **geometry) * bg.tensor(weights)).sum(), x)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize(
    "case",
    [
        lambda m: F(m).one_hot(m.tensor([[0, 2], [1, 1]]), 4),
        lambda m: F(m).one_hot(m.tensor([3, 0])),
        lambda m: m.tensor([[1.0, 2.0], [0.5, -1.0]]).softmax(-1),
        lambda m: m.tensor([[1.0, 2.0], [0.5, -1.0]]).log_softmax(0),
        lambda m: m.softmax(m.tensor([1, 2, 3]), 0, dtype=m.float64),
        lambda m: F(m).dropout(m.ones(3, 4), 0.5, training=False),
    ],
)
def test_forward_only_ops_match_torch(case):
    assert_same(case(bg), case(torch))


@pytest.mark.parametrize(
    "case",
    [
        lambda m: F(m).gelu(m.ones(2), approximate="foo"),
        lambda m: F(m).silu(m.tensor([1, 2])),
        lambda m: F(m).softmax(m.tensor([1, 2]), 0),
        lambda m: F(m).dropout(m.ones(2), 1.5),
        lambda m: F(m).mse_loss(m.ones(2), m.ones(2), reduction="avg"),
        lambda m: F(m).one_hot(m.tensor([0, 2]), 2),
        lambda m: F(m).one_hot(m.tensor([-1, 2])),
        lambda m: F(m).nll_loss(m.zeros(2, 3), m.tensor([0, 5])),
        lambda m: F(m).cross_entropy(m.zeros(2, 3), m.tensor([0, 1, 1])),
        lambda m: F(m).binary_cross_entropy(m.tensor([2.0]), m.tensor([1.0])),
        lambda m: F(m).binary_cross_entropy(m.tensor([0.2]), m.tensor([1.0, 0.0])),
        lambda m: F(m).binary_cross_entropy_with_logits(m.tensor([0.2]), m.tensor([1.0, 0.0])),
        lambda m: F(m).linear(m.zeros(2, 3), m.zeros(4, 2)),
        lambda m: F(m).conv2d(m.zeros(1, 2, 5, 5), m.zeros(3, 3, 3, 3)),
        lambda m: F(m).conv2d(m.zeros(1, 3, 5, 5), m.zeros(3, 3, 3, 3), stride=2, padding="same"),
        lambda m: F(m).max_pool2d(m.zeros(1, 1, 2, 2), 3),
        lambda m: F(m).max_pool2d(m.zeros(1, 1, 4, 4), 2, padding=2),
        lambda m: F(m).layer_norm(m.zeros(2, 3), (4,)),
        lambda m: F(m).embedding(m.tensor([5]), m.zeros(3, 2)),
        lambda m: F(m).embedding(m.tensor([0.0]), m.zeros(3, 2)),
        lambda m: F(m).pad(m.zeros(2, 3), (1, 2, 3)),
        lambda m: F(m).pad(m.zeros(2, 3), (1, 1), mode="bogus"),
        lambda m: F(m).pad(m.zeros(2, 3), (-3, -1)),
        lambda m: F(m).pad(m.zeros(1, 2, 4), (1, 4), mode="reflect"),
        lambda m: F(m).pad(m.zeros(1, 2, 4), (5, 0), mode="circular"),
        lambda m: F(m).linear(m.zeros(2, 3), m.zeros(4, 3), m.zeros(3)),
        lambda m: F(m).linear(m.zeros(5, 2, 3), m.zeros(4, 3), m.zeros(3, 4)),
        lambda m: F(m).linear(m.zeros(5, 2, 3), m.zeros(4, 3), m.zeros(7, 2, 4)),
        lambda m: F(m).linear(m.zeros(2, 3), m.zeros(4, 3), m.zeros(2, 2, 4)),
        lambda m: F(m).conv2d(m.zeros(1, 1, 5, 5), m.zeros(2, 1, 3, 3), m.zeros(3)),
        lambda m: F(m).conv2d(m.zeros(1, 1, 5, 5), m.zeros(2, 1, 3, 3), stride=0),
        lambda m: F(m).conv2d(m.zeros(1, 1, 5, 5), m.zeros(2, 1, 3, 3), padding=-1),
        lambda m: F(m).conv2d(m.zeros(1, 1, 5, 5), m.zeros(2, 1, 3, 3), dilation=(1, 0)),
        lambda m: F(m).conv2d(m.zeros(1, 4, 5, 5), m.zeros(3, 2, 3, 3), groups=2),
        lambda m: F(m).conv2d(m.zeros(1, 1, 2, 5), m.zeros(1, 1, 3, 3)),
        lambda m: F(m).conv2d(m.zeros(1, 1, 4, 4), m.zeros(1, 1, 3, 3), dilation=2),
        lambda m: F(m).conv1d(m.zeros(1, 1, 2), m.zeros(1, 1, 3)),
        lambda m: F(m).l1_loss(m.zeros(3, 4), m.zeros(5)),
        lambda m: F(m).smooth_l1_loss(m.zeros(3, 4), m.zeros(5)),
        lambda m: F(m).mse_loss(m.zeros(3, 4), m.zeros(2, 1, 5)),
        lambda m: F(m).binary_cross_entropy(m.full((3, 4), 0.5), m.full((3, 4), 0.5), weight=m.ones(5)),
        lambda m: F(m).binary_cross_entropy(m.full((2,), 0.5), m.tensor([0.5, 2.0])),
        lambda m: F(m).binary_cross_entropy_with_logits(m.zeros(3, 4), m.zeros(3, 4), weight=m.ones(5)),
        lambda m: F(m).binary_cross_entropy_with_logits(m.zeros(3, 4), m.zeros(3, 4), pos_weight=m.ones(5)),
    ],
)
def test_bad_arguments_raise_like_torch(case):
    raises_like_torch(case)


def test_dropout_draws_from_the_generator_and_scales_what_it_keeps():
    x = rand(200, 50, low=1, high=2)
    bg.manual_seed(3)
    y = F(bg).dropout(x, 0.3)
    kept = y.detach().numpy() != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(y.detach().numpy()[kept], x.detach().numpy()[kept] / 0.7)
    bg.manual_seed(3)
    assert np.array_equal(F(bg).dropout(x, 0.3).detach().numpy(), y.detach().numpy())
    (g,) = bg.autograd.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), kept / 0.7)
    assert (F(bg).dropout(x, 1.0).detach().numpy() == 0).all()
    with pytest.raises(RuntimeError, match="randomness"):
        vmap.vmap(lambda r: F(bg).dropout(r, 0.5))(x)


# ---- modules ----------------------------------------------------------------------------------------------
def _copy_weights(bg_module, torch_module):
    state = {k: bg.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()}
    bg_module.load_state_dict(state)
    return bg_module


MODULES = {  # name: (constructor(module), input)
    "linear": (lambda m: m.nn.Linear(3, 2), rand(4, 3)),
    "conv2d": (lambda m: m.nn.Conv2d(2, 3, 3, stride=2, padding=1, bias=False), rand(2, 2, 5, 5)),
    "conv2d_reflect": (lambda m: m.nn.Conv2d(2, 2, (3, 2), padding=1, padding_mode="reflect"), rand(1, 2, 4, 4)),
    "layer_norm": (lambda m: m.nn.LayerNorm(4), rand(2, 3, 4)),
    "embedding": (lambda m: m.nn.Embedding(5, 3, padding_idx=0), bg.tensor([[0, 4, 2]])),
    "mlp": (
        lambda m: m.nn.Sequential(
            m.nn.Linear(3, 4),
            m.nn.GELU(),
            m.nn.Linear(4, 4),
            m.nn.Tanh(),
            m.nn.Dropout(0.5),
            m.nn.Linear(4, 1),
            m.nn.Sigmoid(),
        ),
        rand(5, 3),
    ),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_forward_and_parameter_grads_match_torch(name):
    make, x = MODULES[name]
    torch.manual_seed(0)
    t_module = make(torch).double().eval()
    module = _copy_weights(make(bg).double(), t_module).eval()
    assert [n for n, _ in module.named_parameters()] == [n for n, _ in t_module.named_parameters()]
    assert repr(module) == repr(t_module)
    out, t_out = module(x), t_module(to_torch(x, False))
    assert_same(out, t_out, rtol=1e-10)
    (out * out).sum().backward()
    (t_out * t_out).sum().backward()
    for p, t_p in zip(module.parameters(), t_module.parameters()):
        assert_same(p.grad, t_p.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("make", [lambda m: m.nn.Linear(40, 30), lambda m: m.nn.Conv2d(4, 6, 3)])
def test_default_init_follows_torch_distributions(make):
    module = make(bg)
    bound = 1 / np.sqrt(np.prod(module.weight.shape[1:]))  # kaiming_uniform(a=sqrt(5)) and the bias share it
    for p in (module.weight, module.bias):
        v = p.detach().numpy()
        assert p.dtype is bg.float32 and p.requires_grad and type(p) is bg.nn.Parameter
        assert np.abs(v).max() <= bound
    assert np.abs(module.weight.detach().numpy()).max() > 0.9 * bound
    assert abs(module.weight.detach().numpy().std() - bound / np.sqrt(3)) < 0.1 * bound


def test_module_registration_state_dict_and_modes():
    model = bg.nn.Sequential(bg.nn.Linear(3, 4), bg.nn.ReLU(), bg.nn.Dropout(0.5), bg.nn.Linear(4, 2))
    model.head = bg.nn.Linear(2, 1)
    model.scale = bg.nn.Parameter(bg.ones(1))
    model.register_buffer("steps", bg.zeros(1))
    names = ["scale", "0.weight", "0.bias", "3.weight", "3.bias", "head.weight", "head.bias"]
    assert [n for n, _ in model.named_parameters()] == names
    assert list(model.state_dict()) == ["scale", "steps"] + names[1:]
    assert [n for n, _ in model.named_modules()] == ["", "0", "1", "2", "3", "head"]
    assert len(list(model.children())) == 5 and model[3] is model._modules["3"]
    with pytest.raises(TypeError, match="cannot assign 'int' as parameter 'scale'"):
        model.scale = 3
    with pytest.raises(TypeError, match="cannot assign 'torch.FloatTensor' as parameter 'scale'"):
        model.scale = bg.zeros(1)

    other = bg.nn.Sequential(bg.nn.Linear(3, 4), bg.nn.ReLU(), bg.nn.Dropout(0.5), bg.nn.Linear(4, 2))
    other.head, other.scale = bg.nn.Linear(2, 1), bg.nn.Parameter(bg.zeros(1))
    other.register_buffer("steps", bg.ones(1))
    result = other.load_state_dict(model.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (k, a), b in zip(model.state_dict().items(), other.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)

    x = bg.randn(8, 3)
    assert model.training and all(m.training for m in model.modules())
    model.eval()
    assert not model[2].training
    np.testing.assert_array_equal(model(x).detach().numpy(), model(x).detach().numpy())
    h = model[1](model[0](x))
    np.testing.assert_array_equal(model[2](h).detach().numpy(), h.detach().numpy())
    model.train()
    dropped = model[2](h).detach().numpy()
    assert (dropped == 0).any() and np.allclose(dropped[dropped != 0], 2 * h.detach().numpy()[dropped != 0])

    model(x).sum().backward()
    assert model[0].weight.grad is not None
    model.zero_grad(set_to_none=False)
    assert (model[0].weight.grad.numpy() == 0).all()
    model.zero_grad()
    assert model[0].weight.grad is None


@pytest.mark.parametrize(
    "state",
    [
        lambda m: {"weight": m.zeros(2, 3)},
        lambda m: {"weight": m.zeros(2, 3), "bias": m.zeros(2), "extra": m.zeros(1)},
        lambda m: {"weight": m.zeros(3, 3), "bias": m.zeros(2)},
    ],
)
def test_load_state_dict_errors_match_torch(state):
    e, t_e = raises_like_torch(lambda m: m.nn.Linear(3, 2).load_state_dict(state(m)))
    assert str(e) == str(t_e)


def test_parameter_is_a_leaf_that_requires_grad_and_prints_like_torch():
    p = bg.nn.Parameter(bg.tensor([1.0, 2.0]))
    assert p.is_leaf and p.requires_grad and isinstance(p, bg.Tensor)
    assert repr(p) == repr(torch.nn.Parameter(torch.tensor([1.0, 2.0])))
    assert not bg.nn.Parameter(bg.ones(2), requires_grad=False).requires_grad
    assert type(p * 2) is bg.Tensor
    raises_like_torch(lambda m: m.nn.Parameter(m.tensor([1, 2])))


# ---- a small CNN: training and per-sample gradients ------------------------------------------------------------
def _cnn(m):
    return m.nn.Sequential(m.nn.Conv2d(1, 3, 3), m.nn.ReLU(), m.nn.MaxPool2d(2), m.nn.Flatten(), m.nn.Linear(12, 3))


def _cnn_pair():
    torch.manual_seed(0)
    t_model = _cnn(torch).double()
    model = _copy_weights(_cnn(bg).double(), t_model)
    rng = np.random.default_rng(0)
    x, y = bg.tensor(rng.standard_normal((6, 1, 6, 6))), bg.tensor(rng.integers(0, 3, 6))
    return model, t_model, x, y


def test_cnn_training_matches_torch():
    model, t_model, x, y = _cnn_pair()
    opt = bg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    t_opt = torch.optim.SGD(t_model.parameters(), lr=0.1, momentum=0.9)
    loss_fn, t_loss_fn = bg.nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()
    losses = {bg: [], torch: []}
    for _ in range(3):
        for m, o, mod, fn, xs, ys in (
            (bg, opt, model, loss_fn, x, y),
            (torch, t_opt, t_model, t_loss_fn, *to_torch([x, y], False)),
        ):
            o.zero_grad()
            loss = fn(mod(xs), ys)
            loss.backward()
            o.step()
            losses[m].append(loss.item())
    np.testing.assert_allclose(losses[bg], losses[torch], rtol=1e-10)
    assert losses[bg][-1] < losses[bg][0]
    for p, t_p in zip(model.parameters(), t_model.parameters()):
        assert_same(p.detach(), t_p.detach(), rtol=1e-9, atol=1e-12)


def _functional_cnn(m, params, x):
    w1, b1, w2, b2 = params
    h = F(m).max_pool2d(F(m).relu(F(m).conv2d(x, w1, b1)), 2)
    return F(m).linear(h.reshape(h.shape[0], -1), w2, b2)


def test_cnn_per_sample_gradients_both_idioms_match_torch_loop():
    model, t_model, x, y = _cnn_pair()
    params, t_params = list(model.parameters()), list(t_model.parameters())
    tx, ty = to_torch([x, y], False)
    expected = [
        torch.stack(g)
        for g in zip(
            *[
                torch.autograd.grad(
                    torch.nn.functional.cross_entropy(_functional_cnn(torch, t_params, tx[i : i + 1]), ty[i : i + 1]),
                    t_params,
                )
                for i in range(len(x))
            ]
        )
    ]
    with vmap.fallback_warnings(), warnings.catch_warnings():
        warnings.simplefilter("error", vmap.FallbackWarning)
        losses = F(bg).cross_entropy(_functional_cnn(bg, params, x), y, reduction="none")
        eye_idiom = bg.autograd.grad(losses, params, bg.eye(len(x), dtype=bg.float64), is_grads_batched=True)
        vmap_idiom = vmap.vmap(
            lambda xi, yi: bg.autograd.grad(
                F(bg).cross_entropy(_functional_cnn(bg, params, xi[None]), yi[None]), params
            )
        )(x, y)
    for got in (eye_idiom, vmap_idiom):
        assert_same(list(got), expected, rtol=1e-9, atol=1e-12)
