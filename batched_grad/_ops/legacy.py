"""torch's other entry points to ops batched_grad has: the torch-level losses taking an integer reduction,
torch.convolution and constant_pad_nd, torch.lu, torch.range, unsafe_chunk and unsafe_split(_with_sizes),
torch.gradient, index_reduce, histogramdd, and the Tensor methods apply_, map_, map2_, const_data_ptr, dim_order,
conj_physical(_)."""

import warnings

import numpy as np

from .. import _dtypes
from .._factories import arange
from .._graph import VersionCounter
from .._inplace import DETACH
from .._int_args import int_or_ints
from .._layout_types import takes_layout
from .._tensor import Tensor, _wrap_dim, warn_at_caller, warn_once
from . import conv_transpose
from . import nn as _nn
from .complex_parts import conj_physical, conj_physical_
from .decompositions import lu_factor_ex
from .return_types import return_type
from .scatters import INDEX_REDUCE, scatter_reduce_by
from .searching import without_derivative_of
from .shape import cat, chunk_named, narrow, split_named
from .unique import _host_values

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(value):
    return _REDUCTIONS[value] if isinstance(value, int) and not isinstance(value, bool) else value


def _functional():
    from ..nn import functional

    return functional


def kl_div(input, target, reduction=0, *, log_target=False):
    """F.kl_div with torch's integer reduction (0 none, 1 mean, 2 sum; none by default, as torch's functions at
    this level), without F's 'mean' warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _functional().kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    """F.hinge_embedding_loss with torch's integer reduction."""
    return _functional().hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """F.margin_ranking_loss with torch's integer reduction."""
    return _functional().margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """F.cosine_embedding_loss with torch's integer reduction."""
    return _functional().cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """F.poisson_nll_loss with torch's integer reduction (every argument required, as torch's)."""
    return _functional().poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, reduction=0):
    """F.triplet_margin_loss with torch's integer reduction."""
    return _functional().triplet_margin_loss(
        anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction)
    )


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    """F.binary_cross_entropy_with_logits with torch's integer reduction."""
    return _functional().binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction(reduction), pos_weight=pos_weight
    )


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0, zero_infinity=False):
    """F.ctc_loss with torch's integer reduction (torch.ctc_loss's binding defaults to 0, per-sample losses)."""
    return _functional().ctc_loss(
        log_probs,
        targets,
        input_lengths,
        target_lengths,
        blank,
        reduction=_reduction(reduction),
        zero_infinity=zero_infinity,
    )


_LOSSES = (
    ctc_loss,
    kl_div,
    hinge_embedding_loss,
    margin_ranking_loss,
    cosine_embedding_loss,
    poisson_nll_loss,
    triplet_margin_loss,
    binary_cross_entropy_with_logits,
)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """torch.convolution: conv{1,2,3}d, or conv_transpose{1,2,3}d when `transposed`, by weight's rank."""
    n = weight.ndim - 2
    if transposed:
        fn = (conv_transpose.conv_transpose1d, conv_transpose.conv_transpose2d, conv_transpose.conv_transpose3d)[n - 1]
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return (_nn.conv1d, _nn.conv2d, _nn.conv3d)[n - 1](input, weight, bias, stride, padding, dilation, groups)


def constant_pad_nd(input, pad, value=0):
    """F.pad(input, pad, 'constant', value)."""
    return _nn.pad(input, pad, "constant", value)


_LU_WARNING = (
    "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will be "
    "removed in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\nshould be replaced "
    "with\nLU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\nLU, pivots, info = torch.lu(A, "
    "compute_pivots, get_infos=True)\nshould be replaced with\nLU, pivots, info = "
    "torch.linalg.lu_factor_ex(A, compute_pivots)"
)


def lu(A, pivot=True, get_infos=False):
    """(LU, pivots) of linalg.lu_factor_ex (and its info with get_infos): deprecated."""
    warn_once(_LU_WARNING)
    factors = lu_factor_ex(A, pivot=pivot)
    return tuple(factors) if get_infos else tuple(factors)[:2]


@takes_layout
def range_(start, end, step=1, *, dtype=None, requires_grad=False, device=None):
    """The values start, start + step, ... up to and including end (deprecated: arange excludes end)."""

    warn_at_caller(
        "torch.range is deprecated and will be removed in a future release because its behavior is "
        "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
        "[start, end)."
    )
    count = int(np.floor((end - start) / step)) + 1

    d = dtype if dtype is not None else _dtypes.get_default_dtype()
    return arange(count, dtype=_dtypes.float64).mul(step).add(start).to(d)._requires_grad_(requires_grad)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """torch.embedding (weight first; padding_idx -1 for none): F.embedding(indices, weight, ...)."""
    return _nn.embedding(
        indices,
        weight,
        None if padding_idx == -1 else padding_idx,
        scale_grad_by_freq=scale_grad_by_freq,
        sparse=sparse,
    )


