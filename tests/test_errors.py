"""The error catalogue (reference §1.7): each message is raised with torch 2.13's exception type and text."""

import types
import warnings

import pytest
import torch

import batched_grad as bg

pytestmark = pytest.mark.usefixtures("engine_tier")


def _x(lib):
    return lib.tensor([1.0, 2.0, 3.0], requires_grad=True)


def _raise_numbered(lib, x, case):
    """The cases of the catalogue's numbered messages (M1 to M22)."""
    grad = lib.autograd.grad
    if case == "M1":
        grad(x * 2, x)
    elif case == "M3":
        grad(x * 2, x, lib.ones(4))
    elif case == "M5":
        grad(x * 2, x, lib.ones(3, dtype=lib.complex64))
    elif case == "M6":
        grad(x * 2, x, [3])
    elif case == "M7":
        y = lib.tensor([1.0], requires_grad=True)
        grad((x * 2).sum(), [x, y])
    elif case == "M8":
        grad((x * 2).sum(), x, materialize_grads=True, allow_unused=False)
    elif case == "M9":
        grad(lib.ones(3).sum(), x)
    elif case == "M10":
        grad((x * 2).sum(), [x, lib.ones(3)])
    elif case == "M11":
        grad((x * 2).sum(), [])
    elif case == "M12":
        lib.autograd.backward((x * 2).sum(), inputs=[])
    elif case == "M13":
        y = (x * x).sum()
        grad(y, x)
        grad(y, x)
    elif case == "M16":
        grad((x * 2).sum(), types.MappingProxyType({"x": x}))
    elif case == "M17":
        grad([x * 2, x * 3], x, [lib.ones(3)])
    elif case == "M20":
        grad(x.sum(), [1.0])
    elif case == "M21":
        lib.autograd.backward((x * 2).sum(), inputs=[lib.ones(3)])
    elif case == "M22":
        lib.ones(3, dtype=lib.int64, requires_grad=True)
    elif case == "M2":
        grad((x.to(lib.complex64) * 2).sum(), x)
    else:
        raise AssertionError(case)


def _raise_named(lib, x, case):
    """The named misuses of tensors, hooks and graphs."""
    if case == "leaf_inplace":
        x.add_(1)
    elif case == "hook_size":
        x.register_hook(lambda g: g[:2])
        (x * 2).sum().backward()
    elif case == "non_scalar_backward":
        (x * 2).backward()
    elif case == "requires_grad_nonleaf":
        (x * 2).requires_grad = False
    elif case == "retain_grad_no_grad":
        lib.ones(3).retain_grad()
    elif case == "hook_no_grad":
        lib.ones(3).register_hook(lambda g: g)
    elif case == "inplace_saved":
        y = x.exp()
        z = y * y
        y.add_(1)
        z.sum().backward()
    elif case == "backward_twice":
        y = (x.exp()).sum()
        y.backward()
        y.backward()
    else:
        raise AssertionError(case)


def _raise(lib, case):
    x = _x(lib)
    if case.startswith("M"):
        _raise_numbered(lib, x, case)
    else:
        _raise_named(lib, x, case)


CASES = [
    "M1",
    "M2",
    "M3",
    "M5",
    "M6",
    "M7",
    "M8",
    "M9",
    "M10",
    "M11",
    "M12",
    "M13",
    "M16",
    "M17",
    "M20",
    "M21",
    "M22",
    "leaf_inplace",
    "hook_size",
    "non_scalar_backward",
    "requires_grad_nonleaf",
    "retain_grad_no_grad",
    "hook_no_grad",
    "inplace_saved",
    "backward_twice",
]


def _caught(lib, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as info:
            _raise(lib, case)
    return info.value


@pytest.mark.parametrize("case", CASES)
def test_message_matches_torch(case):
    expected = _caught(torch, case)
    actual = _caught(bg, case)
    assert type(actual) is type(expected)
    assert str(actual) == str(expected)


def test_a_number_no_int64_holds_raises_like_torch():
    for lib in (bg, torch):
        with pytest.raises(OverflowError, match="int too big to convert"):
            lib.tensor([1, 2]) * 2**70


def test_only_inputs_false_warns_future_warning():
    x = _x(bg)
    with pytest.warns(FutureWarning, match="only_inputs argument is deprecated"):
        bg.autograd.grad((x * 2).sum(), x, only_inputs=False)


def test_backward_create_graph_warns_once_per_process_as_torch_but_grad_does_not(monkeypatch):
    monkeypatch.setattr(bg._tensor, "_warned", set())  # torch's warning is TORCH_WARN_ONCE
    x = _x(bg)
    with pytest.warns(UserWarning, match="reference cycle") as caught:
        bg.autograd.backward((x * x).sum(), create_graph=True)
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (x * x).sum().backward(create_graph=True)
        bg.autograd.grad((x * x).sum(), x, create_graph=True)


def test_non_leaf_grad_access_warns_like_torch():
    for lib in (torch, bg):
        y = _x(lib) * 2
        with pytest.warns(UserWarning) as record:
            assert y.grad is None
        assert "is not a leaf Tensor is being accessed" in str(record[0].message)
