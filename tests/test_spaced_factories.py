"""linspace and logspace bit for bit against torch 2.13's CPU loops at every length and dtype (old programs build
their data with them: `torch.unsqueeze(torch.linspace(-1, 1, 100), dim=1)`), and their refusals: bool results and
ends outside an integer dtype's range."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import raises_like_torch

LENGTHS = [0, 1, 2, 7, 16, 17, 31, 33, 100, 257, 1000, 5000]
ENDS = [(-1, 1), (0, 2 * np.pi), (-3.3, 10), (7.5, -2.25), (1, 1)]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16"]


def _bits(t):
    return np.asarray(t.float().numpy() if t.dtype in (torch.bfloat16, bg.bfloat16) else t.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ends", ENDS, ids=str)
def test_linspace_bit_for_bit(dtype, ends):
    for steps in LENGTHS:
        want = torch.linspace(*ends, steps, dtype=getattr(torch, dtype))
        got = bg.linspace(*ends, steps, dtype=getattr(bg, dtype))
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"steps={steps}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("base", [10.0, 2.0, 2.718281828])
def test_logspace_bit_for_bit(dtype, base):
    for ends in [(-1, 1), (0, 2), (-3.3, 2.5), (2, -1.5)]:
        for steps in LENGTHS:
            want = torch.logspace(*ends, steps, base=base, dtype=getattr(torch, dtype))
            got = bg.logspace(*ends, steps, base=base, dtype=getattr(bg, dtype))
            np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"ends={ends} steps={steps}")


def test_default_dtype_and_tensor_ends():
    for m in (torch, bg):
        m.set_default_dtype(m.float64)
    try:
        np.testing.assert_array_equal(bg.linspace(-1, 1, 100).numpy(), torch.linspace(-1, 1, 100).numpy())
    finally:
        for m in (torch, bg):
            m.set_default_dtype(m.float32)
    got = bg.logspace(bg.tensor(-1.0), bg.tensor(2.0), 50)
    np.testing.assert_array_equal(got.numpy(), torch.logspace(torch.tensor(-1.0), torch.tensor(2.0), 50).numpy())


@pytest.mark.parametrize("name", ["linspace", "logspace"])
@pytest.mark.parametrize(
    "dtype, ends",
    [("uint8", (-1.5, 2.7)), ("uint8", (0, 300)), ("int8", (0, 300)), ("int16", (0, 1e10)), ("int32", (0, 1e10))]
    + [("bool", (0, 1))],
)
def test_refused_ends_and_dtypes(name, dtype, ends):
    raises_like_torch(lambda m: getattr(m, name)(*ends, 3, dtype=getattr(m, dtype)))
