"""torch names that public code uses, against torch: Module.get_submodule/get_parameter/get_buffer, memory formats,
the random module, the CPU-only cuda functions and nn.utils.rnn's padding and packing."""

import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


def _net(lib):
    torch.manual_seed(0)
    net = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
    net.add_module("head", lib.nn.Sequential(lib.nn.ReLU()))
    return net


def test_get_submodule_parameter_and_buffer():
    for lib in (bg, torch):
        net = _net(lib)
        assert net.get_submodule("") is net
        assert net.get_submodule("head.0") is net.head[0]
        assert net.get_parameter("0.weight") is net[0].weight
        assert net.get_buffer("1.running_mean") is net[1].running_mean


@pytest.mark.parametrize(
    "lookup",
    [
        lambda net: net.get_submodule("head.missing"),
        lambda net: net.get_submodule("0.weight.x"),
        lambda net: net.get_parameter("1.running_var"),
        lambda net: net.get_parameter("head.0.nothing"),
        lambda net: net.get_buffer("0.weight"),
        lambda net: net.get_buffer("9.running_mean"),
    ],
)
def test_get_member_errors_as_torch(lookup):
    raises_like_torch(lambda lib: lookup(_net(lib)))
