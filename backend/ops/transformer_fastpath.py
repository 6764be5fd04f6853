"""The inference fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer. In eval
mode without gradients PyTorch calls aten::_native_multi_head_attention and
_transformer_encoder_layer_fwd for a PrivateUse1 device as for CPU and CUDA. In kernel mode
each is composed of the device's own ops (projections and attention as matmuls, the masked
softmax, layer norm, the feed-forward) in the order of PyTorch's native kernel; reference mode
runs the CPU's native kernel on the host.

As the native kernel: q is scaled by 1/sqrt(head size) before q·kᵀ; a mask is made boolean
(nonzero: masked out; MultiheadAttention passes 0 / -inf) and is [L, S] (mask_type 0),
[B, S] key padding (1) or [B, H or 1, L, S] (2); a row with every key masked is NaN, as the
CPU's; the weights are averaged over heads when asked."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from trnsim.backend.registry import op


def _mask4d(mask: torch.Tensor, mask_type: int | None, b: int, lq: int, s: int) -> torch.Tensor:
    m = mask if mask.dtype == torch.bool else mask.to(torch.bool)
    if mask_type == 1 or (mask_type is None and m.dim() == 2 and list(m.shape) == [b, s]):
        return m.view(b, 1, 1, s)
    if m.dim() == 2:
        return m.view(1, 1, lq, s)
    return m if m.dim() == 4 else m.view(b, -1, lq, s)


def native_mha(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
               proj_bias, mask=None, need_weights=True, average_attn_weights=True,
               mask_type=None):
    b, lq, e = query.shape
    s = key.shape[1]
    d = embed_dim // num_head
    if query is key and key is value:
        q, k, v = F.linear(query, qkv_weight, qkv_bias).chunk(3, -1)
    else:
        (wq, wk, wv), (bq, bk, bv) = qkv_weight.chunk(3), qkv_bias.chunk(3)
        q, k, v = F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)
    q = (q * (1.0 / math.sqrt(d))).view(b, lq, num_head, d).transpose(1, 2)
    k = k.reshape(b, s, num_head, d).transpose(1, 2)
    v = v.reshape(b, s, num_head, d).transpose(1, 2)
    scores = q @ k.transpose(-2, -1)
    if mask is None:
        weights = scores.softmax(-1)
    else:
        m = _mask4d(mask, mask_type, b, lq, s)
        weights = scores.masked_fill(m, float("-inf")).softmax(-1)
    ctx = (weights @ v).transpose(1, 2).reshape(b, lq, e)
    out = F.linear(ctx, proj_weight, proj_bias)
    if not need_weights:
        return out, None
    return out, (weights.sum(1) / num_head if average_attn_weights else weights)


def encoder_layer(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                  use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
                  norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                  mask_type=None):
    def norm(t, w, bias):
        return F.layer_norm(t, [embed_dim], w, bias, eps)

    x = norm(src, norm_weight_1, norm_bias_1) if norm_first else src
    x = native_mha(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                   mask, False, True, mask_type)[0] + src
    if not norm_first:
        x = norm(x, norm_weight_1, norm_bias_1)
    residual = x
    if norm_first:
        x = norm(x, norm_weight_2, norm_bias_2)
    h = F.linear(x, ffn_weight_1, ffn_bias_1)
    x = F.linear(F.gelu(h) if use_gelu else F.relu(h), ffn_weight_2, ffn_bias_2) + residual
    return x if norm_first else norm(x, norm_weight_2, norm_bias_2)


_NOTE = "composed of the device's ops (nn.MultiheadAttention's inference fast path)"
op("_native_multi_head_attention", note=_NOTE, group="attention")(native_mha)
op("_transformer_encoder_layer_fwd", group="attention",
   note="composed of the device's ops (nn.TransformerEncoderLayer's inference fast path)")(
    encoder_layer)
