"""torch.nn.attention's kernel choice (SDPBackend, sdpa_kernel) and torch.backends.cuda.sdp_kernel, against torch:
the names, the block's value and the switches each sets inside its block and restores after (test_sdpa_backends.py
checks the node each choice gives); and first derivatives of the ops torch computes with a
first-order-only kernel (scaled_dot_product_attention's CPU flash kernel, hardsigmoid) on operands of any
magnitude, such as attention masks filled with -finfo.max."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.attention

import batched_grad as bg
import batched_grad.nn.attention
from oracle import assert_same, to_torch

SWITCHES = ("flash", "mem_efficient", "math", "cudnn")


def _switches(m):
    return {name: getattr(m.backends.cuda, f"{name}_sdp_enabled")() for name in SWITCHES}


def test_backend_names_match_torch():
    for name, member in torch.nn.attention.SDPBackend.__members__.items():
        ours = getattr(bg.nn.attention.SDPBackend, name)
        assert (int(ours), str(ours), repr(ours)) == (int(member), str(member), repr(member))


@pytest.mark.parametrize(
    "names",
    [["MATH"], ["FLASH_ATTENTION", "MATH"], ["EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"], []],
)
def test_sdpa_kernel_sets_and_restores_the_switches_as_torch(names):
    def inside(m):
        backends = [getattr(m.nn.attention.SDPBackend, name) for name in names]
        with m.nn.attention.sdpa_kernel(backends[0] if len(backends) == 1 else backends) as context:
            seen = _switches(m)
        return context, seen, _switches(m)

    assert inside(bg) == inside(torch)


def test_sdpa_kernel_refuses_other_arguments_as_torch():
    for m in (torch, bg):
        with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend .*, got str"):
            with m.nn.attention.sdpa_kernel("math"):
                pass


def test_deprecated_sdp_kernel_warns_and_sets_the_switches_as_torch():
    def inside(m):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with m.backends.cuda.sdp_kernel(enable_flash=False, enable_cudnn=False):
                seen = _switches(m)
        return [(w.category, str(w.message)) for w in caught], seen, _switches(m)

    assert inside(bg) == inside(torch)


def _attention_with_mask(m, q, k, v, fill):
    causal = m.ones(q.shape[-2], k.shape[-2], dtype=m.bool).triu(1)
    bias = m.arange(q.shape[-2] * k.shape[-2], dtype=q.dtype).reshape(q.shape[-2], k.shape[-2]) / 10
    with m.nn.attention.sdpa_kernel([m.nn.attention.SDPBackend.MATH, m.nn.attention.SDPBackend.FLASH_ATTENTION]):
        return m.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias.masked_fill(causal, fill))


@pytest.mark.parametrize("fill", ["max", "half max", "-inf"])
def test_attention_gradients_under_huge_mask_values_match_torch(fill):
    rng = np.random.default_rng(0)
    q, k, v = (bg.tensor(rng.standard_normal((2, 2, 3, 4)), dtype=bg.float32, requires_grad=True) for _ in range(3))
    value = {"max": lambda m: -m.finfo(m.float32).max, "half max": lambda m: -m.finfo(m.float32).max // 2}
    value["-inf"] = lambda m: float("-inf")
    out = _attention_with_mask(bg, q, k, v, value[fill](bg))
    t_q, t_k, t_v = to_torch([q, k, v])
    t_out = _attention_with_mask(torch, t_q, t_k, t_v, value[fill](torch))
    assert_same(out, t_out, rtol=1e-5, atol=1e-6)
    grads = bg.autograd.grad((out * out).sum(), (q, k, v))
    assert_same(grads, torch.autograd.grad((t_out * t_out).sum(), (t_q, t_k, t_v)), rtol=1e-5, atol=1e-5)


def test_hardsigmoid_gradient_of_operands_whose_sum_overflows_matches_torch():
    values = [3e38, 3e38, 0.5, -1.0, -3e38]
    x, t_x = bg.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    got = bg.autograd.grad(bg.nn.functional.hardsigmoid(x).sum(), x)[0]
    assert_same(got, torch.autograd.grad(torch.nn.functional.hardsigmoid(t_x).sum(), t_x)[0])
