"""Enabled CPU autocast against torch 2.13: the functions on torch's lists cast their floating arguments (to the
region's bfloat16 or float16, to float32, or to the widest of them), float64 and integer arguments stay, the functions
off the lists run in the dtypes they are given; values and gradients agree with torch's to the low precision's
rounding; nested disabled regions, the state functions and custom_fwd(cast_inputs=) behave as torch's."""

import numpy as np
import pytest
import torch

import batched_grad as bg
from oracle import assert_same

RNG = np.random.default_rng(0)
A = RNG.standard_normal((4, 4))
B = RNG.standard_normal((4, 4))
LOW = dict(rtol=2e-2, atol=2e-2)


def _operands(m):
    a, b = m.tensor(A, dtype=m.float32), m.tensor(B, dtype=m.float32)
    return a, b, a.to(m.bfloat16), a.to(m.float64)


CALLS = {
    "matmul_operator": lambda m, a, b, h, d: a @ b,
    "mm_float64_stays": lambda m, a, b, h, d: m.mm(d, d),
    "linear_with_bias": lambda m, a, b, h, d: m.nn.functional.linear(a, b, b[0]),
    "addmm": lambda m, a, b, h, d: m.addmm(a, a, b),
    "baddbmm": lambda m, a, b, h, d: m.baddbmm(a[None], a[None], b[None]),
    "bmm_method": lambda m, a, b, h, d: a[None].bmm(b[None]),
    "conv1d": lambda m, a, b, h, d: m.nn.functional.conv1d(a[None], b[..., None]),
    "conv_transpose1d": lambda m, a, b, h, d: m.nn.functional.conv_transpose1d(a[None], b[..., None]),
    "sdpa": lambda m, a, b, h, d: m.nn.functional.scaled_dot_product_attention(a[None], b[None], a[None]),
    "einsum": lambda m, a, b, h, d: m.einsum("ij,jk->ik", a, b),
    "unlisted_dot_stays": lambda m, a, b, h, d: m.dot(a[0], b[0]),
    "unlisted_softmax_of_bf16": lambda m, a, b, h, d: m.softmax(h, -1),
    "unlisted_add_promotes": lambda m, a, b, h, d: h + a,
    "prod_fp32": lambda m, a, b, h, d: h.prod(),
    "mse_loss_fp32": lambda m, a, b, h, d: m.nn.functional.mse_loss(h, h),
    "cross_entropy_fp32": lambda m, a, b, h, d: m.nn.functional.cross_entropy(h, m.tensor([0, 1, 2, 3])),
    "kl_div_fp32": lambda m, a, b, h, d: m.nn.functional.kl_div(h, a, reduction="batchmean"),
    "cdist_fp32": lambda m, a, b, h, d: m.cdist(h, h),
    "replicate_pad_fp32": lambda m, a, b, h, d: m.nn.functional.pad(h[None], (1, 1), mode="replicate"),
    "rfft_fp32": lambda m, a, b, h, d: m.fft.rfft(h),
    "linalg_solve_fp32": lambda m, a, b, h, d: m.linalg.solve(a + 4 * m.eye(4), h),
    "cat_promotes": lambda m, a, b, h, d: m.cat([h.to(m.get_autocast_dtype("cpu")), a]),
    "stack_with_float64": lambda m, a, b, h, d: m.stack([h.to(m.get_autocast_dtype("cpu")), d]),
    "lstm_lower": lambda m, a, b, h, d: m.nn.LSTM(4, 3)(a[None])[0],
    "gru_stays": lambda m, a, b, h, d: m.nn.GRU(4, 3)(a[None])[0],
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_result_dtypes_and_values_match_torch(call, dtype):
    if call is CALLS["lstm_lower"] and dtype == "float16":
        pytest.skip("torch's oneDNN LSTM has no float16 form on the CPU")
    results = []
    for m in (bg, torch):
        m.manual_seed(0)
        with m.autocast("cpu", dtype=getattr(m, dtype)):
            results.append(call(m, *_operands(m)))
    ours, theirs = results
    assert str(ours.dtype) == str(theirs.dtype)
    widest = "complex128" if ours.is_complex() else "float64"
    assert_same(ours.to(getattr(bg, widest)), theirs.to(getattr(torch, widest)), check_dtype=False, **LOW)


def test_bfloat16_meeting_a_float16_region_in_cat_is_torchs_error():
    for m in (bg, torch):
        with m.autocast("cpu", dtype=m.float16):
            with pytest.raises(RuntimeError, match="Unexpected floating ScalarType in at::autocast::prioritize"):
                m.cat([m.ones(2, dtype=m.bfloat16), m.ones(2)])


def _amp_step(m):
    m.manual_seed(0)
    model = m.nn.Sequential(m.nn.Conv1d(2, 4, 3), m.nn.ReLU(), m.nn.Flatten(), m.nn.Linear(8, 3))
    x, y = m.tensor(RNG_X, dtype=m.float32), m.tensor([0, 2, 1])
    with m.autocast("cpu"):
        logits = model(x)
        loss = m.nn.functional.cross_entropy(logits, y)
    loss.backward()
    return logits.dtype, loss.dtype, [logits, loss] + [p.grad for p in model.parameters()]


RNG_X = np.random.default_rng(1).standard_normal((3, 2, 4))


def test_gradients_flow_back_to_float32_parameters_as_torchs():
    ours, theirs = _amp_step(bg), _amp_step(torch)
    assert (str(ours[0]), str(ours[1])) == (str(theirs[0]), str(theirs[1])) == ("torch.bfloat16", "torch.float32")
    for o, t in zip(ours[2], theirs[2]):
        assert str(o.dtype) == str(t.dtype)
        assert_same(o.double(), t.double(), check_dtype=False, **LOW)


def test_region_state_nesting_and_custom_fwd_cast_inputs():
    for m in (bg, torch):
        seen = []

        class Square(m.autograd.Function):
            @staticmethod
            @m.amp.custom_fwd(device_type="cpu", cast_inputs=m.float32)
            def forward(ctx, t):
                seen.append((t.dtype, m.is_autocast_enabled("cpu")))
                return t * t

            @staticmethod
            def backward(ctx, grad):
                return grad

        x = m.ones(2, 2)
        with m.autocast("cpu"):
            assert m.is_autocast_enabled("cpu") and (x @ x).dtype == m.bfloat16
            with m.autocast("cpu", enabled=False):
                assert not m.is_autocast_enabled("cpu") and (x @ x).dtype == m.float32
            assert Square.apply(x.to(m.bfloat16)).dtype == m.float32
            assert (x @ x).dtype == m.bfloat16
        assert seen == [(m.float32, False)]
        assert not m.is_autocast_enabled("cpu") and (x @ x).dtype == m.float32
        m.set_autocast_enabled("cpu", True)
        try:
            assert (x @ x).dtype == m.bfloat16
        finally:
            m.set_autocast_enabled("cpu", False)
        assert (x @ x).dtype == m.float32


def test_warnings_of_listed_functions_point_at_the_caller_in_and_out_of_a_region():
    """A listed function's cast wrapper is one more frame: its warnings still name the line that called it."""
    import warnings

    def caught(call):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            call()
        return [w.filename for w in seen]

    def calls():
        bg.nn.functional.grid_sample(bg.ones(1, 1, 2, 2), bg.zeros(1, 1, 1, 2))
        bg.nn.functional.mse_loss(bg.ones(2, 1), bg.ones(2))
        bg.nn.functional.kl_div(bg.zeros(2), bg.ones(2), size_average=True)

    for enabled in (False, True):
        with bg.autocast("cpu", enabled=enabled):
            files = caught(calls)
        assert len(files) == 4 and set(files) == {__file__}, files
