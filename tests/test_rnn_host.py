"""The recurrent layers' NumPy forms (nn/_rnn_host.py): a new sequence length or batch traces and compiles nothing on
the CPU backend, the forward and the backpropagation through time agree with the layer's kernel (jax.lax.scan and
JAX's VJP of it) within float32 rounding, and training matches torch."""

import functools

import jax
import numpy as np
import pytest
import torch

import batched_grad as bg
from batched_grad import _numpy_eval
from batched_grad.nn import _rnn_host, rnn
from oracle import assert_same

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="host forms run on the CPU backend only")

CONFIGS = [
    ("RNN_TANH", False, False),
    ("RNN_RELU", False, True),
    ("GRU", False, False),
    ("GRU", False, True),
    ("LSTM", False, False),
    ("LSTM", True, True),
]


def _operands(mode, proj, masked, dtype, rng, length=6, batch=3, size=4, hidden=5):
    gates = rnn._GATES[mode]
    out = 3 if proj else hidden
    arrays = [rng.standard_normal((length, batch, size)), rng.standard_normal((batch, out))]
    if mode == "LSTM":
        arrays.append(rng.standard_normal((batch, hidden)))
    arrays += [rng.standard_normal((gates * hidden, size)), rng.standard_normal((gates * hidden, out))]
    arrays += [rng.standard_normal(gates * hidden), rng.standard_normal(gates * hidden)]
    if proj:
        arrays.append(rng.standard_normal((out, hidden)))
    arrays = [(a * 0.6).astype(dtype) for a in arrays]
    if masked:
        arrays.append(np.arange(length)[:, None] < np.array([length, 2, 4])[None, :batch])
    static = dict(
        mode=mode,
        gate_rows=tuple((g * hidden, (g + 1) * hidden) for g in range(gates)),
        reverse=masked,
        has_bias=True,
        has_proj=proj,
        masked=masked,
    )
    return arrays, static


@pytest.mark.parametrize("mode, proj, masked", CONFIGS)
def test_host_forms_agree_with_the_kernel_and_its_vjp(mode, proj, masked):
    arrays, static = _operands(mode, proj, masked, np.float32, np.random.default_rng(0))
    kernel = functools.partial(rnn._LAYER.fn, **static)
    with jax.enable_x64(True):
        outs, pullback = jax.vjp(
            lambda *floats: kernel(*floats, *arrays[len(floats) :]), *arrays[: len(arrays) - masked]
        )
        rng = np.random.default_rng(1)
        cts = [rng.standard_normal(o.shape).astype(np.float32) for o in outs]
        kernel_grads = pullback(tuple(cts))
    host_outs = _rnn_host.layer_forward(*arrays, **static)
    host_grads = _rnn_host.layer_vjp(cts, arrays, None, **static)
    for got, expected in zip(list(host_outs) + host_grads, list(outs) + list(kernel_grads)):
        np.testing.assert_allclose(got, np.asarray(expected), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("mode, proj, masked", CONFIGS)
def test_host_vjp_takes_any_cotangents_missing(mode, proj, masked):
    arrays, static = _operands(mode, proj, masked, np.float64, np.random.default_rng(2))
    floats = len(arrays) - masked
    with jax.enable_x64(True):
        outs, pullback = jax.vjp(lambda *f: rnn._LAYER.fn(*f, *arrays[floats:], **static), *arrays[:floats])
        for given in range(len(outs)):  # the cotangent of one output only, the others None
            ct = np.random.default_rng(given).standard_normal(outs[given].shape)
            expected = pullback(tuple(ct if k == given else np.zeros(o.shape) for k, o in enumerate(outs)))
            got = _rnn_host.layer_vjp([ct if k == given else None for k in range(len(outs))], arrays, None, **static)
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, np.asarray(e), rtol=1e-12, atol=1e-12)


def _grads(lib, kind, sizes, **kwargs):
    """The loss and the parameters' gradients of a layer over sequences of each (length, batch) in `sizes`."""
    lib.manual_seed(0)
    model = getattr(lib.nn, kind)(4, 5, **kwargs)
    rng = np.random.default_rng(3)
    found = []
    for length, batch in sizes:
        x = lib.tensor(rng.standard_normal((length, batch, 4)).astype(np.float32))
        out, _ = model(x)
        loss = out.pow(2).mean()
        model.zero_grad()
        loss.backward()
        found += [loss.detach()] + [p.grad for p in model.parameters()]
    return found


@pytest.mark.parametrize("kind, kwargs", [("GRU", {"num_layers": 2}), ("LSTM", {"bidirectional": True}), ("RNN", {})])
def test_new_lengths_and_batches_trace_and_compile_nothing(kind, kwargs, monkeypatch):
    _grads(bg, kind, [(3, 2), (8, 7)], **kwargs)  # the loss's ops met on these patterns of sizes
    traced = []
    real = _numpy_eval._trace
    monkeypatch.setattr(
        _numpy_eval, "_trace", lambda build, pattern, *a: traced.append(pattern) or real(build, pattern, *a)
    )
    compiles = bg.compile_count()
    sizes = [(6, 3), (7, 2), (4, 6)]  # none of the hidden size: the loss sees no new pattern of sizes
    found = _grads(bg, kind, sizes, **kwargs)
    assert (bg.compile_count() - compiles, traced) == (0, [])
    for got, expected in zip(found, _grads(torch, kind, sizes, **kwargs)):
        assert_same(got, expected, rtol=1e-5, atol=1e-6)
