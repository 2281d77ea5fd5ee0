"""beta * input + alpha * product (addmm, addmv, addr, baddbmm, addbmm): beta and alpha are operands of the op, not
static parameters, so a quasi-Newton loop's new step size compiles and traces nothing; values and gradients equal
torch's at each one, and the special values (beta 0 ignores input's nan, alpha 1, beta 1) keep torch's meaning."""

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _lazy, _numpy_eval
from oracle import assert_same

CALLS = {
    "addmm": lambda m, i, a, b, beta, alpha: m.addmm(i, a, b, beta=beta, alpha=alpha),
    "addmv": lambda m, i, a, b, beta, alpha: m.addmv(i[0], a, b[:, 0], beta=beta, alpha=alpha),
    "addr": lambda m, i, a, b, beta, alpha: m.addr(i, a[:, 0], b[0], beta=beta, alpha=alpha),
    "baddbmm": lambda m, i, a, b, beta, alpha: m.baddbmm(i[None], a[None], b[None], beta=beta, alpha=alpha),
    "addbmm": lambda m, i, a, b, beta, alpha: m.addbmm(i, a[None], b[None], beta=beta, alpha=alpha),
    "addr_": lambda m, i, a, b, beta, alpha: i.detach().clone().addr_(a[:, 0], b[0], beta=beta, alpha=alpha),
}


def _values_and_grads(lib, name, scales):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((4, 4)) for _ in range(3)]
    found = []
    for beta, alpha in scales:
        i, a, b = (lib.tensor(x, requires_grad=True) for x in arrays)
        out = CALLS[name](lib, i, a, b, beta, alpha)
        found.append(out.detach())
        if out.requires_grad:
            found += lib.autograd.grad(out.pow(2).sum(), (i, a, b), allow_unused=True)
    return found


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="host forms run on the CPU backend only")
@pytest.mark.parametrize("name", CALLS)
def test_new_scales_compile_and_trace_nothing(name, monkeypatch):
    monkeypatch.setattr(_lazy, "FUSE_AFTER", 10**9)  # op by op: no structure's program for the repeated calls
    _values_and_grads(bg, name, [(0.5, 0.25)])
    traced = []
    real = _numpy_eval._trace
    monkeypatch.setattr(
        _numpy_eval, "_trace", lambda build, pattern, *a: traced.append(pattern) or real(build, pattern, *a)
    )
    before = bg.compile_count()
    scales = [(0.7, -1.3), (2.5, 0.125), (-1.0, 3.0)]
    found = _values_and_grads(bg, name, scales)
    assert (bg.compile_count() - before, traced) == (0, [])
    for got, expected in zip(found, _values_and_grads(torch, name, scales)):
        assert_same(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", CALLS)
def test_special_scales_keep_torchs_meaning(name):
    scales = [(0, 1), (1, 1), (0, 2.0), (1, 0), (0.5, 0)]
    for got, expected in zip(_values_and_grads(bg, name, scales), _values_and_grads(torch, name, scales)):
        assert_same(got, expected, rtol=1e-12, atol=1e-12)
    nan = np.full((4, 4), np.nan)
    for m in (bg, torch):  # beta 0: input's nan does not propagate
        assert not m.isnan(
            m.addmm(m.tensor(nan), m.ones(4, 4, dtype=m.float64), m.ones(4, 4, dtype=m.float64), beta=0)
        ).any()
