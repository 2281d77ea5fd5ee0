"""utils.dlpack and the top-level to_dlpack/from_dlpack against torch 2.13: values and dtypes through NumPy, torch,
JAX and bare capsules, memory shared as torch shares it, the producer protocol (__dlpack__, __dlpack_device__) that
lets torch and NumPy import batched_grad tensors, and torch's errors."""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.utils.dlpack as torch_dlpack

import batched_grad as bg
import batched_grad.utils.dlpack as dlpack
from oracle import assert_same, raises_like_torch, to_torch

NUMPY_DTYPES = ["float32", "float64", "int64", "int32", "int8", "uint8", "bool", "complex64"]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_from_numpy_arrays_like_torch(dtype):
    array = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    ours, theirs = bg.from_dlpack(array), torch.from_dlpack(array)
    assert_same(ours, theirs)


def test_numpy_memory_is_shared_both_ways_unless_copied():
    array = np.zeros(4, np.float32)
    shared, copied = bg.from_dlpack(array), bg.from_dlpack(array, copy=True)
    t_shared, t_copied = torch.from_dlpack(array), torch.from_dlpack(array, copy=True)
    array[0] = 7.0
    shared[1] = 3.0
    t_shared[2] = 5.0
    assert shared.tolist() == t_shared.tolist() == array.tolist() == [7.0, 3.0, 5.0, 0.0]
    assert copied.tolist() == t_copied.tolist() == [0.0] * 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16, torch.cfloat])
def test_torch_to_batched_grad_and_back(dtype):
    source = torch.arange(6).reshape(2, 3).to(dtype)
    ours = bg.from_dlpack(source)
    assert repr(ours.dtype) == repr(source.dtype) and ours.shape == source.shape
    back = torch.from_dlpack(ours)
    assert back.dtype == dtype and torch.equal(back, source)
    assert torch.equal(torch.from_dlpack(dlpack.to_dlpack(ours)), source)
    again = bg.from_dlpack(bg.to_dlpack(ours))
    assert repr(again.dtype) == repr(source.dtype) and torch.equal(torch.from_dlpack(again), source)


def test_writes_through_torch_reach_the_imported_tensor():
    source = torch.zeros(3)
    ours = bg.from_dlpack(source)
    source[1] = 4.0
    assert ours.tolist() == [0.0, 4.0, 0.0]


def test_numpy_and_jax_import_batched_grad_tensors():
    values = bg.arange(6.0).reshape(2, 3)
    for tensor in (values, values[:, 1], values.exp(), bg.randn(3, requires_grad=True).mul(2).detach()):
        expected = np.asarray(tensor.detach().numpy())
        np.testing.assert_array_equal(np.from_dlpack(tensor), expected)
        np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(tensor)), expected)
    assert_same(bg.from_dlpack(jnp.arange(3.0)), torch.arange(3.0))


def test_capsules_from_either_library():
    assert_same(bg.from_dlpack(torch_dlpack.to_dlpack(torch.arange(4.0))), torch.arange(4.0))
    assert_same(bg.from_dlpack(dlpack.to_dlpack(bg.arange(4))), torch.arange(4))
    capsule = bg.to_dlpack(bg.tensor([1.5, 2.5]))
    assert "dltensor" in repr(capsule)
    assert torch.from_dlpack(capsule).tolist() == [1.5, 2.5]
    t_capsule = torch.to_dlpack(torch.ones(2))
    torch.from_dlpack(t_capsule)
    with pytest.raises(RuntimeError) as got:
        bg.from_dlpack(t_capsule)  # consumed
    with pytest.raises(RuntimeError) as want:
        torch.from_dlpack(t_capsule)
    assert str(got.value) == str(want.value)


def test_to_dlpack_exports_a_tensor_that_requires_grad_but_the_protocol_refuses_it():
    leaf = bg.ones(3, requires_grad=True)
    assert torch.from_dlpack(bg.to_dlpack(leaf)).tolist() == [1.0, 1.0, 1.0]
    raises_like_torch(lambda m: np.from_dlpack(m.ones(3, requires_grad=True)))
    raises_like_torch(lambda m: m.ones(3, requires_grad=True).__dlpack__())


def test_dlpack_device_and_enum_match_torch():
    assert bg.ones(2).__dlpack_device__() == torch.ones(2).__dlpack_device__()
    assert isinstance(bg.ones(2).__dlpack_device__()[0], dlpack.DLDeviceType)
    assert {m.name: m.value for m in dlpack.DLDeviceType} == {m.name: m.value for m in torch_dlpack.DLDeviceType}
    assert bg.from_dlpack is dlpack.from_dlpack and bg.to_dlpack is dlpack.to_dlpack


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.from_dlpack(np.ones(2), device=3.5),
        lambda m: m.from_dlpack(5),
        lambda m: m.from_dlpack(m.to_dlpack(m.ones(1)), copy=True),
        lambda m: m.from_dlpack(m.to_dlpack(m.ones(1)), device="cpu"),
        lambda m: m.ones(2, device="meta").__dlpack__(),
    ],
)
def test_errors_match_torch(call):
    raises_like_torch(call)


def test_to_dlpack_refuses_what_is_not_a_tensor():
    with pytest.raises(TypeError, match=r"argument 'data' \(position 1\) must be Tensor, not list"):
        bg.to_dlpack([1])


def test_device_argument():
    assert_same(bg.from_dlpack(np.ones(2), device="cpu", copy=False), torch.ones(2, dtype=torch.float64))
    assert_same(bg.from_dlpack(to_torch(bg.ones(2)), device=bg.device("cpu")), torch.ones(2))
