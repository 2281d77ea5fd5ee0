"""Layers and products given operands of different dtypes, against torch 2.13 on CPU: normalizations accept a
bfloat16/float16 input with float32 parameters (and return the input's dtype) and refuse any other mixture;
linear, the fused products (addmm, addbmm, baddbmm, addmv), convolutions, bilinear and recurrent layers refuse
with torch's messages; addr promotes. NumPy functions given a tensor return a tensor, as torch's do."""

import warnings

import numpy as np
import pytest
import torch

import batched_grad as bg

F32, F64, BF16, F16 = "float32", "float64", "bfloat16", "float16"


def _outcome(m, build):
    """('ok', dtype, values in float64), or (exception type, message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = build(m)
    except Exception as e:  # the refusal itself is what is compared
        return type(e).__name__, str(e), None
    return "ok", str(out.dtype).replace("torch.", ""), np.asarray(out.detach().double().numpy())


def _same_outcome(build, tolerance=1e-6):
    expected, actual = _outcome(torch, build), _outcome(bg, build)
    assert actual[:2] == expected[:2]
    if expected[0] == "ok":
        np.testing.assert_allclose(actual[2], expected[2], rtol=tolerance, atol=tolerance)


def _ramp(m, dtype, *shape):
    n = int(np.prod(shape))
    return m.linspace(-1.5, 2.0, n, dtype=m.float64).reshape(shape).to(getattr(m, dtype))


def _norm(kind, x_dtype, weight_dtype, bias_dtype, stats_dtype):
    def build(m):
        F = m.nn.functional
        x = _ramp(m, x_dtype, 2, 3, 4)
        w = None if weight_dtype is None else _ramp(m, weight_dtype, 3) + 2
        b = None if bias_dtype is None else _ramp(m, bias_dtype, 3)
        mean = None if stats_dtype is None else _ramp(m, stats_dtype, 3) * 0.1
        var = None if stats_dtype is None else _ramp(m, stats_dtype, 3) * 0 + 1.5
        if kind == "batch_norm_train":
            return F.batch_norm(x, mean, var, w, b, training=True)
        if kind == "batch_norm_eval":
            return F.batch_norm(x, mean, var, w, b, training=False)
        if kind == "layer_norm":
            return F.layer_norm(x.transpose(1, 2), (3,), w, b)
        if kind == "group_norm":
            return F.group_norm(x, 3, w, b)
        if kind == "instance_norm":
            return F.instance_norm(x, mean, var, w, b)
        return F.rms_norm(x.transpose(1, 2), (3,), w)

    return build


NORM_MIXTURES = [
    (F32, F64, F64, None),  # float32 input, double parameters
    (F64, F32, F32, None),  # double input, float parameters
    (F32, F32, F64, None),  # the first parameter agrees, a later one does not
    (F32, None, F64, None),
    (BF16, F32, F32, None),  # accepted: computed in float32, returned in bfloat16
    (F16, F32, F32, None),
    (BF16, F32, F64, None),
    (BF16, BF16, F32, None),
]
STATS_MIXTURES = [(F32, F32, F32, F64), (F32, None, None, F64), (BF16, F32, F32, F32), (BF16, F32, F32, F64)]


@pytest.mark.parametrize("kind", ["batch_norm_train", "layer_norm", "group_norm", "instance_norm", "rms_norm"])
@pytest.mark.parametrize("dtypes", NORM_MIXTURES, ids=str)
def test_normalization_parameters_of_another_dtype(kind, dtypes):
    _same_outcome(_norm(kind, *dtypes), tolerance=2e-2 if BF16 in dtypes or F16 in dtypes else 1e-6)


@pytest.mark.parametrize("kind", ["batch_norm_train", "batch_norm_eval"])
@pytest.mark.parametrize("dtypes", STATS_MIXTURES, ids=str)
def test_batch_norm_running_statistics_of_another_dtype(kind, dtypes):
    _same_outcome(_norm(kind, *dtypes), tolerance=2e-2)


def test_batch_norm_module_in_double_given_float_input():
    _same_outcome(lambda m: m.nn.BatchNorm1d(3).double()(_ramp(m, F32, 4, 3)))


def test_mixed_normalization_gradients_keep_each_operand_dtype():
    def grads(m):
        x = _ramp(m, F32, 4, 3, 5).bfloat16().requires_grad_()
        w = (_ramp(m, F32, 3) + 2).requires_grad_()
        out = m.nn.functional.group_norm(x, 3, w, None) + m.nn.functional.batch_norm(x, None, None, w, None, True)
        (out.float() * _ramp(m, F32, 4, 3, 5)).sum().backward()
        return out.dtype, x.grad.dtype, w.grad.dtype, w.grad

    expected, actual = grads(torch), grads(bg)
    assert [str(d) for d in actual[:3]] == [str(d) for d in expected[:3]]
    np.testing.assert_allclose(actual[3].numpy(), expected[3].numpy(), rtol=2e-2, atol=2e-2)


LINEAR_MIXTURES = [
    (F32, F64, None),
    (F64, F32, None),
    (F32, F32, F64),
    (F32, F64, F32),
    (F64, F32, F32),
    (F32, F64, F64),
]


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtypes", LINEAR_MIXTURES, ids=str)
def test_linear_operands_of_another_dtype(rank, dtypes):
    x_dtype, w_dtype, b_dtype = dtypes

    def build(m):
        bias = None if b_dtype is None else _ramp(m, b_dtype, 3)
        return m.nn.functional.linear(_ramp(m, x_dtype, *(2,) * (rank - 1), 5), _ramp(m, w_dtype, 3, 5), bias)

    _same_outcome(build)


FUSED = {
    "addmm": lambda m, s, a, b: m.addmm(_ramp(m, s, 2), _ramp(m, a, 3, 4), _ramp(m, b, 4, 2)),
    "addbmm": lambda m, s, a, b: m.addbmm(_ramp(m, s, 3, 2), _ramp(m, a, 2, 3, 4), _ramp(m, b, 2, 4, 2)),
    "baddbmm": lambda m, s, a, b: m.baddbmm(_ramp(m, s, 2), _ramp(m, a, 2, 3, 4), _ramp(m, b, 2, 4, 2)),
    "addmv": lambda m, s, a, b: m.addmv(_ramp(m, s, 3), _ramp(m, a, 3, 4), _ramp(m, b, 4)),
    "addr": lambda m, s, a, b: m.addr(_ramp(m, s, 3, 2), _ramp(m, a, 3), _ramp(m, b, 2)),
    "addmm_bad_shapes": lambda m, s, a, b: m.addmm(_ramp(m, s, 2), _ramp(m, a, 3, 5), _ramp(m, b, 4, 2)),
}


@pytest.mark.parametrize("name", list(FUSED))
@pytest.mark.parametrize("dtypes", [(F64, F32, F32), (F32, F64, F32), (F32, F32, F64), (F64, F64, F32)], ids=str)
def test_fused_products_of_another_dtype(name, dtypes):
    _same_outcome(lambda m: FUSED[name](m, *dtypes))


def test_addr_promotes_an_integer_input():
    _same_outcome(lambda m: m.addr(m.ones(3, 2, dtype=m.int64), _ramp(m, F32, 3), _ramp(m, F64, 2)))


# (batch, kernel, groups, size): torch's CPU convolution words a weight of another dtype after the kernel it picks
CONV_GEOMETRIES = [(2, 2, 1, 4), (1, 4, 1, 6), (1, 2, 2, 4), (1, 2, 1, 4)]
CONV_MIXTURES = [
    (F32, F64, None),
    (F64, F32, None),
    (BF16, F32, None),
    (F16, F32, None),
    (F32, F32, F64),
    (F32, F32, BF16),
]


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("geometry", CONV_GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtypes", CONV_MIXTURES, ids=str)
def test_convolution_operands_of_another_dtype(n, transposed, geometry, dtypes):
    batch, k, groups, size = geometry
    x_dtype, w_dtype, b_dtype = dtypes

    def build(m):
        fn = getattr(m.nn.functional, f"conv_transpose{n}d" if transposed else f"conv{n}d")
        x = _ramp(m, x_dtype, batch, 2, *(size,) * n)
        bias = None if b_dtype is None else _ramp(m, b_dtype, 2)
        return fn(x, _ramp(m, w_dtype, 2, 2 // groups, *(k,) * n), bias, groups=groups)

    _same_outcome(build, tolerance=1e-5)


@pytest.mark.parametrize("dtypes", [(F32, F32, F64, None), (F32, F32, F32, F64), (F32, F64, F32, None)], ids=str)
def test_bilinear_operands_of_another_dtype(dtypes):
    a, b, w, bias = dtypes
    _same_outcome(
        lambda m: m.nn.functional.bilinear(
            _ramp(m, a, 2, 3), _ramp(m, b, 2, 3), _ramp(m, w, 4, 3, 3), None if bias is None else _ramp(m, bias, 4)
        )
    )


@pytest.mark.parametrize("layer", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("packed", [False, True])
def test_recurrent_input_of_another_dtype(layer, packed):
    def build(m):
        m.manual_seed(0)
        x = _ramp(m, F64, 3, 2, 4)
        if packed:
            x = m.nn.utils.rnn.pack_padded_sequence(x, [3, 2])
        return getattr(m.nn, layer)(4, 5)(x)[1]

    _same_outcome(build)


def test_lstm_cell_input_of_another_dtype():
    _same_outcome(lambda m: m.nn.LSTMCell(4, 5)(_ramp(m, F64, 2, 4))[0])


NUMPY_CALLS = {
    "argmax": lambda a: np.argmax(a, axis=1),
    "argmax_flat": lambda a: np.argmax(a),
    "cumsum": lambda a: np.cumsum(a, axis=0),
    "round": lambda a: np.round(a, 1),
    "clip": lambda a: np.clip(a, -0.5, 0.5),
    "exp": lambda a: np.exp(a),
    "add": lambda a: np.add(a, 1),
    "maximum": lambda a: np.maximum(a, 0),
    "isnan": lambda a: np.isnan(a),  # a bool result comes back as uint8, as torch's
    "argsort": lambda a: np.argsort(a, axis=1),
    "repeat": lambda a: np.repeat(a, 2, axis=0),
}


@pytest.mark.parametrize("name", list(NUMPY_CALLS))
def test_numpy_functions_given_a_tensor_return_a_tensor(name):
    def build(m):
        out = NUMPY_CALLS[name](_ramp(m, F64, 3, 4))
        assert isinstance(out, m.Tensor), type(out)
        return out

    _same_outcome(build)


LOSSES = {
    "cross_entropy": lambda m, x, w: m.nn.functional.cross_entropy(x, m.tensor([0, 1, 2, 1]), weight=w),
    "cross_entropy_smoothed": lambda m, x, w: m.nn.CrossEntropyLoss(weight=w, label_smoothing=0.1)(
        x, m.tensor([0, 1, 2, 1])
    ),
    "cross_entropy_probabilities": lambda m, x, w: m.nn.functional.cross_entropy(x, x.softmax(1), weight=w),
    "nll_loss": lambda m, x, w: m.nn.functional.nll_loss(x, m.tensor([2, 1, 0, 1]), weight=w),
    "multi_margin_loss": lambda m, x, w: m.nn.functional.multi_margin_loss(x, m.tensor([2, 1, 0, 1]), weight=w),
    "binary_cross_entropy_target": lambda m, x, w: m.nn.functional.binary_cross_entropy(
        x.sigmoid(), x.sigmoid().to(w.dtype)
    ),
    "binary_cross_entropy_weight": lambda m, x, w: m.nn.functional.binary_cross_entropy(x.sigmoid(), x.sigmoid(), w),
    "bce_with_logits_target": lambda m, x, w: m.nn.functional.binary_cross_entropy_with_logits(
        x, x.sigmoid().to(w.dtype)
    ),
    "bce_with_logits_weights": lambda m, x, w: m.nn.functional.binary_cross_entropy_with_logits(
        x, x.sigmoid(), weight=w, pos_weight=w
    ),
}


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("dtypes", [(F64, F32), (F32, F64)], ids=str)
def test_losses_given_weights_or_targets_of_another_dtype(name, dtypes):
    _same_outcome(lambda m: LOSSES[name](m, _ramp(m, dtypes[0], 4, 3), _ramp(m, dtypes[1], 3).abs() + 0.5))
