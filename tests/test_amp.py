"""torch.amp against torch 2.13 on a CPU build: autocast where it is disabled (enabled=False, CUDA without a GPU, an
unsupported dtype) runs the region unchanged with torch's warnings; enabled autocast off the CPU is refused by name
(enabled CPU autocast: test_amp_autocast_cpu.py); GradScaler("cpu") scales, unscales, skips steps on inf/nan and
grows/backs off its scale as torch's; the default GradScaler("cuda") without a GPU is a pass-through."""

import warnings

import numpy as np
import pytest
import torch
import torch.amp

import batched_grad as bg
from batched_grad.amp import GradScaler as ImportedGradScaler
from oracle import assert_same, raises_like_torch

TOL = dict(rtol=1e-5, atol=1e-6)
X = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
no_gpu = pytest.mark.skipif(bg.cuda.is_available(), reason="torch's CPU build has no GPU; batched_grad sees one")


def _model(m):
    model = m.nn.Linear(3, 2)
    with m.no_grad():
        model.weight.copy_(m.tensor(np.linspace(-0.6, 0.6, 6).reshape(2, 3), dtype=m.float32))
        model.bias.copy_(m.tensor([0.1, -0.2]))
    return model


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [(w.category, str(w.message)) for w in caught]


def _disabled_region(m, make_autocast):
    model = _model(m)
    context, caught = _caught(lambda: make_autocast(m))
    with context:
        inside = (m.is_autocast_enabled("cpu"), m.is_autocast_enabled("cuda"))
        y = model(m.tensor(X, dtype=m.float32))
    y.pow(2).sum().backward()
    return caught, inside, y.dtype == m.float32, (y, model.weight.grad)


DISABLED = {
    "cpu_enabled_false": lambda m: m.autocast("cpu", enabled=False),
    "amp_cpu_enabled_false": lambda m: m.amp.autocast("cpu", dtype=m.bfloat16, enabled=False),
    "cpu_float32_dtype": lambda m: m.autocast("cpu", dtype=m.float32),
    "cpu_amp_deprecated_disabled": lambda m: m.cpu.amp.autocast(enabled=False),
    "cuda_without_gpu": pytest.param(lambda m: m.autocast("cuda"), marks=no_gpu),
    "cuda_amp_without_gpu": pytest.param(lambda m: m.cuda.amp.autocast(), marks=no_gpu),
}


@pytest.mark.parametrize("make_autocast", DISABLED.values(), ids=DISABLED.keys())
def test_disabled_autocast_runs_the_region_unchanged_with_torchs_warnings(make_autocast):
    ours, theirs = _disabled_region(bg, make_autocast), _disabled_region(torch, make_autocast)
    assert ours[:3] == (
        [(c, msg) for c, msg in theirs[0]],
        theirs[1],
        theirs[2],
    )
    assert_same(ours[3], theirs[3], **TOL)


def test_autocast_as_a_decorator_and_the_state_around_it():
    for m in (bg, torch):

        @m.autocast("cpu", enabled=False)
        def step(x):
            return m.is_autocast_enabled("cpu"), x * 2

        assert step(m.ones(1))[0] is False
        assert m.get_autocast_dtype("cpu") == m.bfloat16 and m.get_autocast_dtype("cuda") == m.float16
        assert m.is_autocast_cache_enabled() is True
        assert m.amp.is_autocast_available("cpu") and not m.amp.is_autocast_available("meta")


def test_enabled_autocast_off_the_cpu_is_refused_by_name():
    with pytest.raises(NotImplementedError, match="autocast on 'cuda'.*not implemented"):
        bg.set_autocast_enabled("cuda", True)
    assert not bg.is_autocast_enabled("cuda")


@pytest.mark.parametrize(
    "call",
    [lambda m: m.autocast(0), lambda m: m.autocast("foo"), lambda m: m.autocast("cpu", enabled=False)(3)],
    ids=["device_not_str", "unknown_device", "decorate_non_callable"],
)
def test_autocast_errors_match_torch(call):
    raises_like_torch(call)


