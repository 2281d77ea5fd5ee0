"""The Transformer layers of torch.nn: TransformerEncoderLayer and TransformerDecoderLayer (post- or pre-norm,
relu/gelu or any activation), their stacks TransformerEncoder and TransformerDecoder, and Transformer, with torch's
submodule names (so state dicts carry over), initialization and reprs. Torch's nested-tensor fast path is an
inference optimization; where torch takes it (a stack in eval mode without gradients, given a left-aligned key padding
mask) its one visible effect, zeros at the padded positions, is reproduced."""

import copy
import warnings

import numpy as np

from .. import _factories
from .._grad_mode import is_recording
from . import functional as F
from . import init
from .attention import MultiheadAttention, _as_additive
from .basic import GELU, Dropout, LayerNorm, Linear, ReLU
from .containers import ModuleList
from .module import Module

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(activation):
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise RuntimeError(f"activation should be relu/gelu, not {activation}")
        return _ACTIVATIONS[activation]
    return activation


def _relu_or_gelu(activation):
    """torch's activation_relu_or_gelu: 1 for relu, 2 for gelu (function or module), else 0."""
    if activation is F.relu or isinstance(activation, ReLU):
        return 1
    return 2 if activation is F.gelu or isinstance(activation, GELU) else 0


def _canonical_masks(key_padding_mask, mask, dtype, names):
    """Both masks additive, as torch's layers canonicalize them, under the layer's names for them."""
    padding_name, mask_name = names
    other = None if mask is None else mask.dtype
    return (_as_additive(key_padding_mask, padding_name, dtype, other, mask_name), _as_additive(mask, mask_name, dtype))


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with dropout, a residual connection and layer norm (after
    them, or before with norm_first)."""

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation=F.relu,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, dtype=dtype
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = _activation(activation)
        self.activation_relu_or_gelu = _relu_or_gelu(self.activation)
        self._made_on(device)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        src_key_padding_mask, src_mask = _canonical_masks(
            src_key_padding_mask, src_mask, src.dtype, ("src_key_padding_mask", "src_mask")
        )
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's memory, then a feed-forward block, each with dropout, a residual
    connection and layer norm (after them, or before with norm_first)."""

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation=F.relu,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, dtype=dtype
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, dtype=dtype
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1, self.norm2, self.norm3 = (
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype) for _ in range(3)
        )
        self.dropout1, self.dropout2, self.dropout3 = Dropout(dropout), Dropout(dropout), Dropout(dropout)
        self.activation = _activation(activation)
        self._made_on(device)

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=False,
        memory_is_causal=False,
    ):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal, need_weights=False
        )[0]
        return self.dropout1(x)

    def _mha_block(self, x, memory, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(
            x,
            memory,
            memory,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=False,
        )[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _clones(layer, n):
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


def _detect_causal(mask, is_causal, size):
    """torch's _detect_is_causal_mask: is_causal as given, else whether `mask` is the square subsequent mask."""
    if is_causal is None and mask is not None:
        size = size or mask.shape[-2]
        causal = Transformer.generate_square_subsequent_mask(size, dtype=mask.dtype)
        return tuple(mask.shape) == tuple(causal.shape) and bool((mask == causal).all())
    return bool(is_causal)


def _why_not_nested(layer):
    """Why torch's encoder cannot take its nested-tensor path with this layer ("" where it can)."""
    attention = layer.self_attn if isinstance(layer, TransformerEncoderLayer) else None
    reasons = (
        (attention is None, "encoder_layer was not TransformerEncoderLayer"),
        (attention is not None and layer.norm_first, "encoder_layer.norm_first was True"),
        (
            attention is not None and not attention.batch_first,
            "encoder_layer.self_attn.batch_first was not True(use batch_first for better inference performance)",
        ),
        (
            attention is not None and not attention._qkv_same_embed_dim,
            "encoder_layer.self_attn._qkv_same_embed_dim was not True",
        ),
        (attention is not None and attention.in_proj_bias is None, "encoder_layer.self_attn was passed bias=False"),
        (
            attention is not None and not layer.activation_relu_or_gelu,
            "encoder_layer.activation_relu_or_gelu was not True",
        ),
        (
            attention is not None and layer.norm1.eps != layer.norm2.eps,
            "encoder_layer.norm1.eps was not equal to encoder_layer.norm2.eps",
        ),
        (attention is not None and attention.num_heads % 2 == 1, "encoder_layer.self_attn.num_heads is odd"),
    )
    return next((reason for blocked, reason in reasons if blocked), "")


def _left_aligned(valid):
    """Whether every row's valid positions come first (then only padding)."""
    valid = np.asarray(valid.detach().numpy())
    return bool((np.cumprod(valid, axis=-1) == valid).all())


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer, then `norm` (if given)."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor = self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why_not = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn(
                f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why_not}", stacklevel=2
            )
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        src_key_padding_mask, mask = _canonical_masks(
            src_key_padding_mask, mask, src.dtype, ("src_key_padding_mask", "mask")
        )
        batch_first = self.layers[0].self_attn.batch_first
        causal = _detect_causal(mask, is_causal, src.shape[1 if batch_first and src.ndim == 3 else 0])
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, is_causal=causal, src_key_padding_mask=src_key_padding_mask)
        if self._takes_nested_path(src, mask, src_key_padding_mask):  # torch pads its nested result with zeros
            out = out.masked_fill((src_key_padding_mask != 0).unsqueeze(-1), 0.0)
        return self.norm(out) if self.norm is not None else out

    def _takes_nested_path(self, src, mask, key_padding_mask):
        """Whether torch runs this call on nested tensors: in inference (eval mode, no gradient recorded) with a
        batched input and a left-aligned key padding mask alone."""
        first = self.layers[0]
        if not self.use_nested_tensor or first.training or src.ndim != 3 or key_padding_mask is None:
            return False
        if (self.mask_check and not _left_aligned(key_padding_mask == 0)) or mask is not None:
            return False
        weights = (
            first.self_attn.in_proj_weight,
            first.self_attn.in_proj_bias,
            first.self_attn.out_proj.weight,
            first.self_attn.out_proj.bias,
            first.norm1.weight,
            first.norm1.bias,
            first.norm2.weight,
            first.norm2.bias,
            first.linear1.weight,
            first.linear1.bias,
            first.linear2.weight,
            first.linear2.bias,
        )
        return not (is_recording() and any(t is not None and t.requires_grad for t in (src, *weights)))


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer, then `norm` (if given)."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        batch_first = self.layers[0].self_attn.batch_first
        causal = _detect_causal(tgt_mask, tgt_is_causal, tgt.shape[1 if batch_first and tgt.ndim == 3 else 0])
        out = tgt
        for layer in self.layers:
            out = layer(
                out,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=causal,
                memory_is_causal=memory_is_causal,
            )
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """An encoder-decoder Transformer (Vaswani et al.): TransformerEncoder and TransformerDecoder stacks with final
    layer norms, weights xavier-uniform initialized."""

    def __init__(
        self,
        d_model=512,
        nhead=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dim_feedforward=2048,
        dropout=0.1,
        activation=F.relu,
        custom_encoder=None,
        custom_decoder=None,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        options = dict(
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=batch_first,
            norm_first=norm_first,
            bias=bias,
            dtype=dtype,
        )
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(  # warns, as torch's, where its layers block the nested-tensor path
                TransformerEncoderLayer(d_model, nhead, **options),
                num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype),
            )
        self.decoder = (
            custom_decoder
            if custom_decoder is not None
            else TransformerDecoder(
                TransformerDecoderLayer(d_model, nhead, **options),
                num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype),
            )
        )
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        self._made_on(device)

    def forward(
        self,
        src,
        tgt,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        src_key_padding_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        src_is_causal=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        batched = src.ndim == 3
        if not self.batch_first and src.shape[1] != tgt.shape[1] and batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if self.batch_first and src.shape[0] != tgt.shape[0] and batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) float mask with -inf above the diagonal (each position attends to itself and earlier ones)."""
        return _factories.full((sz, sz), float("-inf"), dtype=dtype).triu(diagonal=1)
