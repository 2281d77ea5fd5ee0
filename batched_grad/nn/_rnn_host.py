"""NumPy forms of one recurrent layer's pass over a sequence (the rnn_layer op of rnn.py) and of its VJP, which run
instead of tracing the layer's scan and compiling its steps' kernels on the CPU backend: a new sequence length, batch
or configuration compiles nothing. The forward runs step by step as the kernel's scan does; the VJP recomputes the
forward, keeping each step's gates, and backpropagates through time. As in the kernel, a float32 layer's sigmoid and
tanh are float64 values rounded once (rnn._activation), so both tiers round the same accurate value."""

import numpy as np

from .. import _host

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _wide(a):
    return a.astype(_F64) if a.dtype == _F32 else a


def _sigmoid(a):
    """(the rounded sigmoid of `a`, its float64 value), as rnn._activation computes it."""
    wide = 1.0 / (1.0 + np.exp(-_wide(a)))
    return wide.astype(a.dtype), wide


def _tanh(a):
    wide = np.tanh(_wide(a))
    return wide.astype(a.dtype), wide


def _through_sigmoid(ct, wide):
    """The cotangent of a sigmoid's input from its output's `ct` and its float64 value."""
    return (_wide(ct) * (wide * (1.0 - wide))).astype(ct.dtype)


def _through_tanh(ct, wide):
    return (_wide(ct) * ((1.0 + wide) * (1.0 - wide))).astype(ct.dtype)


class _Layer:
    """A layer's operands by name, as rnn._layer unpacks them."""

    def __init__(self, arrays, mode, has_bias, has_proj, masked):
        x, h0, *rest = arrays
        self.x, self.h0, self.mode = x, h0, mode
        self.mask = rest.pop() if masked else None
        self.c0 = rest.pop(0) if mode == "LSTM" else None
        self.w_ih, self.w_hh = rest.pop(0), rest.pop(0)
        self.b_ih, self.b_hh = (rest.pop(0), rest.pop(0)) if has_bias else (None, None)
        self.w_hr = rest.pop(0) if has_proj else None

    def projected(self):
        p = self.x @ self.w_ih.T
        return p if self.b_ih is None else p + self.b_ih


def _step(layer, gate_rows, x_proj, h, c):
    """One step: (new h, new c, what its VJP reads), as rnn._step computes it."""
    hh = h @ layer.w_hh.T
    if layer.b_hh is not None:
        hh = hh + layer.b_hh
    parts = lambda a: [a[:, start:stop] for start, stop in gate_rows]  # noqa: E731
    if layer.mode == "GRU":
        (_, _, i_n), (_, _, h_n) = parts(x_proj), parts(hh)
        (r_start, _), (_, z_stop) = gate_rows[0], gate_rows[1]  # r's and z's gates, adjacent: one sigmoid
        both, both_wide = _sigmoid(x_proj[:, r_start:z_stop] + hh[:, r_start:z_stop])
        (r, z), (r_wide, z_wide) = _split(both, gate_rows), _split(both_wide, gate_rows)
        n, n_wide = _tanh(i_n + r * h_n)
        return (1 - z) * n + z * h, c, (h, r, r_wide, z, z_wide, n, n_wide, h_n)
    gates = x_proj + hh
    if layer.mode == "LSTM":
        (_, _, g, _), (sigmoids, wide) = parts(gates), _sigmoid(gates)  # i, f, o's sigmoids in one pass, and g's
        (si, sf, _, so), (si_wide, sf_wide, _, so_wide) = parts(sigmoids), parts(wide)
        tg, tg_wide = _tanh(g)
        new_c = sf * c + si * tg
        tc, tc_wide = _tanh(new_c)
        h_raw = so * tc
        saved = (h, c, si, si_wide, sf, sf_wide, tg, tg_wide, so, so_wide, tc, tc_wide, h_raw)
        return (h_raw if layer.w_hr is None else h_raw @ layer.w_hr.T), new_c, saved
    if layer.mode == "RNN_TANH":
        out, wide = _tanh(gates)
        return out, c, (h, wide)
    return np.maximum(gates, 0), c, (h, gates > 0)


def _split(a, gate_rows):
    """r's and z's parts of their sigmoids, computed together."""
    (r_start, r_stop), (_, z_stop) = gate_rows[0], gate_rows[1]
    return a[:, : r_stop - r_start], a[:, r_stop - r_start : z_stop - r_start]


def _order(length, reverse):
    return range(length - 1, -1, -1) if reverse else range(length)


def _run(layer, gate_rows, reverse):
    """(outputs, h_n, c_n, each step's saved values by step)."""
    projected = layer.projected()
    length, mask = projected.shape[0], layer.mask
    h, c = layer.h0, layer.c0
    outputs = np.empty((length,) + h.shape, h.dtype)
    saved = [None] * length
    for t in _order(length, reverse):
        new_h, new_c, saved[t] = _step(layer, gate_rows, projected[t], h, c)
        if mask is None:
            h, c, outputs[t] = new_h, new_c, new_h
        else:
            present = mask[t][:, None]
            outputs[t] = np.where(present, new_h, 0)
            h = np.where(present, new_h, h)
            c = new_c if c is None else np.where(present, new_c, c)
    return outputs, h, c, saved


def _fits(arrays):
    """Whether the host forms take these operands: all of float32 or all of float64 (but a mask), none too large."""
    dtypes = {a.dtype for a in arrays if a.dtype != np.bool_}
    return len(dtypes) == 1 and dtypes <= {_F32, _F64} and all([a.size <= _host.HOST_ELEMENTS for a in arrays])


