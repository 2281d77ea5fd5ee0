"""Neural-network ops: activations, softmax, linear, convolution, layer norm, embedding, pad, one_hot and
dropout (pooling is in pooling.py). Each is a pure JAX function recorded through the op table, so its VJP (and
every higher one) is JAX's."""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from .. import _dtypes
from .._autocast import autocast_policy
from .._dtypes import not_implemented
from .._foreign import not_a_tensor
from .._grad_mode import is_recording
from .._graph import GradientEdge, sequence_mark
from .._int_args import int_or_ints
from .._lazy import NeedsTracing, signature
from .._meta import MetaValue, check_devices
from .._tensor import Tensor, _wrap_dim, warn_at_caller
from . import _derivatives
from ._core import SAVES_RESULT, Op, apply, node_after_the_fact
from ._fused_backward import FUSED, FUSED_ZEROS, Fused, last_operand_if
from ._mixed_dtype import (
    HALF_ARRAY_DTYPES,
    REDUCED_FLOATS,
    check_norm_parameters,
    compute_dtype,
    conv_bias_of_input_dtype,
    halves_in_float32,
)
from .elementwise import broadcast_shape
from .products import check_fused_dtypes
from .random_draws import sample_like
from .shape import expanded_shape


def _is_concrete(x):
    try:
        return not isinstance(x._value, jax.core.Tracer)
    except NeedsTracing:  # a row of vmap.vmap's input, not computed yet: value checks are skipped, as when traced
        return False


def _host(x):
    """The values of a concrete Tensor as a NumPy array (for torch's value checks)."""
    return np.asarray(x._value)


def _check_tensor(fn, name, x, position=1):
    if not isinstance(x, Tensor):
        raise not_a_tensor(fn, name, x, position)


def _require_inexact(kernel, dtype):
    """torch's NotImplementedError for kernels without an integer or bool version."""
    if not (dtype.is_floating_point or dtype.is_complex):
        raise not_implemented(kernel, dtype)


def _tuple(value, n, name):
    """An int or a sequence of n ints (torch's `_pair`), checked."""
    values = int_or_ints(value, n)
    if len(values) != n or not all(isinstance(v, (int, np.integer)) for v in values):
        raise TypeError(f"{name} must be an int or a sequence of {n} ints, but got {value!r}")
    return tuple(int(v) for v in values)


# ---- activations --------------------------------------------------------------------------------------------
def _softplus(a, *, beta, threshold):
    z = a * beta
    return jnp.where(z > threshold, a, jax.nn.softplus(z) / beta)


_ACTIVATIONS = {  # name: (JAX function of the array and static parameters, torch's kernel name)
    # a number parameter is an operand (a 0-d array, in the input's dtype as torch takes it): a new value compiles
    # nothing
    "leaky_relu": (lambda a, slope: jnp.where(a > 0, a, a * slope.astype(a.dtype)), "leaky_relu_cpu"),
    # torch's derivative: alpha exp(x) where x <= 0 (alpha at 0), else 1 (at nan too)
    "elu": (lambda a, alpha: _derivatives.elu_like(a, alpha=alpha.astype(a.dtype)), "elu_cpu"),
    "gelu": (lambda a, *, approximate: jax.nn.gelu(a, approximate=approximate == "tanh"), "GeluKernelImpl"),
    "silu": (lambda a: a * jax.nn.sigmoid(a), "silu_cpu"),
    "softplus": (_softplus, "softplus_cpu"),
}
# torch's backward of each is a kernel (leaky_relu_backward, ...) that reads the input, and its derivative in the
# input is zeros where the math has none
_ACTIVATION_OPS = {
    name: Op(name, halves_in_float32(f), diagonal=True, inputs=1, fused=FUSED_ZEROS)
    for name, (f, _) in _ACTIVATIONS.items()
}


def _activation(name, input, inplace=False, numbers=(), **static):
    _check_tensor(name, "input", input)
    _require_inexact(_ACTIVATIONS[name][1], input.dtype)
    out = apply(_ACTIVATION_OPS[name], [input, *numbers], **static)
    return input._assign(out, f"{name}_") if inplace else out


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x."""
    return _activation("leaky_relu", input, inplace, numbers=(float(negative_slope),))


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return _activation("elu", input, inplace, numbers=(float(alpha),))


def gelu(input, approximate="none"):
    """x * Phi(x) (the Gaussian CDF), or its tanh approximation with approximate='tanh'."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return _activation("gelu", input, approximate=approximate)


