"""Small autograd APIs against torch 2.13: _unsafe_preserve_version_counter (versions set back on leaving, so saved
tensors stay valid), set_multithreading_enabled as a switch set on construction (a context manager and a
decorator), and torch._unique / torch._unique2 (the values recorded as UniqueBackward0 / Unique2Backward0, empty
int64 tensors for the parts not asked for)."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad.autograd.grad_mode import is_multithreading_enabled
from oracle import assert_same


def test_preserve_version_counter_restores_versions_and_keeps_saved_tensors_valid():
    def case(m):
        x = m.ones(3, requires_grad=True).clone()
        y = m.ones(2, requires_grad=True).clone()
        x.add_(1)
        out = x.exp()  # saves its result... and x's version
        z = x * 2  # saves nothing of x: x is multiplied by a number
        w = x * y.sum()  # saves x
        versions = []
        with m.autograd._unsafe_preserve_version_counter(x):
            x.mul_(1)
            versions.append(x._version)
        versions.append(x._version)
        with m.autograd._unsafe_preserve_version_counter((x, y)):
            x.add_(0)
            y.mul_(1)
        versions += [x._version, y._version]
        (out.sum() + z.sum() + w.sum()).backward()  # no "modified by an inplace operation" error
        return versions, x.grad_fn is not None

    assert case(bg) == case(torch)


def test_preserve_version_counter_refuses_a_list():
    with pytest.raises(TypeError, match="argument 'tensors' must be a Tensor or a tuple of Tensors, not list"):
        bg.autograd._unsafe_preserve_version_counter([bg.ones(1)])


def test_set_multithreading_enabled_is_set_on_construction_and_restored_on_exit():
    assert "set_multithreading_enabled" in bg.autograd.__all__
    assert is_multithreading_enabled()
    switch = bg.autograd.set_multithreading_enabled(False)
    assert not is_multithreading_enabled()  # set already, as torch's
    with switch:
        x = bg.tensor(2.0, requires_grad=True)
        (x.sin() * x).backward()
    assert is_multithreading_enabled()
    assert_same(x.grad, torch.tensor(2.0).sin() + 2 * torch.tensor(2.0).cos())

    seen = []

    @bg.autograd.set_multithreading_enabled(True)
    def read():
        seen.append(is_multithreading_enabled())

    with bg.autograd.set_multithreading_enabled(False):
        read()
        seen.append(is_multithreading_enabled())
    assert seen == [True, False]
    assert bg.autograd.is_multithreading_enabled is is_multithreading_enabled  # torch.autograd's name for it


@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True), (True, True)])
def test_private_unique_functions_match_torch(flags):
    return_inverse, return_counts = flags
    values = np.array([3.0, 1.0, 3.0, 2.0, 7.0, 5.0, 1.0], np.float32)
    for sort in (True, False):
        results = []
        for m in (torch, bg):
            x = m.tensor(values, requires_grad=True)
            first = m._unique(x, sorted=sort, return_inverse=return_inverse)
            second = m._unique2(x, sorted=sort, return_inverse=return_inverse, return_counts=return_counts)
            names = [r[0].grad_fn.name() for r in (first, second)]
            grads = [r.requires_grad for r in (*first, *second)]
            results.append((first, second, names, grads))
        (t_first, t_second, *t_rest), (b_first, b_second, *b_rest) = results
        assert b_rest == t_rest
        assert_same(b_first, t_first)
        assert_same(b_second, t_second)
