"""scaled_dot_product_attention: softmax(q k^T * scale + mask) v as one op (torch's CPU flash-attention node where
torch takes that kernel), with boolean or additive masks, causal masking, grouped-query attention and dropout of the
attention weights."""

import math

import jax
import jax.numpy as jnp

from .. import _dtypes
from .._autocast import autocast_policy
from ..backends.cuda import SDP
from ._core import Op, apply
from ._derivatives import first_order_only
from ._forward_refused import not_implemented_forward
from .nn import _check_tensor
from .random_draws import sample


def _safe_softmax(scores):
    # torch's attention (every CPU kernel) gives a row whose scores are all -inf zero weights, not softmax's NaN; the
    # row is zeroed before the softmax too, so that its gradient is zero rather than NaN
    masked_row = jnp.all(scores == -jnp.inf, axis=-1, keepdims=True)
    weights = jax.nn.softmax(jnp.where(masked_row, 0.0, scores), axis=-1)
    return jnp.where(masked_row, 0.0, weights)


def _attention(q, k, v, *extra, scale, causal, mask_kind, groups):
    if groups > 1:  # grouped-query attention: each key/value head serves `groups` query heads
        k, v = jnp.repeat(k, groups, axis=-3), jnp.repeat(v, groups, axis=-3)
    scores = jnp.matmul(q, jnp.swapaxes(k, -1, -2)) * scale
    extra = list(extra)
    if causal:
        scores = jnp.where(jnp.tril(jnp.ones(scores.shape[-2:], bool)), scores, -jnp.inf)
    if mask_kind == "bool":
        scores = jnp.where(extra.pop(0), scores, -jnp.inf)
    elif mask_kind == "float":
        scores = scores + extra.pop(0)
    weights = _safe_softmax(scores)
    if extra:  # dropout's keep mask, already scaled by 1 / (1 - p)
        weights = weights * extra.pop(0)
    return jnp.matmul(weights, v)


def _first_order_attention(*arrays, **static):
    # torch's CPU attention has no double backward
    error = lambda: RuntimeError(
        "derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is "  # noqa
        "not implemented"
    )
    return first_order_only(lambda *a: _attention(*a, **static), error)(*arrays)


# torch takes its CPU flash-attention kernel (one node, no double backward) for 4-D inputs of one head size without
# dropout or a mask that requires grad, and composes matmul and softmax (differentiable again) otherwise
_FLASH = Op(
    "scaled_dot_product_attention",
    _first_order_attention,
    "ScaledDotProductFlashAttentionForCpuBackward0",
    forward_error=not_implemented_forward("_scaled_dot_product_flash_attention_for_cpu"),
)
_MATH = Op(
    "scaled_dot_product_attention",
    _attention,
    lambda sig: "MmBackward0" if len(sig.avals[0][0]) == 2 else "UnsafeViewBackward0",
)


def _mask_kind(attn_mask, query):
    if attn_mask is None:
        return None
    _check_tensor("scaled_dot_product_attention", "attn_mask", attn_mask, 4)
    if attn_mask.dtype is _dtypes.bool:
        return "bool"
    if attn_mask.dtype is not query.dtype:
        raise RuntimeError(
            f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {attn_mask.dtype.type_name} and  query.dtype: "
            f"{query.dtype.type_name} instead."
        )
    return "float"


@autocast_policy("lower")
def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """softmax(query @ key^T * scale + mask) @ value over the last two dims (scale 1 / sqrt(E) by default); a bool
    mask keeps the True positions, a float mask is added; is_causal masks the upper triangle; a query row with every
    key masked gets zero weights (torch's, not softmax's NaN); with dropout_p the attention weights are dropped
    (batched_grad's generator)."""
    for i, (name, t) in enumerate((("query", query), ("key", key), ("value", value)), 1):
        _check_tensor("scaled_dot_product_attention", name, t, i)
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError(
            f"Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{query.dtype.type_name} key.dtype: {key.dtype.type_name} and "
            f"value.dtype: {value.dtype.type_name} instead."
        )
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    groups = 1
    if query.ndim >= 3 and key.ndim >= 3 and query.shape[-3] != key.shape[-3]:
        if not enable_gqa or query.shape[-3] % key.shape[-3]:
            raise RuntimeError(
                f"The size of tensor a ({query.shape[-3]}) must match the size of tensor b "
                f"({key.shape[-3]}) at non-singleton dimension {query.ndim - 3}"
            )
        groups = query.shape[-3] // key.shape[-3]
    kind = _mask_kind(attn_mask, query)
    operands = [query, key, value] + ([] if attn_mask is None else [attn_mask])
    if dropout_p > 0:
        shape = tuple(query.shape[:-1]) + (key.shape[-2],)
        scale_kept = 0.0 if dropout_p >= 1 else 1.0 / (1.0 - dropout_p)
        operands.append(
            sample(
                None,
                "scaled_dot_product_attention",
                shape,
                lambda bits, size: (bits.bernoulli(size, 1 - dropout_p) * scale_kept).astype(query.dtype.np),
            )
        )
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    flash = SDP["flash"] and (
        query.ndim == key.ndim == value.ndim == 4
        and query.shape[-1] == key.shape[-1] == value.shape[-1]
        and dropout_p == 0
        and not (attn_mask is not None and attn_mask.requires_grad)
    )
    if not (flash or SDP["math"]):
        raise RuntimeError(
            "No viable backend for scaled_dot_product_attention was found. This is likely due to turning off both "
            "the math kernel and the fused kernels."
        )
    return apply(
        _FLASH if flash else _MATH, operands, scale=scale, causal=bool(is_causal), mask_kind=kind, groups=groups
    )


FUNCTIONAL = {"scaled_dot_product_attention": scaled_dot_product_attention}
