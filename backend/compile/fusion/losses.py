"""Cross-entropy with class-index targets as one launch forward (kernels.cross_entropy:
log_softmax and nll_loss in one pass over the logits) and one backward.

Patterns: F.cross_entropy(logits [N, C], target [N] int64, weight, ignore_index, reduction,
label_smoothing), and F.nll_loss(F.log_softmax(logits, 1), target, ...) with the log-probs
used only by the loss.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from trnsim.backend.compile.fusion.fused_op import define, run_fused
from trnsim.backend.compile.fusion.match import args, kind, on_device, only_user
from trnsim.backend.compile.fusion.match import tensor as fake
from trnsim.backend.compile.fusion.rewrite import Match
from trnsim.backend.ops._common import launch, new
from trnsim.backend.runtime import runtime

REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}  # ATen's at::Reduction
_NAMES = {v: k for k, v in REDUCTIONS.items()}


def _check_targets(logits: Tensor, target: Tensor, ignore_index: int) -> None:
    from trnsim.kernels.losses import target_error

    err = target_error(runtime().host_views.of(target).numpy(), logits.shape[1], ignore_index)
    if err is not None:
        raise IndexError(err)


def _cross_entropy(logits: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
                   ignore_index: int, label_smoothing: float) -> tuple[Tensor, Tensor, Tensor]:
    n = logits.shape[0]

    def kernels():
        from trnsim.kernels.cross_entropy import cross_entropy_forward

        _check_targets(logits, target, ignore_index)
        loss = new((n,) if reduction == 0 else (), logits.dtype)
        lse, total = new((n,), torch.float32), new((), logits.dtype)
        launch(cross_entropy_forward, loss.view(-1), lse, total.view(1), logits, target, weight,
               aten_op="trnsim_fused::cross_entropy",
               names=("loss", "lse", "total_weight", "logits", "target", "weight"),
               reduction=reduction, ignore_index=ignore_index,
               label_smoothing=float(label_smoothing))
        return loss, lse, total

    def eager():
        loss = F.cross_entropy(logits, target, weight, ignore_index=ignore_index,
                               reduction=_NAMES[reduction], label_smoothing=label_smoothing)
        lse = torch.logsumexp(logits.float(), 1)
        return loss, lse, _total_weight(logits, target, weight, ignore_index)

    return run_fused("cross_entropy", kernels, eager, logits, weight)


def _total_weight(logits, target, weight, ignore_index):
    valid = target != ignore_index
    w = weight[target.clamp(min=0)] if weight is not None else torch.ones_like(
        target, dtype=logits.dtype)
    return (w * valid).sum().to(logits.dtype)


def _cross_entropy_backward(grad: Tensor, logits: Tensor, target: Tensor,
                            weight: Tensor | None, lse: Tensor, total: Tensor, reduction: int,
                            ignore_index: int, label_smoothing: float) -> Tensor:
    def kernels():
        from trnsim.kernels.cross_entropy import cross_entropy_backward

        gl = new(logits.shape, logits.dtype)
        launch(cross_entropy_backward, gl, grad.reshape(-1) if grad.dim() else grad.view(1),
               logits, target, lse, total.view(1), weight,
               aten_op="trnsim_fused::cross_entropy_backward",
               names=("grad_logits", "grad_loss", "logits", "target", "lse", "total_weight",
                      "weight"),
               reduction=reduction, ignore_index=ignore_index,
               label_smoothing=float(label_smoothing))
        return gl

    def eager():
        x = logits.float()
        c = x.shape[1]
        valid = (target != ignore_index).unsqueeze(1)
        safe = target.clamp(min=0).unsqueeze(1)
        w = weight.float() if weight is not None else torch.ones(c, device=x.device)
        wt = w.gather(0, safe.squeeze(1)).unsqueeze(1)
        g = grad.float().reshape(-1, 1) if reduction == 0 else grad.float().reshape(1, 1)
        if reduction == 1:
            g = g / total.float()
        p = torch.exp(x - lse.unsqueeze(1))
        onehot = torch.zeros_like(x).scatter(1, safe, 1.0)
        eps = float(label_smoothing)
        out = (1 - eps) * wt * (p - onehot) + eps / c * (p * w.sum() - w.unsqueeze(0))
        return (g * valid * out).to(logits.dtype)

    return run_fused("cross_entropy_backward", kernels, eager, grad, logits, weight, lse)


def _fake(logits, target, weight, reduction, ignore_index, label_smoothing):
    n = logits.shape[0]
    return (logits.new_empty((n,) if reduction == 0 else ()),
            logits.new_empty((n,), dtype=torch.float32), logits.new_empty(()))


def _bwd_fake(grad, logits, target, weight, lse, total, reduction, ignore_index, smoothing):
    return torch.empty_like(logits)


def _unfused(logits, target, weight, reduction, ignore_index, label_smoothing):
    return (F.cross_entropy(logits, target, weight, ignore_index=ignore_index,
                            reduction=_NAMES[reduction], label_smoothing=label_smoothing),)


def _setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    logits, target, weight, reduction, ignore_index, label_smoothing = inputs
    ctx.attrs = (reduction, ignore_index, label_smoothing)
    ctx.save_for_backward(logits, target, weight, output[1], output[2])


def _backward(ctx, grad, _glse, _gtotal):
    logits, target, weight, lse, total = ctx.saved_tensors
    gl = CROSS_ENTROPY_BACKWARD.overload(grad, logits, target, weight, lse, total, *ctx.attrs)
    return gl, None, None, None, None, None


CROSS_ENTROPY_BACKWARD = define("cross_entropy_backward", _cross_entropy_backward,
                                fake=_bwd_fake, unfused=lambda *a: (), outputs=1,
                                parts="cross_entropy backward")
CROSS_ENTROPY = define("cross_entropy", _cross_entropy, fake=_fake, unfused=_unfused,
                       outputs=1, parts="cross_entropy", backward=_backward, setup=_setup)


def _operands(ctx, logits: Any, target: Any, weight: Any, a: dict) -> list | None:
    """The fused op's arguments for a class-index loss the kernels serve, or None."""
    lt, tt = fake(logits), fake(target)
    if lt is None or tt is None or lt.dim() != 2 or tt.dim() != 1 or 0 in lt.shape:
        return None
    if tt.dtype != torch.int64 or tt.device != lt.device or tt.shape[0] != lt.shape[0]:
        return None
    if not on_device(ctx.device, logits, weight) or a.get("size_average") is not None \
            or a.get("reduce") is not None or a["reduction"] not in REDUCTIONS:
        return None
    if weight is not None and tuple(fake(weight).shape) != (lt.shape[1],):
        return None
    return [logits, target, weight, REDUCTIONS[a["reduction"]], int(a["ignore_index"]),
            float(a.get("label_smoothing", 0.0))]


def _find(graph: torch.fx.Graph, ctx) -> Iterator[Match]:
    for node in graph.nodes:
        k = kind(node)
        if k == "cross_entropy":
            a = args(node)
            ops = _operands(ctx, a["input"], a["target"], a["weight"], a)
            if ops is not None:
                yield Match([node], ops, [node], node, "cross_entropy (log_softmax, nll_loss)")
        elif k == "nll_loss":
            a = args(node)
            ls = a["input"]
            if kind(ls) != "log_softmax" or not only_user(ls, node):
                continue
            la = args(ls)
            t = fake(la["input"])
            if t is None or la["dtype"] is not None or la["dim"] not in (1, -1) or t.dim() != 2:
                continue
            ops = _operands(ctx, la["input"], a["target"], a["weight"], a)
            if ops is not None:
                yield Match([ls, node], ops, [node], node, "log_softmax -> nll_loss")


def _patterns():
    from trnsim.backend.compile.fusion import Pattern

    return (Pattern("cross_entropy", CROSS_ENTROPY, _find),)


PATTERNS = _patterns()
