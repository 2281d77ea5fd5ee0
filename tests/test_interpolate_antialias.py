"""F.interpolate with antialias=True (bilinear, bicubic and the Lanczos-3 mode) against torch 2.13: values,
gradients and node names when downscaling (the filter widens by the scale), upscaling and with align_corners; the
refusals of other modes, of half and integer inputs, and of uint8 bilinear/bicubic resizing (which torch does in
integer arithmetic)."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch

RESIZES = [
    {"size": (3, 4)},
    {"size": (5, 2), "align_corners": True},
    {"scale_factor": 0.37},
    {"scale_factor": (0.5, 1.7)},
    {"size": (9, 13)},
]
TOLERANCE = {"float64": {"rtol": 1e-12, "atol": 1e-14}, "float32": {"rtol": 2e-6, "atol": 1e-6}}


def _resized(m, mode, dtype, resize):
    x = m.tensor(np.random.RandomState(0).rand(2, 3, 7, 11), dtype=getattr(m, dtype), requires_grad=True)
    y = m.nn.functional.interpolate(x, mode=mode, antialias=True, **resize)
    (g,) = m.autograd.grad(y, x, m.ones_like(y) * m.arange(y.shape[-1], dtype=y.dtype))
    return y, g


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("resize", RESIZES, ids=lambda r: "-".join(f"{k}={v}" for k, v in r.items()))
@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
def test_antialiased_resize_as_torch(mode, resize, dtype):
    if mode == "lanczos" and resize.get("align_corners"):
        pytest.skip("lanczos refuses align_corners (test_refusals)")
    (got, got_grad), (want, want_grad) = _resized(bg, mode, dtype, resize), _resized(torch, mode, dtype, resize)
    assert got.grad_fn.name() == want.grad_fn.name()
    assert got.dtype == bg.float32 if dtype == "float32" else got.dtype == bg.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **TOLERANCE[dtype])
    np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), **TOLERANCE[dtype])


def _refused(shape, dtype="float32", **kwargs):
    def call(m):
        m.nn.functional.interpolate(m.ones(shape).to(getattr(m, dtype)), **kwargs)

    return call


@pytest.mark.parametrize(
    "call",
    [
        _refused((1, 2, 6), size=3, mode="linear", antialias=True),
        _refused((1, 2, 6, 6), size=3, mode="nearest", antialias=True),
        _refused((1, 1, 4, 4, 4), size=3, mode="trilinear", antialias=True),
        _refused((1, 2, 6, 6), size=3, mode="lanczos"),
        _refused((1, 2, 6, 6), size=3, mode="lanczos", antialias=True, align_corners=True),
        _refused((1, 2, 6, 6), "float16", size=3, mode="bilinear", antialias=True),
        _refused((1, 2, 6, 6), "bfloat16", size=3, mode="bicubic", antialias=True),
        _refused((1, 2, 6, 6), "int32", size=3, mode="bilinear", antialias=True),
        _refused((1, 2, 6), "int64", size=3, mode="linear"),
        _refused((1, 2, 6), "uint8", size=3, mode="linear"),
        _refused((1, 1, 6, 6), "int32", size=3, mode="bilinear"),
        _refused((1, 2, 6, 6), "bool", size=3, mode="bicubic"),
        _refused((1, 1, 4, 4, 4), "int8", size=3, mode="trilinear"),
        _refused((1, 2, 6, 6), size=3, mode="bogus"),
    ],
)
def test_refusals(call):
    raises_like_torch(call)


@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_uint8_resizing_is_refused_not_zeroed(mode, antialias):
    x = bg.tensor(np.full((1, 1, 6, 6), 200, np.uint8))
    with pytest.raises(NotImplementedError, match="torch.uint8 input"):
        bg.nn.functional.interpolate(x, size=3, mode=mode, antialias=antialias)
