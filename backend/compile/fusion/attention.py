"""Attention written out, softmax(q @ k^T * scale [+ mask]) @ v, as flash attention: one
kernels.flash_attention launch forward (the [Sq, Skv] scores never reach HBM) and one
flash_attention_backward launch backward (probabilities recomputed from the log-sum-exp).

Pattern: 4-D q, k, v [B, H, S, D] of one dtype, D <= 128, the scores scaled by a number
(`* s` or `/ s`) or not, then an additive float mask (`+ mask`) or `masked_fill(mask,
-inf)` (a bool mask, True dropping a score), or neither; softmax over the last dim; every
intermediate used only by the next step; the mask not requiring grad; K and V of one head
fitting in SBUF.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor
from trnsim.backend.compile.fusion.fused_op import define, run_fused
from trnsim.backend.compile.fusion.match import args, kind, last_dim, on_device, only_user
from trnsim.backend.compile.fusion.match import tensor as fake
from trnsim.backend.compile.fusion.rewrite import Match, requires_grad
from trnsim.backend.ops._common import launch, new

RESIDENT_SHARE = 0.6  # kernels.flash_attention's SBUF share for the resident K^T and V


def _kernel_mask(mask: Tensor | None, mask_kind: str) -> Tensor | None:
    """The kernel's attn_mask: a float mask as is, a bool mask True-keeps (masked_fill's
    True-drops mask inverted on the device)."""
    if mask is None:
        return None
    return torch.logical_not(mask) if mask_kind == "drop" else mask


def _scores(q, k, mask, scale, mask_kind):
    s = (q @ k.transpose(-2, -1)) * scale
    if mask is None:
        return s
    if mask_kind == "drop":
        return s.masked_fill(mask, float("-inf"))
    return s + mask


def _attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float,
               mask_kind: str) -> tuple[Tensor, Tensor]:
    def kernels():
        from trnsim.kernels.flash_attention import flash_attention

        out = torch.empty_like(q)  # q's layout, as the fake (and SDPA's meta) allocates
        lse = new(q.shape[:-1], torch.float32)
        launch(flash_attention, out, lse, q, k, v, aten_op="trnsim_fused::attention",
               names=("out", "lse", "q", "k", "v"), scale=float(scale), causal=False,
               attn_mask=_kernel_mask(mask, mask_kind))
        return out, lse

    def eager():
        s = _scores(q, k, mask, scale, mask_kind).float()
        lse = torch.logsumexp(s, -1)
        p = torch.exp(s - lse.unsqueeze(-1)).to(q.dtype)
        return _like(q, p @ v), lse

    return run_fused("attention", kernels, eager, q, k, v, mask)


def _attention_backward(grad: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor,
                        lse: Tensor, mask: Tensor | None, scale: float,
                        mask_kind: str) -> tuple[Tensor, Tensor, Tensor]:
    def kernels():
        from trnsim.kernels.flash_attention import flash_attention_backward

        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        launch(flash_attention_backward, dq, dk, dv, grad, q, k, v, out, lse,
               aten_op="trnsim_fused::attention_backward",
               names=("dq", "dk", "dv", "grad_out", "q", "k", "v", "out", "lse"),
               scale=float(scale), causal=False, attn_mask=_kernel_mask(mask, mask_kind))
        return dq, dk, dv

    def eager():
        s = _scores(q, k, mask, scale, mask_kind).float()
        p = torch.exp(s - lse.unsqueeze(-1))
        g = grad.float()
        dv = (p.transpose(-2, -1) @ g).to(v.dtype)
        dp = g @ v.float().transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True)) * scale
        return (_like(q, ds @ k.float()), _like(k, ds.transpose(-2, -1) @ q.float()),
                _like(v, dv))

    return run_fused("attention_backward", kernels, eager, grad, q, k, v, out, lse, mask)


def _like(t: Tensor, value: Tensor) -> Tensor:
    """value in t's layout and dtype (the layout the op's fake promises)."""
    out = torch.empty_like(t)
    out.copy_(value)
    return out


def _fake(q, k, v, mask, scale, mask_kind):
    return torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)


def _bwd_fake(grad, q, k, v, out, lse, mask, scale, mask_kind):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _unfused(q, k, v, mask, scale, mask_kind):
    return (torch.softmax(_scores(q, k, mask, scale, mask_kind), -1) @ v,)


def _setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    q, k, v, mask, scale, mask_kind = inputs
    ctx.scale, ctx.mask_kind = scale, mask_kind
    ctx.save_for_backward(q, k, v, *output, mask)


def _backward(ctx, grad, _glse):
    q, k, v, out, lse, mask = ctx.saved_tensors
    dq, dk, dv = ATTENTION_BACKWARD.overload(grad, q, k, v, out, lse, mask, ctx.scale,
                                             ctx.mask_kind)
    return dq, dk, dv, None, None, None


ATTENTION_BACKWARD = define("attention_backward", _attention_backward, fake=_bwd_fake,
                            unfused=lambda *a: (), outputs=3, parts="attention backward")
ATTENTION = define("attention", _attention, fake=_fake, unfused=_unfused, outputs=1,
                   parts="matmul -> softmax -> matmul", backward=_backward, setup=_setup)


# ---------------------------------------------------------------- pattern
def _number(v: Any) -> bool:
    return isinstance(v, float | int) and not isinstance(v, bool) and math.isfinite(v) and v != 0


def _transposed_k(node: Any) -> Any:
    """k for a node k.transpose(-2, -1) of a 4-D k, else None."""
    if kind(node) != "transpose":
        return None
    a = args(node)
    k = a["input"]
    t = fake(k)
    if t is None or t.dim() != 4 or {a["dim0"] % 4, a["dim1"] % 4} != {2, 3}:
        return None
    return k


def _strip_mask(node: Any) -> tuple[Any, Any, str, list]:
    """(scores before the mask, mask, kind, mask nodes) of softmax's input."""
    k = kind(node)
    if k == "masked_fill":
        a = args(node)
        if a["value"] == float("-inf") and isinstance(a["mask"], torch.fx.Node):
            return a["input"], a["mask"], "drop", [node]
    if k == "add" and args(node)["alpha"] == 1:
        a = args(node)
        for s, m in ((a["input"], a["other"]), (a["other"], a["input"])):
            if kind(s) in ("mul", "div", "matmul") and isinstance(m, torch.fx.Node):
                return s, m, "add", [node]
    return node, None, "none", []