def silu(input, inplace=False):
    """x * sigmoid(x)."""
    return _activation("silu", input, inplace)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""
    return _activation("softplus", input, beta=float(beta), threshold=float(threshold))


def _over_one_axis(fn):
    """fn along `axis`; a 0-dim input is a single element (torch's softmax of a scalar is 1)."""
    return lambda a, *, axis, dtype: fn(a.reshape(a.shape or (1,)), axis=axis, dtype=dtype).reshape(a.shape)


def _softmax_fn(a, *, axis, dtype):
    if dtype not in HALF_ARRAY_DTYPES:
        return jax.nn.softmax(a.astype(dtype), axis=axis)
    # torch's kernels compute a half-float softmax in float32 and round once along the last dim; along another they
    # store the exponentials in the output (rounded), sum them unrounded and divide the stored ones
    x = a.astype(dtype).astype(jnp.float32)
    if axis == a.ndim - 1:
        return jax.nn.softmax(x, axis=axis).astype(dtype)
    e = jnp.exp(x - jax.lax.stop_gradient(x.max(axis=axis, keepdims=True)))
    return (e.astype(dtype).astype(jnp.float32) / e.sum(axis=axis, keepdims=True)).astype(dtype)


def _log_softmax_fn(a, *, axis, dtype):
    return jax.nn.log_softmax(a.astype(dtype), axis=axis)


_SOFTMAX = Op("softmax", _over_one_axis(_softmax_fn), torch_saves=SAVES_RESULT)
_LOG_SOFTMAX = Op("log_softmax", _over_one_axis(_log_softmax_fn), torch_saves=SAVES_RESULT)


def _softmax_dim(name, ndim, dim):
    if dim is None:  # torch's legacy implicit choice
        warn_at_caller(
            f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an "
            "argument."
        )
        dim = 0 if ndim in (0, 1, 3) else 1
    return _wrap_dim(dim, ndim)


def _softmax(op, name, input, dim, dtype):
    _check_tensor(name, "input", input)
    d = input.dtype if dtype is None else _dtypes.to_dtype(dtype)
    _require_inexact(f"{name}_lastdim_kernel_impl", d)
    return apply(op, [input], axis=_softmax_dim(name, input.ndim, dim), dtype=d.np)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along `dim` (computed in `dtype` when given)."""
    return _softmax(_SOFTMAX, "softmax", input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x - logsumexp(x) along `dim`, computed stably (in `dtype` when given)."""
    return _softmax(_LOG_SOFTMAX, "log_softmax", input, dim, dtype)


# ---- linear and convolution ---------------------------------------------------------------------------------
def _linear(*operands, weight_t, addmm_rows=False):
    """bias + x @ w.T, the operands in torch's addmm order (bias, x, weight) or (x, weight) without a bias; with
    `weight_t` the weight operand is already transposed (torch's weight.t(), recorded as its own node);
    `addmm_rows`: a contiguous 3-D input, whose rows torch folds into one addmm."""
    *bias, x, w = operands
    w = w if weight_t else w.T
    if not bias:
        return jnp.matmul(x, w)
    dtype = jnp.result_type(x, w)
    if dtype in (jnp.bfloat16, jnp.float16) and (x.ndim == 2 or addmm_rows):  # addmm adds in float32, rounds once
        return (jnp.matmul(x, w, preferred_element_type=jnp.float32) + bias[0].astype(jnp.float32)).astype(dtype)
    return jnp.matmul(x, w) + bias[0]


def _linear_name(sig):  # torch's last recorded op, by input rank (1, 2, more) and whether there is a bias
    rank, bias = min(len(sig.avals[-2][0]), 3), len(sig.avals) == 3
    return {
        1: ("SqueezeBackward4", "ViewBackward0"),
        2: ("MmBackward0", "AddmmBackward0"),
        3: ("UnsafeViewBackward0", "ViewBackward0"),
    }[rank][bias]


