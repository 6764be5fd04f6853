"""An MLP block as one launch (kernels.fused_mlp.mlp): the hidden activations stay in SBUF.

Patterns (every intermediate used only inside the block, the weights fitting in SBUF):
* `swiglu_mlp`: down(act(gate(x)) * up(x)) with act silu (SwiGLU) or gelu (GeGLU);
* `mlp`: fc2(act(fc1(x))) with act gelu, relu or silu.
In training the kernel also stores what eager's backward reads (pre-activations, the
activation, the hidden product; as [H, M] storage, the layout of its h^T tiles), and the
backward runs eager's backward ops (products, activation backward, bias sums) on them in
that layout.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor
from trnsim.backend.compile.fusion.fused_op import define, run_fused
from trnsim.backend.compile.fusion.linear import ACTS, act_backward, act_name, linear_operands
from trnsim.backend.compile.fusion.match import args, kind, only_user
from trnsim.backend.compile.fusion.match import tensor as fake
from trnsim.backend.compile.fusion.rewrite import Match, requires_grad
from trnsim.backend.ops._common import launch, new, rows_2d

PLAIN_ACTS = ("gelu", "gelu_tanh", "relu", "silu")
GATED_ACTS = ("silu", "gelu", "gelu_tanh")


def _mlp(x: Tensor, w_in: Tensor, b_in: Tensor | None, w_up: Tensor | None,
         b_up: Tensor | None, w_out: Tensor, b_out: Tensor | None, act: str,
         save: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    d, h, n = x.shape[-1], w_in.shape[0], w_out.shape[0]
    gated = w_up is not None
    names = _SAVED if gated else ("pre", "hidden")

    def kernels():
        from trnsim.kernels.fused_mlp import mlp

        x2 = rows_2d(x, d)
        m = x2.shape[0]
        out = new((m, n), x.dtype)
        # [M, H] views of [H, M] storage: the kernel stores h^T tiles in runs.
        saved = {k: new((h, m), x.dtype).t() for k in names} if save else {}
        launch(mlp, out, x2, w_in, w_out, aten_op="trnsim_fused::mlp",
               names=("out", "x", "w_in", "w_out"), act=act, w_up=w_up, b_in=b_in,
               b_up=b_up, b_out=b_out, **{_KW[k]: v for k, v in saved.items()})
        # distinct empty tensors: a custom op's results may not alias each other
        return (out.view(*x.shape[:-1], n),
                *(saved[k] if k in saved else new((0,), x.dtype) for k in _SAVED))

    def eager():
        z = F.linear(x, w_in, b_in)
        a = ACTS[act][0](z)
        u = F.linear(x, w_up, b_up) if gated else None
        hid = a * u if gated else a
        got = {"pre": z, "up": u, "act": a, "hidden": hid}
        return (F.linear(hid, w_out, b_out),
                *(_h_major(got[k].reshape(-1, h)) if save and k in names
                  else x.new_empty((0,)) for k in _SAVED))

    return run_fused("mlp", kernels, eager, x, w_in, b_in, w_up, b_up, w_out, b_out)


_SAVED = ("pre", "up", "act", "hidden")  # results after the output, in order
_KW = {"pre": "pre", "up": "up", "act": "act_out", "hidden": "hidden"}


def _h_major(t: Tensor) -> Tensor:
    """t [M, H] copied into the kernel's layout (an [M, H] view of [H, M] storage)."""
    out = t.new_empty((t.shape[1], t.shape[0])).t()
    out.copy_(t)
    return out


def _fake(x, w_in, b_in, w_up, b_up, w_out, b_out, act, save):
    m = x.numel() // x.shape[-1]
    h = w_in.shape[0]
    names = _SAVED if w_up is not None else ("pre", "hidden")
    y = x.new_empty((*x.shape[:-1], w_out.shape[0]))
    return (y, *(x.new_empty((h, m)).t() if save and k in names else x.new_empty((0,))
                 for k in _SAVED))


def _unfused(x, w_in, b_in, w_up, b_up, w_out, b_out, act, save):
    z = ACTS[act][0](F.linear(x, w_in, b_in))
    if w_up is not None:
        z = z * F.linear(x, w_up, b_up)
    return (F.linear(z, w_out, b_out),)


def _setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)  # unused outputs get None, not zeros
    x, w_in, b_in, w_up, b_up, w_out, b_out, act, _save = inputs
    ctx.act = act
    ctx.gated = w_up is not None
    ctx.biases = (b_in is not None, b_up is not None, b_out is not None)
    ctx.save_for_backward(x, w_in, w_up, w_out, *output[1:])


