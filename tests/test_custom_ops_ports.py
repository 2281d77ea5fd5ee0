"""The custom-operator pattern of a public inference-kernels project, retold against both libraries: operators
declared for CUDA with CPU reference kernels registered by register_kernel("cpu"), fake kernels, Optional Tensor
arguments, a backward that differentiates the reference under enable_grad, and a mutable cache append. The reference
kernels are written here; every value, gradient and version count is compared with torch 2.13."""

from typing import Optional

import numpy as np
import torch

import batched_grad as bg
from oracle import assert_same


def reference(lib):
    """The CPU reference kernels (plain Tensor code of `lib`)."""

    def residual_rms_norm(input, residual, weight, eps):
        hidden = input + residual
        scale = (hidden.pow(2).mean(-1, keepdim=True) + eps).rsqrt()
        return hidden * scale * weight, hidden

    def bias_swiglu(gate, up, gate_bias=None, up_bias=None):
        gate = gate if gate_bias is None else gate + gate_bias
        up = up if up_bias is None else up + up_bias
        return lib.nn.functional.silu(gate) * up

    def kv_cache_append(key_cache, value_cache, slots, key, value):
        key_cache.index_copy_(0, slots, key)
        value_cache.index_copy_(0, slots, value)

    return residual_rms_norm, bias_swiglu, kv_cache_append


def define(torch):
    """The operators, as the project declares them (imports switched to `torch`)."""
    Tensor = torch.Tensor
    ref_residual_rms_norm, ref_bias_swiglu, ref_kv_cache_append = reference(torch)

    @torch.library.custom_op("ported_kernels::residual_rms_norm", mutates_args=(), device_types="cuda")
    def residual_rms_norm(
        input: Tensor, residual: Tensor, weight: Tensor, eps: float = 1.0e-6
    ) -> tuple[Tensor, Tensor]:
        raise RuntimeError("the CUDA extension is not built")

    @residual_rms_norm.register_kernel("cpu")
    def _(input: Tensor, residual: Tensor, weight: Tensor, eps: float = 1.0e-6) -> tuple[Tensor, Tensor]:
        return ref_residual_rms_norm(input, residual, weight, eps)

    @residual_rms_norm.register_fake
    def _(input, residual, weight, eps=1.0e-6):
        return torch.empty_like(input), torch.empty_like(input)

    def residual_setup_context(ctx, inputs, output):
        input, residual, weight, eps = inputs
        ctx.save_for_backward(input, residual, weight)
        ctx.eps = eps

    def residual_backward(ctx, grad_output, grad_residual_out):
        input, residual, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad[:3]
        with torch.enable_grad():
            differentiable = [t.detach().requires_grad_(need) for t, need in zip((input, residual, weight), needs)]
            output = ref_residual_rms_norm(*differentiable, ctx.eps)
            grads = torch.autograd.grad(output, differentiable, (grad_output, grad_residual_out), allow_unused=True)
        return (*grads, None)

    residual_rms_norm.register_autograd(residual_backward, setup_context=residual_setup_context)

    @torch.library.custom_op("ported_kernels::bias_swiglu", mutates_args=(), device_types="cuda")
    def bias_swiglu(
        gate: Tensor,
        up: Tensor,
        gate_bias: Optional[Tensor] = None,  # noqa: UP045  (the project's hints: typing.Optional)
        up_bias: Optional[Tensor] = None,  # noqa: UP045
    ) -> Tensor:
        raise RuntimeError("the CUDA extension is not built")

    @bias_swiglu.register_kernel("cpu")
    def _(gate, up, gate_bias=None, up_bias=None):
        return ref_bias_swiglu(gate, up, gate_bias, up_bias)

    bias_swiglu.register_fake(lambda gate, up, gate_bias=None, up_bias=None: torch.empty_like(gate))

    def swiglu_setup_context(ctx, inputs, output):
        gate, up, gate_bias, up_bias = inputs
        sentinel = torch.empty(0, dtype=gate.dtype)
        ctx.save_for_backward(
            gate, up, gate_bias if gate_bias is not None else sentinel, up_bias if up_bias is not None else sentinel
        )
        ctx.has_gate_bias, ctx.has_up_bias = gate_bias is not None, up_bias is not None

    def swiglu_backward(ctx, grad_output):
        gate, up, saved_gate_bias, saved_up_bias = ctx.saved_tensors
        values = (gate, up, saved_gate_bias if ctx.has_gate_bias else None, saved_up_bias if ctx.has_up_bias else None)
        needs = ctx.needs_input_grad[:4]
        with torch.enable_grad():
            differentiable = [v.detach().requires_grad_(n) if v is not None else None for v, n in zip(values, needs)]
            output = ref_bias_swiglu(*differentiable)
            present = [v for v in differentiable if v is not None]
            computed = iter(torch.autograd.grad(output, present, grad_output, allow_unused=True))
        return tuple(next(computed) if v is not None else None for v in differentiable)

    bias_swiglu.register_autograd(swiglu_backward, setup_context=swiglu_setup_context)

    @torch.library.custom_op(
        "ported_kernels::kv_cache_append", mutates_args=("key_cache", "value_cache"), device_types="cuda"
    )
    def kv_cache_append(key_cache: Tensor, value_cache: Tensor, slots: Tensor, key: Tensor, value: Tensor) -> None:
        raise RuntimeError("the CUDA extension is not built")

    @kv_cache_append.register_kernel("cpu")
    def _(key_cache, value_cache, slots, key, value):
        ref_kv_cache_append(key_cache, value_cache, slots, key, value)

    kv_cache_append.register_fake(lambda *args: None)
    return residual_rms_norm, bias_swiglu, kv_cache_append


