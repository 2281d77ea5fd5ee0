"""nn.init and nn.utils against torch's: gains and fans, the deterministic fills exactly, the random initializers
by their shapes, dtypes and statistics, and their errors; parameters_to_vector / vector_to_parameters, clip_grad_norm_
and clip_grad_value_ (values, returned norms, in-place updates, errors), also under torch's module paths."""

import math
import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad.nn.utils.clip_grad import clip_grad_norm_ as clip_grad_norm_by_path
from batched_grad.nn.utils.convert_parameters import parameters_to_vector as to_vector_by_path
from oracle import assert_same, raises_like_torch, to_torch


# ---- nn.init ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "nonlinearity, param",
    [
        ("linear", None),
        ("conv1d", None),
        ("conv2d", None),
        ("conv3d", None),
        ("conv_transpose1d", None),
        ("conv_transpose2d", None),
        ("conv_transpose3d", None),
        ("sigmoid", None),
        ("tanh", None),
        ("relu", None),
        ("leaky_relu", None),
        ("leaky_relu", 0.2),
        ("leaky_relu", 3),
        ("selu", None),
    ],
)
def test_calculate_gain_is_torchs(nonlinearity, param):
    got = bg.nn.init.calculate_gain(nonlinearity, param)
    want = torch.nn.init.calculate_gain(nonlinearity, param)
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("shape", [(5, 3), (4, 2, 3), (6, 3, 2, 5), (2, 1, 1, 1, 7)])
def test_fans_are_torchs(shape):
    got = bg.nn.init._calculate_fan_in_and_fan_out(bg.empty(*shape))
    assert got == torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))


