"""torch's legacy constructors against torch 2.13: Tensor(...) in all its forms, the typed tensor classes
(FloatTensor, LongTensor, ...) as constructors, isinstance() types and .type() arguments, Tensor.new(...), and
autograd.Variable."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch
from test_tensor import _restore_modes  # noqa: F401

TYPED = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor", "ShortTensor",
         "IntTensor", "LongTensor", "BoolTensor"]  # fmt: skip


def summary(m, code, values=True):
    """What a constructor call gives: dtype, shape, requires_grad, leafness, node name and (with `values`; torch
    leaves a tensor made from sizes uninitialized) the values; or the exception's class and first line."""
    x = m.ones(3, requires_grad=True) * 2
    try:
        t = eval(code, {"m": m, "np": np, "x": x, "i": m.arange(3), "f": m.ones(2)})
    except Exception as e:  # the exception is the outcome
        return type(e).__name__, str(e).split("\n")[0]
    if not isinstance(t, (torch.Tensor, bg.Tensor)):
        return repr(t)
    node = t.grad_fn.name() if t.grad_fn is not None else None
    return repr(t.dtype), tuple(t.shape), t.requires_grad, t.is_leaf, node, t.detach().tolist() if values else None


def assert_same_as_torch(code, values=True):
    expected, got = summary(torch, code, values), summary(bg, code, values)
    assert got == expected, f"\n{code}\n torch: {expected}\n    bg: {got}"


# sizes: torch leaves the values uninitialized
SIZE_FORMS = [
    "m.Tensor(2, 3)",
    "m.Tensor(3)",
    "m.Tensor(np.int64(2), 3)",
    "m.Tensor(2, True)",
    "m.Tensor(m.Size([2, 3]))",
    "m.Tensor(m.Size([]))",
    "m.Tensor(size=(2, 3))",
    "m.Tensor(2, device='cpu')",
    "m.LongTensor(2, 3)",
    "m.FloatTensor(m.Size([2]))",
    "m.FloatTensor(size=(2,))",
    "f.new(2, 3)",
    "f.new(m.Size([2]))",
    "f.new(size=(2,))",
    "i.new(4)",
    "m.nn.Parameter(m.Tensor(3, 2))",
    "m.nn.Parameter(m.FloatTensor(2, 3))",
]
FORMS = [
    "m.Tensor()",
    "m.Tensor(0)",
    "m.Tensor(2, 0)",
    "m.Tensor([1, 2])",
    "m.Tensor([[1, 2], [3, 4]])",
    "m.Tensor((2, 3))",
    "m.Tensor(())",
    "m.Tensor([])",
    "m.Tensor([[]])",
    "m.Tensor([True, False])",
    "m.Tensor(range(3))",
    "m.Tensor(bytearray(b'ab'))",
    "m.Tensor(data=[1])",
    "m.Tensor([m.Size([2, 3])])",
    "m.Tensor([m.ones(2).shape, m.ones(2).shape])",
    "m.Tensor(np.arange(3))",
    "m.Tensor(np.arange(3.0))",
    "m.Tensor(np.array(2.0))",
    "m.Tensor([1, 2], device='cpu')",
    "m.Tensor(i)",
    "m.Tensor(f)",
    "m.Tensor(x)",
    "f.new(x)",
    "m.FloatTensor(x)",
    "m.LongTensor([1.5, 2.7])",
    "m.LongTensor(np.arange(3.0))",
    "m.IntTensor([1, 2])",
    "m.BoolTensor([1, 0])",
    "m.ByteTensor([1, 200])",
    "m.HalfTensor([1.5])",
    "m.ShortTensor([1])",
    "m.CharTensor([-1])",
    "m.DoubleTensor(np.arange(3.0, dtype=np.float32))",
    "m.BFloat16Tensor([1.5])",
    "m.FloatTensor()",
    "m.FloatTensor([1, 2], device='cpu')",
    "f.new()",
    "f.new([[1, 2]])",
    "f.new((2, 3))",
    "f.new(np.arange(3))",
    "i.new([1.5])",
    "i.new(np.arange(3.0))",
    "m.ones(2, dtype=m.float64).new([1, 2])",
]

ERRORS = [
    "m.Tensor(2, 3.0)",
    "m.Tensor(2, 3, (4,))",
    "m.FloatTensor(2, 3.5)",
    "f.new(2, 3.0)",
    "m.Tensor(2.0)",
    "m.Tensor(True)",
    "m.Tensor(None)",
    "m.LongTensor(2.0)",
    "m.Tensor(np.float64(2.0))",
    "m.Tensor('a')",
    "m.Tensor(object())",
    "m.Tensor({1, 2})",
    "m.Tensor(iter([1, 2]))",
    "m.Tensor(-1)",
    "m.Tensor(2, -3)",
    "m.Tensor(2, 3, dtype=m.float64)",
    "m.Tensor(2, requires_grad=True)",
    "m.Tensor([1, 2], [3])",
    "m.Tensor(2.5, 1)",
    "m.Tensor(True, 2)",
    "m.Tensor((2, 3), 4)",
    "m.Tensor(m.Size([2]), m.Size([3]))",
    "m.Tensor(x, 2)",
    "m.Tensor(size=3)",
    "m.Tensor(3, size=(2,))",
    "m.Tensor([[1], [2, 3]])",
    "m.Tensor(x, device='cpu')",
    "f.new(f, device='cpu')",
    "m.Tensor(2, device='meta')",
    "m.Tensor([1, 2], device='meta')",
    "f.new(2, device='meta')",
    "f.new(2, requires_grad=True)",
    "f.new([1, 2], dtype=m.int64)",
    "f.new(2.5)",
    "m.FloatTensor(i)",
    "m.LongTensor(f)",
    "f.new(i)",
    "m.FloatTensor(None)",
]


