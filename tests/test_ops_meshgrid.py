"""meshgrid against torch 2.13: shapes and values for both indexings, derivatives through the grids, views, the
warning without indexing=, and torch's errors."""

import warnings

import pytest
import torch

import batched_grad as bg
from oracle import assert_same, check_both, raises_like_torch, rand

CASES = {
    "ij": lambda m, a, b, c: m.meshgrid(a, b, indexing="ij"),
    "xy": lambda m, a, b, c: m.meshgrid(a, b, indexing="xy"),
    "a list": lambda m, a, b, c: m.meshgrid([a, b, c], indexing="xy"),
    "three ij": lambda m, a, b, c: m.meshgrid(a, b, c, indexing="ij"),
    "one xy": lambda m, a, b, c: m.meshgrid(a, indexing="xy"),
    "a 0-d input": lambda m, a, b, c: m.meshgrid(a[0], b, indexing="xy"),
    "grids combined": lambda m, a, b, c: [g.sin() * 2 for g in m.meshgrid(a, b * c[:2].sum(), indexing="xy")],
}


@pytest.mark.parametrize("name", list(CASES))
def test_meshgrid_matches_torch(name):
    check_both(CASES[name], [rand(3), rand(2), rand(4)])


def test_grids_are_views_of_their_inputs():
    def run(m):
        x = m.arange(3.0)
        gx, _ = m.meshgrid(x, m.arange(2.0), indexing="xy")
        return gx._base is x, gx.is_contiguous()

    assert run(bg) == run(torch) == (True, False)


def test_grad_fn_is_torchs():
    def run(m):
        return m.meshgrid(m.ones(2, requires_grad=True), m.ones(3), indexing="ij")[0].grad_fn.name()

    assert run(bg) == run(torch) == "ExpandBackward0"


def test_without_indexing_it_is_ij_and_warns_once():
    bg_grids = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            bg_grids = bg.meshgrid(bg.arange(3.0), bg.arange(2.0))
    messages = [str(w.message) for w in caught if "meshgrid" in str(w.message)]
    assert len(messages) <= 1  # once per process: an earlier test may have seen it already
    assert all(
        m.startswith("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.")
        for m in messages
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch.meshgrid(torch.arange(3.0), torch.arange(2.0))
    assert_same(bg_grids, expected)


ERRORS = {
    "no tensors": lambda m: m.meshgrid(indexing="ij"),
    "an empty list": lambda m: m.meshgrid([], indexing="ij"),
    "a bad indexing": lambda m: m.meshgrid(m.ones(2), m.ones(3), indexing="foo"),
    "a 2-d tensor": lambda m: m.meshgrid(m.ones(2, 2), m.ones(3), indexing="ij"),
    "mixed dtypes": lambda m: m.meshgrid(m.ones(2), m.ones(3, dtype=m.float64), indexing="ij"),
    "a list element": lambda m: m.meshgrid(m.ones(2), [1.0, 2.0], indexing="ij"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_meshgrid_errors_are_torchs(name):
    if name == "a 2-d tensor":  # torch prints the tensor after this prefix; we name its shape
        with pytest.raises(
            RuntimeError,
            match="^torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
            r"got: a tensor of shape \(2, 2\)$",
        ):
            ERRORS[name](bg)
        with pytest.raises(RuntimeError, match="^torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "):
            ERRORS[name](torch)
        return
    raises_like_torch(ERRORS[name])
