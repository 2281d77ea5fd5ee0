"""The recurrent layers RNN, LSTM and GRU (stacked, bidirectional, batch_first, dropout between layers, LSTM's
projection) and their cells, with torch's parameter names, shapes, initialization, gate order and reprs. A layer's
pass over a sequence is one op (a jax.lax.scan over time), so the sequence is one node; on the CPU backend small
layers run its NumPy forms (_rnn_host.py), which trace and compile nothing for a new length or batch."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .. import _factories
from .._autocast import autocast_policy
from .._ops._core import Op, apply
from .._ops.elementwise import in_float64
from .._ops.shape import cat, stack
from .._tensor import Tensor
from . import functional as F
from . import init
from ._rnn_host import layer_forward, layer_shapes, layer_vjp
from .module import Module
from .parameter import Parameter
from .utils.rnn import PackedSequence, pad_packed_sequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _gates(a, gate_rows):
    """The gates' slices of the last dimension of `a`, one per (start, stop) in `gate_rows`."""
    return [jax.lax.slice_in_dim(a, start, stop, axis=a.ndim - 1) for start, stop in gate_rows]


# a float32 layer's sigmoid and tanh are float64 values rounded once, as its host forms (_rnn_host.py) round them
_sigmoid, _tanh = in_float64(jax.nn.sigmoid), in_float64(jnp.tanh)


def _step(mode, gate_rows, x_proj, h, c, w_hh, b_hh, w_hr):
    """One time step: (new h, new c) from the input's projection x W_ih^T + b_ih and the state."""
    hh = h @ w_hh.T + (b_hh if b_hh is not None else 0)
    if mode == "GRU":
        ir, iz, i_n = _gates(x_proj, gate_rows)
        hr, hz, h_n = _gates(hh, gate_rows)
        r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
        n = _tanh(i_n + r * h_n)
        return (1 - z) * n + z * h, c
    gates = x_proj + hh
    if mode == "LSTM":
        i, f, g, o = _gates(gates, gate_rows)
        c = _sigmoid(f) * c + _sigmoid(i) * _tanh(g)
        h = _sigmoid(o) * _tanh(c)
        return (h @ w_hr.T if w_hr is not None else h), c
    return (_tanh(gates) if mode == "RNN_TANH" else jax.nn.relu(gates)), c


def _layer(x, h0, *arrays, mode, gate_rows, reverse, has_bias, has_proj, masked=False):
    """One direction of one layer over the sequence x (L, N, H_in): (outputs, h_n[, c_n]). `gate_rows`: the
    (start, stop) rows of each gate in the weights, static, so that a symbolic trace (_numpy_eval.py) keeps the
    weights' sizes: only the sequence's length and batch vary in it. With `masked`, the last array is a (L, N) mask
    of the steps each sequence has (a packed batch): the state passes a missing step unchanged and its output there
    is zero, so each sequence's h_n is the state after its own last step, in either direction."""
    arrays = list(arrays)
    mask = arrays.pop() if masked else None
    c0 = arrays.pop(0) if mode == "LSTM" else None
    w_ih, w_hh = arrays.pop(0), arrays.pop(0)
    b_ih, b_hh = (arrays.pop(0), arrays.pop(0)) if has_bias else (None, None)
    w_hr = arrays.pop(0) if has_proj else None
    projected = x @ w_ih.T + (b_ih if b_ih is not None else 0)

    def body(state, step):
        x_proj, present = step
        h, c = _step(mode, gate_rows, x_proj, state[0], state[1], w_hh, b_hh, w_hr)
        if present is None:
            return (h, c), h
        present = present[:, None]
        h = jnp.where(present, h, state[0])
        if mode == "LSTM":
            c = jnp.where(present, c, state[1])
        return (h, c), jnp.where(present, h, 0)

    (h_n, c_n), outputs = jax.lax.scan(
        body, (h0, c0 if c0 is not None else jnp.zeros((), x.dtype)), (projected, mask), reverse=reverse
    )
    return (outputs, h_n, c_n) if mode == "LSTM" else (outputs, h_n)


_LAYER = Op("rnn_layer", _layer, multi=True, host=layer_forward, host_vjp=layer_vjp, shapes=layer_shapes)


def _layer(operands, **static):
    return apply(_LAYER, operands, **static)


# torch's CPU autocast runs LSTM and RNN layers (not GRU's) as mkldnn_rnn_layer, an op on its lower-precision list
_lower_precision_layer = autocast_policy("lower")(_layer)


def _packed_rows(x, batch_sizes):
    """The rows of a padded, time-major x (L, N, H) that a packed batch holds, in its order: step by step."""
    return cat([x[t, :size] for t, size in enumerate(batch_sizes)])


def _packed_dropout(x, batch_sizes, p):
    """Dropout of a packed batch's padded x (L, N, H) drawn over its packed rows, as torch draws it on the packed
    data between layers; the padding (masked steps) is zeros."""
    rows = F.dropout(_packed_rows(x, batch_sizes), p, True).split(batch_sizes)
    return stack([F.pad(r, (0, 0, 0, x.shape[1] - size)) for r, size in zip(rows, batch_sizes)])


