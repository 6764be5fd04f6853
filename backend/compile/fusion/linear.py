"""linear + bias + activation as one launch (kernels.fused_linear.linear_act).

Pattern: act(F.linear(x, w, b)) with act gelu (either approximation), relu, silu, tanh or
sigmoid, the linear's output used only by the activation. The backward is eager's: the
activation's backward op, then the two products and the bias sum of a linear's backward
(gelu and silu need the pre-activation, which the fused kernel then also stores; relu, tanh
and sigmoid differentiate from their output).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor
from trnsim.backend.compile.fusion.fused_op import define, run_fused
from trnsim.backend.compile.fusion.match import ACTIVATIONS, args, kind, on_device, only_user
from trnsim.backend.compile.fusion.match import tensor as fake
from trnsim.backend.compile.fusion.rewrite import Match, requires_grad
from trnsim.backend.ops._common import launch, new, rows_2d

# act -> (eager function, backward from the pre-activation (True) or the output)
ACTS = {
    "gelu": (lambda z: F.gelu(z), True),
    "gelu_tanh": (lambda z: F.gelu(z, approximate="tanh"), True),
    "silu": (F.silu, True),
    "relu": (torch.relu, False),
    "tanh": (torch.tanh, False),
    "sigmoid": (torch.sigmoid, False),
}


def act_name(node: torch.fx.Node) -> str | None:
    """The fused kernel's name for an activation node, or None."""
    k = kind(node)
    if k not in ACTIVATIONS:
        return None
    if k == "gelu":
        approx = args(node)["approximate"]
        return {"none": "gelu", "tanh": "gelu_tanh"}.get(approx)
    return k


def act_backward(act: str, grad: Tensor, saved: Tensor) -> Tensor:
    """d act / d z * grad, from the pre-activation z (gelu, silu) or the output y."""
    aten = torch.ops.aten
    if act in ("gelu", "gelu_tanh"):
        return aten.gelu_backward(grad, saved, approximate="tanh" if act == "gelu_tanh"
                                  else "none")
    if act == "silu":
        return aten.silu_backward(grad, saved)
    if act == "relu":
        return aten.threshold_backward(grad, saved, 0)
    if act == "tanh":
        return aten.tanh_backward(grad, saved)
    return aten.sigmoid_backward(grad, saved)


def _linear_act(x: Tensor, weight: Tensor, bias: Tensor | None, act: str,
                save_pre: bool) -> tuple[Tensor, Tensor]:
    def kernels():
        from trnsim.kernels.fused_linear import linear_act

        k, n = x.shape[-1], weight.shape[0]
        x2 = rows_2d(x, k)
        out = new((x2.shape[0], n), x.dtype)
        pre = new(out.shape if save_pre else (0,), x.dtype)
        launch(linear_act, out, x2, weight.t(), aten_op="trnsim_fused::linear_act",
               names=("out", "x", "weight_t"), c=bias, act=act,
               pre=pre if save_pre else None)
        shape = (*x.shape[:-1], n)
        return out.view(shape), pre.view(shape) if save_pre else pre

    def eager():
        z = F.linear(x, weight, bias)
        y = ACTS[act][0](z)
        return y, z if save_pre else x.new_empty((0,))

    return run_fused("linear_act", kernels, eager, x, weight, bias)


def _fake(x, weight, bias, act, save_pre):
    shape = (*x.shape[:-1], weight.shape[0])
    return x.new_empty(shape), x.new_empty(shape if save_pre else (0,))


def _unfused(x, weight, bias, act, save_pre):
    return (ACTS[act][0](F.linear(x, weight, bias)),)


def _setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)  # unused outputs get None, not zeros
    x, weight, bias, act, _save_pre = inputs
    y, pre = output
    ctx.act, ctx.has_bias = act, bias is not None
    ctx.save_for_backward(x, weight, pre if ACTS[act][1] else y)


def _backward(ctx, grad, _grad_pre):
    x, weight, saved = ctx.saved_tensors
    gz = act_backward(ctx.act, grad, saved)
    n, k = weight.shape
    gz2, x2 = gz.reshape(-1, n), x.reshape(-1, k)
    gx = (gz2 @ weight).view(x.shape) if ctx.needs_input_grad[0] else None
    gw = gz2.t() @ x2 if ctx.needs_input_grad[1] else None
    gb = gz2.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
    return gx, gw, gb, None, None


LINEAR_ACT = define("linear_act", _linear_act, fake=_fake, unfused=_unfused, outputs=1,
                    parts="linear -> activation", backward=_backward, setup=_setup)


def linear_operands(ctx, node: torch.fx.Node):
    """(x, weight, bias) of a linear node the kernels serve, or None."""
    if kind(node) != "linear":
        return None
    a = args(node)
    x, w, b = a["input"], a["weight"], a["bias"]
    if not on_device(ctx.device, x, w, b):
        return None
    xt, wt = fake(x), fake(w)
    if xt.dim() < 2 or wt.dim() != 2 or xt.shape[-1] != wt.shape[1] or 0 in (*xt.shape,
                                                                             *wt.shape):
        return None
    if b is not None and tuple(fake(b).shape) != (wt.shape[0],):
        return None
    return x, w, b


def _find(graph: torch.fx.Graph, ctx) -> Iterator[Match]:
    for node in graph.nodes:
        act = act_name(node)
        if act is None:
            continue
        lin = args(node)["input"]
        if not isinstance(lin, torch.fx.Node) or not only_user(lin, node):
            continue
        ops = linear_operands(ctx, lin)
        if ops is None:
            continue
        save = ACTS[act][1] and requires_grad(node)
        yield Match([lin, node], [*ops, act, save], [node], lin, f"linear -> {act}")


def pattern():
    from trnsim.backend.compile.fusion import Pattern

    return Pattern("linear_act", LINEAR_ACT, _find)


PATTERNS = (pattern(),)
