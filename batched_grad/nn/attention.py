"""Multi-head attention as torch computes it: F.multi_head_attention_forward (packed or separate input projections,
bias_k/bias_v, zero attention, boolean or additive masks, key padding, per-head or averaged weights) and the
MultiheadAttention module with torch's parameters, initialization and repr; and torch.nn.attention's choice of
scaled_dot_product_attention's kernel (SDPBackend, sdpa_kernel)."""

import contextlib
import enum
import math
import warnings

from .. import _dtypes, _factories
from .._ops.shape import cat
from ..backends import cuda as _cuda_backends
from . import functional as F
from . import init
from .basic import Linear
from .module import Module
from .parameter import Parameter


def _as_additive(mask, name, dtype, other_dtype=None, other_name=""):
    """A mask as an additive float mask: a bool mask's True (masked) positions become -inf, as torch's
    _canonical_mask (with its warning where the key padding mask's type differs from attn_mask's)."""
    if mask is None:
        return None
    if mask.dtype is not _dtypes.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if other_dtype is not None and mask.dtype is not other_dtype:
        warnings.warn(
            f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both instead.",
            stacklevel=3,
        )
    if mask.dtype is _dtypes.bool:
        return _factories.zeros(*mask.shape, dtype=dtype).masked_fill(mask, float("-inf"))
    return mask


def _canonical_masks(key_padding_mask, attn_mask, dtype):
    """Both masks additive, as torch canonicalizes them (the key padding mask checked against attn_mask's type)."""
    other = None if attn_mask is None else attn_mask.dtype
    return (
        _as_additive(key_padding_mask, "key_padding_mask", dtype, other, "attn_mask"),
        _as_additive(attn_mask, "attn_mask", dtype),
    )