@pytest.mark.parametrize("code", SIZE_FORMS)
def test_constructor_size_forms(code):
    assert_same_as_torch(code, values=False)


@pytest.mark.parametrize("code", FORMS)
def test_constructor_forms(code):
    assert_same_as_torch(code)


@pytest.mark.parametrize("code", ERRORS)
def test_constructor_errors(code):
    assert_same_as_torch(code)


@pytest.mark.parametrize("name", TYPED)
def test_typed_classes_construct_and_check_instances(name):
    for lib in (torch, bg):
        cls = getattr(lib, name)
        assert repr(cls) == f"<class 'torch.{name}'>" and cls.__name__ == name
        assert cls.is_cuda is False and cls.is_sparse is False
        made = cls([1, 0])
        assert type(made) is lib.Tensor and isinstance(made, lib.Tensor) and isinstance(made, cls)
        assert repr(made.dtype) == repr(getattr(torch, name).dtype)
        assert made.type() == f"torch.{name}"
        assert not isinstance(made, lib.FloatTensor if name != "FloatTensor" else lib.DoubleTensor)
        assert not issubclass(cls, lib.Tensor)
        assert repr(lib.ones(2).type(cls).dtype) == repr(cls.dtype)


def test_parameters_and_meta_tensors_as_typed_instances():
    for lib in (torch, bg):
        assert isinstance(lib.nn.Parameter(lib.ones(2)), lib.FloatTensor)
        assert not isinstance(lib.ones(2, device="meta"), lib.FloatTensor)


@pytest.mark.parametrize(
    "code",
    [
        "f.type(m.Tensor)",
        "i.type(m.Tensor)",
        "f.type(m.LongTensor)",
        "f.type('torch.DoubleTensor')",
        "f.type(int)",
        "f.type(5)",
        "m.autograd.Variable(f, requires_grad=True)",
        "m.autograd.Variable(x)",
        "m.autograd.Variable()",
        "m.autograd.Variable(None)",
        "m.autograd.Variable(None, requires_grad=True)",
        "f.type(np.float32)",
        "f.type(float)",
        "m.autograd.Variable(i, requires_grad=True)",
        "m.autograd.Variable([1.])",
        "x.data",
    ],
)
def test_type_variable_and_data(code):
    assert_same_as_torch(code)


def test_default_dtype_follows_set_default_dtype():
    torch.set_default_dtype(torch.float64)
    bg.set_default_dtype(bg.float64)
    assert_same_as_torch("m.Tensor(2)", values=False)
    for code in ["m.Tensor([1])", "m.Tensor()", "isinstance(f, m.DoubleTensor)", "i.type(m.Tensor)"]:
        assert_same_as_torch(code)


def test_alias_shares_values_version_and_graph():
    for lib in (torch, bg):
        w = lib.ones(3, requires_grad=True)
        y = w * 2
        a = lib.Tensor(y)
        assert a is not y and a._base is y
        with lib.no_grad():
            a.mul_(3)
        assert y.tolist() == [6.0, 6.0, 6.0] and y._version == 1
        (a * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        assert w.grad.tolist() == [2.0, 4.0, 6.0]


def test_constructed_tensors_are_writable_leaves():
    for lib in (torch, bg):
        t = lib.Tensor(2, 3)
        t.fill_(1.5)
        w = lib.nn.Parameter(lib.Tensor(2, 3).uniform_(-1, 1))
        assert t.tolist() == [[1.5] * 3] * 2 and w.is_leaf and w.requires_grad and w.shape == (2, 3)


def _warnings_and_outcome(m, code):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = repr(eval(code, {"m": m}))
        except RuntimeError as error:
            result = f"RuntimeError: {error}"
    return result, [(w.category.__name__, str(w.message)) for w in caught]


@pytest.mark.parametrize(
    "code",
    [
        "m.ones(2).volatile",
        "setattr(m.ones(2), 'volatile', True)",
        "m.ones(2).reinforce(1.0)",
        "m.nn.Container(a=m.nn.Linear(1, 1))",
        "m.ones(2).new_tensor(m.zeros(2))",
        "m.nn.functional.softmin(m.ones(2, 2))",
        "m.nn.functional.softmax(m.tensor(3.0))",
        "m.nn.functional.log_softmax(m.tensor(3.0), dim=-1)",
        "m.nn.functional.softmax(m.ones(2, 3, 4))",
    ],
)
def test_removed_and_deprecated_names_warn_or_raise_as_torch(code):
    assert _warnings_and_outcome(bg, code) == _warnings_and_outcome(torch, code)


@pytest.mark.skipif(bg.cuda.is_available() or torch.cuda.is_available(), reason="the behaviour without a GPU")
@pytest.mark.parametrize("name", ["FloatTensor", "DoubleTensor", "LongTensor", "BoolTensor"])
def test_cuda_typed_classes_without_a_gpu_as_torch(name):
    ours, theirs = getattr(bg.cuda, name), getattr(torch.cuda, name)
    assert repr(ours) == repr(theirs)
    assert isinstance(bg.ones(1), ours) == isinstance(torch.ones(1), theirs) is False
    raises_like_torch(lambda m: getattr(m.cuda, name)(2))
