"""Counting ops have no derivative, and torch says so in two ways, which batched_grad follows: histc records no
node at all (its counts never require grad), while histogram, histogramdd and weighted bincount record a
NotImplemented node when an operand requires grad, whose backward raises naming the aten op."""

import pytest
import torch

import batched_grad


def _grad_record(m, make):
    """(requires_grad, grad_fn name, backward's error or None) of make(m, x) for a float64 x requiring grad."""
    x = m.tensor([[-1.5, 0.25], [0.5, -0.75], [1.25, 2.0]], dtype=m.float64, requires_grad=True)
    out = make(m, x)
    try:
        out.sum().backward()
        error = None
    except RuntimeError as e:
        error = str(e)
    return out.requires_grad, out.grad_fn.name() if out.grad_fn is not None else None, error


CASES = {
    "histc": lambda m, x: m.histc(x, 3),
    "Tensor.histc": lambda m, x: x.histc(4, -1, 1),
    "histogram.hist": lambda m, x: m.histogram(x.flatten(), 3).hist,
    "Tensor.histogram.bin_edges": lambda m, x: x.flatten().histogram(3)[1],
    "histogram.weight": lambda m, x: m.histogram(x.detach().flatten(), 3, weight=x.flatten())[0],
    "histogram.density": lambda m, x: m.histogram(x.flatten(), 2, density=True)[0],
    "histogramdd.counts": lambda m, x: m.histogramdd(x, bins=[2, 2])[0],
    "histogramdd.tensor_bins": lambda m, x: m.histogramdd(
        x, bins=[m.tensor([-2.0, 0.0, 2.0], dtype=m.float64), m.tensor([-1.0, 3.0], dtype=m.float64)]
    )[0],
    "histogramdd.edges": lambda m, x: m.histogramdd(x, bins=[2, 3]).bin_edges[1],
    "bincount.weights": lambda m, x: m.bincount(m.tensor([0, 2, 2]), x[:, 1]),
    "Tensor.bincount.weights": lambda m, x: m.tensor([1, 1, 0]).bincount(x[:, 0]),
    "bincount.detached_weights": lambda m, x: m.bincount(m.tensor([0, 2, 2]), x[:, 1].detach()),
}


@pytest.mark.parametrize("name", list(CASES))
def test_counting_ops_record_what_torch_records(name):
    assert _grad_record(batched_grad, CASES[name]) == _grad_record(torch, CASES[name])


@pytest.mark.parametrize("m", [torch, batched_grad], ids=["torch", "batched_grad"])
def test_counts_under_no_grad_are_plain_and_keep_their_values(m):
    x = m.tensor([0.1, 0.4, 0.45, 0.9], requires_grad=True)
    with m.no_grad():
        hist, edges = m.histogram(x, 2)
    assert not hist.requires_grad and not edges.requires_grad
    assert hist.tolist() == [3.0, 1.0]
    assert m.histc(x, 2, 0, 1).tolist() == [3.0, 1.0]


FORWARD_CASES = {
    "histc": lambda m, x: m.histc(x, 3),
    "histogram": lambda m, x: m.histogram(x, 3)[0],
    "histogramdd": lambda m, x: m.histogramdd(x.view(3, 2), [2, 2])[0],
    "bincount": lambda m, x: m.bincount(m.tensor([0, 1, 1, 2, 0, 0]), x),
}


def _forward_record(m, make):
    """The tangent of make(m, x) for a dual x, or the error forward mode raises."""
    fa = m.autograd.forward_ad
    with fa.dual_level():
        x = fa.make_dual(m.tensor([-1.0, 0.5, 2.0, 0.25, 1.5, -0.5], dtype=m.float64), m.ones(6, dtype=m.float64))
        try:
            return fa.unpack_dual(make(m, x)).tangent
        except NotImplementedError as e:
            return str(e)


@pytest.mark.parametrize("name", list(FORWARD_CASES))
def test_forward_mode_refuses_counts_as_torch_does(name):
    assert _forward_record(batched_grad, FORWARD_CASES[name]) == _forward_record(torch, FORWARD_CASES[name])
