"""nn.DataParallel and nn.parallel.data_parallel against torch's on a machine without a GPU (as torch's, the wrapper
calls its module as it is); with one GPU (where JAX has one) the module and its inputs are moved to it."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch


def _wrapped(lib):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 1))
    return lib.nn.DataParallel(model), model


def _train_step(lib):
    net, inner = _wrapped(lib)
    optimizer = lib.optim.SGD(net.parameters(), lr=0.1)
    x = lib.tensor(np.linspace(-1, 1, 15).reshape(5, 3), dtype=lib.float32)
    loss = net(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss.detach(), inner[0].weight.detach(), net.module is inner


@pytest.mark.skipif(bg.cuda.is_available(), reason="the wrapper of a machine without a GPU")
def test_without_a_gpu_the_wrapper_is_transparent_as_torchs():
    ours, theirs = _wrapped(bg)[0], _wrapped(torch)[0]
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())  # keys prefixed by "module."
    assert ours.device_ids == theirs.device_ids == []
    assert_same(_train_step(bg), _train_step(torch))


def test_data_parallel_needs_a_device_type_as_torchs():
    if bg.cuda.is_available():
        pytest.skip("torch's error is for a machine without an accelerator")
    raises_like_torch(lambda lib: lib.nn.parallel.data_parallel(lib.nn.Linear(2, 2), lib.ones(1, 2)))


def test_the_wrapper_is_torch_nn_parallel_data_parallel():
    assert bg.nn.parallel.DataParallel is bg.nn.DataParallel


def test_several_gpus_are_refused_with_the_devices_named():
    if not bg.cuda.is_available():
        pytest.skip("device_ids are read only where there is a GPU")
    with pytest.raises(NotImplementedError, match=r"device_ids=\[0, 1\]"):
        bg.nn.DataParallel(bg.nn.Linear(2, 2), device_ids=[0, 1])


@pytest.mark.skipif(not bg.cuda.is_available(), reason="needs JAX's GPU backend")
def test_with_one_gpu_the_module_and_inputs_move_to_it():
    net = bg.nn.DataParallel(bg.nn.Linear(3, 2))
    assert net.module.weight.device == bg.device("cuda", 0)
    out = net(bg.ones(4, 3))
    assert out.device == bg.device("cuda", 0)
    moved = bg.nn.DataParallel(bg.nn.Linear(3, 2).to("cuda:0"))
    moved.module.to("cpu")
    with pytest.raises(RuntimeError, match=r"on device cuda:0 \(device_ids\[0\]\)"):
        moved(bg.ones(1, 3))


def test_distributed_data_parallel_is_a_module_class_that_needs_a_process_group_as_in_torch():
    """A training script's is_parallel check (`type(model) in (DataParallel, DistributedDataParallel)`) runs; wrapping
    without a process group raises torch's error."""
    for lib in (torch, bg):
        ddp = lib.nn.parallel.DistributedDataParallel
        assert issubclass(ddp, lib.nn.Module)
        assert type(lib.nn.Linear(2, 2)) not in (lib.nn.parallel.DataParallel, ddp)
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            ddp(lib.nn.Linear(2, 2))
