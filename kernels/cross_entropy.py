"""Fused cross-entropy with class-index targets, forward and backward: log_softmax and
nll_loss in one pass over the logits, with class weights, ignore_index and label smoothing
(for the backend's fused cross_entropy op and the torch.compile fusion pass), with references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only. Rows,
targets and reductions as in kernels/losses.py (shared pieces in kernels/_loss_rows.py).
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._common import P_MAX
from ._loss_rows import (
    REDUCTIONS,
    Targets,
    Total,
    check_reduced,
    check_scalar,
    class_rows,
    combine,
    from_class_rows,
    grad_scale,
    loader,
    loss_plan,
    loss_space,
    requests,
    row_shape_of,
    store_totals,
    target_weights,
)
from ._norm_rows import Vectors, check_vectors
from ._rows import Prefetch

F32 = nl.float32


def cross_entropy_forward(
    loss,
    lse,
    total_weight,
    logits,
    target,
    weight=None,
    *,
    reduction: int,
    ignore_index: int,
    label_smoothing: float = 0.0,
) -> None:
    """Fused cross_entropy(logits, target, weight, ignore_index, reduction, label_smoothing)
    with class-index targets: log_softmax and nll_loss in one pass over the logits.

    Per row, with lse = logsumexp(logits[i]) (fp32; chunks merged with rescaled sums) and
    eps = label_smoothing: loss_i = valid_i * ((1 - eps) * w[t_i] * (lse - x[i, t_i]) +
    eps / C * (lse * sum(w) - sum_c w[c] * x[i, c])); mean divides the sum by
    sum_i valid_i * w[t_i] (torch's weighted mean, also for the smoothing term).

    Dimensions:
        logits: [N, C], [C] or [N, C, *S] (classes on dim 1), any strides; rows R = [N, *S].
        target: int64 pair view of R targets. weight: [C] or None. loss: R values (none) or
        one element. lse: R values, fp32 (saved for the backward), or None. total_weight: one
        element or None.
    """
    what = "cross_entropy"
    red = REDUCTIONS.get(reduction)
    rows = {"loss": loss if red == "none" else None, "lse": lse}
    sp = loss_space(what, logits, target, {}, rows, reduction)
    if red != "none":
        check_scalar(what, "loss", loss)
    check_scalar(what, "total_weight", total_weight)
    c_all = sp.n_cols
    vecs = Vectors(check_vectors(what, c_all, weight=weight), c_all)
    eps = float(label_smoothing)
    plan, iota = loss_plan(what, sp, logits.dtype, vecs, 8)  # + exp and product scratch
    wsum = _weight_sum(vecs, plan, c_all) if eps and weight is not None else float(c_all)
    total = Total()
    tiles = sp.tiles(plan.g)
    pf = Prefetch(requests(tiles, 1, plan.chunks), loader(sp, logits.dtype, vecs, (0,)))
    for tile in tiles:
        tg = Targets(sp, tile, iota, ignore_index)
        lse_t, picked, wt, dot = _ce_row_stats(pf, tg, plan, vecs, eps, weight is not None)
        if "lse" in sp.operands:
            sp.store(tile, "lse", lse_t)
        lw = _ce_rows(tg, lse_t, picked, wt, dot, eps, c_all, wsum)
        if red == "none":
            sp.store(tile, "loss", lw[:, 0, :])
        if red != "none" or len(logits.shape) == 1:
            total.add(lw)
    store_totals(total, loss, total_weight, red, len(logits.shape))


def _ce_row_stats(pf, tg, plan, vecs, eps: float, weighted: bool):
    """One pass over a row tile's class chunks: (lse, x[target], w[target] or None,
    sum_c w[c] * x[c] or None) per row [m, G]. Per chunk: the softmax statistics (VectorE max,
    ScalarE exp with the sums), the target selection, the smoothing dot product."""
    m, g = tg.m, tg.g
    st = ro.sbuf((m, g, 5, len(plan.chunks)), F32, "chunk_stats")
    for c, (c0, c1) in enumerate(plan.chunks):
        ld = pf.next()
        x = ld["x"]
        ro.lse_chunk(st[:, :, 0, c], st[:, :, 1, c], x)
        mask = tg.mask(c0, c1)
        tg.pick(st[:, :, 2, c], mask, x)
        w = vecs.view("weight", ld, m, g, c0, c1)
        if w is not None:
            tg.pick(st[:, :, 3, c], mask, w)
        if eps:
            _row_dot(st[:, :, 4, c], x, w)
    lse_t = ro.sbuf((m, g), F32, "lse")
    nlse = ro.neg_lse(st[:, :, 0, :], st[:, :, 1, :])
    nisa.tensor_scalar(dst=lse_t, data=nlse, op0=nl.multiply, operand0=-1.0)
    wt = combine(st[:, :, 3, :], nl.maximum) if weighted else None
    dot = combine(st[:, :, 4, :], nl.add) if eps else None
    return lse_t, combine(st[:, :, 2, :], nl.maximum), wt, dot


def _row_dot(dst, x, w) -> None:
    """dst [m, G] = sum over the chunk of w * x (sum of x without weights)."""
    if w is None:
        ro.row_reduce(dst, x, nl.add)
        return
    prod = ro.sbuf(x.shape, F32, "w_x")
    nisa.tensor_tensor(dst=prod, data1=x, data2=w, op=nl.multiply)
    ro.row_reduce(dst, prod, nl.add)


def _weight_sum(vecs, plan, c_all: int):
    """sum(weight) on every partition, [128, 1] fp32."""
    chunks = plan.chunks
    part = ro.sbuf((P_MAX, len(chunks)), F32, "weight_sums")
    for c, (c0, c1) in enumerate(chunks):
        w = vecs.tiles["weight"][:, c0:c1] if vecs.resident else vecs.load(P_MAX, c0, c1)["weight"]
        nisa.tensor_reduce(dst=part[:, c : c + 1], op=nl.add, data=w, axis=1)
    out = ro.sbuf((P_MAX, 1), F32, "weight_sum")
    nisa.tensor_reduce(dst=out, op=nl.add, data=part, axis=1)
    return out


def _ce_rows(tg, lse_t, picked, wt, dot, eps: float, c_all: int, wsum):
    """(loss, weight) per row [m, 2, G] of the fused cross-entropy."""
    m, g = tg.m, tg.g
    lw = ro.sbuf((m, 2, g), F32, "loss_weight")
    if wt is None:
        nisa.tensor_copy(dst=lw[:, 1, :], src=tg.valid)
    else:
        nisa.tensor_tensor(dst=lw[:, 1, :], data1=tg.valid, data2=wt, op=nl.multiply)
    nll = ro.sbuf((m, g), F32, "nll")  # (1 - eps) * w[t] * (lse - x[t])
    nisa.tensor_tensor(dst=nll, data1=lse_t, data2=picked, op=nl.subtract)
    nisa.scalar_tensor_tensor(
        dst=lw[:, 0, :],
        data=nll,
        op0=nl.multiply,
        operand0=1.0 - eps,
        op1=nl.multiply,
        operand1=lw[:, 1, :],
    )
    if eps:  # + eps / C * valid * (lse * sum(w) - sum(w * x))
        ws = wsum if isinstance(wsum, float) else wsum[:m]
        sm = ro.sbuf((m, g), F32, "smooth")
        nisa.scalar_tensor_tensor(
            dst=sm, data=lse_t, op0=nl.multiply, operand0=ws, op1=nl.subtract, operand1=dot
        )
        nisa.tensor_tensor(dst=sm, data1=sm, data2=tg.valid, op=nl.multiply)
        nisa.scalar_tensor_tensor(
            dst=lw[:, 0, :],
            data=sm,
            op0=nl.multiply,
            operand0=eps / c_all,
            op1=nl.add,
            operand1=lw[:, 0, :],
        )
    return lw


def cross_entropy_backward(
    grad_logits,
    grad_loss,
    logits,
    target,
    lse,
    total_weight=None,
    weight=None,
    *,
    reduction: int,
    ignore_index: int,
    label_smoothing: float = 0.0,
) -> None:
    """Gradient of cross_entropy_forward with respect to the logits:
    grad[i, c] = g_i * ((1 - eps) * w[t_i] * (p[i, c] - [c == t_i]) + eps / C * (p[i, c] *
    sum(w) - w[c])), p = exp(x - lse); g_i as in nll_loss_backward (valid rows only).

    Dimensions:
        grad_logits, logits: [N, C], [C] or [N, C, *S]. grad_loss: R values (none) or one
        element. lse: R values from the forward. total_weight: one element (mean). weight:
        [C] or None.
    """
    what = "cross_entropy_backward"
    red = REDUCTIONS.get(reduction)
    rows = {"lse": lse, "gout": grad_loss if red == "none" else None}
    sp = loss_space(what, logits, target, {"grad": grad_logits}, rows, reduction)
    check_reduced(what, red, grad_loss, total_weight)
    c_all = sp.n_cols
    vecs = Vectors(check_vectors(what, c_all, weight=weight), c_all)
    eps = float(label_smoothing)
    plan, iota = loss_plan(what, sp, logits.dtype, vecs, 8 + grad_logits.dtype.itemsize)
    wsum = _weight_sum(vecs, plan, c_all) if eps and weight is not None else float(c_all)
    single = len(plan.chunks) == 1
    passes = 2 if weight is not None and not single else 1
    tiles = sp.tiles(plan.g)
    pf = Prefetch(
        requests(tiles, passes, plan.chunks), loader(sp, logits.dtype, vecs, (passes - 1,))
    )
    for tile in tiles:
        m, g = tile.parts, tile.g
        tg = Targets(sp, tile, iota, ignore_index)
        gs = grad_scale(sp, tile, tg, red, grad_loss, total_weight)
        nlse = sp.fetch(tile, "lse", F32)
        nisa.tensor_scalar(dst=nlse, data=nlse, op0=nl.multiply, operand0=-1.0)
        kept = [] if single else None
        wt = target_weights(pf, tg, plan, vecs, m, g, kept) if weight is not None else None
        a, b, c = _ce_coefs(gs, wt, eps, c_all, wsum, m, g)
        for ci, (c0, c1) in enumerate(plan.chunks):
            ld = kept[ci] if kept else pf.next()
            x = ld["x"]
            p = ro.sbuf(x.shape, F32, "probs")
            ro.act_rows(p, x, nl.exp, bias=nlse)
            w = vecs.view("weight", ld, m, g, c0, c1)
            t1 = ro.sbuf(x.shape, F32, "grad_soft")
            ro.apply_col(
                t1,
                p,
                nl.multiply,
                a,
                nl.add if eps and w is None else None,
                c if eps and w is None else None,
            )
            if eps and w is not None:
                ro.fma_col(t1, w, nl.multiply, c, nl.add, t1)
            gl = ro.sbuf(x.shape, grad_logits.dtype, "grad_logits")
            ro.fma_col(gl, tg.mask(c0, c1), nl.multiply, b, nl.add, t1)
            sp.store(tile, "grad", gl, c0, c1)


def _ce_coefs(gs, wt, eps: float, c_all: int, wsum, m: int, g: int):
    """Per row a = g * ((1 - eps) * w[t] + eps * sum(w) / C), b = -g * (1 - eps) * w[t],
    c = -g * eps / C ([m, G] tiles; c None without smoothing)."""
    gw = gs
    if wt is not None:
        gw = ro.sbuf((m, g), F32, "g_wt")
        nisa.tensor_tensor(dst=gw, data1=gs, data2=wt, op=nl.multiply)
    b = ro.sbuf((m, g), F32, "coef_onehot")
    nisa.tensor_scalar(dst=b, data=gw, op0=nl.multiply, operand0=-(1.0 - eps))
    a = ro.sbuf((m, g), F32, "coef_probs")
    if eps:
        ws = wsum if isinstance(wsum, float) else wsum[:m]
        nisa.tensor_scalar(
            dst=a, data=gs, op0=nl.multiply, operand0=ws, op1=nl.multiply, operand1=eps / c_all
        )
        nisa.scalar_tensor_tensor(
            dst=a, data=gw, op0=nl.multiply, operand0=1.0 - eps, op1=nl.add, operand1=a
        )
        c = ro.sbuf((m, g), F32, "coef_weight")
        nisa.tensor_scalar(dst=c, data=gs, op0=nl.multiply, operand0=-eps / c_all)
        return a, b, c
    nisa.tensor_copy(dst=a, src=gw)
    return a, b, None


# ---------------------------------------------------------------- references
def _ce_parts(logits, target, weight, ignore_index: int):
    x = class_rows(logits)
    c = x.shape[1]
    t = np.asarray(target).reshape(-1)
    w = np.ones(c) if weight is None else np.asarray(weight, np.float64)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    mx = x.max(axis=1, keepdims=True)
    lse = (mx + np.log(np.exp(x - mx).sum(axis=1, keepdims=True)))[:, 0]
    return x, w, valid, safe, lse, np.where(valid, w[safe], 0.0)


def cross_entropy_ref(
    logits, target, weight=None, *, reduction: int, ignore_index: int, label_smoothing: float = 0.0
):
    """(loss, lse, total_weight) in float64, as torch.nn.functional.cross_entropy with class
    targets (loss of the row shape [N, *S] for none; lse [R] flat otherwise)."""
    x, w, valid, safe, lse, wt = _ce_parts(logits, target, weight, ignore_index)
    eps, c = label_smoothing, x.shape[1]
    logp = x - lse[:, None]
    nll = -wt * np.where(valid, logp[np.arange(len(safe)), safe], 0.0)
    loss = nll
    if eps:  # torch adds the smoothing term only for label_smoothing > 0
        smooth = np.where(valid, -(logp * w).sum(axis=1), 0.0)
        loss = (1 - eps) * nll + eps / c * smooth
    total = wt.sum()
    red = REDUCTIONS[reduction]
    if red == "none":
        rows = row_shape_of(np.shape(logits))
        return loss.reshape(rows), lse.reshape(rows), total
    return (loss.sum() / total if red == "mean" else loss.sum()), lse, total


def cross_entropy_backward_ref(
    grad_loss,
    logits,
    target,
    weight=None,
    *,
    reduction: int,
    ignore_index: int,
    label_smoothing: float = 0.0,
) -> np.ndarray:
    """grad_logits (the logits' shape) in float64."""
    x, w, valid, safe, lse, wt = _ce_parts(logits, target, weight, ignore_index)
    eps, c = label_smoothing, x.shape[1]
    g = np.asarray(grad_loss, np.float64).reshape(-1) * valid
    if REDUCTIONS[reduction] == "mean":
        g = g / wt.sum()
    p = np.exp(x - lse[:, None])
    onehot = np.zeros_like(x)
    onehot[np.arange(len(safe)), safe] = 1.0
    grad = (1 - eps) * wt[:, None] * (p - onehot) + eps / c * (p * w.sum() - w[None, :])
    return from_class_rows(g[:, None] * grad, np.shape(logits))