def adjoint(input):
    """input.adjoint(): the conjugate transpose of the last two dims."""
    return input.adjoint()


def get_device(input):
    """input.get_device(): the CUDA device index, or -1 on the cpu."""
    return input.get_device()


def _unsafe(outputs):
    """torch's unsafe split outputs: they share their input's values (in-place writes show through both ways) but
    are no views for autograd: no _base, a version counter of their own, in-place ops on them recorded as on any
    tensor (not refused as on a multi-output view's outputs, and their input's node is left as it is)."""
    for out in outputs:
        root, chain = out._view
        out._view, out._counter = (root, chain + (DETACH,)), VersionCounter()
    return outputs


def unsafe_split(input, split_size, dim=0):
    """split, whose outputs are no views for autograd (torch's UnsafeSplitBackward0)."""
    return _unsafe(split_named(input, split_size, dim, "UnsafeSplit"))


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    """split_with_sizes, whose outputs are no views for autograd (torch's UnsafeSplitWithSizesBackward0)."""
    return _unsafe(split_named(input, list(split_sizes), dim, "UnsafeSplit"))


def unsafe_chunk(input, chunks, dim=0):
    """chunk, whose outputs are no views for autograd (as unsafe_split's)."""
    return _unsafe(chunk_named(input, chunks, dim, "UnsafeSplit"))