def _uniform_by_hidden_size(module):
    bound = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0
    for weight in module.parameters():
        init.uniform_(weight, -bound, bound)


class RNNBase(Module):
    """The stacked recurrent layer shared by RNN, LSTM and GRU."""

    def __init__(
        self,
        mode,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                stacklevel=3,
            )
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        gate_size = _GATES[mode] * hidden_size
        for layer in range(num_layers):
            for suffix in ("", "_reverse")[:directions]:
                layer_input = input_size if layer == 0 else real_hidden * directions
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, f"{name}_l{layer}{suffix}", Parameter(_factories.empty(*shape, dtype=dtype)))
        self.reset_parameters()
        self._made_on(device)

    def reset_parameters(self):
        """Every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as torch."""
        _uniform_by_hidden_size(self)

    def _layer_parameters(self, layer, suffix):
        return [getattr(self, name) for name in self._layer_names(layer, suffix)]

    def _layer_names(self, layer, suffix):
        names = (
            ["weight_ih", "weight_hh"]
            + (["bias_ih", "bias_hh"] if self.bias else [])
            + (["weight_hr"] if self.proj_size > 0 else [])
        )
        return [f"{name}_l{layer}{suffix}" for name in names]

    @property
    def _all_weights(self):
        """torch's per-layer, per-direction parameter names, which public initialisation code reads."""
        directions = ("", "_reverse") if self.bidirectional else ("",)
        return [self._layer_names(layer, suffix) for layer in range(self.num_layers) for suffix in directions]

    @property
    def _flat_weights_names(self):
        return [name for names in self._all_weights for name in names]

    @property
    def _flat_weights(self):
        """The parameters in _flat_weights_names' order."""
        return [getattr(self, name, None) for name in self._flat_weights_names]

    def flatten_parameters(self):
        """Nothing to pack: torch packs the weights into one buffer only for cuDNN, and here (as with torch on the
        CPU) each weight stays its own array."""

    @property
    def all_weights(self):
        """Each layer's and direction's parameters, in torch's order: [[weight_ih, weight_hh, bias_ih, bias_hh,
        weight_hr if any], ...]."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _initial_state(self, x, hx):
        directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        rows = self.num_layers * directions
        if hx is None:
            h = _factories.zeros(rows, x.shape[1], real_hidden, dtype=x.dtype)
            return (
                (h, _factories.zeros(rows, x.shape[1], self.hidden_size, dtype=x.dtype))
                if self.mode == "LSTM"
                else (h,)
            )
        states = tuple(hx) if self.mode == "LSTM" else (hx,)
        expected = [(rows, x.shape[1], real_hidden), (rows, x.shape[1], self.hidden_size)]
        for state, shape, what in zip(states, expected, ("hidden", "cell")):
            if tuple(state.shape) != shape:
                raise RuntimeError(f"Expected {what} size {shape}, got {list(state.shape)}")
        return states

    def _time_major_input(self, input, hx):
        """(input as (time, batch, features), hx with a batch dimension, whether the input was unbatched), checked."""
        if not isinstance(input, Tensor):
            raise TypeError(
                f"{type(self).__name__}: expected input to be a Tensor or a PackedSequence, got {type(input).__name__}"
            )
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        unbatched = input.ndim == 2
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first else input)
        if unbatched and hx is not None:
            hx = tuple(s.unsqueeze(1) for s in hx) if self.mode == "LSTM" else hx.unsqueeze(1)
        self._check_input(x)
        return x, hx, unbatched

    def _check_input(self, x, packed=False):
        """torch's checks of the input's dtype (its LSTM skips that check for a packed input, which then meets the
        weights in its first product) and size."""
        weight = self.weight_ih_l0
        if x.dtype != weight.dtype and packed and self.mode == "LSTM":
            raise RuntimeError(
                f"mat1 and mat2 must have the same dtype, but got {x.dtype.type_name} and {weight.dtype.type_name}"
            )
        if x.dtype != weight.dtype:
            raise ValueError(
                f"RNN input dtype ({x.dtype}) does not match weight dtype ({weight.dtype}). Convert input: "
                f"input.to({weight.dtype}), or convert model: model.to({x.dtype})"
            )
        if x.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got {x.shape[-1]}"
            )

    def _run_layers(self, x, states, mask=None, batch_sizes=None):
        """(the last layer's output, each state's final value per layer and direction); a packed batch gives the mask
        of its steps and its batch sizes."""
        finals = [[] for _ in states]
        directions = ("", "_reverse") if self.bidirectional else ("",)
        gates = _GATES[self.mode]
        for layer in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(directions):
                row = layer * len(directions) + d
                out = (_layer if self.mode == "GRU" else _lower_precision_layer)(
                    [x]
                    + [s[row] for s in states]
                    + self._layer_parameters(layer, suffix)
                    + ([mask] * (mask is not None)),
                    mode=self.mode,
                    gate_rows=tuple([(k * self.hidden_size, (k + 1) * self.hidden_size) for k in range(gates)]),
                    reverse=d == 1,
                    has_bias=bool(self.bias),
                    has_proj=self.proj_size > 0,
                    masked=mask is not None,
                )
                outputs.append(out[0])
                for final, value in zip(finals, out[1:]):
                    final.append(value)
            x = outputs[0] if len(outputs) == 1 else cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = (
                    F.dropout(x, self.dropout, True)
                    if batch_sizes is None
                    else _packed_dropout(x, batch_sizes, self.dropout)
                )
        return x, finals

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        x, hx, unbatched = self._time_major_input(input, hx)
        x, finals = self._run_layers(x, self._initial_state(x, hx))
        output = x.squeeze(1) if unbatched else (x.transpose(0, 1) if self.batch_first else x)
        hidden = tuple(stack(final) for final in finals)
        if unbatched:
            hidden = tuple(h.squeeze(1) for h in hidden)
        return output, (hidden if self.mode == "LSTM" else hidden[0])

    def _forward_packed(self, packed, hx):
        """A packed batch: the layers run over it padded (in its sorted order) with each sequence's steps masked;
        the output is packed as the input was, and hx and the final states are in the caller's order, as torch's."""
        x, lengths = pad_packed_sequence(PackedSequence(packed.data, packed.batch_sizes))
        self._check_input(x, packed=True)
        steps = np.arange(x.shape[0])[:, None] < np.asarray(lengths.tolist())[None, :]
        if hx is not None and packed.sorted_indices is not None:
            order = packed.sorted_indices
            hx = tuple(s.index_select(1, order) for s in hx) if self.mode == "LSTM" else hx.index_select(1, order)
        sizes = packed.batch_sizes.tolist()
        out, finals = self._run_layers(x, self._initial_state(x, hx), _factories.tensor(steps), sizes)
        data = _packed_rows(out, sizes)
        hidden = tuple(stack(final) for final in finals)
        if packed.unsorted_indices is not None:
            hidden = tuple(h.index_select(1, packed.unsorted_indices) for h in hidden)
        output = PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
        return output, (hidden if self.mode == "LSTM" else hidden[0])

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (relu with nonlinearity='relu')."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        nonlinearity="tanh",
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(
            "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device,
            dtype,
        )
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o), with an optional projection of h to proj_size."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__(
            "LSTM",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device,
            dtype,
        )


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n)."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__(
            "GRU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device,
            dtype,
        )


# ---- cells -------------------------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """One step of a recurrent layer: weight_ih, weight_hh (and biases) of gates * hidden_size rows."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(_factories.empty(num_chunks * hidden_size, input_size, dtype=dtype))
        self.weight_hh = Parameter(_factories.empty(num_chunks * hidden_size, hidden_size, dtype=dtype))
        for name in ("bias_ih", "bias_hh"):
            self.register_parameter(
                name, Parameter(_factories.empty(num_chunks * hidden_size, dtype=dtype)) if bias else None
            )
        self.reset_parameters()
        self._made_on(device)

    def reset_parameters(self):
        """Every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as torch."""
        _uniform_by_hidden_size(self)

    def _batched(self, input, hx, states):
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        if hx is None:
            hx = tuple(_factories.zeros(x.shape[0], self.hidden_size, dtype=x.dtype) for _ in range(states))
        else:
            hx = tuple(h.unsqueeze(0) if unbatched else h for h in (hx if states > 1 else (hx,)))
        return x, hx, unbatched

    def _projections(self, x, h):
        return F.linear(x, self.weight_ih, self.bias_ih), F.linear(h, self.weight_hh, self.bias_hh)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (relu with nonlinearity='relu')."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity not in ("tanh", "relu"):  # torch checks it here, not when built
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        x, (h,), unbatched = self._batched(input, hx, 1)
        gx, gh = self._projections(x, h)
        out = (gx + gh).tanh() if self.nonlinearity == "tanh" else (gx + gh).relu()
        return out.squeeze(0) if unbatched else out


class LSTMCell(RNNCellBase):
    """One LSTM step: (h', c') from (h, c), gates i, f, g, o."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, (h, c), unbatched = self._batched(input, hx, 2)
        gx, gh = self._projections(x, h)
        i, f, g, o = (gx + gh).chunk(4, 1)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h = o.sigmoid() * c.tanh()
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """One GRU step: h' = (1 - z) n + z h with gates r, z, n."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, (h,), unbatched = self._batched(input, hx, 1)
        gx, gh = self._projections(x, h)
        ir, iz, i_n = gx.chunk(3, 1)
        hr, hz, h_n = gh.chunk(3, 1)
        r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
        n = (i_n + r * h_n).tanh()
        out = (1 - z) * n + z * h
        return out.squeeze(0) if unbatched else out
