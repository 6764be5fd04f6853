"""RMS norm and layer norm, with the residual add before them, as one launch.

Patterns:
* `add_norm`: rms_norm / layer_norm over the last dim of `x + residual` (same shapes): one
  kernels.add_norm launch stores the sum (the residual stream, when used further) and the
  normalized rows;
* `rms_norm`: RMS norm written out, x * rsqrt(mean(x^2, -1, keepdim=True) + eps) [* w]
  (x^2 as pow, square or x * x), one kernels.layer_norm.rms_norm_forward launch (or the
  add_norm one when x is itself a residual sum).
The backward is eager's norm backward op (the device's single kernel) on the sum, the
residual's gradient added in when the sum is used further.
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
from trnsim.backend.compile.fusion.rewrite import Match
from trnsim.backend.ops._common import launch, new, rows_2d

aten = torch.ops.aten


def _stats_shape(x: Tensor) -> tuple[int, ...]:
    return (*x.shape[:-1], 1)


def _flat(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.reshape(-1)


# ---------------------------------------------------------------- rms norm (+ residual)
def _add_rms_norm(x: Tensor, residual: Tensor | None, weight: Tensor | None,
                  eps: float | None) -> tuple[Tensor, Tensor, Tensor]:
    d = x.shape[-1]

    def kernels():
        from trnsim.kernels.add_norm import add_rms_norm_forward
        from trnsim.kernels.layer_norm import rms_norm_forward

        r = x.numel() // d
        out, rstd = new(x.shape, x.dtype), new(_stats_shape(x), torch.float32)
        if residual is None:
            launch(rms_norm_forward, out.view(r, d), rstd.view(r), rows_2d(x, d),
                   _flat(weight), aten_op="trnsim_fused::rms_norm",
                   names=("out", "rstd", "x", "weight"), eps=eps)
            return out, new((0,), x.dtype), rstd
        s = new(x.shape, x.dtype)
        launch(add_rms_norm_forward, out.view(r, d), s.view(r, d), rstd.view(r),
               rows_2d(x, d), rows_2d(residual, d), _flat(weight),
               aten_op="trnsim_fused::add_rms_norm",
               names=("out", "sum", "rstd", "x", "residual", "weight"), eps=eps)
        return out, s, rstd

    def eager():
        s = x if residual is None else x + residual
        y, rstd = aten._fused_rms_norm(s, [d], weight, eps)
        return y, (x.new_empty((0,)) if residual is None else s), rstd

    return run_fused("add_rms_norm" if residual is not None else "rms_norm", kernels, eager, x,
                     residual, weight)


def _rms_fake(x, residual, weight, eps):
    return (torch.empty_like(x), x.new_empty(x.shape if residual is not None else (0,)),
            x.new_empty(_stats_shape(x), dtype=torch.float32))


def _rms_unfused(x, residual, weight, eps):
    s = x if residual is None else x + residual
    y = torch.rms_norm(s, (x.shape[-1],), weight, eps)
    return (y,) if residual is None else (y, s)


def _rms_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)  # unused outputs get None, not zeros
    x, residual, weight, _eps = inputs
    _, s, rstd = output
    ctx.residual = residual is not None
    ctx.save_for_backward(s if ctx.residual else x, rstd, weight)


def _rms_backward(ctx, gy, gs, _grstd):
    s, rstd, weight = ctx.saved_tensors
    need_w = weight is not None and ctx.needs_input_grad[2]
    gx, gw = aten._fused_rms_norm_backward(gy, s, [s.shape[-1]], rstd, weight, [True, need_w])
    if ctx.residual and gs is not None:
        gx = gx + gs
    return gx, (gx if ctx.residual else None), (gw if need_w else None), None


ADD_RMS_NORM = define("add_rms_norm", _add_rms_norm, fake=_rms_fake, unfused=_rms_unfused,
                      outputs=2, parts="add -> rms_norm", backward=_rms_backward,
                      setup=_rms_setup)


# ---------------------------------------------------------------- layer norm + residual
def _add_layer_norm(x: Tensor, residual: Tensor, weight: Tensor | None, bias: Tensor | None,
                    eps: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    d = x.shape[-1]

    def kernels():
        from trnsim.kernels.add_norm import add_layer_norm_forward

        r = x.numel() // d
        out, s = new(x.shape, x.dtype), new(x.shape, x.dtype)
        mean, rstd = new(_stats_shape(x), x.dtype), new(_stats_shape(x), x.dtype)
        launch(add_layer_norm_forward, out.view(r, d), s.view(r, d), mean.view(r),
               rstd.view(r), rows_2d(x, d), rows_2d(residual, d), _flat(weight), _flat(bias),
               aten_op="trnsim_fused::add_layer_norm",
               names=("out", "sum", "mean", "rstd", "x", "residual", "weight", "bias"),
               eps=float(eps))
        return out, s, mean, rstd

    def eager():
        s = x + residual
        y, mean, rstd = aten.native_layer_norm(s, [d], weight, bias, eps)
        return y, s, mean, rstd

    return run_fused("add_layer_norm", kernels, eager, x, residual, weight, bias)


def _ln_fake(x, residual, weight, bias, eps):
    st = _stats_shape(x)
    return torch.empty_like(x), torch.empty_like(x), x.new_empty(st), x.new_empty(st)


def _ln_unfused(x, residual, weight, bias, eps):
    s = x + residual
    return torch.layer_norm(s, (x.shape[-1],), weight, bias, eps), s


def _ln_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)  # unused outputs get None, not zeros
    _, _, weight, bias, _ = inputs
    _, s, mean, rstd = output
    ctx.save_for_backward(s, mean, rstd, weight, bias)


def _ln_backward(ctx, gy, gs, _gmean, _grstd):
    s, mean, rstd, weight, bias = ctx.saved_tensors
    need = ctx.needs_input_grad
    mask = [True, weight is not None and need[2], bias is not None and need[3]]
    gx, gw, gb = aten.native_layer_norm_backward(gy, s, [s.shape[-1]], mean, rstd, weight,
                                                 bias, mask)
    if gs is not None:
        gx = gx + gs
    return gx, gx, gw if mask[1] else None, gb if mask[2] else None, None


ADD_LAYER_NORM = define("add_layer_norm", _add_layer_norm, fake=_ln_fake, unfused=_ln_unfused,
                        outputs=2, parts="add -> layer_norm", backward=_ln_backward,
                        setup=_ln_setup)


# ---------------------------------------------------------------- patterns
def _residual(ctx, node: Any) -> tuple[Any, Any] | None:
    """(x, residual) of a same-shape tensor add node the kernels serve, or None."""
    if kind(node) != "add":
        return None
    a = args(node)
    x, r = a["input"], a["other"]
    if a["alpha"] != 1 or not isinstance(x, torch.fx.Node) or not isinstance(r, torch.fx.Node):
        return None
    if not on_device(ctx.device, x, r, node) or fake(x).shape != fake(r).shape:
        return None
    return x, r


def _norm_vectors(ctx, x: Any, shape: Any, *vecs: Any) -> bool:
    """The norm runs over x's last dim only, with [D] weight/bias of x's dtype (or None)."""
    t = fake(x)
    dims = [shape] if isinstance(shape, int) else list(shape) if isinstance(
        shape, (list, tuple, torch.Size)) else None
    if t is None or t.dim() < 1 or dims != [t.shape[-1]] or t.numel() == 0:
        return False
    return all(v is None or (on_device(ctx.device, x, v)
                             and tuple(fake(v).shape) == (t.shape[-1],)) for v in vecs)


def _find_add_norm(graph: torch.fx.Graph, ctx) -> Iterator[Match]:
    for norm in graph.nodes:
        k = kind(norm)
        if k not in ("rms_norm", "layer_norm"):
            continue
        a = args(norm)
        add = a["input"]
        pair = _residual(ctx, add)
        if pair is None:
            continue
        weight, bias = a["weight"], a.get("bias")
        if not _norm_vectors(ctx, add, a["normalized_shape"], weight, bias):
            continue
        outputs = [norm] if only_user(add, norm) else [norm, add]
        if k == "rms_norm":
            yield Match([add, norm], [*pair, weight, a["eps"]], outputs, norm,
                        "add -> rms_norm", {"op": ADD_RMS_NORM})
        else:
            yield Match([add, norm], [*pair, weight, bias, float(a["eps"])], outputs, norm,
                        "add -> layer_norm", {"op": ADD_LAYER_NORM})


def _square_of(node: Any) -> Any:
    """x for a node computing x^2 (pow 2, square, x * x), else None."""
    k = kind(node)
    if k == "pow" and args(node)["exponent"] == 2:
        return args(node)["input"]
    if k == "square":
        return args(node)["input"]
    if k == "mul":
        a = args(node)
        return a["input"] if a["input"] is a["other"] else None
    return None


def _scaled_by(node: Any, r: Any) -> Any:
    """The other factor of a mul node with factor `r`, else None."""
    if kind(node) != "mul":
        return None
    a = args(node)
    if a["input"] is r:
        return a["other"]
    return a["input"] if a["other"] is r else None


def _find_manual_rms(graph: torch.fx.Graph, ctx) -> Iterator[Match]:
    for rs in graph.nodes:
        if kind(rs) != "rsqrt":
            continue
        ad = args(rs)["input"]
        if kind(ad) != "add" or args(ad)["alpha"] != 1 or not only_user(ad, rs):
            continue
        aa = args(ad)
        mean, eps = (aa["input"], aa["other"]) if isinstance(aa["other"], float | int) \
            else (aa["other"], aa["input"])
        if not isinstance(eps, float | int) or kind(mean) != "mean" or not only_user(mean, ad):
            continue
        ma = args(mean)
        dim = ma["dim"]
        dim = dim[0] if isinstance(dim, (list, tuple)) and len(dim) == 1 else dim
        sq = ma["input"]
        x = _square_of(sq)
        if x is None or not ma["keepdim"] or ma["dtype"] is not None or not last_dim(sq, dim):
            continue
        if not only_user(sq, mean) or len(rs.users) != 1:
            continue
        y = next(iter(rs.users))
        if _scaled_by(y, rs) is not x or not on_device(ctx.device, x, y):
            continue
        nodes, out, weight = [sq, mean, ad, rs, y], y, None
        if len(y.users) == 1:
            wn = next(iter(y.users))
            w = _scaled_by(wn, y)
            if isinstance(w, torch.fx.Node) and _norm_vectors(ctx, x, fake(x).shape[-1], w):
                nodes, out, weight = [*nodes, wn], wn, w
        if not math.isfinite(float(eps)) or not _norm_vectors(ctx, x, fake(x).shape[-1]):
            continue
        pair = _residual(ctx, x)
        extra = {"op": ADD_RMS_NORM}
        if pair is not None:
            outputs = [out] if set(x.users) <= set(nodes) else [out, x]
            yield Match([x, *nodes], [*pair, weight, float(eps)], outputs, out,
                        "add -> rms_norm (written out)", extra)
        else:
            yield Match(nodes, [x, None, weight, float(eps)], [out], out,
                        "rms_norm (written out)", extra)


def _patterns():
    from trnsim.backend.compile.fusion import Pattern

    return (Pattern("rms_norm", ADD_RMS_NORM, _find_manual_rms),
            Pattern("add_norm", ADD_RMS_NORM, _find_add_norm))


PATTERNS = _patterns()
