"""LayerNorm and RMSNorm over the last dim of a [R, D] strided view, forward and backward (the
device kernels of aten.native_layer_norm, _fused_rms_norm and their backward), with references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.

Rows go on partitions (G rows per partition when rows are short; see kernels/_rows.py).
Statistics are fp32; rows longer than one SBUF chunk take two passes (statistics, then the
result). weight/bias sit on every partition for the whole kernel when they fit, else they
are loaded per chunk. The weight/bias gradients reduce over all rows: fp32 accumulators in
SBUF (one row of D per partition), summed across partitions by GpSimd at the end.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._common import fail
from ._norm_rows import (
    Vectors,
    acc_bytes,
    acc_columns,
    check_rows,
    check_vectors,
    const_col,
    norm_row_space,
    normalize_block,
    normalize_rows,
    row_stats_forward,
    store_accs,
    zero_accs,
)
from ._rows import MIN_DMA_BYTES, Prefetch, plan_rows

MAX_CHUNK_COLS = 8192  # columns per chunk when a row is longer than one SBUF tile holds
F32 = nl.float32
POOL = nisa.engine.gpsimd  # the backward's gradient accumulation runs on GpSimd, off VectorE


# ---------------------------------------------------------------- forward
def layer_norm_forward(out, mean, rstd, x, weight, bias, *, eps: float) -> None:
    """out = (x - mean) * rstd * weight + bias over the last dim of x [R, D].

    Dimensions:
        x, out: [R, D] views, any strides. mean, rstd: R values (fp32 or any float dtype; may
        be None). weight, bias: [D] views or None.

    Args:
        eps: added to the biased variance.

    Notes:
        Per row tile: VectorE bn_stats/bn_aggr for mean and variance (G = 1) or sums over the
        block (G > 1); ScalarE rsqrt(var + eps) and the normalization x * rstd - mean * rstd
        as one activation (G = 1); VectorE weight and bias.
    """
    _norm_forward("layer_norm", out, mean, rstd, x, weight, bias, eps, centered=True)


def rms_norm_forward(out, rstd, x, weight, *, eps: float | None = None) -> None:
    """out = x * rsqrt(mean(x^2) + eps) * weight over the last dim of x [R, D] (torch's
    _fused_rms_norm; eps=None is finfo(float32).eps, the computation dtype's).

    Dimensions:
        x, out: [R, D] views, any strides. rstd: R values or None. weight: [D] or None.
    """
    eps = float(np.finfo(np.float32).eps) if eps is None else eps
    _norm_forward("rms_norm", out, None, rstd, x, weight, None, eps, centered=False)


def _norm_forward(what, out, mean, rstd, x, weight, bias, eps, centered) -> None:
    r, d = check_rows(what, x, out=out)
    vecs = Vectors(check_vectors(what, d, weight=weight, bias=bias), d)
    space = norm_row_space(what, r, x, {"x": x, "out": out}, {"mean": mean, "rstd": rstd})
    col_bytes = x.dtype.itemsize + out.dtype.itemsize + 8 + vecs.col_bytes
    plan = plan_rows(space, col_bytes, x.dtype.itemsize, what, vecs.fixed_bytes, MAX_CHUNK_COLS)
    eps_t = const_col(eps, "eps")
    passes = 1 if len(plan.chunks) == 1 else 2

    def load(req):
        t, p, (c0, c1) = req
        got = {"x": space.fetch(t, "x", x.dtype, c0, c1)}
        if p == passes - 1:
            got.update(vecs.load(t.parts, c0, c1))
        return got

    tiles = space.tiles(plan.g)
    pf = Prefetch([(t, p, c) for t in tiles for p in range(passes) for c in plan.chunks], load)
    for tile in tiles:
        m, g = tile.parts, tile.g
        mu, rs, xc, kept = row_stats_forward(pf, plan, m, g, d, eps_t[:m], centered)
        for name, val in (("mean", mu), ("rstd", rs)):
            if name in space.operands:
                space.store(tile, name, val)
        nmr = None
        if centered and g == 1:  # bias of the activation x * rstd - mean * rstd
            nmr = ro.sbuf((m, 1), F32, "neg_mean_rstd")
            nisa.tensor_scalar(
                dst=nmr, data=mu, op0=nl.multiply, operand0=rs, op1=nl.multiply, operand1=-1.0
            )
        for c, (c0, c1) in enumerate(plan.chunks):
            ld = kept[c] if passes == 1 else pf.next()
            w = vecs.view("weight", ld, m, g, c0, c1)
            b = vecs.view("bias", ld, m, g, c0, c1)
            if g == 1:
                y = normalize_rows(ld["x"], mu, rs, nmr, w, b, out.dtype)
            else:
                y = ro.sbuf(xc.shape if xc is not None else ld["x"].shape, out.dtype, "y")
                normalize_block(y, ld["x"] if xc is None else xc, rs, w, b)
            space.store(tile, "out", y, c0, c1)


# ---------------------------------------------------------------- backward
def layer_norm_backward(grad_x, grad_weight, grad_bias, grad_out, x, mean, rstd, weight) -> None:
    """Gradients of layer_norm_forward (aten.native_layer_norm_backward); any output may be
    None.

    grad_x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) with xhat = (x - mean) * rstd,
    gw = grad_out * weight; grad_weight = sum_rows(grad_out * xhat); grad_bias =
    sum_rows(grad_out), accumulated in fp32 over all row tiles.

    Dimensions:
        grad_x, grad_out, x: [R, D]. mean, rstd: R values. weight, grad_weight, grad_bias: [D].
    """
    _norm_backward(
        "layer_norm_backward",
        grad_x,
        grad_weight,
        grad_bias,
        grad_out,
        x,
        mean,
        rstd,
        weight,
        centered=True,
    )


def rms_norm_backward(grad_x, grad_weight, grad_out, x, rstd, weight) -> None:
    """Gradients of rms_norm_forward (torch's _fused_rms_norm_backward); any output may be None.

    grad_x = rstd * (gw - xhat * mean(gw * xhat)) with xhat = x * rstd, gw = grad_out * weight;
    grad_weight = sum_rows(grad_out * xhat).
    """
    _norm_backward(
        "rms_norm_backward",
        grad_x,
        grad_weight,
        None,
        grad_out,
        x,
        None,
        rstd,
        weight,
        centered=False,
    )


def _norm_backward(
    what, grad_x, grad_weight, grad_bias, grad_out, x, mean, rstd, weight, centered: bool
):
    r, d = check_rows(what, x, grad_out=grad_out, grad_x=grad_x)
    if rstd is None or (mean is None and centered):
        fail(f"{what}: the saved statistics (mean, rstd) are required")
    check_vectors(what, d, grad_weight=grad_weight, grad_bias=grad_bias)
    vecs = Vectors(check_vectors(what, d, weight=weight), d)
    space = norm_row_space(
        what, r, x, {"x": x, "g": grad_out, "gx": grad_x}, {"mean": mean, "rstd": rstd}
    )
    accs = {
        k: v for k, v in (("grad_weight", grad_weight), ("grad_bias", grad_bias)) if v is not None
    }
    g_max = max(1, -(-MIN_DMA_BYTES // (d * x.dtype.itemsize)))
    acc_cols = acc_columns(d, acc_bytes(len(accs), g_max))
    col_bytes = x.dtype.itemsize + grad_out.dtype.itemsize + 20 + vecs.col_bytes
    if grad_x is not None:
        col_bytes += grad_x.dtype.itemsize
    fixed = vecs.fixed_bytes + acc_bytes(len(accs), g_max) * acc_cols
    plan = plan_rows(space, col_bytes, x.dtype.itemsize, what, fixed, MAX_CHUNK_COLS)
    fused = acc_cols >= d  # accumulate the weight/bias gradients in the grad_x sweep
    acc = zero_accs(accs, plan.g, d) if fused else {}
    passes = 1 if len(plan.chunks) == 1 or grad_x is None else 2

    def load(req):
        t, _, (c0, c1) = req
        got = {
            "x": space.fetch(t, "x", x.dtype, c0, c1),
            "g": space.fetch(t, "g", grad_out.dtype, c0, c1),
        }
        got.update(vecs.load(t.parts, c0, c1))
        return got

    tiles = space.tiles(plan.g)
    if grad_x is not None or fused:
        reqs = [(t, p, c) for t in tiles for p in range(passes) for c in plan.chunks]
        pf = Prefetch(reqs, load)
        for tile in tiles:
            _backward_tile(space, tile, plan, pf, vecs, acc, passes, grad_x, d)
        store_accs(acc, accs, plan.g, 0, d)
        if fused:
            return
    # D too wide for accumulators of whole rows: one more sweep per block of acc_cols columns
    for a0 in range(0, d, acc_cols):
        a1 = min(d, a0 + acc_cols)
        acc = None  # free the previous block's accumulators before allocating the next
        acc = zero_accs(accs, plan.g, a1 - a0)
        chunks = [(c0, min(a1, c0 + plan.chunks[0][1])) for c0 in range(a0, a1, plan.chunks[0][1])]
        pf = Prefetch([(t, 0, c) for t in tiles for c in chunks], load)
        for tile in tiles:
            rs, nmr = _row_stats(space, tile)
            for c0, c1 in chunks:
                ld = pf.next()
                xhat, _ = _xhat_gw(ld, None, rs, nmr, tile.parts, tile.g, c0, c1)
                _accumulate(acc, ld["g"], xhat, tile.parts, tile.g, c0 - a0, c1 - a0)
        store_accs(acc, accs, plan.g, a0, a1)


def _row_stats(space, tile):
    """rstd and -mean * rstd (None for RMSNorm) of a tile, [parts, G] fp32."""
    m, g = tile.parts, tile.g
    rs = space.fetch(tile, "rstd", F32)
    if "mean" not in space.operands:
        return rs, None
    mu = space.fetch(tile, "mean", F32)
    nmr = ro.sbuf((m, g), F32, "neg_mean_rstd")
    nisa.scalar_tensor_tensor(
        dst=nmr, data=mu, op0=nl.multiply, operand0=-1.0, op1=nl.multiply, operand1=rs
    )
    return rs, nmr


def _backward_tile(space, tile, plan, pf, vecs, acc, passes, grad_x, d) -> None:
    m, g = tile.parts, tile.g
    centered = "mean" in space.operands
    rs, nmr = _row_stats(space, tile)
    n_chunks = len(plan.chunks)
    sums = ro.sbuf((m, g, 2, n_chunks), F32, "row_sums")
    kept = []
    for c, (c0, c1) in enumerate(plan.chunks):
        ld = pf.next()
        xhat, gw = _xhat_gw(ld, vecs, rs, nmr, m, g, c0, c1)
        if grad_x is not None:
            prod = ro.sbuf(xhat.shape, F32, "gw_xhat")
            nisa.tensor_tensor(dst=prod, data1=gw, data2=xhat, op=nl.multiply)
            ro.row_sum(sums[:, :, 0, c], prod)
            if centered:
                ro.row_sum(sums[:, :, 1, c], gw)
        _accumulate(acc, ld["g"], xhat, m, g, c0, c1)
        if n_chunks == 1:
            kept.append((ld, xhat, gw))
    if grad_x is None:
        return
    tot = sums[:, :, :, 0]
    if n_chunks > 1:
        tot = ro.sbuf((m, g, 2), F32, "row_sums_total")
        nisa.tensor_reduce(dst=tot, op=nl.add, data=sums, axis=3)
    # grad_x = (gw * rstd - rstd * s1 / D) - xhat * (rstd * s2 / D)
    a = ro.sbuf((m, g), F32, "coef_xhat")
    nisa.scalar_tensor_tensor(
        dst=a, data=tot[:, :, 0], op0=nl.multiply, operand0=1.0 / d, op1=nl.multiply, operand1=rs
    )
    ncm = None  # -rstd * s1 / D
    if centered:
        ncm = ro.sbuf((m, g), F32, "coef_mean")
        nisa.scalar_tensor_tensor(
            dst=ncm,
            data=tot[:, :, 1],
            op0=nl.multiply,
            operand0=-1.0 / d,
            op1=nl.multiply,
            operand1=rs,
        )
    for c, (c0, c1) in enumerate(plan.chunks):
        if n_chunks == 1:
            ld, xhat, gw = kept[c]
        else:
            ld = pf.next()
            xhat, gw = _xhat_gw(ld, vecs, rs, nmr, m, g, c0, c1)
        t = ro.sbuf(xhat.shape, F32, "gw_rstd")
        ro.act_rows(t, gw, nl.copy, bias=ncm, scale=rs)
        gx = ro.sbuf(xhat.shape, grad_x.dtype, "grad_x")
        ro.fma_col(gx, xhat, nl.multiply, a, nl.subtract, t, reverse1=True)
        space.store(tile, "gx", gx, c0, c1)


def _xhat_gw(ld, vecs, rs, nmr, m, g, c0, c1):
    """xhat = (x - mean) * rstd (ScalarE for G = 1) and gw = grad_out * weight of a chunk."""
    xt, gt = ld["x"], ld["g"]
    xhat = ro.sbuf(xt.shape, F32, "xhat")
    if g == 1:
        ro.act_rows(xhat, xt, nl.copy, bias=nmr, scale=rs)
    else:
        ro.apply_col(xhat, xt, nl.multiply, rs, None if nmr is None else nl.add, nmr)
    w = None if vecs is None else vecs.view("weight", ld, m, g, c0, c1)
    if w is None:
        return xhat, gt
    gw = ro.sbuf(xt.shape, F32, "gw")
    nisa.tensor_tensor(dst=gw, data1=gt, data2=w, op=nl.multiply)
    return xhat, gw


def _accumulate(acc: dict, gt, xhat, m: int, g: int, c0: int, c1: int) -> None:
    """grad_weight += grad_out * xhat, grad_bias += grad_out (per partition and slot; GpSimd
    adds, off the VectorE path)."""
    if "grad_weight" in acc:
        prod = ro.sbuf(xhat.shape, F32, "g_xhat")
        nisa.tensor_tensor(dst=prod, data1=gt, data2=xhat, op=nl.multiply, engine=POOL)
        dst = acc["grad_weight"][:m, :g, c0:c1]
        nisa.tensor_tensor(dst=dst, data1=dst, data2=prod, op=nl.add, engine=POOL)
    if "grad_bias" in acc:
        dst = acc["grad_bias"][:m, :g, c0:c1]
        nisa.tensor_tensor(dst=dst, data1=dst, data2=gt, op=nl.add, engine=POOL)


# ---------------------------------------------------------------- references
def layer_norm_ref(x, weight=None, bias=None, eps=1e-5):
    """(out, mean, rstd) of LayerNorm over the last axis, float64."""
    x64 = np.asarray(x, dtype=np.float64)
    mean = x64.mean(axis=-1)
    rstd = 1.0 / np.sqrt(x64.var(axis=-1) + eps)
    y = (x64 - mean[:, None]) * rstd[:, None]
    if weight is not None:
        y = y * np.asarray(weight, np.float64)
    if bias is not None:
        y = y + np.asarray(bias, np.float64)
    return y, mean, rstd


def rms_norm_ref(x, weight=None, eps=None):
    """(out, rstd) of RMSNorm over the last axis, float64 (eps None: finfo(float32).eps)."""
    eps = float(np.finfo(np.float32).eps) if eps is None else eps
    x64 = np.asarray(x, dtype=np.float64)
    rstd = 1.0 / np.sqrt((x64 * x64).mean(axis=-1) + eps)
    y = x64 * rstd[:, None]
    if weight is not None:
        y = y * np.asarray(weight, np.float64)
    return y, rstd


def norm_backward_ref(grad_out, x, mean, rstd, weight=None):
    """(grad_x, grad_weight, grad_bias) of LayerNorm (mean given) or RMSNorm (mean None),
    float64, from the saved statistics."""
    g = np.asarray(grad_out, np.float64)
    x64 = np.asarray(x, np.float64)
    rs = np.asarray(rstd, np.float64)[:, None]
    mu = 0.0 if mean is None else np.asarray(mean, np.float64)[:, None]
    xhat = (x64 - mu) * rs
    gw = g if weight is None else g * np.asarray(weight, np.float64)
    inner = gw - xhat * (gw * xhat).mean(axis=-1, keepdims=True)
    if mean is not None:
        inner = inner - gw.mean(axis=-1, keepdims=True)
    return rs * inner, (g * xhat).sum(axis=0), g.sum(axis=0)