def layer_forward(*arrays, mode, gate_rows, reverse, has_bias, has_proj, masked=False):
    """rnn._layer with NumPy: (outputs, h_n[, c_n]); None for operands above the host's bound or of other dtypes."""
    if not _fits(arrays):
        return None
    outputs, h_n, c_n, _ = _run(_Layer(arrays, mode, has_bias, has_proj, masked), gate_rows, reverse)
    return (outputs, h_n, c_n) if mode == "LSTM" else (outputs, h_n)


class _Grads:
    """The weights' gradients, summed over the steps."""

    def __init__(self, layer):
        self.w_hh = np.zeros_like(layer.w_hh)
        self.b_hh = None if layer.b_hh is None else np.zeros_like(layer.b_hh)
        self.w_hr = None if layer.w_hr is None else np.zeros_like(layer.w_hr)


def _step_vjp(layer, grads, saved, dh, dc):
    """Through one step back: (the cotangent of its input projection, of the previous h, of the previous c)."""
    mode = layer.mode
    if mode == "GRU":
        h, r, r_wide, z, z_wide, n, n_wide, h_n = saved
        dn_pre = _through_tanh(dh * (1 - z), n_wide)
        dz_pre = _through_sigmoid(dh * h - dh * n, z_wide)
        dr_pre = _through_sigmoid(dn_pre * h_n, r_wide)
        d_proj = np.concatenate([dr_pre, dz_pre, dn_pre], 1)
        d_hh = np.concatenate([dr_pre, dz_pre, dn_pre * r], 1)
        dh_prev = dh * z
    elif mode == "LSTM":
        h, c, si, si_wide, sf, sf_wide, tg, tg_wide, so, so_wide, tc, tc_wide, h_raw = saved
        if layer.w_hr is not None:
            grads.w_hr += dh.T @ h_raw
            dh = dh @ layer.w_hr
        dc = dc + _through_tanh(dh * so, tc_wide)
        parts = [
            _through_sigmoid(dc * tg, si_wide),
            _through_sigmoid(dc * c, sf_wide),
            _through_tanh(dc * si, tg_wide),
            _through_sigmoid(dh * tc, so_wide),
        ]
        d_proj = d_hh = np.concatenate(parts, 1)
        dh_prev, dc = np.zeros_like(h), dc * sf
    else:
        h, slope = saved
        d_proj = d_hh = _through_tanh(dh, slope) if mode == "RNN_TANH" else np.where(slope, dh, 0)
        dh_prev = np.zeros_like(h)
    grads.w_hh += d_hh.T @ h
    if grads.b_hh is not None:
        grads.b_hh += d_hh.sum(0)
    return d_proj, dh_prev + d_hh @ layer.w_hh, dc


def _cotangents(cts, layer, length):
    """The outputs', h_n's and c_n's cotangents, zeros for those not given."""
    h_shape = layer.h0.shape
    shapes = [(length,) + h_shape, h_shape] + ([layer.c0.shape] if layer.mode == "LSTM" else [])
    return [np.zeros(s, layer.h0.dtype) if ct is None else ct for ct, s in zip(cts, shapes)]


def layer_vjp(cts, operands, avals, *, mode, gate_rows, reverse, has_bias, has_proj, masked=False):
    """The gradient of each operand of rnn._layer (None for the mask) from its outputs' cotangents `cts` (None where
    not given); None for operands above the host's bound or of other dtypes."""
    if any([o is None for o in operands[: len(operands) - masked]]) or not _fits(operands):
        return None
    layer = _Layer(operands, mode, has_bias, has_proj, masked)
    d_out, dh, *rest = _cotangents(cts, layer, layer.x.shape[0])
    dc = rest[0] if rest else None
    _, _, _, saved = _run(layer, gate_rows, reverse)
    grads, mask = _Grads(layer), layer.mask
    d_proj = np.empty((layer.x.shape[0],) + (layer.x.shape[1], layer.w_ih.shape[0]), layer.x.dtype)
    for t in _order(layer.x.shape[0], not reverse):
        if mask is None:
            d_proj[t], dh, dc = _step_vjp(layer, grads, saved[t], dh + d_out[t], dc)
        else:
            present = mask[t][:, None]
            step_dc = None if dc is None else np.where(present, dc, 0)
            d_proj[t], dh_prev, dc_prev = _step_vjp(
                layer, grads, saved[t], np.where(present, dh + d_out[t], 0), step_dc
            )
            dh = dh_prev + np.where(present, 0, dh)
            dc = None if dc is None else dc_prev + np.where(present, 0, dc)
    result = [d_proj @ layer.w_ih, dh] + ([dc] if mode == "LSTM" else [])
    result += [np.einsum("lng,lni->gi", d_proj, layer.x), grads.w_hh]
    if has_bias:
        result += [d_proj.sum((0, 1)), grads.b_hh]
    if has_proj:
        result.append(grads.w_hr)
    return result + ([None] if masked else [])


def layer_shapes(avals, *, mode, gate_rows, reverse, has_bias, has_proj, masked=False):
    """The (shape, dtype) of rnn._layer's outputs on operands of `avals`."""
    (x_shape, dtype), (h_shape, _) = avals[0], avals[1]
    outs = [((x_shape[0],) + tuple(h_shape), dtype), (tuple(h_shape), dtype)]
    return tuple(outs + [avals[2]] if mode == "LSTM" else outs)
