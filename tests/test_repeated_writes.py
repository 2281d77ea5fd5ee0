"""Writes at repeated positions (index_put_ and its setitem form, scatter, index_copy, put_, index_fill): torch keeps
the value written last and its forward-mode tangent likewise, yet its backward gives every repeated source the
gradient at its position (grad.index(indices), grad.gather(...)). Both compared with torch 2.13."""

import numpy as np
import pytest
import torch

import batched_grad as bg

REPEATED = [0, 1, 0, 2, 0, 1]

WRITES = {
    "index_put_": lambda m, a, v, i: a.index_put_((i,), v),
    "index_put": lambda m, a, v, i: m.index_put(a, (i,), v),
    "setitem": lambda m, a, v, i: a.__setitem__(i, v) or a,
    "scatter": lambda m, a, v, i: a.scatter(0, i, v),
    "index_copy": lambda m, a, v, i: a.index_copy(0, i, v),
    "put_": lambda m, a, v, i: a.put_(i, v),
    "index_fill": lambda m, a, v, i: a.index_fill(0, i, v[4]),
}


def _gradients(m, write):
    index = m.tensor(REPEATED)
    values = m.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=m.float64, requires_grad=True)
    base = m.tensor([7.0, 8.0, 9.0, 10.0], dtype=m.float64, requires_grad=True)
    out = write(m, base * 1.0, values * 1.0, index)
    out.backward(m.tensor([1.0, 10.0, 100.0, 1000.0], dtype=m.float64))
    return out.detach().numpy(), values.grad.numpy(), base.grad.numpy()


def _tangent(m, write):
    fwd = m.autograd.forward_ad
    with fwd.dual_level():
        values = fwd.make_dual(m.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=m.float64), m.arange(6.0) + 1)
        base = fwd.make_dual(m.zeros(4, dtype=m.float64), m.full((4,), 0.5, dtype=m.float64))
        out = write(m, base * 1.0, values * 1.0, m.tensor(REPEATED))
        return fwd.unpack_dual(out).tangent.numpy()


@pytest.mark.parametrize("name", list(WRITES))
def test_repeated_writes_keep_the_last_value_and_give_every_source_its_gradient(name, engine_tier):
    for ours, theirs in zip(_gradients(bg, WRITES[name]), _gradients(torch, WRITES[name])):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("name", list(WRITES))
def test_repeated_writes_tangent_is_the_last_sources(name):
    np.testing.assert_array_equal(_tangent(bg, WRITES[name]), _tangent(torch, WRITES[name]))
