"""torch.nn.attention's sdpa_kernel and torch.backends.cuda's attention switches choose, on the CPU, between torch's
fused flash-attention node (no double backward) and the composite of differentiable ops, or raise torch's error
when neither is allowed; the switches are restored when the block exits."""

import importlib

import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch


def _attention(lib):
    return importlib.import_module(f"{lib.__name__}.nn.attention")


def _node(lib, backends):
    att = _attention(lib)
    chosen = [getattr(att.SDPBackend, name) for name in backends]
    q = lib.linspace(-1.0, 1.0, 64, dtype=lib.float64).reshape(1, 2, 4, 8).requires_grad_()
    with att.sdpa_kernel(chosen if len(chosen) > 1 else chosen[0]):
        out = lib.nn.functional.scaled_dot_product_attention(q, q, q)
    (g,) = lib.autograd.grad(out.pow(2).sum(), q, create_graph=True)
    composite = type(out.grad_fn).__name__ == "UnsafeViewBackward0"  # the fused node has no double backward
    second = lib.autograd.grad(g.sum(), q)[0].sum().item() if composite else None
    return type(out.grad_fn).__name__, out.sum().item(), g.sum().item(), second


@pytest.mark.parametrize("backends", [["MATH"], ["FLASH_ATTENTION"], ["EFFICIENT_ATTENTION", "MATH"]])
def test_the_chosen_kernel_is_torchs(backends):
    got, expected = _node(bg, backends), _node(torch, backends)
    assert got[0] == expected[0]
    assert got[1:] == pytest.approx(expected[1:], rel=1e-12)


@pytest.mark.parametrize("backends", [["EFFICIENT_ATTENTION"], ["CUDNN_ATTENTION"], ["OVERRIDEABLE"]])
def test_no_cpu_kernel_allowed_raises_torchs_error(backends):
    raises_like_torch(lambda m: _node(m, backends))


def test_switches_are_restored_and_the_module_switches_count():
    for lib in (bg, torch):
        att = _attention(lib)
        with att.sdpa_kernel([att.SDPBackend.MATH]):
            assert (lib.backends.cuda.flash_sdp_enabled(), lib.backends.cuda.math_sdp_enabled()) == (False, True)
        assert lib.backends.cuda.flash_sdp_enabled() and lib.backends.cuda.math_sdp_enabled()
        lib.backends.cuda.enable_flash_sdp(False)
        try:
            q = lib.ones(1, 1, 2, 4, requires_grad=True)
            assert (
                type(lib.nn.functional.scaled_dot_product_attention(q, q, q).grad_fn).__name__ == "UnsafeViewBackward0"
            )
        finally:
            lib.backends.cuda.enable_flash_sdp(True)


def test_backends_must_be_sdpbackends():
    raises_like_torch(lambda m: _attention(m).sdpa_kernel("math").__enter__())
    assert repr(bg.nn.attention.SDPBackend.MATH) == repr(torch.nn.attention.SDPBackend.MATH)
    assert str(bg.nn.attention.SDPBackend.FLASH_ATTENTION) == str(torch.nn.attention.SDPBackend.FLASH_ATTENTION)
