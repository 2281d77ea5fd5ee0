"""Tensor conveniences and factories against torch 2.13: new_*, size and type queries, strides, conversions,
sum_to_size, fill_diagonal_, angle, complex/polar/view_as_*, type utilities, logspace, tril/triu_indices, window
functions, asarray, fill, detach; and the random samplers' distributions, derivatives and errors."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, check_both, raises_like_torch, to_torch


def test_new_factories_and_queries():
    x = bg.tensor([[1.5, -2.0, 0.0]], dtype=bg.float64)
    t = to_torch(x)
    for name, args, kwargs in (
        ("new_full", ((2, 3), 4.5), {}),
        ("new_full", ((2,), 1), {"dtype": bg.int32}),
        ("new_tensor", ([1, 2],), {}),
        ("new_tensor", ([[1.5]],), {"dtype": bg.float32}),
    ):
        got = getattr(x, name)(*args, **kwargs)
        want = getattr(t, name)(*args, **{k: getattr(torch, v.name) for k, v in kwargs.items()})
        assert_same(got, want)
    assert x.new_empty(2, 3).shape == (2, 3) and x.new_empty((4,)).dtype is bg.float64
    assert x.new_full((1,), 2.0, requires_grad=True).requires_grad
    for name in ("ndimension", "nelement", "is_signed", "is_conj", "is_neg"):
        assert getattr(x, name)() == getattr(t, name)(), name
    for name in (
        "nbytes",
        "itemsize",
        "is_cpu",
        "is_mps",
        "is_xla",
        "is_xpu",
        "is_ipu",
        "is_mtia",
        "is_maia",
        "is_vulkan",
        "is_mkldnn",
        "is_nested",
        "is_sparse_csr",
    ):
        assert getattr(x, name) == getattr(t, name), name
    assert bg.tensor([1], dtype=bg.uint8).is_signed() is False
    assert x.resolve_conj() is x and bg.resolve_neg(x) is x
    assert bg.is_same_size(x, bg.ones(1, 3)) and not x.is_same_size(bg.ones(3))
    assert bg.tensor([2.0]).is_nonzero() and not bg.is_nonzero(bg.tensor(0))
    raises_like_torch(lambda m: m.ones(2).is_nonzero())
    raises_like_torch(lambda m: m.ones(0).is_nonzero())


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a,
        lambda a: a.T,
        lambda a: a[1:, ::2],
        lambda a: a[0, 1:],
        lambda a: a.unsqueeze(0).expand(2, 3, 4),
        lambda a: a.reshape(2, 6),
        lambda a: a.permute(1, 0)[::2],
        lambda a: a + 1,
    ],
)
def test_strides(view):
    x, t = bg.ones(3, 4), torch.ones(3, 4)
    assert view(x).stride() == view(t).stride() and view(x).storage_offset() == view(t).storage_offset()
    assert view(x).stride(-1) == view(t).stride(-1)


def test_conversions_and_sum_to_size():
    x = bg.tensor([[1.7, -2.2, 3.0]])
    for name in ("byte", "char", "short", "cfloat", "cdouble"):
        assert_same(getattr(x.abs(), name)(), getattr(to_torch(x).abs(), name)())
    assert x.bfloat16().dtype is bg.bfloat16 and np.allclose(x.bfloat16().float().numpy(), [[1.703125, -2.203125, 3.0]])
    y = bg.tensor(np.random.default_rng(0).uniform(size=(2, 3, 4)), requires_grad=True)
    for size in ((3, 4), (1, 4), (2, 1, 1), (2, 3, 4), (4,)):
        check_both(lambda m, y: y.sum_to_size(*size), [y])
    raises_like_torch(lambda m: m.ones(2, 3).sum_to_size(3, 3))


@pytest.mark.parametrize(
    "shape,wrap", [((3, 3), False), ((2, 5), False), ((7, 3), False), ((7, 3), True), ((3, 3, 3), False)]
)
def test_fill_diagonal(shape, wrap):
    def call(m, x):
        y = x * 1
        assert y.fill_diagonal_(2.5, wrap) is y
        return y

    check_both(call, [bg.tensor(np.random.default_rng(1).uniform(size=shape), requires_grad=True)])


def test_complex_helpers():
    z = bg.tensor([1 + 2j, -3 + 0.5j, 0j], requires_grad=True)
    check_both(lambda m, z: m.view_as_real(z) * 2, [z])
    check_both(lambda m, z: m.angle(z), [z], gradgrad=False)  # torch's second derivative at 0 is nan
    check_both(lambda m, z: m.angle(z[:2]), [z])
    r = bg.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=bg.float64, requires_grad=True)
    check_both(lambda m, r: m.view_as_complex(r).abs(), [r])
    check_both(lambda m, r: m.complex(r[0], r[1]).abs() + m.polar(r[0].abs(), r[1]).real, [r])
    check_both(lambda m, r: m.angle(r) + r.angle(), [r])
    assert_same(bg.angle(bg.tensor([-1, 0, 2])), torch.angle(torch.tensor([-1, 0, 2])))
    raises_like_torch(lambda m: m.view_as_real(m.ones(2)))
    raises_like_torch(lambda m: m.view_as_complex(m.ones(2, 3)))
    raises_like_torch(lambda m: m.complex(m.ones(2), m.ones(2, dtype=m.float64)))


def test_type_utilities():
    for a, b in (
        (bg.int32, bg.float32),
        (bg.uint8, bg.int8),
        (bg.bool, bg.int64),
        (bg.float16, bg.bfloat16),
        (bg.complex64, bg.float64),
    ):
        assert repr(bg.promote_types(a, b)) == repr(torch.promote_types(getattr(torch, a.name), getattr(torch, b.name)))
        for x, y in ((a, b), (b, a)):
            assert bg.can_cast(x, y) == torch.can_cast(getattr(torch, x.name), getattr(torch, y.name)), (x, y)
    assert repr(bg.result_type(bg.ones(2, dtype=bg.int32), 2.5)) == repr(torch.result_type(torch.ones(2).int(), 2.5))
    assert bg.typename(bg.ones(2)) == torch.typename(torch.ones(2)) and bg.typename(3) == torch.typename(3)


FACTORIES = {
    "logspace": lambda m: m.logspace(0, 2, 5),
    "logspace-base": lambda m: m.logspace(-1, 3, 4, base=2, dtype=m.float64),
    "scalar_tensor": lambda m: m.scalar_tensor(3),
    "scalar_tensor-dtype": lambda m: m.scalar_tensor(2, dtype=m.int64),
    "tril_indices": lambda m: m.tril_indices(3, 4),
    "tril_indices-offset": lambda m: m.tril_indices(4, 3, -1),
    "triu_indices": lambda m: m.triu_indices(3, 4, 1),
    "hann": lambda m: m.hann_window(7),
    "hann-symmetric": lambda m: m.hann_window(6, periodic=False),
    "hamming": lambda m: m.hamming_window(8),
    "hamming-coefficients": lambda m: m.hamming_window(5, True, 0.5, 0.5),
    "blackman": lambda m: m.blackman_window(9),
    "bartlett": lambda m: m.bartlett_window(6, False),
    "kaiser": lambda m: m.kaiser_window(7),
    "kaiser-beta": lambda m: m.kaiser_window(6, False, 5.0, dtype=m.float64),
    "window-1": lambda m: m.hann_window(1),
    "window-0": lambda m: m.blackman_window(0),
    "asarray": lambda m: m.asarray([[1, 2], [3, 4]]),
    "asarray-dtype": lambda m: m.asarray(np.arange(3), dtype=m.float32),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_factories(name):
    assert_same(FACTORIES[name](bg), FACTORIES[name](torch), rtol=1e-6, atol=1e-7)


def test_fill_detach_and_asarray_sharing():
    x = bg.tensor([1.0, 2.0], requires_grad=True)
    v = bg.tensor(3.0, requires_grad=True)
    check_both(lambda m, x, v: m.fill(x, v) * 2 + m.fill(x, 1.5), [x, v])
    assert not bg.detach(x).requires_grad and bg.asarray(x) is x
    assert bg.asarray(x, copy=True) is not x
    y = x.detach().clone()
    assert bg.detach_(y) is y


def _sample(fn, n=20000, seed=0, shape=None):
    bg.manual_seed(seed)
    x = bg.zeros(n if shape is None else shape, dtype=bg.float64)
    return np.asarray(fn(x).numpy(), np.float64)


@pytest.mark.parametrize(
    "name,fn,mean,var",
    [
        ("uniform_", lambda x: x.uniform_(-1, 3), 1.0, 16 / 12),
        ("normal_", lambda x: x.normal_(2.0, 0.5), 2.0, 0.25),
        ("bernoulli_", lambda x: x.bernoulli_(0.3), 0.3, 0.21),
        ("exponential_", lambda x: x.exponential_(2.0), 0.5, 0.25),
        ("log_normal_", lambda x: x.log_normal_(0.0, 0.5), np.exp(0.125), (np.exp(0.25) - 1) * np.exp(0.25)),
        ("geometric_", lambda x: x.geometric_(0.25), 4.0, 12.0),
        ("random_", lambda x: x.random_(3, 7), 4.5, 1.25),
    ],
)
def test_in_place_samplers(name, fn, mean, var):
    samples = _sample(fn)
    assert abs(samples.mean() - mean) < 4 * np.sqrt(var / samples.size) + 1e-9
    assert abs(samples.var() - var) < 0.1 * var
    cauchy = _sample(lambda x: x.cauchy_(1.0, 2.0))
    assert abs(np.median(cauchy) - 1.0) < 0.1
    # a fill recorded in the graph: its derivative for the old values is 0, as torch's
    args = {"bernoulli_": (0.5,), "geometric_": (0.5,), "random_": (0, 5)}.get(name, ())
    leaf = bg.ones(3, requires_grad=True)
    y = leaf * 2
    assert getattr(y, name)(*args) is y
    assert y.grad_fn.name() == getattr(torch.ones(3, requires_grad=True) * 2, name)(*args).grad_fn.name()
    assert np.allclose(bg.autograd.grad(y.sum(), leaf)[0].numpy(), 0)
    raises_like_torch(lambda m: getattr(m.ones(2, requires_grad=True), name)(*args))


def test_normal_bernoulli_multinomial_poisson_randperm():
    bg.manual_seed(0)
    mean = bg.tensor([0.0, 5.0], requires_grad=True)
    std = bg.tensor([1.0, 2.0], requires_grad=True)
    draws = bg.stack([bg.normal(mean, std) for _ in range(4000)]).detach().numpy()
    assert np.allclose(draws.mean(0), [0, 5], atol=0.15) and np.allclose(draws.std(0), [1, 2], rtol=0.05)
    out = bg.normal(mean, std)
    g_mean, g_std = bg.autograd.grad(out.sum(), [mean, std])
    assert np.allclose(g_mean.numpy(), 1) and np.allclose(g_std.numpy(), ((out - mean) / std).detach().numpy())
    assert bg.normal(0.0, 1.0, (2, 3)).shape == (2, 3) and bg.normal(mean, 2.0).shape == (2,)
    p = bg.tensor([0.1, 0.9] * 5000, requires_grad=True)
    b = bg.bernoulli(p)
    assert abs(b.detach().numpy()[1::2].mean() - 0.9) < 0.02 and set(np.unique(b.detach().numpy())) <= {0.0, 1.0}
    assert np.allclose(bg.autograd.grad(b.sum(), p)[0].numpy(), 0) and b.grad_fn.name() == "BernoulliBackward0"
    raises_like_torch(lambda m: m.bernoulli(m.ones(2, requires_grad=True) * 0.5, 0.3).sum().backward())
    picks = bg.multinomial(bg.tensor([[1.0, 0.0, 3.0]] * 2), 4000, replacement=True).numpy()
    assert set(np.unique(picks)) <= {0, 2} and abs((picks == 2).mean() - 0.75) < 0.03
    unique = bg.multinomial(bg.tensor([1.0, 2.0, 3.0, 4.0]), 4).numpy()
    assert sorted(unique) == [0, 1, 2, 3] and bg.multinomial(bg.ones(3), 2).dtype is bg.int64
    rates = bg.tensor([0.5, 4.0] * 5000)
    counts = bg.poisson(rates).numpy()
    assert np.allclose([counts[::2].mean(), counts[1::2].mean()], [0.5, 4.0], rtol=0.05)
    perm = bg.randperm(10).numpy()
    assert sorted(perm) == list(range(10)) and bg.randperm(3, dtype=bg.float32).dtype is bg.float32


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.ones(2).normal_(0, -1),
        lambda m: m.ones(2, dtype=m.int64).uniform_(),
        lambda m: m.ones(2).exponential_(0),
        lambda m: m.ones(2).geometric_(1.5),
        lambda m: m.ones(2).random_(5, 2),
        lambda m: m.multinomial(m.tensor([1.0, -1.0]), 1),
        lambda m: m.multinomial(m.ones(2), 3),
        lambda m: m.multinomial(m.zeros(2), 1),
        lambda m: m.normal(m.zeros(2), -m.ones(2)),
        lambda m: m.randperm(-1),
    ],
    ids=[
        "normal-std",
        "uniform-int",
        "exponential-rate",
        "geometric-p",
        "random-range",
        "multinomial-negative",
        "multinomial-count",
        "multinomial-zero",
        "normal-negative-std",
        "randperm-negative",
    ],
)
def test_sampler_errors(call):
    raises_like_torch(call)


@pytest.mark.parametrize(
    "mean_dtype, std_dtype",
    [("float32", None), (None, "float32"), ("float64", None), ("float32", "float64"), ("float64", "float32")],
)
def test_normal_takes_the_dtype_of_its_mean_tensor(mean_dtype, std_dtype):
    def draw(m):
        mean = m.zeros(3, dtype=getattr(m, mean_dtype)) if mean_dtype else 0.0
        std = m.ones(3, dtype=getattr(m, std_dtype)) if std_dtype else 1.0
        return m.normal(mean, std).dtype

    assert str(draw(bg)) == str(draw(torch))