def _scaled_training(m, make_scaler):
    model = _model(m)
    opt = m.optim.SGD(model.parameters(), lr=0.1)
    scaler = make_scaler(m)
    history = []
    x = m.tensor(X, dtype=m.float32)
    for i in range(6):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        if i in (2, 3):  # an overflow: this step is skipped and the scale backs off
            with m.no_grad():
                model.weight.grad[0, 0] = float("inf") if i == 2 else float("nan")
        scaler.unscale_(opt) if i == 4 else None  # unscale explicitly once, e.g. to clip
        scaler.step(opt)
        scaler.update()
        history.append((scaler.get_scale(), scaler._get_growth_tracker(), sorted(scaler.state_dict().items())))
    return history, (model.weight.detach(), model.bias.detach())


SCALERS = {
    "cpu": lambda m: m.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2),
    "cpu_custom_factors": lambda m: m.amp.GradScaler("cpu", 4.0, growth_factor=3.0, backoff_factor=0.25,
                                                      growth_interval=1),
    "disabled": lambda m: m.amp.GradScaler("cpu", enabled=False),
    "cuda_default_without_gpu": pytest.param(lambda m: m.amp.GradScaler(), marks=no_gpu),
}  # fmt: skip


@pytest.mark.parametrize("make_scaler", SCALERS.values(), ids=SCALERS.keys())
def test_grad_scaler_training_matches_torch(make_scaler):
    (ours, ours_params), caught = _caught(lambda: _scaled_training(bg, make_scaler))
    (theirs, their_params), their_caught = _caught(lambda: _scaled_training(torch, make_scaler))
    assert ours == theirs
    assert caught == their_caught
    if "nan" not in repr(their_params):
        assert_same(ours_params, their_params, **TOL)


@no_gpu
def test_deprecated_cuda_grad_scaler_warns_and_passes_through():
    for m in (bg, torch):
        scaler, caught = _caught(lambda: m.cuda.amp.GradScaler())  # noqa: B023
        assert [c for c, _ in caught] == [FutureWarning, UserWarning]
        assert not scaler.is_enabled() and scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    assert _caught(lambda: bg.cuda.amp.GradScaler())[1] == _caught(lambda: torch.cuda.amp.GradScaler())[1]


def _misuse(m, misuse):
    model = _model(m)
    opt = m.optim.SGD(model.parameters(), lr=0.1)
    scaler = m.amp.GradScaler("cpu")
    scaler.scale(model(m.ones(1, 3)).sum()).backward()
    misuse(scaler, opt)


@pytest.mark.parametrize(
    "misuse",
    [
        lambda s, o: (s.unscale_(o), s.unscale_(o)),
        lambda s, o: (s.step(o), s.unscale_(o)),
        lambda s, o: (s.step(o), s.step(o)),
        lambda s, o: s.step(o, closure=lambda: 0),
        lambda s, o: s.load_state_dict({}),
    ],
    ids=["unscale_twice", "unscale_after_step", "step_twice", "closure", "empty_state"],
)
def test_grad_scaler_misuse_errors_match_torch(misuse):
    raises_like_torch(lambda m: _misuse(m, misuse))


def test_grad_scaler_state_dict_round_trip():
    for m in (bg, torch):
        source = m.amp.GradScaler("cpu", init_scale=32.0, growth_interval=7)
        target = m.amp.GradScaler("cpu")
        target.load_state_dict(source.state_dict())
        assert target.state_dict() == source.state_dict()


def test_import_forms():
    assert ImportedGradScaler is bg.amp.GradScaler and bg.autocast is bg.amp.autocast


def test_custom_fwd_and_bwd_decorators_match_torch():
    def run(m):
        x = m.tensor([0.5, -1.0, 2.0], requires_grad=True)

        class Cube(m.autograd.Function):
            @staticmethod
            @m.amp.custom_fwd(device_type="cpu", cast_inputs=m.float32)
            def forward(ctx, t):
                ctx.save_for_backward(t)
                return t**3

            @staticmethod
            @m.amp.custom_bwd(device_type="cpu")
            def backward(ctx, grad):
                (t,) = ctx.saved_tensors
                assert not m.is_autocast_enabled("cpu")
                return grad * 3 * t**2

        Cube.apply(x).sum().backward()
        return x.grad

    assert_same(run(bg), run(torch))
