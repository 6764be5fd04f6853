"""NLL loss and fused cross-entropy, forward and backward (the device kernels of
aten.nll_loss_forward / nll_loss_backward, and of cross_entropy as one fused op with class
weights and label smoothing), with references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.

Rows (samples) go on partitions, classes on the free axis (kernels/_rows.py: G rows per
partition for few classes, chunks of classes for many). Each row's class is selected by
comparing a class-index iota with its target (VectorE), so no gather is needed and the
backward writes its dense gradient in the same pass. Targets are int64 pair views (low words
read). A target outside [0, C) that is not ignore_index must be refused on the host before
launching (`target_error`, as torch's CPU kernels check): on the device it matches no class,
and its row's loss is not meaningful.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
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
from .cross_entropy import (
    cross_entropy_backward,
    cross_entropy_backward_ref,
    cross_entropy_forward,
    cross_entropy_ref,
)

__all__ = [
    "cross_entropy_backward",
    "cross_entropy_backward_ref",
    "cross_entropy_forward",
    "cross_entropy_ref",
    "nll_loss_backward",
    "nll_loss_forward",
    "target_error",
]

F32 = nl.float32


def target_error(target: np.ndarray, n_classes: int, ignore_index: int) -> str | None:
    """Host-side check of class targets, for the backend to run before launching: the message
    for the first target outside [0, n_classes) that is not ignore_index, or None."""
    t = np.asarray(target).reshape(-1)
    bad = (t != ignore_index) & ((t < 0) | (t >= n_classes))
    if not bad.any():
        return None
    return (
        f"Target {int(t[np.argmax(bad)])} is out of bounds: class targets lie in "
        f"[0, {n_classes}) or equal ignore_index={ignore_index}"
    )


# ---------------------------------------------------------------- nll_loss
def nll_loss_forward(
    out, total_weight, logp, target, weight, *, reduction: int, ignore_index: int
) -> None:
    """loss_i = -weight[t_i] * logp[i, t_i] (0 where t_i == ignore_index), reduced.

    Dimensions:
        logp: [N, C], [C] (one sample) or [N, C, *S] (nll_loss2d: classes on dim 1), any
        strides. Rows R = [N, *S] ([1] for [C]). target: int64 pair view of R targets.
        weight: [C] or None. out: R values (reduction 0, none) or one element (1 mean, 2 sum).
        total_weight: one element (sum of weight[t_i] over counted rows; 0 for none with a
        2-D input, as torch) or None.
    """
    what = "nll_loss"
    red = REDUCTIONS.get(reduction)
    sp = loss_space(what, logp, target, {}, {"loss": out if red == "none" else None}, reduction)
    if red != "none":
        check_scalar(what, "out", out)
    check_scalar(what, "total_weight", total_weight)
    vecs = Vectors(check_vectors(what, sp.n_cols, weight=weight), sp.n_cols)
    plan, iota = loss_plan(what, sp, logp.dtype, vecs, 0)
    total = Total()
    tiles = sp.tiles(plan.g)
    pf = Prefetch(requests(tiles, 1, plan.chunks), loader(sp, logp.dtype, vecs, (0,)))
    for tile in tiles:
        m, g = tile.parts, tile.g
        tg = Targets(sp, tile, iota, ignore_index)
        parts = ro.sbuf((m, g, 2, len(plan.chunks)), F32, "picked")
        for c, (c0, c1) in enumerate(plan.chunks):
            ld = pf.next()
            mask = tg.mask(c0, c1)
            tg.pick(parts[:, :, 0, c], mask, ld["x"])
            if weight is not None:
                tg.pick(parts[:, :, 1, c], mask, vecs.view("weight", ld, m, g, c0, c1))
        lw = _nll_rows(
            tg,
            combine(parts[:, :, 0, :], nl.maximum),
            None if weight is None else combine(parts[:, :, 1, :], nl.maximum),
        )
        if red == "none":
            sp.store(tile, "loss", lw[:, 0, :])
        if red != "none" or len(logp.shape) == 1:
            total.add(lw)
    store_totals(total, out, total_weight, red, len(logp.shape))


def _nll_rows(tg, picked, wt):
    """(loss, weight) per row [m, 2, G]: weight = valid * w[t], loss = -picked * weight."""
    lw = ro.sbuf((tg.m, 2, tg.g), F32, "loss_weight")
    if wt is None:
        nisa.tensor_copy(dst=lw[:, 1, :], src=tg.valid)
    else:
        nisa.tensor_tensor(dst=lw[:, 1, :], data1=tg.valid, data2=wt, op=nl.multiply)
    nisa.scalar_tensor_tensor(
        dst=lw[:, 0, :],
        data=picked,
        op0=nl.multiply,
        operand0=-1.0,
        op1=nl.multiply,
        operand1=lw[:, 1, :],
    )
    return lw


def nll_loss_backward(
    grad_logp, grad_out, target, weight, total_weight, *, reduction: int, ignore_index: int
) -> None:
    """grad_logp[i, c] = -weight[t_i] * g_i where c == t_i, else 0; g_i = grad_out[i] (none),
    grad_out (sum) or grad_out / total_weight (mean); 0 for ignored rows.

    Dimensions:
        grad_logp: [N, C], [C] or [N, C, *S] (written whole). grad_out: R values (none) or one
        element. target: int64 pair view of R targets. weight: [C] or None. total_weight: one
        element (mean; may be None otherwise).
    """
    what = "nll_loss_backward"
    red = REDUCTIONS.get(reduction)
    # the row space's column operand "x" is grad_logp: only written
    sp = loss_space(
        what, grad_logp, target, {}, {"gout": grad_out if red == "none" else None}, reduction
    )
    check_reduced(what, red, grad_out, total_weight)
    vecs = Vectors(check_vectors(what, sp.n_cols, weight=weight), sp.n_cols)
    plan, iota = loss_plan(what, sp, grad_logp.dtype, vecs, 0)
    single = len(plan.chunks) == 1
    passes = 2 if weight is not None and not single else 1
    tiles = sp.tiles(plan.g)
    pf = Prefetch(requests(tiles, passes, plan.chunks), loader(sp, grad_logp.dtype, vecs, ()))
    for tile in tiles:
        m, g = tile.parts, tile.g
        tg = Targets(sp, tile, iota, ignore_index)
        coef = grad_scale(sp, tile, tg, red, grad_out, total_weight)
        kept = [] if single else None
        if weight is not None:
            wt = target_weights(pf, tg, plan, vecs, m, g, kept)
            nisa.tensor_tensor(dst=coef, data1=coef, data2=wt, op=nl.multiply)
        nisa.tensor_scalar(dst=coef, data=coef, op0=nl.multiply, operand0=-1.0)
        for c0, c1 in plan.chunks:
            if weight is None or not single:
                pf.next()
            gl = ro.sbuf((m, g, c1 - c0), grad_logp.dtype, "grad_logp")
            tg.one_hot_scaled(gl, coef, c0, c1)
            sp.store(tile, "x", gl, c0, c1)


# ---------------------------------------------------------------- references
def _targets(target, n_classes: int, weight, ignore_index: int):
    """(targets, valid, safe targets, class weights, w[target] masked) in float64."""
    t = np.asarray(target).reshape(-1)
    w = np.ones(n_classes) if weight is None else np.asarray(weight, np.float64)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    return t, valid, safe, w, np.where(valid, w[safe], 0.0)


def nll_loss_ref(logp, target, weight=None, *, reduction: int, ignore_index: int):
    """(out, total_weight) in float64, as torch's nll_loss_forward / nll_loss2d_forward (out
    of the row shape [N, *S] for none)."""
    lp = class_rows(logp)
    _, valid, safe, w, wt = _targets(target, lp.shape[1], weight, ignore_index)
    loss = np.where(valid, -w[safe] * lp[np.arange(len(safe)), safe], 0.0)
    total = wt.sum()
    red = REDUCTIONS[reduction]
    if red == "none":
        return loss.reshape(row_shape_of(np.shape(logp))), (total if np.ndim(logp) == 1 else 0.0)
    return (loss.sum() / total if red == "mean" else loss.sum()), total


def nll_loss_backward_ref(
    grad_out, target, weight, total_weight, shape: tuple, *, reduction: int, ignore_index: int
) -> np.ndarray:
    """grad_logp of `shape` ([C], [N, C] or [N, C, *S]) in float64, as torch's
    nll_loss_backward."""
    c = shape[0] if len(shape) == 1 else shape[1]
    t, valid, safe, _, wt = _targets(target, c, weight, ignore_index)
    g = np.asarray(grad_out, np.float64).reshape(-1)
    if REDUCTIONS[reduction] == "mean":
        g = g / float(np.asarray(total_weight).reshape(-1)[0])
    grad = np.zeros((len(t), c))
    grad[np.arange(len(t)), safe] = np.where(valid, -wt * g, 0.0)
    return from_class_rows(grad, tuple(shape))
