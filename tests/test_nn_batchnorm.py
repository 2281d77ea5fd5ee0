"""nn.BatchNorm1d, F.batch_norm and nn.Softplus against torch's: outputs, running statistics, num_batches_tracked
and gradients over several training steps, then eval mode, under each option; double backward, batched grads and
errors."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, check_both, raises_like_torch, rand, to_torch

OPTIONS = {
    "default": {},
    "momentum": {"momentum": 0.3},
    "cumulative": {"momentum": None},
    "no_affine": {"affine": False},
    "no_bias": {"bias": False},
    "no_running_stats": {"track_running_stats": False},
    "eps": {"eps": 1e-2},
}


def _pair(options):
    t_norm = torch.nn.BatchNorm1d(3, dtype=torch.float64, **options)
    norm = bg.nn.BatchNorm1d(3, dtype=bg.float64, **options)
    with torch.no_grad():  # a scale and shift other than ones and zeros
        for p in t_norm.parameters():
            p.copy_(torch.linspace(0.5, 1.5, 3, dtype=torch.float64))
    norm.load_state_dict({k: bg.tensor(v.numpy()) for k, v in t_norm.state_dict().items()})
    return norm, t_norm


def _inputs(shape, steps):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape) * 2 + 1 for _ in range(steps)]


@pytest.mark.parametrize("name", sorted(OPTIONS))
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6)])
def test_training_then_eval_matches_torch(name, shape):
    norm, t_norm = _pair(OPTIONS[name])
    assert repr(norm) == repr(t_norm)
    assert list(norm.state_dict()) == list(t_norm.state_dict())
    for step, a in enumerate(_inputs(shape, 4)):
        if step == 3:
            norm.eval(), t_norm.eval()
        x, t_x = bg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        out, t_out = norm(x), t_norm(t_x)
        assert_same(out, t_out, 1e-10, 1e-12)
        assert out.grad_fn.name() == t_out.grad_fn.name()
        weights = np.linspace(-1, 2, out.numel()).reshape(out.shape)
        (out * bg.tensor(weights)).sum().backward()
        (t_out * torch.tensor(weights)).sum().backward()
        assert_same(x.grad, t_x.grad, 1e-9, 1e-12)
        for p, t_p in zip(norm.parameters(), t_norm.parameters()):
            assert_same(p.grad, t_p.grad, 1e-9, 1e-12)
        for b, t_b in zip(norm.state_dict().values(), t_norm.state_dict().values()):
            assert_same(b, t_b, 1e-12, 1e-14)


def test_running_statistics_are_updated_in_place_as_torchs():
    norm = bg.nn.BatchNorm1d(2)
    mean, var, count = norm.running_mean, norm.running_var, norm.num_batches_tracked
    versions = mean._version, count._version
    norm(bg.randn(4, 2))
    assert norm.running_mean is mean and norm.running_var is var and norm.num_batches_tracked is count
    assert (mean._version, count._version) == (versions[0] + 1, versions[1] + 1) and count.item() == 1
    assert count.dtype is bg.int64 and not mean.requires_grad
    norm.double()
    assert norm.running_mean.dtype is bg.float64 and norm.num_batches_tracked.dtype is bg.int64


@pytest.mark.parametrize("training", [True, False])
def test_functional_batch_norm_double_backward_and_batched_grads_match_torch(training):
    def fn(m, x, w, b):
        running_mean, running_var = (
            m.tensor([0.1, -0.2, 0.3], dtype=m.float64),
            m.tensor([1.5, 0.5, 2.0], dtype=m.float64),
        )
        return m.nn.functional.batch_norm(x, running_mean, running_var, w, b, training=training, momentum=0.2)

    check_both(fn, [rand(4, 3, 2), rand(3), rand(3)], batched=True, rtol=1e-8, atol=1e-10)


def test_functional_batch_norm_moves_the_given_statistics_as_torch():
    stats = [bg.zeros(3, dtype=bg.float64), bg.ones(3, dtype=bg.float64)]
    t_stats = [torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)]
    x = rand(6, 3)
    bg.nn.functional.batch_norm(x, *stats, training=True, momentum=0.25)
    torch.nn.functional.batch_norm(to_torch(x), *t_stats, training=True, momentum=0.25)
    assert_same(stats, t_stats, 1e-12, 1e-14)


@pytest.mark.parametrize(
    "case",
    [
        lambda m: m.nn.functional.batch_norm(m.randn(4, 3), None, None),
        lambda m: m.nn.functional.batch_norm(m.randn(4, 3), m.zeros(3), None),
        lambda m: m.nn.functional.batch_norm(m.randn(4, 3), m.zeros(4), m.ones(3)),
        lambda m: m.nn.functional.batch_norm(m.randn(4, 3), m.zeros(3), m.ones(4)),
        lambda m: m.nn.functional.batch_norm(m.randn(4, 3), m.zeros(3), m.ones(3), m.ones(4)),
        lambda m: m.nn.functional.batch_norm(m.randn(4, 3), m.zeros(3), m.ones(3), None, m.ones(2)),
        lambda m: m.nn.functional.batch_norm(m.randn(4, 3), None, None, training=True, eps=0.0),
        lambda m: m.nn.functional.batch_norm(m.randn(4, 3), m.zeros(3), m.ones(3), eps=-1.0),
        lambda m: m.nn.functional.batch_norm(m.randn(1, 3), None, None, training=True),
        lambda m: m.nn.functional.batch_norm(m.randn(1, 3, 1), None, None, training=True),
        lambda m: m.nn.functional.batch_norm(m.randn(3), None, None, training=True),
        lambda m: m.nn.BatchNorm1d(3)(m.randn(2, 3, 4, 5)),
        lambda m: m.nn.BatchNorm1d(3)(m.randn(2)),
        lambda m: m.nn.BatchNorm1d(3)(m.randn(2, 4)),
        lambda m: m.nn.BatchNorm1d(3)(m.randn(1, 3)),
    ],
)
def test_errors_match_torch(case):
    got, want = raises_like_torch(case)
    assert str(got) == str(want)


def test_a_failed_call_still_counts_the_batch_as_torchs_does():
    counts = []
    for m in (bg, torch):
        norm = m.nn.BatchNorm1d(3)
        with pytest.raises(RuntimeError):
            norm(m.randn(2, 4))
        counts.append(norm.num_batches_tracked.item())
    assert counts == [1, 1]


@pytest.mark.parametrize("options", [{}, {"beta": 2, "threshold": 1.0}, {"beta": 0.5, "threshold": 30}])
def test_softplus_module_matches_torch(options):
    layer, t_layer = bg.nn.Softplus(**options), torch.nn.Softplus(**options)
    assert repr(layer) == repr(t_layer)
    x = rand(4, 5, low=-3, high=3)
    t_x = to_torch(x)
    out, t_out = layer(x), t_layer(t_x)
    assert_same(out, t_out, 1e-12, 1e-14)
    out.sum().backward()
    t_out.sum().backward()
    assert_same(x.grad, t_x.grad, 1e-12, 1e-14)