def run(lib):
    residual_rms_norm, bias_swiglu, kv_cache_append = define(lib)
    rng = np.random.default_rng(0)
    x, r, w = (lib.tensor(rng.standard_normal(shape)).requires_grad_() for shape in ((3, 8), (3, 8), (8,)))
    out, hidden = residual_rms_norm(x, r, w)
    (out.sum() + (hidden * hidden).sum()).backward()
    gate, up = (lib.tensor(rng.standard_normal((3, 8))).requires_grad_() for _ in range(2))
    bias = lib.tensor(rng.standard_normal(8)).requires_grad_()
    swiglu = bias_swiglu(gate, up, gate_bias=bias)
    swiglu.sum().backward()
    no_bias = bias_swiglu(gate.detach(), up.detach())
    key_cache, value_cache = lib.zeros(6, 4, dtype=lib.float64), lib.zeros(6, 4, dtype=lib.float64)
    versions = (key_cache._version, value_cache._version)
    key, value = (lib.tensor(rng.standard_normal((2, 4))) for _ in range(2))
    kv_cache_append(key_cache, value_cache, lib.tensor([4, 1]), key, value)
    bumps = [key_cache._version - versions[0], value_cache._version - versions[1]]
    checks = [
        lib.library.opcheck(residual_rms_norm, (x, r, w), test_utils=CHECKS),
        lib.library.opcheck(bias_swiglu, (gate, up, None, bias), test_utils=CHECKS),
        lib.library.opcheck(
            kv_cache_append, (key_cache, value_cache, lib.tensor([0]), key[:1], value[:1]), test_utils=CHECKS
        ),
    ]
    values = [
        out,
        hidden,
        x.grad,
        r.grad,
        w.grad,
        swiglu,
        gate.grad,
        up.grad,
        bias.grad,
        no_bias,
        key_cache,
        value_cache,
    ]
    return values, bumps, checks


CHECKS = ("test_schema", "test_autograd_registration", "test_faketensor")


def test_ported_operators_match_torch():
    expected, actual = run(torch), run(bg)
    assert_same(actual[0], expected[0])
    assert actual[1:] == expected[1:]
