"""The torch conveniences of the top-level namespace against torch 2.13: dtype aliases, finfo/iinfo, allclose,
isclose, equal, is_tensor, is_floating_point, numel, size= on factories, randint_like, batched_grad.cuda and the
legacy autograd.Variable."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad.autograd import Variable
from oracle import assert_same, raises_like_torch, to_torch

DTYPES = [
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "bool",
    "complex64",
    "complex128",
]


# ---- dtype aliases -------------------------------------------------------------------------------------
@pytest.mark.parametrize("alias", ["float", "double", "half", "long", "int", "short", "cfloat", "cdouble"])
def test_dtype_aliases_are_the_dtypes_torch_maps_them_to(alias):
    target = getattr(torch, alias)
    assert getattr(bg, alias) is getattr(bg, str(target).replace("torch.", ""))
    assert repr(getattr(bg, alias)) == repr(target)


def test_aliases_work_as_dtypes():
    assert bg.zeros(2, dtype=bg.float).dtype is bg.float32
    assert bg.ones(2).to(bg.int).dtype is bg.int32
    assert bg.arange(3, dtype=bg.short).dtype is bg.int16


@pytest.mark.parametrize("name", ["pi", "e", "inf", "nan", "newaxis"])
def test_constants_are_torchs(name):
    got, want = getattr(bg, name), getattr(torch, name)
    assert type(got) is type(want)
    assert got is None if want is None else np.array_equal(got, want, equal_nan=True)


def test_constants_in_use():
    x = bg.tensor([0.5, 1.0])
    assert_same(bg.sin(bg.pi * x), torch.sin(torch.pi * torch.tensor([0.5, 1.0])))
    assert x[:, bg.newaxis].shape == (2, 1)
    assert bg.isinf(bg.tensor(bg.inf)).item() and bg.isnan(bg.tensor(bg.nan)).item()


# ---- finfo / iinfo ------------------------------------------------------------------------------------------
FINFO_FIELDS = ["bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"]


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"])
def test_finfo_fields_and_repr(name):
    got, want = bg.finfo(getattr(bg, name)), torch.finfo(getattr(torch, name))
    for field in FINFO_FIELDS:
        assert getattr(got, field) == getattr(want, field), field
        assert type(getattr(got, field)) is type(getattr(want, field)), field
    assert repr(got) == repr(want) and str(got) == str(want)


def test_finfo_defaults_to_the_default_dtype():
    assert bg.finfo() == bg.finfo(bg.float32)
    bg.set_default_dtype(bg.float64)
    try:
        assert bg.finfo().dtype == "float64"
    finally:
        bg.set_default_dtype(bg.float32)
    assert bg.finfo(type=bg.float16).bits == 16


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_fields_and_repr(name):
    got, want = bg.iinfo(getattr(bg, name)), torch.iinfo(getattr(torch, name))
    for field in ["bits", "min", "max", "dtype"]:
        assert getattr(got, field) == getattr(want, field), field
        assert type(getattr(got, field)) is type(getattr(want, field)), field
    assert repr(got) == repr(want)


def test_info_equality_and_read_only_fields():
    assert bg.finfo(bg.float32) == bg.finfo(bg.complex64)
    assert bg.finfo(bg.float32) != bg.finfo(bg.float64)
    assert bg.iinfo(bg.int32) == bg.iinfo(bg.int32)
    raises_like_torch(lambda m: setattr(m.finfo(m.float32), "eps", 1.0))


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.finfo(m.int32),
        lambda m: m.finfo(m.bool),
        lambda m: m.finfo("float32"),
        lambda m: m.finfo(3),
        lambda m: m.iinfo(m.float32),
        lambda m: m.iinfo(m.complex64),
        lambda m: m.iinfo(m.bool),
        lambda m: m.iinfo(),
        lambda m: m.iinfo(3),
    ],
    ids=[
        "finfo-int",
        "finfo-bool",
        "finfo-str",
        "finfo-number",
        "iinfo-float",
        "iinfo-complex",
        "iinfo-bool",
        "iinfo-nothing",
        "iinfo-number",
    ],
)
def test_info_errors(call):
    raises_like_torch(call)


def test_finfo_eps_is_the_gap_above_one():
    for d in (bg.float16, bg.float32, bg.float64):
        one = bg.ones((), dtype=d)
        assert (one + bg.finfo(d).eps).item() > 1 and (one + bg.finfo(d).eps / 4).item() == 1


# ---- allclose / isclose / equal -----------------------------------------------------------------------------
def _pair(dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, (3, 4))
    b = a + rng.choice([0.0, 1e-9, 1e-6, 1e-4, 1e-2], size=a.shape) * rng.choice([-1, 1], size=a.shape)
    b[0, 0] = a[0, 0] = np.nan if np.dtype(dtype).kind == "f" else 0
    b[1, 1], a[1, 1] = (np.inf, np.inf) if np.dtype(dtype).kind == "f" else (1, 1)
    b[2, 2], a[2, 2] = (np.inf, -np.inf) if np.dtype(dtype).kind == "f" else (3, 2)
    return bg.tensor(a.astype(dtype)), bg.tensor(b.astype(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool"])
@pytest.mark.parametrize(
    "tolerances",
    [
        {},
        {"rtol": 1e-3},
        {"atol": 1e-5, "rtol": 0},
        {"rtol": 0, "atol": 0},
        {"rtol": 0.4, "atol": 0.5},
        {"equal_nan": True},
    ],
)
def test_isclose_and_allclose(dtype, tolerances):
    a, b = _pair(dtype)
    assert_same(bg.isclose(a, b, **tolerances), torch.isclose(to_torch(a), to_torch(b), **tolerances))
    assert_same(a.isclose(b, **tolerances), torch.isclose(to_torch(a), to_torch(b), **tolerances))
    for x, y in ((a, b), (a, a), (a[1:2, 1:], b[1:2, 1:])):
        want = torch.allclose(to_torch(x), to_torch(y), **tolerances)
        assert bg.allclose(x, y, **tolerances) is want
        assert x.allclose(y, **tolerances) is want


def test_isclose_complex_and_broadcast():
    a = bg.tensor([[1 + 1j, 2 - 1j]])
    b = bg.tensor([[1 + 1.000001j], [2 - 1j]])
    assert_same(bg.isclose(a, b), torch.isclose(to_torch(a), to_torch(b)))
    assert bg.allclose(bg.ones(2, 1), bg.ones(3)) is torch.allclose(torch.ones(2, 1), torch.ones(3))


def test_isclose_of_tensors_requiring_grad_gives_a_plain_bool_tensor():
    x = bg.ones(3, requires_grad=True)
    assert bg.isclose(x, x).requires_grad is False and bg.isclose(x, x).dtype is bg.bool


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.isclose(m.ones(2), m.ones(2, dtype=m.float64)),
        lambda m: m.allclose(m.tensor([1, 2]), m.tensor([1.0, 2.0])),
        lambda m: m.isclose(m.ones(2), 1.0),
        lambda m: m.allclose(m.ones(2), 1.0),
        lambda m: m.isclose(1.0, m.ones(2)),
        lambda m: m.isclose(m.ones(2), m.ones(2), rtol=-1),
        lambda m: m.isclose(m.ones(2), m.ones(2), atol=-0.5),
        lambda m: m.allclose(m.ones(2), m.ones(3)),
    ],
    ids=["dtypes", "allclose-dtypes", "number", "allclose-number", "number-first", "rtol", "atol", "shapes"],
)
def test_closeness_errors(call):
    raises_like_torch(call)


@pytest.mark.parametrize(
    "a,b",
    [
        ([1.0, 2.0], [1.0, 2.0]),
        ([1.0, 2.0], [1, 2]),
        ([0.1], np.array([0.1])),
        ([1.0, 2.0], [1.0, 2.0, 3.0]),
        ([1.0, 2.0], [1.0]),
        ([float("nan")], [float("nan")]),
        ([1, 0], [True, False]),
        ([[1.0]], [1.0]),
        ([], []),
    ],
)
def test_equal(a, b):
    x, y = bg.tensor(a), bg.tensor(b)
    assert bg.equal(x, y) is torch.equal(to_torch(x), to_torch(y))
    assert x.equal(y) is torch.equal(to_torch(x), to_torch(y))


def test_equal_errors():
    raises_like_torch(lambda m: m.equal(m.ones(2), 1.0))
    raises_like_torch(lambda m: m.equal([1.0], m.ones(1)))


# ---- is_tensor / is_floating_point / is_complex / numel ------------------------------------------------------
@pytest.mark.parametrize("name", DTYPES)
def test_type_predicates(name):
    x, t = bg.zeros(2, 3, dtype=getattr(bg, name)), torch.zeros(2, 3, dtype=getattr(torch, name))
    assert bg.is_tensor(x) and bg.is_floating_point(x) is torch.is_floating_point(t)
    assert bg.is_complex(x) is torch.is_complex(t)
    assert bg.numel(x) == torch.numel(t) == 6


def test_is_tensor_of_other_things():
    for thing in (1, 1.0, [bg.ones(1)], np.ones(2), torch.ones(2), None):
        assert bg.is_tensor(thing) is False
    assert bg.is_tensor(bg.nn.Parameter(bg.ones(2)))
    assert bg.numel(bg.ones(())) == 1 and bg.numel(bg.ones(0, 5)) == 0


@pytest.mark.parametrize(
    "call",
    [lambda m: m.is_floating_point(1.0), lambda m: m.numel(3), lambda m: m.is_complex([1])],
    ids=["is_floating_point", "numel", "is_complex"],
)
def test_predicate_errors(call):
    raises_like_torch(call)


# ---- size= on factories, randint_like --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
@pytest.mark.parametrize("size", [(2, 3), [4], (), (0, 2)])
def test_size_keyword(name, size):
    got, want = getattr(bg, name)(size=size), getattr(torch, name)(size=size)
    assert got.shape == want.shape and repr(got.dtype) == repr(want.dtype)
    typed = getattr(bg, name)(size=size, dtype=bg.float64, requires_grad=True)
    assert typed.dtype is bg.float64 and typed.requires_grad


def test_size_keyword_of_full_and_randint():
    assert_same(bg.full(size=(2,), fill_value=3), torch.full(size=(2,), fill_value=3))
    assert bg.randint(0, 3, size=(2, 5)).shape == (2, 5)
    assert bg.randint(high=3, size=(4,)).shape == (4,)


def test_size_keyword_of_new_factories():
    x = bg.ones(2, dtype=bg.float64)
    assert_same(x.new_zeros(size=(2, 3)), torch.ones(2, dtype=torch.float64).new_zeros(size=(2, 3)))
    assert_same(x.new_ones(size=[4]), torch.ones(2, dtype=torch.float64).new_ones(size=[4]))
    raises_like_torch(lambda m: m.ones(2).new_zeros(2, size=(3,)))


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
@pytest.mark.parametrize(
    "call",
    [
        lambda f: f(2, size=(2, 3)),
        lambda f: f(size=2),
        lambda f: f(size=None),
        lambda f: f(size="ab"),
        lambda f: f(size=(2.0,)),
        lambda f: f(size=(-1, 2)),
    ],
    ids=["both", "int", "none", "str", "float-item", "negative"],
)
def test_size_keyword_errors(name, call):
    if name in ("rand", "randn") and call(lambda *a, **k: a and "size" in k):  # torch: its overloads' message
        with pytest.raises(TypeError, match="got multiple values for argument 'size'"):
            call(getattr(bg, name))
        return
    raises_like_torch(lambda m: call(getattr(m, name)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8"])
def test_randint_like(dtype):
    x = bg.zeros(50, 3, dtype=getattr(bg, dtype))
    r = bg.randint_like(x, 5)
    assert r.shape == x.shape and r.dtype is x.dtype and 0 <= r.min().item() and r.max().item() < 5
    r = bg.randint_like(x, 3, 7)
    assert r.min().item() >= 3 and r.max().item() < 7 and len(set(r.flatten().tolist())) > 1  # 150 draws
    r = bg.randint_like(x, low=2, high=4, dtype=bg.int64)
    assert r.dtype is bg.int64 and set(np.unique(r.numpy()).tolist()) <= {2, 3}
    assert bg.randint_like(x, high=5).shape == x.shape


def test_randint_like_follows_the_generator():
    x = bg.zeros(4, 4)
    a = bg.randint_like(x, 100, generator=bg.Generator().manual_seed(3))
    b = bg.randint_like(x, 100, generator=bg.Generator().manual_seed(3))
    assert bg.equal(a, b)
    grad = bg.randint_like(x, 5, requires_grad=True)
    assert grad.requires_grad and grad.is_leaf


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.randint_like(m.ones(2), 5, 2),
        lambda m: m.randint_like(m.ones(2), -1),
        lambda m: m.randint_like(m.ones(2, dtype=m.uint8), 300),
        lambda m: m.randint(0, 300, (3,), dtype=m.uint8),
        lambda m: m.randint_like(m.ones(2), 5, dtype=m.complex64),
        lambda m: m.randint_like(m.ones(2, dtype=m.int64), 5, requires_grad=True),
    ],
    ids=["reversed", "negative-high", "uint8-bounds", "randint-uint8", "complex", "int-grad"],
)
def test_randint_like_errors(call):
    raises_like_torch(call)


@pytest.mark.parametrize(
    "call",
    [lambda m: m.randint_like(m.ones(2), 5.5), lambda m: m.randint_like(m.ones(2)), lambda m: m.randint_like([1.0], 5)],
    ids=["float", "no-high", "not-tensor"],
)
def test_randint_like_type_errors(call):  # torch lists its overloads; the type is the contract
    with pytest.raises(TypeError):
        call(torch)
    with pytest.raises(TypeError, match="randint_like()"):
        call(bg)


# ---- batched_grad.cuda ----------------------------------------------------------------------------------------
def test_cuda_module_reports_jax_gpu_backend():
    import jax

    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    assert bg.cuda.is_available() is bool(gpus)
    assert bg.cuda.device_count() == len(gpus)


# ---- autograd.Variable ---------------------------------------------------------------------------------------
def test_variable_is_a_detached_alias():
    x = bg.ones(3)
    v = Variable(x)
    assert type(v) is bg.Tensor and v is not x and v.is_leaf and not v.requires_grad
    v.add_(1)  # shares values and version counter, as torch's
    assert x.tolist() == [2.0, 2.0, 2.0] and x._version == v._version == 1
    assert v.data_ptr() == x.data_ptr() and v._base is None


def test_variable_requires_grad():
    w = bg.ones(3, requires_grad=True)
    assert Variable(w).requires_grad is False
    nonleaf = w * 2
    v = Variable(nonleaf, requires_grad=True)
    assert v.is_leaf and v.requires_grad and v.grad_fn is None
    (v * v).sum().backward()
    assert_same(v.grad, torch.full((3,), 4.0))
    assert Variable(data=bg.zeros(2), requires_grad=False).requires_grad is False


def test_every_tensor_is_a_variable():
    assert isinstance(bg.ones(1), Variable) and isinstance(bg.nn.Parameter(bg.ones(1)), Variable)
    assert not isinstance(np.ones(1), Variable) and not isinstance(1.0, Variable)


def test_variable_without_data_and_with_volatile():
    assert_same(Variable(), torch.autograd.Variable())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Variable(bg.ones(1), volatile=True)
    assert str(caught[0].message) == "volatile was removed and now has no effect. Use `with torch.no_grad():` instead."


def test_autograd_reexports_the_package_and_volatile_reads_false():
    # torch.autograd imports torch, and older code reaches torch through it
    for m in (bg, torch):
        assert m.autograd.torch is m
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert m.autograd.torch.ones(2).volatile is False
        assert "volatile" in str(caught[0].message)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.autograd.Variable(3),
        lambda m: m.autograd.Variable([1.0, 2.0]),
        lambda m: m.autograd.Variable(m.ones(2, dtype=m.int64), requires_grad=True),
    ],
    ids=["number", "list", "int-requires-grad"],
)
def test_variable_errors(call):
    raises_like_torch(call)