def _strip_scale(node: Any) -> tuple[Any, float, list]:
    k = kind(node)
    if k in ("mul", "div"):
        a = args(node)
        other = a["other"]
        if k == "mul" and _number(a["input"]) and isinstance(other, torch.fx.Node):
            return other, float(a["input"]), [node]
        if _number(other) and (k == "mul" or a["rounding_mode"] is None):
            return a["input"], float(other) if k == "mul" else 1.0 / float(other), [node]
    return node, 1.0, []


def _fits(ctx, q: Tensor, k: Tensor) -> bool:
    sq, skv, d, isz = q.shape[2], k.shape[2], q.shape[3], q.element_size()
    resident = (skv + sq) * isz + -(-skv // 128) * d * isz
    return resident <= RESIDENT_SHARE * ctx.sbuf_bytes


def _find(graph: torch.fx.Graph, ctx) -> Iterator[Match]:
    for pv in graph.nodes:
        if kind(pv) != "matmul":
            continue
        probs, v = args(pv)["input"], args(pv)["other"]
        if kind(probs) != "softmax" or not only_user(probs, pv):
            continue
        sa = args(probs)
        if sa["dtype"] is not None or not last_dim(probs, sa["dim"]):
            continue
        scaled, mask, mask_kind, mask_nodes = _strip_mask(sa["input"])
        qk, scale, scale_nodes = _strip_scale(scaled)
        if kind(qk) != "matmul":
            continue
        q, kt = args(qk)["input"], args(qk)["other"]
        k = _transposed_k(kt)
        chain = [qk, *scale_nodes, *mask_nodes, probs]
        if k is None or any(not only_user(a, b) for a, b in zip(chain, [*chain[1:], pv],
                                                                  strict=True)):
            continue
        if not on_device(ctx.device, q, k, v):
            continue
        qt, ktt, vt = fake(q), fake(k), fake(v)
        if qt.dim() != 4 or ktt.shape != vt.shape or qt.shape[:2] != ktt.shape[:2] \
                or qt.shape[3] != ktt.shape[3] or qt.shape[3] > 128 or 0 in qt.shape \
                or 0 in ktt.shape or not _fits(ctx, qt, ktt):
            continue
        if mask is not None and not _mask_ok(mask, mask_kind, qt, ktt):
            continue
        nodes = [*([kt] if only_user(kt, qk) else []), *chain, pv]
        yield Match(nodes, [q, k, v, mask, scale, mask_kind], [pv], probs,
                    "matmul -> " + " -> ".join(
                        [*(["scale"] if scale_nodes else []),
                         *(["mask"] if mask is not None else []), "softmax", "matmul"]))


def _mask_ok(mask: Any, mask_kind: str, q: Tensor, k: Tensor) -> bool:
    m = fake(mask)
    if m is None or requires_grad(mask) or m.device != q.device:
        return False
    if (mask_kind == "drop") != (m.dtype == torch.bool):
        return False
    if m.dtype != torch.bool and m.dtype != q.dtype:
        return False
    target = (*q.shape[:3], k.shape[2])
    try:
        return m.dim() <= 4 and tuple(torch.broadcast_shapes(tuple(m.shape), target)) == target
    except RuntimeError:
        return False


def _patterns():
    from trnsim.backend.compile.fusion import Pattern

    return (Pattern("attention", ATTENTION, _find),)


PATTERNS = _patterns()