def _backward(ctx, gy, *_saved_grads):
    """Eager's backward ops, from what the forward stored (pre-activations, activation,
    hidden), in their [H, M] layout (contiguous there, so every pointwise step reads and
    writes one layout)."""
    x, w_in, w_up, w_out, z, u, a, hid = ctx.saved_tensors
    need = ctx.needs_input_grad
    d, n = x.shape[-1], w_out.shape[0]
    x2, gy2 = x.reshape(-1, d), gy.reshape(-1, n)
    z_t, hid_t = z.t(), hid.t()  # [H, M], contiguous
    grads: list[Tensor | None] = [None] * 9
    grads[5] = gy2.t() @ hid_t.t() if need[5] else None
    grads[6] = gy2.sum(0) if ctx.biases[2] and need[6] else None
    gh_t = w_out.t() @ gy2.t()  # [H, M]
    gu_t = None
    if ctx.gated:
        gz_t = act_backward(ctx.act, gh_t * u.t(), z_t)
        gu_t = gh_t * a.t()
        grads[3] = gu_t @ x2 if need[3] else None
        grads[4] = gu_t.sum(1) if ctx.biases[1] and need[4] else None
    else:
        gz_t = act_backward(ctx.act, gh_t, hid_t if ctx.act == "relu" else z_t)
    grads[1] = gz_t @ x2 if need[1] else None
    grads[2] = gz_t.sum(1) if ctx.biases[0] and need[2] else None
    if need[0]:
        gx = gz_t.t() @ w_in
        if gu_t is not None:
            gx = gx + gu_t.t() @ w_up
        grads[0] = gx.view(x.shape)
    return tuple(grads)


MLP = define("mlp", _mlp, fake=_fake, unfused=_unfused, outputs=1, parts="mlp",
             backward=_backward, setup=_setup)


def _fits(ctx, x, w_in, w_out, gated: bool) -> bool:
    from trnsim.kernels.fused_mlp import mlp_fits

    xt, wi, wo = fake(x), fake(w_in), fake(w_out)
    return (wo.shape[1] == wi.shape[0]
            and mlp_fits(xt.shape[-1], wi.shape[0], wo.shape[0], xt.element_size(), gated,
                         ctx.sbuf_bytes))


def _find_plain(graph: torch.fx.Graph, ctx) -> Iterator[Match]:
    for down in graph.nodes:
        outer = linear_operands(ctx, down)
        if outer is None:
            continue
        mid, w_out, b_out = outer
        act = act_name(mid) if isinstance(mid, torch.fx.Node) else None
        if act not in PLAIN_ACTS or not only_user(mid, down):
            continue
        fc1 = args(mid)["input"]
        inner = linear_operands(ctx, fc1) if isinstance(fc1, torch.fx.Node) else None
        if inner is None or not only_user(fc1, mid):
            continue
        x, w_in, b_in = inner
        if not _fits(ctx, x, w_in, w_out, False):
            continue
        save = requires_grad(down)
        yield Match([fc1, mid, down], [x, w_in, b_in, None, None, w_out, b_out, act, save],
                    [down], down, f"linear -> {act} -> linear")


def _find_gated(graph: torch.fx.Graph, ctx) -> Iterator[Match]:
    for down in graph.nodes:
        outer = linear_operands(ctx, down)
        if outer is None:
            continue
        prod, w_out, b_out = outer
        if kind(prod) != "mul" or not only_user(prod, down):
            continue
        pa = args(prod)
        for act_node, up in ((pa["input"], pa["other"]), (pa["other"], pa["input"])):
            act = act_name(act_node) if isinstance(act_node, torch.fx.Node) else None
            if act not in GATED_ACTS or not isinstance(up, torch.fx.Node):
                continue
            gate = args(act_node)["input"]
            g_ops = linear_operands(ctx, gate) if isinstance(gate, torch.fx.Node) else None
            u_ops = linear_operands(ctx, up)
            if g_ops is None or u_ops is None or g_ops[0] is not u_ops[0]:
                continue
            if not (only_user(gate, act_node) and only_user(act_node, prod)
                    and only_user(up, prod)):
                continue
            x, w_in, b_in = g_ops
            if not _fits(ctx, x, w_in, w_out, True) or fake(u_ops[1]).shape != fake(w_in).shape:
                continue
            save = requires_grad(down)
            yield Match([gate, act_node, up, prod, down],
                        [x, w_in, b_in, u_ops[1], u_ops[2], w_out, b_out, act, save], [down],
                        down, f"linear -> {act} * linear -> linear")
            break


def _patterns():
    from trnsim.backend.compile.fusion import Pattern

    return (Pattern("swiglu_mlp", MLP, _find_gated), Pattern("mlp", MLP, _find_plain))


PATTERNS = _patterns()
