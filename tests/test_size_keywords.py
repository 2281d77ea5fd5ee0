"""The size arguments that torch's methods take as *sizes also taken by their keyword, as torch's parser takes them
(MAE's patchify calls imgs.reshape(shape=(...))): reshape(shape=), view(size=), expand(size=), repeat(repeats=),
permute(dims=), resize_(size=), sum_to_size(size=) and the functions torch.reshape(input=, shape=) and
torch.permute(input, dims=); torch's errors for a size given both ways or as a bare int, and the gradient through
each."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same, raises_like_torch

CALLS = {
    "reshape_tuple": lambda m, x: x.reshape(shape=(3, 2, 2)),
    "reshape_list": lambda m, x: x.reshape(shape=[-1, 4]),
    "reshape_size": lambda m, x: x.reshape(shape=m.Size([12])),
    "view": lambda m, x: x.view(size=(6, 2)),
    "view_inferred": lambda m, x: x.view(size=[-1]),
    "expand": lambda m, x: x[:1].expand(size=(5, 3, 4)),
    "repeat": lambda m, x: x.repeat(repeats=(2, 1, 1)),
    "permute": lambda m, x: x.permute(dims=(1, 0)),
    "sum_to_size": lambda m, x: x.sum_to_size(size=(1, 4)),
    "torch_reshape": lambda m, x: m.reshape(input=x, shape=(4, 3)),
    "torch_permute": lambda m, x: m.permute(x, dims=[1, 0]),
}


def _run(m, name):
    x = m.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    out = CALLS[name](m, x)
    (grad,) = m.autograd.grad(out, x, m.ones_like(out) * m.arange(out.numel(), dtype=out.dtype).view(out.shape))
    return [out.detach(), grad]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_sizes_by_keyword_match_torch(name):
    assert_same(_run(bg, name), _run(torch, name))


def test_resize_by_keyword_matches_torch():
    got = bg.arange(6.0).resize_(size=(3, 2), memory_format=bg.contiguous_format)
    assert_same(got, torch.arange(6.0).resize_(size=(3, 2), memory_format=torch.contiguous_format))


ERRORS = {
    "both_ways": lambda m: m.zeros(2, 3).reshape(3, shape=(3, 2)),
    "permute_both_ways": lambda m: m.zeros(2, 3).permute(1, dims=(1, 0)),
    "bare_int": lambda m: m.zeros(2, 3).expand(size=3),
    "repeat_bare_int": lambda m: m.zeros(2, 3).repeat(repeats=2),
    "unknown_keyword": lambda m: m.zeros(2, 3).reshape(shape=(3, 2), other=1),
    "none": lambda m: m.zeros(2, 3).reshape(shape=None),
    "view_both_ways": lambda m: m.zeros(2, 3).view(3, size=(3, 2)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_bad_size_keywords_raise_as_torch(name):
    if name == "view_both_ways":  # torch lists its overloads; the type is what code can rely on
        with pytest.raises(TypeError, match="view\\(\\) received an invalid combination of arguments"):
            ERRORS[name](bg)
        with pytest.raises(TypeError, match="view\\(\\) received an invalid combination of arguments"):
            ERRORS[name](torch)
        return
    raises_like_torch(ERRORS[name])