# affine in each operand: an operand's own value never enters its VJP, so multilinear saving is exact
_LINEAR = Op(
    "linear",
    _linear,
    multilinear=True,
    backward_name=_linear_name,
    expose=lambda node: _expose_t(node),
    added=lambda sig: (0,) if len(sig.avals) == 3 else (),  # the bias
)
# torch's weight.t() inside linear: a node of its own (TBackward0) between the product and the weight. It is made
# when the graph is first looked at (the product node's next_functions), not at every forward: until then the
# product differentiates the weight itself, which is the same gradient, and nothing can tell the node is missing
_WEIGHT_T = Op("t", lambda w: w.T, linear=True, backward_name="TBackward0")


def _expose_t(node):
    """Give a recorded linear node torch's structure: its weight edge leads to a TBackward0 node (made just before
    it, as torch's weight.t()), which leads to the weight; the node then differentiates the transposed weight, and
    saves it (the saved weight, transposed, with the weight's version)."""
    sig, edge = node.sig, node.edges[-1]
    if dict(sig.static)["weight_t"] or edge is None:
        return
    (shape, dtype) = sig.avals[-1]
    transpose = node_after_the_fact(signature(_WEIGHT_T, (), ((shape, dtype),)), (edge,), node.sequence_nr - 1)
    saved = node.saved[-1]
    node.rewire(
        signature(
            _LINEAR,
            tuple((k, True if k == "weight_t" else v) for k, v in sig.static),
            sig.avals[:-1] + ((shape[::-1], dtype),),
        ),
        node.edges[:-1] + (GradientEdge(transpose, 0),),
        node.saved[:-1] + (None if saved is None else saved.transposed(transpose),),
    )


def _check_linear_bias(input_shape, features, bias):
    """torch's errors for a bias that does not fit: its addmm expands the bias to (rows, features); for input of
    other ranks with a bias of another rank, it adds the bias in place to the product."""

    if len(input_shape) == 2 or bias.ndim == 1:
        expanded_shape(bias, (max(1, math.prod(input_shape[:-1])), features))
    out = tuple(input_shape[:-1]) + (features,)
    shape = broadcast_shape(out, tuple(bias.shape))
    if shape != out and len(input_shape) > 2:
        raise RuntimeError(f"output with shape {list(out)} doesn't match the broadcast shape {list(shape)}")


@autocast_policy("lower")
def linear(input, weight, bias=None):
    """input @ weight.T + bias, recorded as torch's addmm(bias, input, weight.t()) (mm without a bias): one node,
    whose weight.t() node is made when its next_functions are read (_expose_t)."""
    _check_tensor("linear", "input", input)
    _check_tensor("linear", "weight", weight, 2)
    features = weight._v.shape  # the values' shapes: tuples, without a torch.Size made per read
    if input._v.shape[-1:] != features[-1:]:
        rows = int(np.prod(input.shape[:-1]))
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{input.shape[-1]} and "
            f"{'x'.join(map(str, reversed(weight.shape)))})"
        )
    if bias is not None and (bias._v.shape if isinstance(bias, Tensor) else tuple(bias.shape)) != features[:1]:
        _check_linear_bias(input.shape, weight.shape[0], bias)
    if bias is not None:
        check_fused_dtypes("addmm", bias, input, weight)
    elif input.dtype != weight.dtype:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {input.dtype.cpp_name} != {weight.dtype.cpp_name}"
        )
    operands = [input, weight] if bias is None else [bias, input, weight]
    if type(input._v) is MetaValue or type(weight._v) is MetaValue or type(operands[0]._v) is MetaValue:
        check_devices(_LINEAR, operands[-2:] + operands[:-2])  # torch checks the input's device first
    if weight.requires_grad and is_recording():
        sequence_mark()  # the number torch's weight.t() node gets, for the node _expose_t may make
    if bias is not None and input.ndim == 3 and input.dtype in REDUCED_FLOATS and input.is_contiguous():
        return apply(_LINEAR, operands, weight_t=False, addmm_rows=True)
    return apply(_LINEAR, operands, weight_t=False)


def _conv(x, w, *bias, stride, padding, dilation, groups):
    return _conv_biased(x, w, bias[0] if bias else None, (stride, padding, dilation, groups))


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _conv_biased(x, w, bias, geometry):
    taps = math.prod(w.shape[2:])
    # one tap (a pointwise convolution, as point-cloud networks use) is a plain matrix product: in float64 XLA's CPU
    # convolution is 20x slower than the product
    as_product = (w.shape[1] <= 4 and taps <= 64) or taps == 1
    out = (_conv_taps if as_product and jax.default_backend() == "cpu" else _conv_channels_last)(x, w, *geometry)
    return out if bias is None else out + _bias_plane(bias, w.ndim - 2)