@pytest.mark.parametrize(
    "fill",
    [
        lambda m, t: m.nn.init.zeros_(t),
        lambda m, t: m.nn.init.ones_(t),
        lambda m, t: m.nn.init.constant_(t, 0.3),
        lambda m, t: m.nn.init.constant_(t, -2),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16"])
def test_deterministic_fills_are_exact(fill, dtype):
    got = bg.full((2, 3), 7, dtype=getattr(bg, dtype))
    want = torch.full((2, 3), 7, dtype=getattr(torch, dtype))
    assert fill(bg, got) is got and fill(torch, want) is want
    assert_same(got, want, rtol=0, atol=0)


def test_fills_write_into_parameters_without_recording():
    for m in (bg, torch):
        layer = m.nn.Linear(3, 2)
        version = layer.weight._version
        assert m.nn.init.constant_(layer.weight, 0.5) is layer.weight
        assert layer.weight.is_leaf and layer.weight.requires_grad and layer.weight.grad_fn is None
        assert layer.weight._version == version + 1
        assert (layer.weight.detach().numpy() == 0.5).all()


# (initializer, its standard deviation, whether uniform) for a (fan_out, fan_in) = (300, 200) tensor
_FAN_IN, _FAN_OUT = 200, 300
RANDOM = {
    "uniform": (lambda m, t: m.nn.init.uniform_(t, -0.5, 1.5), 2 / math.sqrt(12), 0.5, True),
    "normal": (lambda m, t: m.nn.init.normal_(t, 0.25, 0.1), 0.1, 0.25, False),
    "xavier_uniform": (
        lambda m, t: m.nn.init.xavier_uniform_(t, gain=2.0),
        2.0 * math.sqrt(2 / (_FAN_IN + _FAN_OUT)),
        0.0,
        True,
    ),
    "xavier_normal": (lambda m, t: m.nn.init.xavier_normal_(t), math.sqrt(2 / (_FAN_IN + _FAN_OUT)), 0.0, False),
    "kaiming_uniform": (
        lambda m, t: m.nn.init.kaiming_uniform_(t, a=math.sqrt(5)),
        math.sqrt(2 / (1 + 5)) / math.sqrt(_FAN_IN),
        0.0,
        True,
    ),
    "kaiming_uniform_fan_out_relu": (
        lambda m, t: m.nn.init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"),
        math.sqrt(2) / math.sqrt(_FAN_OUT),
        0.0,
        True,
    ),
    "kaiming_normal": (
        lambda m, t: m.nn.init.kaiming_normal_(t),
        math.sqrt(2 / (1 + 0.01**2)) / math.sqrt(_FAN_IN),
        0.0,
        False,
    ),
    "kaiming_normal_fan_out_tanh": (
        lambda m, t: m.nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="tanh"),
        5 / 3 / math.sqrt(_FAN_OUT),
        0.0,
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(RANDOM))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_random_initializers_follow_torchs_distributions(name, dtype):
    init, std, mean, uniform = RANDOM[name]
    t = bg.nn.Parameter(bg.zeros(_FAN_OUT, _FAN_IN, dtype=getattr(bg, dtype)))
    t_want = torch.nn.Parameter(torch.zeros(_FAN_OUT, _FAN_IN, dtype=getattr(torch, dtype)))
    assert init(bg, t) is t
    init(torch, t_want)
    assert t.shape == t_want.shape and repr(t.dtype) == repr(t_want.dtype) and t.requires_grad and t.is_leaf
    values, torch_values = t.detach().numpy(), t_want.detach().numpy()
    n = values.size
    assert abs(values.mean() - mean) < 5 * std / math.sqrt(n)  # five standard errors
    assert abs(values.std() / std - 1) < 0.02 and abs(torch_values.std() / std - 1) < 0.02
    if uniform:  # the bounds are reached but never passed
        low, high = mean - std * math.sqrt(3), mean + std * math.sqrt(3)
        assert low <= values.min() < low + 0.01 * std and high - 0.01 * std < values.max() <= high
    else:  # about 68% within one standard deviation
        assert abs(np.mean(np.abs(values - mean) < std) - 0.6827) < 0.01


def test_random_initializers_draw_from_the_generator_given():
    results = []
    for _ in range(2):
        g = bg.Generator().manual_seed(7)
        results.append(
            [
                f(bg.empty(4, 5), generator=g).numpy()
                for f in (
                    bg.nn.init.xavier_normal_,
                    bg.nn.init.kaiming_normal_,
                    bg.nn.init.xavier_uniform_,
                    bg.nn.init.kaiming_uniform_,
                )
            ]
        )
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(results[0][0], results[0][1] / results[0][1].std() * results[0][0].std())


@pytest.mark.parametrize(
    "case",
    [
        lambda m: m.nn.init.xavier_uniform_(m.empty(5)),
        lambda m: m.nn.init.xavier_normal_(m.empty(())),
        lambda m: m.nn.init.kaiming_normal_(m.empty(5)),
        lambda m: m.nn.init.kaiming_uniform_(m.empty(3, 4), mode="fan_avg"),
        lambda m: m.nn.init.kaiming_normal_(m.empty(3, 4), nonlinearity="swish"),
        lambda m: m.nn.init.kaiming_normal_(m.empty(3, 4), a="big"),
        lambda m: m.nn.init.calculate_gain("leaky_relu", True),
        lambda m: m.nn.init.calculate_gain("softsign"),
    ],
)
def test_initializer_errors_match_torch(case):
    got, want = raises_like_torch(case)
    assert str(got) == str(want)


@pytest.mark.parametrize("init", ["kaiming_uniform_", "kaiming_normal_"])
def test_kaiming_of_an_empty_tensor_warns_as_torch_and_changes_nothing(init):
    messages = []
    for m in (bg, torch):
        t = m.ones(0, 3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert getattr(m.nn.init, init)(t) is t
        messages.append([(w.category, str(w.message)) for w in caught])
    assert messages[0] == messages[1] == [(UserWarning, "Initializing zero-element tensors is a no-op")]


# ---- nn.utils: parameters as a vector -------------------------------------------------------------------------
def _params(m, dtype="float64"):
    rng = np.random.default_rng(0)
    shapes = [(2, 3), (4,), (1, 2, 2)]
    return [m.nn.Parameter(m.tensor(rng.standard_normal(s), dtype=getattr(m, dtype))) for s in shapes]


def test_parameters_to_vector_matches_torch_and_stays_in_the_graph():
    params, t_params = _params(bg), _params(torch)
    vec, t_vec = bg.nn.utils.parameters_to_vector(params), torch.nn.utils.parameters_to_vector(t_params)
    assert_same(vec, t_vec, rtol=0, atol=0)
    assert vec.grad_fn.name() == t_vec.grad_fn.name() == "CatBackward0"
    weights = bg.arange(vec.numel(), dtype=bg.float64)
    grads = bg.autograd.grad((vec * weights).sum(), params)
    t_grads = torch.autograd.grad((t_vec * torch.arange(t_vec.numel(), dtype=torch.float64)).sum(), t_params)
    assert_same(grads, t_grads)
    assert_same(to_vector_by_path(params), t_vec)


def test_vector_to_parameters_matches_torch():
    params, t_params = _params(bg), _params(torch)
    vec = bg.arange(16, dtype=bg.float32) / 4  # a float32 vector: the parameters take its dtype, as torch's
    objects = [id(p) for p in params]
    bg.nn.utils.vector_to_parameters(vec, params)
    torch.nn.utils.vector_to_parameters(to_torch(vec), t_params)
    assert_same([p.detach() for p in params], [p.detach() for p in t_params], rtol=0, atol=0)
    assert [id(p) for p in params] == objects and all(p.requires_grad and p.is_leaf for p in params)
    bg.nn.utils.vector_to_parameters(bg.zeros(20, dtype=bg.float64), params)  # extra values are ignored
    assert all(p.dtype is bg.float64 and not p.detach().numpy().any() for p in params)


@pytest.mark.parametrize(
    "case",
    [
        lambda m: m.nn.utils.vector_to_parameters([1.0, 2.0], [m.zeros(2)]),
        lambda m: m.nn.utils.vector_to_parameters(m.zeros(5), [m.zeros(2, 3)]),
        lambda m: m.nn.utils.parameters_to_vector([]),
    ],
)
def test_vector_errors_match_torch(case):
    raises_like_torch(case)


# ---- nn.utils: gradient clipping -------------------------------------------------------------------------------
def _with_grads(m, dtype="float64", scale=1.0, extra=None):
    params = _params(m, dtype)
    rng = np.random.default_rng(1)
    for p in params[:2]:  # the last parameter has no gradient
        p.grad = m.tensor(rng.standard_normal(tuple(p.shape)) * scale, dtype=getattr(m, dtype))
    if extra is not None:
        params[0].grad[0, 0] = extra
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, 0.5, float("inf"), 0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
@pytest.mark.parametrize("foreach", [None, True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_clip_grad_norm_matches_torch(norm_type, max_norm, foreach, dtype):
    params, t_params = _with_grads(bg, dtype), _with_grads(torch, dtype)
    grads = [p.grad for p in params[:2]]
    total = bg.nn.utils.clip_grad_norm_(params, max_norm, norm_type, foreach=foreach)
    t_total = torch.nn.utils.clip_grad_norm_(t_params, max_norm, norm_type, foreach=foreach)
    tol = (1e-12, 1e-14) if dtype == "float64" else (2e-6, 1e-7)
    assert_same(total, t_total, *tol)
    assert_same([p.grad for p in params[:2]], [p.grad for p in t_params[:2]], *tol)
    assert [p.grad for p in params[:2]] == grads and params[2].grad is None  # in place


@pytest.mark.parametrize("fuse_after", [0, 10**9], ids=["one program", "tensor by tensor"])
def test_clip_grad_norm_over_many_shapes_matches_torch_and_new_shapes_compile_nothing(fuse_after, monkeypatch):
    """Until the one program over every gradient pays for its compile (which grows with their number), the norms and
    the scaling run tensor by tensor on the host: new shapes compile nothing there. Torch's values either way."""
    from batched_grad import _lazy

    monkeypatch.setattr(_lazy, "FUSE_AFTER", fuse_after)

    def clipped(m, shapes):
        rng = np.random.default_rng(len(shapes))
        params = [m.zeros(s, dtype=m.float32, requires_grad=True) for s in shapes]
        for p, shape in zip(params, shapes):
            p.grad = m.tensor(rng.standard_normal(shape) * 3, dtype=m.float32)
        return m.nn.utils.clip_grad_norm_(params, 1.0), [p.grad for p in params]

    shapes = [(3, 4), (4,), (5, 2, 2), (7,), (1, 6)]
    assert_same(clipped(bg, shapes), clipped(torch, shapes), 2e-6, 1e-7)
    before = bg.compile_count()
    assert_same(clipped(bg, shapes[1:] + [(2, 9)]), clipped(torch, shapes[1:] + [(2, 9)]), 2e-6, 1e-7)
    assert (bg.compile_count() == before) is (fuse_after > 0)


def test_clip_grad_norm_of_one_tensor_none_and_an_empty_generator_as_torch():
    results = []
    for m in (bg, torch):
        (p,) = _with_grads(m, scale=10.0)[:1]
        total = m.nn.utils.clip_grad_norm_(p, 1.0)
        none = m.nn.utils.clip_grad_norm_([m.zeros(2, requires_grad=True)], 1.0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            empty = m.nn.utils.clip_grad_norm_((q for q in []), 1.0)
        results.append(
            (total.item(), np.linalg.norm(p.grad.numpy()), repr(none), repr(empty), [str(w.message) for w in caught])
        )
    assert results[0][2:] == results[1][2:]
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-12)
    assert results[0][1] == pytest.approx(1.0, rel=1e-6) and results[1][1] == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("foreach", [None, False])
def test_nonfinite_norms_raise_when_asked_and_spread_otherwise_as_torch(foreach):
    for value in (float("nan"), float("inf")):
        raises_like_torch(
            lambda m: m.nn.utils.clip_grad_norm_(
                _with_grads(m, extra=value), 1.0, error_if_nonfinite=True, foreach=foreach
            )
        )
        params, t_params = _with_grads(bg, extra=value), _with_grads(torch, extra=value)
        total = bg.nn.utils.clip_grad_norm_(params, 1.0, foreach=foreach)
        t_total = torch.nn.utils.clip_grad_norm_(t_params, 1.0, foreach=foreach)
        assert_same(total, t_total)
        assert_same([p.grad for p in params[:2]], [p.grad for p in t_params[:2]])
    assert_same(
        bg.nn.utils.get_total_norm([bg.ones(3), bg.ones(2, 2)], 3.0),
        torch.nn.utils.get_total_norm([torch.ones(3), torch.ones(2, 2)], 3.0),
    )


@pytest.mark.parametrize("foreach", [None, True, False])
def test_clip_grad_value_matches_torch(foreach):
    params, t_params = _with_grads(bg, extra=float("nan")), _with_grads(torch, extra=float("nan"))
    assert bg.nn.utils.clip_grad_value_(params, 0.4, foreach=foreach) is None
    torch.nn.utils.clip_grad_value_(t_params, 0.4, foreach=foreach)
    assert_same([p.grad for p in params[:2]], [p.grad for p in t_params[:2]], rtol=0, atol=0)


def test_clipping_in_a_training_step_matches_torch():
    models = []
    for m in (bg, torch):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3).double()
        if m is bg:
            state = {k: bg.tensor(v.detach().numpy()) for k, v in model.state_dict().items()}
            model = bg.nn.Linear(4, 3).double()
            model.load_state_dict(state)
        opt = m.optim.SGD(model.parameters(), lr=0.1)
        x = m.tensor(np.arange(8.0).reshape(2, 4))
        for _ in range(3):
            opt.zero_grad()
            (model(x) ** 2).sum().backward()
            clip_grad_norm_by_path(model.parameters(), 0.5) if m is bg else torch.nn.utils.clip_grad.clip_grad_norm_(
                model.parameters(), 0.5
            )
            opt.step()
        models.append(model)
    assert_same(
        [p.detach() for p in models[0].parameters()], [p.detach() for p in models[1].parameters()], 1e-12, 1e-14
    )
