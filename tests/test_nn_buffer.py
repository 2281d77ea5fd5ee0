"""torch.nn.Buffer: the marker that makes a Module attribute a buffer (persistent or not), compared with torch 2.13:
what Buffer() returns, how Module.__setattr__ registers it, tied buffers, and the errors of misplaced ones."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad.func import make_functional_with_buffers
from oracle import assert_same, raises_like_torch


def _registered(m):
    module = m.nn.Module()
    module.kept = m.nn.Buffer(m.ones(2))
    module.scratch = m.nn.Buffer(m.zeros(3), persistent=False)
    module.plain = m.ones(4)  # a plain Tensor attribute is not a buffer
    return module


@pytest.mark.parametrize("m", [torch, bg], ids=["torch", "batched_grad"])
def test_buffer_returns_a_detached_tensor_marked_as_a_buffer(m):
    leaf = m.ones(2, requires_grad=True)
    marked = m.nn.Buffer(leaf)
    assert type(marked) is m.Tensor and marked is not leaf
    assert marked.requires_grad and marked.grad_fn is None and marked.persistent
    assert isinstance(marked, m.nn.Buffer) and issubclass(m.nn.Buffer, m.Tensor)
    assert not isinstance(m.ones(2), m.nn.Buffer)
    assert not isinstance(m.nn.Parameter(m.ones(1)), m.nn.Buffer)
    assert not m.nn.Buffer(m.ones(1), persistent=False).persistent
    assert tuple(m.nn.Buffer().shape) == (0,)
    assert not isinstance(marked * 2, m.nn.Buffer)  # the mark is the tensor's, results do not inherit it


def test_setattr_registers_buffers_as_torch_does():
    ours, theirs = _registered(bg), _registered(torch)
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()] == ["kept", "scratch"]
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["kept"]
    assert_same(ours.kept, theirs.kept)


def test_assigning_a_buffer_again_takes_its_persistence():
    def run(m):
        module = m.nn.Module()
        module.register_buffer("b", m.ones(1), persistent=False)
        module.b = m.nn.Buffer(m.zeros(1))  # persistent: moves into the state_dict
        module.register_buffer("c", m.nn.Buffer(m.ones(1), persistent=False))  # register_buffer's flag wins
        return list(module.state_dict())

    assert run(bg) == run(torch) == ["b", "c"]


def test_a_tied_buffer_is_one_buffer_for_make_functional_with_buffers():
    class Tied(bg.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = bg.nn.Linear(3, 3)
            self.shift = bg.nn.Buffer(bg.randn(3))
            self.shift_again = self.shift

        def forward(self, x):
            return self.linear(x) + self.shift + self.shift_again

    model = Tied()
    fmodel, params, buffers = make_functional_with_buffers(model)
    assert (len(params), len(buffers)) == (2, 1)
    x = bg.tensor(np.random.default_rng(0).standard_normal((2, 3)), dtype=bg.float32)
    new_shift = (bg.ones(3),)
    np.testing.assert_allclose(
        fmodel(params, new_shift, x).detach().numpy(), (model.linear(x) + 2).detach().numpy(), 1e-6
    )


@pytest.mark.parametrize("name", ["weight", "number"], ids=["over_a_parameter", "over_a_plain_attribute"])
def test_misplaced_buffers_raise_like_torch(name):
    def run(m):
        module = m.nn.Linear(1, 1)
        module.number = 5
        setattr(module, name, m.nn.Buffer(m.ones(1)))

    raises_like_torch(run)


def test_buffer_of_a_non_tensor_names_the_argument():
    with pytest.raises(AttributeError):
        torch.nn.Buffer([1.0, 2.0])  # torch's fails calling .detach on the list
    with pytest.raises(TypeError, match="argument 'data' must be a Tensor, not list"):
        bg.nn.Buffer([1.0, 2.0])