def _one_gradient(f, h, d, edge_order):
    """torch.gradient along one dim d with sample spacing h (a number) or coordinates h (a 1-D tensor)."""
    n = f.shape[d]
    if n < edge_order + 1:
        raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")

    def part(start, length):
        return narrow(f, d, start, length)

    if isinstance(h, Tensor):  # nonuniform: second-order central differences with torch's weights
        dx = h[1:] - h[:-1]
        shape = [1] * f.ndim
        shape[d] = -1
        a, b = dx[:-1].reshape(shape), dx[1:].reshape(shape)
        interior = (a * a * part(2, n - 2) + (b * b - a * a) * part(1, n - 2) - b * b * part(0, n - 2)) / (
            a * b * (a + b)
        )
        first = (part(1, 1) - part(0, 1)) / dx[0]
        last = (part(n - 1, 1) - part(n - 2, 1)) / dx[-1]
        if edge_order == 2:
            raise RuntimeError("torch.gradient only supports edge_order=1 with coordinates here")
        return cat([first, interior, last], d)
    interior = (part(2, n - 2) - part(0, n - 2)) / (2 * h)
    if edge_order == 1:
        first, last = (part(1, 1) - part(0, 1)) / h, (part(n - 1, 1) - part(n - 2, 1)) / h
    else:
        first = (-1.5 * part(0, 1) + 2 * part(1, 1) - 0.5 * part(2, 1)) / h
        last = (0.5 * part(n - 3, 1) - 2 * part(n - 2, 1) + 1.5 * part(n - 1, 1)) / h
    return cat([first, interior, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The derivative of `input` sampled on a grid, by central differences inside and one-sided ones at the
    edges (first or second order), along each of `dim` (all dims by default); one tensor per dim."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = list(range(input.ndim)) if dim is None else list(int_or_ints(dim))
    dims = [_wrap_dim(d, input.ndim) for d in dims]
    spacings = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(spacings) == 1 and len(dims) > 1:
        spacings = spacings * len(dims)
    if len(spacings) != len(dims):
        raise RuntimeError(
            f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
            f"arguments to have the same length, but got a spacing argument of length "
            f"{len(spacings)} and a dim argument of length {len(dims)}."
        )
    return tuple(_one_gradient(input, h, d, edge_order) for h, d in zip(spacings, dims))


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """The reduction ('prod', 'mean', 'amax', 'amin') of input's slices at `index` along dim with source's slices
    sent there (scatter_reduce with index spread along dim)."""
    warn_once("index_reduce() is in beta and the API may change at any time.")
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    d = _wrap_dim(dim, max(input.ndim, 1))
    shape = [1] * source.ndim
    shape[d] = -1
    spread = index.reshape(shape).expand(source.shape)
    return scatter_reduce_by(INDEX_REDUCE, input, d, spread, source, reduce, include_self)


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):  # noqa: A002
    """(hist, bin_edges): NumPy's histogramdd of the rows of `input` (N, D)."""

    points = np.asarray(_host_values(input)).reshape(-1, input.shape[-1])
    tensor_bins = isinstance(bins, (list, tuple)) and isinstance(bins[0], Tensor)
    edges = [np.asarray(_host_values(b)) for b in bins] if tensor_bins else bins
    ranges = None if range is None else list(zip(range[::2], range[1::2]))
    w = None if weight is None else np.asarray(_host_values(weight)).reshape(-1)
    hist, edge_values = np.histogramdd(points, edges, range=ranges, weights=w, density=density)
    d = input.dtype.np
    operands = (input, weight, *(bins if tensor_bins else ()))
    counted_from = "_histogramdd_from_bin_tensors" if tensor_bins else "_histogramdd_from_bin_cts"
    # torch computes the edges first: forward mode refuses them before the counts
    edge_tensors = [
        without_derivative_of(Tensor._wrap(e.astype(d)), "_histogramdd_bin_edges", *operands) for e in edge_values
    ]
    hist_tensor = without_derivative_of(Tensor._wrap(hist.astype(d)), counted_from, *operands)
    return return_type("histogramdd", ["hist", "bin_edges"])(hist_tensor, edge_tensors)


# ---- Tensor methods ----------------------------------------------------------------------------------------------
def apply_(self, callable):  # noqa: A002
    """Replace each element x by callable(x), in place (a Python loop on the host; not recorded)."""
    values = np.vectorize(callable, otypes=[self.dtype.np])(np.asarray(self.detach().numpy(force=True)))
    return self.copy_(Tensor._wrap(values))


def map_(self, tensor, callable):  # noqa: A002
    """Replace each element x by callable(x, y), y the matching element of `tensor` (broadcast), in place."""
    other = np.broadcast_to(np.asarray(tensor.detach().numpy(force=True)), tuple(self.shape))
    values = np.vectorize(callable, otypes=[self.dtype.np])(np.asarray(self.detach().numpy(force=True)), other)
    return self.copy_(Tensor._wrap(values))


def map2_(self, x, y, callable):  # noqa: A002
    """Replace each element s by callable(s, x, y) with the matching elements of x and y, in place."""
    a, b = (np.broadcast_to(np.asarray(t.detach().numpy(force=True)), tuple(self.shape)) for t in (x, y))
    values = np.vectorize(callable, otypes=[self.dtype.np])(np.asarray(self.detach().numpy(force=True)), a, b)
    return self.copy_(Tensor._wrap(values))


def const_data_ptr(self):
    """data_ptr() for reading."""
    return self.data_ptr()


def dim_order(self, *, ambiguity_check=False):
    """The dims from outermost to innermost in memory (by decreasing stride)."""
    strides = self.stride()
    return tuple(sorted(range(self.ndim), key=lambda d: -strides[d]))


FUNCTIONS = {
    f.__name__: f
    for f in (
        *_LOSSES,
        convolution,
        constant_pad_nd,
        lu,
        unsafe_chunk,
        unsafe_split,
        unsafe_split_with_sizes,
        gradient,
        index_reduce,
        histogramdd,
        conj_physical,
        conj_physical_,
        embedding,
        adjoint,
        get_device,
    )
}
range_.__name__ = range_.__qualname__ = "range"  # batched_grad.range (kept out of _ops' globals: a builtin)
_REINFORCE_REMOVED = """reinforce() was removed.
Use torch.distributions instead.
See https://pytorch.org/docs/main/distributions.html

Instead of:

probs = policy_network(state)
action = probs.multinomial()
next_state, reward = env.step(action)
action.reinforce(reward)
action.backward()

Use:

probs = policy_network(state)
# NOTE: categorical is equivalent to what used to be called multinomial
m = torch.distributions.Categorical(probs)
action = m.sample()
next_state, reward = env.step(action)
loss = -m.log_prob(action) * reward
loss.backward()
"""


def reinforce(self, reward):
    """Removed in torch (as here): raises torch's RuntimeError pointing to torch.distributions."""
    raise RuntimeError(_REINFORCE_REMOVED)


def _get_volatile(self):
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning, stacklevel=2)
    return False


def _set_volatile(self, value):
    warnings.warn(
        "volatile was removed and now has no effect. Use `with torch.no_grad():` instead.", UserWarning, stacklevel=2
    )


METHODS = {
    "volatile": property(_get_volatile, _set_volatile, doc="Always False, with torch's warning (removed in torch)."),
} | {
    f.__name__: f
    for f in (
        reinforce,
        apply_,
        map_,
        map2_,
        const_data_ptr,
        dim_order,
        conj_physical,
        conj_physical_,
        unsafe_chunk,
        unsafe_split,
        unsafe_split_with_sizes,
        index_reduce,
        lu,
    )
}