def _unpack(projected, parts):
    """The q/k/v parts of a packed projection, each contiguous, as torch's _in_projection_packed."""
    split = projected.unflatten(-1, (parts, projected.shape[-1] // parts)).unsqueeze(0).transpose(0, -2)
    return tuple(split.squeeze(-2).contiguous())


def _in_projection(query, key, value, weight, bias, separate):
    """q, k, v projected: from one packed (3E, E) weight (one product for what is one tensor, as torch's), or from
    separate q/k/v weights."""
    biases = (None, None, None) if bias is None else bias.chunk(3)
    if separate is not None:
        return tuple(F.linear(x, w, b) for x, w, b in zip((query, key, value), separate, biases))
    if key is not value:
        return tuple(F.linear(x, w, b) for x, w, b in zip((query, key, value), weight.chunk(3), biases))
    if query is key:
        return _unpack(F.linear(query, weight, bias), 3)
    e = query.shape[-1]
    w_q, w_kv = weight.split([e, 2 * e])
    b_q, b_kv = (None, None) if bias is None else bias.split([e, 2 * e])
    return (F.linear(query, w_q, b_q), *_unpack(F.linear(key, w_kv, b_kv), 2))


def _check_batched(query, key, value, key_padding_mask, attn_mask, num_heads):
    """Whether the inputs are batched (3-D query) or unbatched (2-D), with torch's checks of the masks' ranks."""
    if query.ndim not in (2, 3):
        raise AssertionError(
            f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D query tensor"
        )
    form, rank = ("batched (3-D)", 3) if query.ndim == 3 else ("unbatched (2-D)", 2)
    if key.ndim != rank or value.ndim != rank:
        raise AssertionError(
            f"For {form} `query`, expected `key` and `value` to be {rank}-D but found "
            f"{key.ndim}-D and {value.ndim}-D tensors respectively"
        )
    if key_padding_mask is not None and key_padding_mask.ndim != rank - 1:
        raise AssertionError(
            f"For {form} `query`, expected `key_padding_mask` to be `None` or {rank - 1}-D but "
            f"found {key_padding_mask.ndim}-D tensor instead"
        )
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise AssertionError(
            f"For {form} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
            f"{attn_mask.ndim}-D tensor instead"
        )
    expected = (num_heads, query.shape[0], key.shape[0])
    if rank == 2 and attn_mask is not None and attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
        raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {_size(attn_mask.shape)}")
    return rank == 3


def _size(shape):
    """A shape as torch prints it."""
    return f"torch.Size({list(shape)})"


def _check_projections(key, value, in_proj_weight, separate):
    if separate is None:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {_size(key.shape)} does not match value shape {_size(value.shape)}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        return
    if tuple(key.shape[:2]) != tuple(value.shape[:2]):
        raise AssertionError(
            f"key's sequence and batch dims {_size(key.shape[:2])} do not match value's {_size(value.shape[:2])}"
        )
    for name, weight in zip(("q_proj_weight", "k_proj_weight", "v_proj_weight"), separate):
        if weight is None:
            raise AssertionError(f"use_separate_proj_weight is True but {name} is None")


def _check_attn_mask(attn_mask, expected):
    """attn_mask as (1 or N * heads, L, S), checking a 2-D mask's (L, S) and a 3-D mask's (N * heads, L, S)."""
    if attn_mask is None:
        return None
    shape = expected if attn_mask.ndim == 3 else expected[1:]
    if tuple(attn_mask.shape) != shape:
        raise RuntimeError(
            f"The shape of the {attn_mask.ndim}D attn_mask is {_size(attn_mask.shape)}, but should be {shape}."
        )
    return attn_mask if attn_mask.ndim == 3 else attn_mask.unsqueeze(0)


def _heads(projected, static, name, batch_heads, head):
    """(N * heads, S, head_dim) keys or values: the projection split into heads, or the given static ones."""
    if static is None:
        return projected.view(projected.shape[0], batch_heads, head).transpose(0, 1)
    if static.shape[0] != batch_heads:
        raise AssertionError(f"expecting {name}.size(0) of {batch_heads}, but got {static.shape[0]}")
    if static.shape[2] != head:
        raise AssertionError(f"expecting {name}.size(2) of {head}, but got {static.shape[2]}")
    return static


def _append_bias_kv(k, v, bias_k, bias_v, static_k, static_v, masks, batch):
    """bias_k and bias_v appended to every sequence of keys and values, the masks padded by a column."""
    if bias_k is None or bias_v is None:
        if bias_k is not None:
            raise AssertionError("bias_k is set but bias_v is None")
        if bias_v is not None:
            raise AssertionError("bias_v is set but bias_k is None")
        return k, v, masks
    if static_k is not None:
        raise AssertionError("bias cannot be added to static key.")
    if static_v is not None:
        raise AssertionError("bias cannot be added to static value.")
    return cat([k, bias_k.repeat(1, batch, 1)]), cat([v, bias_v.repeat(1, batch, 1)]), _pad_masks(masks)


def _pad_masks(masks):
    return tuple(None if mask is None else F.pad(mask, (0, 1)) for mask in masks)


def _with_padding(attn_mask, key_padding_mask, batch, num_heads, source):
    """The key padding mask, per (batch, head) row, added to attn_mask."""
    if key_padding_mask is None:
        return attn_mask
    for dim, expected in enumerate((batch, source)):
        if key_padding_mask.shape[dim] != expected:
            raise AssertionError(
                f"Expected key_padded_mask.shape[{dim}] to be {expected}, but got {key_padding_mask.shape[dim]}"
            )
    padding = key_padding_mask.view(batch, 1, 1, source).expand(-1, num_heads, -1, -1)
    padding = padding.reshape(batch * num_heads, 1, source)
    return padding if attn_mask is None else attn_mask + padding


def _weighted_attention(q, k, v, attn_mask, dropout_p):
    """softmax(q k^T / sqrt(head_dim) + mask) (dropped out) and its product with v, as torch's need_weights path."""
    scores = q * math.sqrt(1.0 / float(q.shape[-1]))
    keys = k.transpose(-2, -1)
    scores = scores.bmm(keys) if attn_mask is None else attn_mask.baddbmm(scores, keys)
    weights = F.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)
    return weights.bmm(v), weights


def multi_head_attention_forward(
    query,
    key,
    value,
    embed_dim_to_check,
    num_heads,
    in_proj_weight,
    in_proj_bias,
    bias_k,
    bias_v,
    add_zero_attn,
    dropout_p,
    out_proj_weight,
    out_proj_bias,
    training=True,
    key_padding_mask=None,
    need_weights=True,
    attn_mask=None,
    use_separate_proj_weight=False,
    q_proj_weight=None,
    k_proj_weight=None,
    v_proj_weight=None,
    static_k=None,
    static_v=None,
    average_attn_weights=True,
    is_causal=False,
):
    """Multi-head attention of (L, N, E) queries over (S, N, E_k) keys and (S, N, E_v) values (unbatched: no N):
    (output, the attention weights averaged over heads or per head, or None without need_weights)."""
    batched = _check_batched(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        key_padding_mask = None if key_padding_mask is None else key_padding_mask.unsqueeze(0)
    target, batch, embed = query.shape
    key_padding_mask = _as_additive(
        key_padding_mask, "key_padding_mask", query.dtype, None if attn_mask is None else attn_mask.dtype, "attn_mask"
    )
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
            "method `generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # left to scaled_dot_product_attention's causal masking
    else:
        attn_mask = _as_additive(attn_mask, "attn_mask", query.dtype)
        is_causal = is_causal and key_padding_mask is None
    if embed != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed}")
    head = embed // num_heads
    if head * num_heads != embed:
        raise AssertionError(f"embed_dim {embed} not divisible by num_heads {num_heads}")
    separate = (q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight else None
    _check_projections(key, value, in_proj_weight, separate)
    q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias, separate)
    attn_mask = _check_attn_mask(attn_mask, (batch * num_heads, target, key.shape[0]))
    k, v, (attn_mask, key_padding_mask) = _append_bias_kv(
        k, v, bias_k, bias_v, static_k, static_v, (attn_mask, key_padding_mask), batch
    )
    q = q.view(target, batch * num_heads, head).transpose(0, 1)
    k = _heads(k, static_k, "static_k", batch * num_heads, head)
    v = _heads(v, static_v, "static_v", batch * num_heads, head)
    if add_zero_attn:
        zeros = _factories.zeros(batch * num_heads, 1, head, dtype=k.dtype)
        k, v = cat([k, zeros], 1), cat([v, zeros.to(v.dtype)], 1)
        attn_mask, key_padding_mask = _pad_masks((attn_mask, key_padding_mask))
    source = k.shape[1]
    attn_mask = _with_padding(attn_mask, key_padding_mask, batch, num_heads, source)
    dropout_p = dropout_p if training else 0.0
    if need_weights:
        out, weights = _weighted_attention(q, k, v, attn_mask, dropout_p)
        out = out.transpose(0, 1).reshape(target * batch, embed)
        out = F.linear(out, out_proj_weight, out_proj_bias).view(target, batch, -1)
        weights = weights.view(batch, num_heads, target, source)
        weights = weights.mean(1) if average_attn_weights else weights
        return (out, weights) if batched else (out.squeeze(1), weights.squeeze(0))
    if attn_mask is not None:
        attn_mask = (
            attn_mask.unsqueeze(0)
            if attn_mask.shape[0] == 1 and attn_mask.ndim == 3
            else attn_mask.view(batch, num_heads, -1, source)
        )
    q, k, v = (
        q.view(batch, num_heads, target, head),
        k.view(batch, num_heads, source, head),
        v.view(batch, num_heads, source, head),
    )
    out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(batch * target, embed)
    out = F.linear(out, out_proj_weight, out_proj_bias).view(target, batch, -1)
    return (out if batched else out.squeeze(1)), None


class NonDynamicallyQuantizableLinear(Linear):
    """Linear, under the name torch gives MultiheadAttention's output projection."""


class MultiheadAttention(Module):
    """Attention from several heads: projections of query, key and value (one packed in_proj_weight when key and
    value have embed_dim features), scaled dot-product attention per head, an output projection."""

    def __init__(
        self,
        embed_dim,
        num_heads,
        dropout=0.0,
        bias=True,
        add_bias_kv=False,
        add_zero_attn=False,
        kdim=None,
        vdim=None,
        batch_first=False,
        device=None,
        dtype=None,
    ):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                f"num_heads={num_heads} instead"
            )
        super().__init__()
        self.embed_dim, self.kdim, self.vdim = embed_dim, kdim or embed_dim, vdim or embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        empty = lambda *shape: Parameter(_factories.empty(*shape, dtype=dtype))  # noqa: E731
        if self._qkv_same_embed_dim:
            self.in_proj_weight = empty(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = empty(embed_dim, embed_dim)
            self.k_proj_weight = empty(embed_dim, self.kdim)
            self.v_proj_weight = empty(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        self.register_parameter("in_proj_bias", empty(3 * embed_dim) if bias else None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k, self.bias_v = empty(1, 1, embed_dim), empty(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()
        self._made_on(device)

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        key_padding_mask, attn_mask = _canonical_masks(key_padding_mask, attn_mask, query.dtype)
        transposed = self.batch_first and query.ndim == 3
        if transposed:  # to (L, N, E), keeping query, key and value one tensor where they were
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = query.transpose(1, 0), key.transpose(1, 0)
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        out, weights = multi_head_attention_forward(
            query,
            key,
            value,
            self.embed_dim,
            self.num_heads,
            self.in_proj_weight,
            self.in_proj_bias,
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
            self.dropout,
            self.out_proj.weight,
            self.out_proj.bias,
            training=self.training,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
        )
        return (out.transpose(1, 0), weights) if transposed else (out, weights)


class SDPBackend(enum.IntEnum):
    """The kernels of scaled_dot_product_attention that `sdpa_kernel` chooses among (torch.nn.attention's): int()
    gives torch's number, str() torch's SDPBackend.MATH."""

    __str__ = enum.Enum.__str__

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_SWITCHES = {
    SDPBackend.MATH: "math",
    SDPBackend.FLASH_ATTENTION: "flash",
    SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
    SDPBackend.CUDNN_ATTENTION: "cudnn",
    SDPBackend.OVERRIDEABLE: "overrideable",
}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Within the block, scaled_dot_product_attention may use only `backends` (an SDPBackend or a list of them): on
    the CPU, FLASH_ATTENTION is torch's fused node (no double backward) and MATH its composite of differentiable
    ops; with neither, it raises torch's error. The switches are restored on exit. `set_priority` orders the
    backends by the list on GPUs; on the CPU the fused node goes first where it applies, as torch's."""
    listed = backends if isinstance(backends, list) else [backends]
    if not all([isinstance(b, SDPBackend) for b in listed]):
        kind = type(backends).__name__
        raise AssertionError(f"Backend must be an instance of SDPBackend or a list of SDPBackend instances, got {kind}")
    if not isinstance(set_priority, bool):
        raise TypeError(f"sdpa_kernel(): argument 'set_priority' must be bool, not {type(set_priority).__name__}")
    previous = dict(_cuda_backends.SDP)
    _cuda_backends.SDP.update({kind: backend in listed for backend, kind in _SWITCHES.items()})
    try:
        yield {}  # torch's block value
    finally:
        _cuda_backends.SDP.update(previous)
