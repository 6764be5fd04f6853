"""Scaled dot-product attention as one fused op.

PyTorch picks SDPA's fused backends through a C++ dispatch stub a Python device cannot
join, so on this device `scaled_dot_product_attention` itself is given an
AutogradPrivateUse1 kernel: it calls `_scaled_dot_product_fused_attention_overrideable`
(whose autograd formula calls the matching backward op), one attention kernel per call.
Attention with dropout, head size above 128 or a mask that needs a
gradient takes PyTorch's math path (the device's matmul, softmax and dropout ops)."""

from __future__ import annotations

import math

import torch
from trnsim.backend.ops._common import launch, new, require_float
from trnsim.backend.registry import HostOnly, op
from trnsim.kernels.flash_attention import flash_attention, flash_attention_backward


def fused_attention_applies(query, key, attn_mask, dropout_p, enable_gqa) -> bool:
    return (dropout_p == 0.0 and query.dim() == 4 and key.dim() == 4
            and (query.shape[-3] == key.shape[-3]
                 or (enable_gqa and key.shape[-3] and query.shape[-3] % key.shape[-3] == 0))
            and query.shape[-1] <= 128 and query.shape[-1] == key.shape[-1]
            and (attn_mask is None or not attn_mask.requires_grad))


def sdpa_autograd(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *,
                  scale=None, enable_gqa=False):
    """AutogradPrivateUse1 kernel of aten::scaled_dot_product_attention."""
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # As SDPA converts it before any backend, the math one included: True keeps a
        # score, False adds -inf (the math path adds a boolean mask as 0/1 otherwise).
        attn_mask = torch.zeros(attn_mask.shape, dtype=query.dtype, device=query.device
                                ).masked_fill(attn_mask.logical_not(), float("-inf"))
    if not fused_attention_applies(query, key, attn_mask, dropout_p, enable_gqa):
        return torch.ops.aten._scaled_dot_product_attention_math(
            query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale,
            enable_gqa=enable_gqa)[0]
    return torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        query, key, value, attn_mask, dropout_p, is_causal, False, scale=scale)[0]


def sdpa_forward_host(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False,
                      return_debug_mask=False, *, scale=None):
    """The host form: PyTorch's CPU flash attention (output and log-sum-exp); grouped-query
    key/value heads are repeated for it."""
    group = query.shape[-3] // key.shape[-3]
    if group > 1:
        key, value = key.repeat_interleave(group, -3), value.repeat_interleave(group, -3)
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, dropout_p, is_causal, attn_mask=attn_bias, scale=scale)
    empty = torch.empty(0, dtype=torch.int64)
    return out, lse, empty, empty, query.shape[-2], key.shape[-2], empty, empty, \
        torch.empty(0, dtype=query.dtype)


def sdpa_backward_host(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp,
                       cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed,
                       philox_offset, *, scale=None):
    bias = attn_bias if attn_bias is not None and attn_bias.numel() else None
    group = query.shape[-3] // key.shape[-3]
    k, v = (key, value) if group == 1 else (key.repeat_interleave(group, -3),
                                            value.repeat_interleave(group, -3))
    dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, query, k, v, out, logsumexp, dropout_p, is_causal, attn_mask=bias,
        scale=scale)
    if group > 1:  # each kv head's gradient sums over the query heads sharing it
        dk = dk.unflatten(-3, (key.shape[-3], group)).sum(-3)
        dv = dv.unflatten(-3, (key.shape[-3], group)).sum(-3)
    return dq, dk, dv, None


def _mask(attn_bias):
    return attn_bias if attn_bias is not None and attn_bias.numel() else None


def _check(query, key, value) -> float:
    require_float("scaled_dot_product_attention", query, key, value)
    if value.shape[-1] != query.shape[-1] or query.shape[-1] > 128:
        raise HostOnly("head sizes other than one D <= 128 for q, k and v")
    if query.numel() == 0 or key.numel() == 0:
        raise HostOnly("an empty operand")
    return 1.0 / math.sqrt(query.shape[-1])


@op("_scaled_dot_product_fused_attention_overrideable", kernels="flash_attention",
    host=sdpa_forward_host)
def sdpa_forward(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False,
                 return_debug_mask=False, *, scale=None):
    default_scale = _check(query, key, value)
    if dropout_p:
        raise HostOnly("dropout inside attention")
    out = torch.empty_like(query)  # in query's layout, as the op's meta function allocates
    lse = new(query.shape[:-1], torch.float32)
    launch(flash_attention, out, lse, query, key, value,
           aten_op="aten::scaled_dot_product_attention",
           names=("out", "lse", "query", "key", "value"),
           scale=float(default_scale if scale is None else scale), causal=bool(is_causal),
           attn_mask=_mask(attn_bias))
    empty = torch.empty(0, dtype=torch.int64, device=query.device)
    return out, lse, empty, empty, query.shape[-2], key.shape[-2], empty, empty, \
        torch.empty(0, dtype=query.dtype, device=query.device)


@op("_scaled_dot_product_fused_attention_overrideable_backward",
    kernels="flash_attention_backward", host=sdpa_backward_host)
def sdpa_backward(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp,
                  cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed,
                  philox_offset, *, scale=None):
    default_scale = _check(query, key, value)
    # In the inputs' layouts, as the op's meta function allocates (torch.compile's graphs
    # view the gradients with those strides).
    dq, dk, dv = torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)
    launch(flash_attention_backward, dq, dk, dv, grad_out, query, key, value, out, logsumexp,
           aten_op="aten::scaled_dot_product_attention_backward",
           names=("dq", "dk", "dv", "grad_out", "query", "key", "value", "out", "lse"),
           scale=float(default_scale if scale is None else scale), causal=bool(is_causal),
           attn_mask=_mask(attn_bias))
    return dq, dk, dv, None
