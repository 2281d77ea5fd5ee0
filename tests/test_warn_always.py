"""set_warn_always / is_warn_always_enabled as torch's: the warnings given once per process (backward's
create_graph warning among them) are given on every call while it is on; grad() never gives that warning."""

import warnings

import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch

CYCLE = "Using backward() with create_graph=True"


@pytest.fixture
def warn_always():
    def switch(m, value):
        previous = m.is_warn_always_enabled()
        m.set_warn_always(value)
        return previous

    previous = [switch(m, True) for m in (bg, torch)]
    yield
    for m, p in zip((bg, torch), previous):
        m.set_warn_always(p)


def _cycle_warnings(m, call):
    b = m.ones(3, dtype=m.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(m, b)
    return sum(CYCLE in str(w.message) for w in caught)


def test_flag_round_trips():
    for m in (bg, torch):
        assert m.is_warn_always_enabled() is False
        m.set_warn_always(True)
        try:
            assert m.is_warn_always_enabled() is True
        finally:
            m.set_warn_always(False)


def test_flag_takes_only_a_bool():
    raises_like_torch(lambda m: m.set_warn_always(1))


def test_backward_with_create_graph_warns_every_time(warn_always):
    def backward(m, b):
        (b * b).sum().backward(create_graph=True)

    for m in (bg, torch):
        assert [_cycle_warnings(m, backward) for _ in range(3)] == [1, 1, 1]


def test_grad_with_create_graph_does_not_warn(warn_always):
    def grad(m, b):
        m.autograd.grad((b * b).sum(), b, create_graph=True)

    for m in (bg, torch):
        assert _cycle_warnings(m, grad) == 0