def _bias_plane(bias, n):
    return bias.reshape((-1,) + (1,) * n)


_TAPS_TANGENT_MAX = 1 << 16  # elements of x's stacked taps: above, XLA's convolution was faster even under vmap


def _conv_biased_jvp(geometry, primals, tangents):
    # For one sample (as in per-sample gradients), the tangent terms of the weight and the bias as one product with
    # x's stacked taps (and a plane of ones for the bias), where those are small. Its transpose gives both gradients
    # from one matrix product over the output positions, a batched one under vmap, where XLA's transpose would be a
    # convolution with a feature group per sample and a separate reduction for the bias, each recomputing the
    # cotangent from its producers. With a batch, XLA's transposed convolution (over batch and positions) is faster.
    (x, w, bias), (tx, tw, tb) = primals, tangents
    out = _conv_biased(x, w, bias, geometry)
    n, with_bias = w.ndim - 2, bias is not None and type(tb) is not SymbolicZero
    terms = [] if type(tx) is SymbolicZero else [_conv_biased(tx, w, None, geometry)]
    if type(tw) is SymbolicZero:
        if with_bias:
            terms.append(jnp.broadcast_to(_bias_plane(tb, n), out.shape))
    elif x.shape[0] == 1 and x.size * math.prod(w.shape[2:]) <= _TAPS_TANGENT_MAX:
        taps = _stacked_taps(x, w.shape[2:], *geometry, ones=with_bias)
        terms.append(_taps_product(taps, tw, tb if with_bias else None))
    else:
        terms.append(_conv_biased(x, tw, tb if with_bias else None, geometry))
    return out, functools.reduce(jnp.add, terms) if terms else jnp.zeros_like(out)


_conv_biased.defjvp(_conv_biased_jvp, symbolic_zeros=True)


def _conv_channels_last(x, w, stride, padding, dilation, groups):
    # computed channels-last (N, *spatial, C) with a (*spatial, I, O) kernel: XLA's CPU convolutions, and the
    # batched ones of per-sample gradients most of all, run faster in that layout than in torch's
    n = w.ndim - 2
    space, spatial = tuple(range(2, n + 2)), "DHW"[-n:]
    out = jax.lax.conv_general_dilated(
        x.transpose((0,) + space + (1,)),
        w.transpose(space + (1, 0)),
        stride,
        padding,
        rhs_dilation=dilation,
        feature_group_count=groups,
        dimension_numbers=("N" + spatial + "C", spatial + "IO", "N" + spatial + "C"),
    )
    return out.transpose((0, n + 1) + tuple(range(1, n + 1)))


def _conv_taps(x, w, stride, padding, dilation, groups):
    """The convolution as one product of the kernel with x's stacked taps. With few input channels per group XLA's
    CPU convolution is a poor matrix product (an inner dimension of 1 to 4); this form is up to 10x faster (one
    input channel), and its per-sample gradients are batched matrix products."""
    return _taps_product(_stacked_taps(x, w.shape[2:], stride, padding, dilation, groups), w)


