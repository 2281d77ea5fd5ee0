"""jacrev with a number of rows as chunk_size, against torch 2.13: each chunk of the basis is one batched gradient
(one plain gradient for chunks of one row), and torch's private `_preallocate_and_copy` chooses how the chunks make
the Jacobian: concatenated (False) or copied into a Jacobian allocated first (True). The values are the same."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad.func import _reverse
from oracle import assert_same

X = np.random.default_rng(0).standard_normal((5, 2))
Y = np.random.default_rng(1).standard_normal((1, 2))


def f(x, y):
    return (x.sin(), x + y), (x + 2, x.sum())


@pytest.mark.parametrize("preallocate", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 3, 1000])
def test_chunks_give_torchs_jacobian(chunk_size, preallocate):
    def case(m):
        x, y = m.tensor(X), m.tensor(Y)
        return m.func.jacrev(f, argnums=(0, 1), chunk_size=chunk_size, _preallocate_and_copy=preallocate)(x, y)

    assert_same(case(bg), case(torch))


@pytest.mark.slow
@pytest.mark.parametrize("preallocate", [False, True])
def test_chunked_jacobians_compose_under_vmap_and_jacrev(preallocate):
    def g(x):
        return (x.sin(), x), (x + 2, x.sum())

    def case(m):
        inner = m.func.jacrev(g, chunk_size=3, _preallocate_and_copy=preallocate)
        return m.func.vmap(m.func.jacrev(inner, chunk_size=3))(m.tensor(X))

    assert_same(case(bg), case(torch))


@pytest.mark.parametrize("preallocate", [False, True])
def test_the_flag_chooses_how_the_chunks_make_the_jacobian(monkeypatch, preallocate):
    joined, copied = [], []
    monkeypatch.setattr(_reverse, "cat", lambda chunks: joined.append(len(chunks)) or bg.cat(chunks))
    copy_ = bg.Tensor.copy_
    monkeypatch.setattr(bg.Tensor, "copy_", lambda self, src: copied.append(tuple(src.shape)) or copy_(self, src))

    bg.func.jacrev(lambda x: x.sin(), chunk_size=4, _preallocate_and_copy=preallocate)(bg.tensor(X))

    # 10 rows in chunks of 4: 4, 4, 2 rows, for the one input
    if preallocate:
        assert (joined, copied) == ([], [(4, 5, 2), (4, 5, 2), (2, 5, 2)])
    else:
        assert (joined, copied) == ([3], [])
