"""A Function's `vmap` staticmethod as its batching rule, under vmap.vmap and inside a vectorized backward,
against torch.func.vmap with the same Function written for torch."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg
import vmap
from oracle import assert_same, to_torch


def make_numpy_sin(lib, calls):
    """sin computed in NumPy (untraceable), with a batching rule that records what it was given."""

    class NumpySin(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return lib.tensor(np.sin(x.detach().numpy()))

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

        @staticmethod
        def vmap(info, in_dims, x):
            calls.append((info.batch_size, in_dims))
            return NumpySin.apply(x.movedim(in_dims[0], 0)), 0

    return NumpySin


@pytest.fixture
def no_fallback():
    with vmap.fallback_warnings(True), warnings.catch_warnings():
        warnings.simplefilter("error", vmap.FallbackWarning)
        yield


def test_rule_batches_forward_under_vmap_like_torch_func():
    calls, t_calls = [], []
    x = bg.randn(3, 5, dtype=bg.float64)
    got = vmap.vmap(make_numpy_sin(bg, calls).apply, in_dims=1)(x)
    expected = torch.func.vmap(make_numpy_sin(torch, t_calls).apply, in_dims=1)(to_torch(x))
    assert_same(got, expected)
    assert [n for n, _ in calls] == [n for n, _ in t_calls] == [5]  # one call for the whole batch


def test_per_sample_gradients_through_a_rule_batched_function():
    w = bg.randn(4, dtype=bg.float64, requires_grad=True)
    X = bg.randn(6, 4, dtype=bg.float64)
    NumpySin = make_numpy_sin(bg, [])
    got = vmap.vmap(lambda x: bg.autograd.grad(NumpySin.apply(x * w).sum(), w)[0])(X)
    tw = to_torch(w)
    expected = torch.stack([torch.autograd.grad(torch.sin(x * tw).sum(), tw)[0] for x in to_torch(X)])
    assert_same(got, expected)


def test_backward_calling_a_rule_batched_function_stays_vectorized(no_fallback):
    calls = []
    NumpySin = make_numpy_sin(bg, calls)

    class SinOfGrad(bg.autograd.Function):  # backward(g) = sin(g), through the NumPy Function
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return NumpySin.apply(g)

    x = bg.randn(3, dtype=bg.float64, requires_grad=True)
    G = bg.randn(4, 3, dtype=bg.float64)
    loops = vmap._fallback.row_loops[0]
    (got,) = bg.autograd.grad(SinOfGrad.apply(x), x, G, is_grads_batched=True)
    np.testing.assert_allclose(got.numpy(), np.sin(G.numpy()))
    assert calls == [(4, (0,))] and vmap._fallback.row_loops[0] == loops


def test_rule_with_several_outputs_and_unbatched_arguments():
    class ScaleAndShift(bg.autograd.Function):
        @staticmethod
        def forward(x, scale):
            return bg.tensor(np.asarray(x.numpy()) * scale.numpy()), bg.tensor(np.asarray(x.numpy()) + 1)

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def vmap(info, in_dims, x, scale):
            assert in_dims == (0, None) and info.randomness == "error"
            return ScaleAndShift.apply(x, scale), (0, None if info.batch_size == 0 else 0)

    x, scale = bg.randn(5, 2, dtype=bg.float64), bg.tensor([2.0, 3.0], dtype=bg.float64)
    scaled, shifted = vmap.vmap(ScaleAndShift.apply, in_dims=(0, None))(x, scale)
    np.testing.assert_allclose(scaled.numpy(), x.numpy() * scale.numpy())
    np.testing.assert_allclose(shifted.numpy(), x.numpy() + 1)


def test_untraceable_function_with_a_generated_rule_is_a_clear_error():
    class NumpyOnly(bg.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return bg.tensor(np.sin(x.numpy()))

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

    with pytest.raises(RuntimeError, match="could not be vectorized .*TracerArrayConversionError.*vmap staticmethod"):
        vmap.vmap(NumpyOnly.apply)(bg.randn(3, 2))


@pytest.mark.parametrize("bad", ["no_setup_context", "out_dims_length"])
def test_rule_misuse_is_a_clear_error(bad):
    class Bad(bg.autograd.Function):
        @staticmethod
        def forward(*args):
            return args[-1] * 2

        @staticmethod
        def vmap(info, in_dims, x):
            return Bad.apply(x), (0, 0)

    if bad == "out_dims_length":
        Bad.setup_context = staticmethod(lambda ctx, inputs, output: None)
        match = "returned an incompatible"
    else:
        match = "must override the setup_context staticmethod"
    with pytest.raises((RuntimeError, ValueError), match=match):
        vmap.vmap(Bad.apply)(bg.randn(3, 2))