def _stacked_taps(x, kernel, stride, padding, dilation, groups, ones=False):
    """x's strided views, one per kernel tap: (batch, groups, channels per group * taps, *out_spatial), in the
    order of the kernel's (channel, *tap) elements; with `ones`, a plane of ones after them."""
    x = jnp.pad(x, ((0, 0), (0, 0)) + tuple(padding))
    batch, channels = x.shape[:2]
    size = [(m - d * (k - 1) - 1) // s + 1 for m, k, d, s in zip(x.shape[2:], kernel, dilation, stride)]
    x = x.reshape((batch, groups, channels // groups) + x.shape[2:])
    views = []
    for tap in itertools.product(*map(range, kernel)):
        view = tuple(slice(t * d, t * d + (m - 1) * s + 1, s) for t, d, m, s in zip(tap, dilation, size, stride))
        views.append(x[(..., *view)])
    taps = jnp.stack(views, 3)
    taps = taps.reshape(taps.shape[:2] + (taps.shape[2] * taps.shape[3],) + taps.shape[4:])  # not -1: empty batches
    return jnp.concatenate([taps, jnp.ones(taps.shape[:2] + (1,) + taps.shape[3:], taps.dtype)], 2) if ones else taps


def _taps_product(taps, w, bias=None):
    """The convolution of w (and `bias`, with the plane of ones) with stacked taps (_stacked_taps)."""
    groups, out_channels = taps.shape[1], w.shape[0]
    w = w.reshape((groups, out_channels // groups, -1))
    if bias is not None:
        w = jnp.concatenate([w, bias.reshape(groups, -1, 1)], 2)
    # w broadcast over the batch: XLA then lays the product out (C_out, batch * positions), not channels-last
    # (batch * positions, C_out), which its consumers in torch's layout read with a stride (2x faster forward)
    out = jnp.einsum("ngok,ngk...->ngo...", jnp.broadcast_to(w, taps.shape[:1] + w.shape), taps)
    return out.reshape((taps.shape[0], out_channels) + taps.shape[3:])


# convolution_backward reads the input and the weight, and of the bias only its size
CONV_BACKWARD = Fused(bias=last_operand_if(lambda sig: len(sig.avals) == 3), reads_bias=False)
_CONV = Op("convolution", _conv, multilinear=True, fused=CONV_BACKWARD)


def _conv_padding(padding, n, kernel, dilation, stride):
    if padding == "valid":
        return ((0, 0),) * n
    if padding == "same":
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple((t // 2, t - t // 2) for t in totals)
    if isinstance(padding, str):
        raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
    return tuple((p, p) for p in _tuple(padding, n, "padding"))


def batched_input(fn, input, n):
    """A convolution's `input` with its batch dim (added where it is unbatched) and whether it was added; torch's
    error for another rank."""
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {fn}, but got input of "
            f"size: {list(input.shape)}"
        )
    unbatched = input.ndim == n + 1
    return (input.unsqueeze(0) if unbatched else input), unbatched


def _convolution(n, input, weight, bias, stride, padding, dilation, groups):
    fn = f"conv{n}d"
    _check_tensor(fn, "input", input)
    _check_tensor(fn, "weight", weight, 2)
    if weight.ndim != n + 2:
        raise RuntimeError(
            "weight should have at least three dimensions"
            if weight.ndim < 3
            else f"Expected {n + 2}-dimensional weight for {fn}, but got weight of size {list(weight.shape)}"
        )
    x, unbatched = batched_input(fn, input, n)
    if bias is not None and tuple(bias.shape) != weight.shape[:1]:
        raise RuntimeError(
            f"Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional with "
            f"{weight.shape[0]} elements, but got bias of size {list(bias.shape)} instead"
        )
    if weight.shape[0] % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
            f"got weight of size [{list(weight.shape)}] instead"
        )
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
            f"{list(x.shape)} to have {weight.shape[1] * groups} channels, but got {x.shape[1]} "
            "channels instead"
        )
    stride, dilation = _tuple(stride, n, "stride"), _tuple(dilation, n, "dilation")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    pads = _conv_padding(padding, n, weight.shape[2:], dilation, stride)
    if min(min(p) for p in pads) < 0:
        raise RuntimeError("negative padding is not supported")
    padded = [size + lo + hi for size, (lo, hi) in zip(x.shape[2:], pads)]
    kernel = [d * (k - 1) + 1 for d, k in zip(dilation, weight.shape[2:])]
    if any(k > p for k, p in zip(kernel, padded)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
            f"({' x '.join(map(str, kernel))}). Kernel size can't be greater than actual input size"
        )
    conv_bias_of_input_dtype(x, weight, bias, groups)
    out = apply(
        _CONV,
        [x, weight] + ([] if bias is None else [bias]),
        stride=stride,
        padding=pads,
        dilation=dilation,
        groups=int(groups),
    )
    return out.squeeze(0) if unbatched else out


@autocast_policy("lower")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation of (N, C_in, L) with (C_out, C_in / groups, k); padding may be 'valid' or 'same'."""
    return _convolution(1, input, weight, bias, stride, padding, dilation, groups)


@autocast_policy("lower")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation of (N, C_in, H, W) with (C_out, C_in / groups, kh, kw)."""
    return _convolution(2, input, weight, bias, stride, padding, dilation, groups)


@autocast_policy("lower")
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation of (N, C_in, D, H, W) with (C_out, C_in / groups, kd, kh, kw)."""
    return _convolution(3, input, weight, bias, stride, padding, dilation, groups)


# ---- normalization and embedding ----------------------------------------------------------------------------
def _layer_norm(input, *affine, axes, eps, has_weight):
    x = input.astype(compute_dtype(input, affine))
    mean = jnp.mean(x, axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axes, keepdims=True)
    out = (x - mean) * jax.lax.rsqrt(var + eps)
    if has_weight:
        out, affine = out * affine[0], affine[1:]
    return (out + affine[0] if affine else out).astype(input.dtype)


_LAYER_NORM = Op("native_layer_norm", _layer_norm, fused=FUSED)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing `normalized_shape` dims (biased variance), then scale and shift."""
    _check_tensor("layer_norm", "input", input)
    shape = int_or_ints(normalized_shape)
    n = len(shape)
    if not n or tuple(input.shape[input.ndim - n :]) != shape or input.ndim < n:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape [*, "
            f"{', '.join(map(str, shape))}], but got input of size{list(input.shape)}"
        )
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != shape:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                f"{list(p.shape)} and normalized_shape = {list(shape)}"
            )
    check_norm_parameters(input, weight, bias)
    affine = [p for p in (weight, bias) if p is not None]
    return apply(
        _LAYER_NORM,
        [input] + affine,
        axes=tuple(range(input.ndim - n, input.ndim)),
        eps=float(eps),
        has_weight=weight is not None,
    )


def _embedding(w, indices, *, padding_idx):
    out = jnp.take(w, indices, axis=0)
    if padding_idx is None:
        return out
    # rows looked up at padding_idx keep their values but get no gradient
    return jnp.where((indices == padding_idx)[..., None], jax.lax.stop_gradient(out), out)


_EMBEDDING = Op("embedding", _embedding, multilinear=True)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` looked up by the integer tensor `input`; rows at `padding_idx` get no gradient; with
    scale_grad_by_freq each row's gradient is divided by how often its index occurs in `input` (reverse mode, first
    order)."""
    _check_tensor("embedding", "input", input)
    _check_tensor("embedding", "weight", weight, 2)
    if input.dtype.is_floating_point or input.dtype.is_complex or input.dtype is _dtypes.bool:
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
            f"Long, Int; but got torch.{input.dtype.type_name}Tensor instead (while checking "
            "arguments for embedding)"
        )
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    rows = weight.shape[0]
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= rows
    if _is_concrete(input) and input.numel() and not (0 <= _host(input).min() and _host(input).max() < rows):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        from .embeddings import renorm_rows_

        renorm_rows_(weight, input, max_norm, norm_type)
    if scale_grad_by_freq and weight.requires_grad and is_recording():
        from .embeddings import embedding_by_frequency  # embeddings imports this module

        return embedding_by_frequency(weight, input, padding_idx, sparse)
    if sparse and weight.requires_grad and is_recording():
        from ..sparse._grads import embedding_with_sparse_grad

        lookup = lambda w: apply(_EMBEDDING, [w, input], padding_idx=padding_idx)  # noqa: E731
        return embedding_with_sparse_grad(weight, input, padding_idx, lookup)
    return apply(_EMBEDDING, [weight, input], padding_idx=padding_idx)


# ---- pad, one_hot, dropout ----------------------------------------------------------------------------------
_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}  # torch's mode: jnp.pad's
_CONSTANT_PAD = Op(
    "constant_pad_nd", lambda a, *, pads, value: jax.lax.pad(a, jnp.array(value, a.dtype), pads), linear=True
)
_MODE_PAD = Op("pad", lambda a, *, pads, mode: jnp.pad(a, pads, mode=mode), linear=True)


def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad) // 2 dims: pad = (left of the last dim, right of the last dim, left of the one before,
    ...). 'constant' takes negative amounts (cropping); 'reflect', 'replicate' and 'circular' repeat the input."""
    _check_tensor("pad", "input", input)
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    n = len(pad) // 2
    if n > input.ndim:
        raise RuntimeError(
            "Padding length should be less than or equal to two times the input dimension but got "
            f"padding length {len(pad)} and input of dimension {input.ndim}"
        )
    pairs = [(0, 0)] * (input.ndim - n) + [pad[2 * i : 2 * i + 2] for i in reversed(range(n))]
    if mode == "constant":
        if any(size + lo + hi < 0 for size, (lo, hi) in zip(input.shape, pairs)):  # cropped past nothing
            raise RuntimeError("narrow(): length must be non-negative.")
        return apply(
            _CONSTANT_PAD, [input], pads=tuple((lo, hi, 0) for lo, hi in pairs), value=0 if value is None else value
        )
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value:
        raise ValueError(f'Padding mode "{mode}" doesn\'t take in value argument.')
    _check_mode_padding(mode, input.shape, pairs)
    if any(lo < 0 or hi < 0 for lo, hi in pairs):  # a negative padding crops that side first, as torch's
        input = input[tuple(slice(max(-lo, 0), size - max(-hi, 0)) for size, (lo, hi) in zip(input.shape, pairs))]
        pairs = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    listed = mode == "replicate" or (mode == "reflect" and n < 3)
    return (_mode_pad_in_float32 if listed else _mode_pad)(input, tuple(map(tuple, pairs)), _PAD_MODES[mode])


def _mode_pad(input, pads, mode):
    return apply(_MODE_PAD, [input], pads=pads, mode=mode)


_mode_pad_in_float32 = autocast_policy("fp32")(_mode_pad)  # torch's reflection_pad1d/2d and replication_pad1d/2d/3d


def _check_mode_padding(mode, shape, pairs):
    """torch's limits: a reflection shorter than its dimension, a circular padding wrapping at most once
    (replication has none)."""
    for dim, (lo, hi) in enumerate(pairs):
        if mode == "reflect" and max(lo, hi) >= shape[dim]:
            raise RuntimeError(
                "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding "
                f"({lo}, {hi}) at dimension {dim} of input {list(shape)}"
            )
        if mode == "circular" and max(lo, hi) > shape[dim]:
            raise RuntimeError("Padding value causes wrapping around more than once.")


_ONE_HOT = Op("one_hot", lambda a, *, classes: (a[..., None] == jnp.arange(classes)).astype(jnp.int64))


def one_hot(tensor, num_classes=-1):
    """An int64 tensor with one more trailing dim of size `num_classes`, 1 at each value's index."""
    _check_tensor("one_hot", "tensor", tensor)
    if tensor.dtype is not _dtypes.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if _is_concrete(tensor) and tensor.numel():
        low, high = _host(tensor).min(), _host(tensor).max()
        if low < 0:
            raise RuntimeError("Class values must be non-negative.")
        if num_classes == -1:
            num_classes = int(high) + 1
        elif high >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    elif num_classes == -1:
        if tensor.numel():  # a traced tensor's values are unknown
            raise ValueError(
                "one_hot: num_classes=-1 needs the values, which are not known inside vmap.vmap; pass "
                "num_classes explicitly."
            )
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    return apply(_ONE_HOT, [tensor], classes=int(num_classes))


_DROPOUT = Op(
    "dropout",
    lambda a, keep, *, scale: a * keep.astype(a.dtype) * scale,
    multilinear=True,
    backward_name="MulBackward0",
)


def kept_scale(p, dtype):
    """torch's 1 / (1 - p) for the kept elements, divided in the tensor's dtype (0 for p = 1)."""
    if p == 1:
        return 0.0
    real = np.float64 if dtype.np == np.float64 else np.float32
    return float(real(1) / real(1 - p))


def check_dropped_dtype(input):
    """torch's refusal of dropping elements of an integer or bool tensor (the scaled result is a float)."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"result type Float can't be cast to the desired output type {input.dtype.type_name}")


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p (drawn from batched_grad's generator) and scale the rest by
    1 / (1 - p); the identity when not training."""

    _check_tensor("dropout", "input", input)
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0 or input.numel() == 0:
        return input
    check_dropped_dtype(input)
    keep = sample_like(None, "dropout", input, lambda bits, size: bits.bernoulli(size, 1 - p), rows_first=True)
    out = apply(_DROPOUT, [input, keep], scale=kept_scale(p, input.dtype))
    return input._assign(out, "mul_") if inplace else out


__all__ = [
    "conv1d",
    "conv2d",
    "conv3d",
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "one_hot",
    "pad",
    "silu",
    "softmax",
    "softplus",
]
