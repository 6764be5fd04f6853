"""Residual add and RMSNorm / LayerNorm in one launch: s = x + residual, out = norm(s), both
stored, for the torch.compile fusion pass (a pre-norm block's `h = norm(x + f(x))`); with
float64 references.

Layer: kernel library (trnsim.kernels); public NKI API only; follows docs/device-kernels.md.
Rows, statistics and normalization are those of kernels/layer_norm.py's forward (the same
kernels/_norm_rows.py steps); each chunk of x and residual is added as it arrives, the sum
stored (the residual stream goes on) and normalized from SBUF, so the sum is not read back
from HBM as eager's add then norm reads it. The norm reads the sum as rounded to sum_out's
dtype, as eager's norm reads the add's output.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._norm_rows import (
    Vectors,
    check_rows,
    check_vectors,
    const_col,
    norm_row_space,
    normalize_block,
    normalize_rows,
    row_stats_forward,
)
from ._rows import Prefetch, plan_rows
from .layer_norm import MAX_CHUNK_COLS, layer_norm_ref, rms_norm_ref

F32 = nl.float32


def add_rms_norm_forward(out, sum_out, rstd, x, residual, weight, *, eps: float | None = None):
    """sum_out = x + residual; out = sum_out * rsqrt(mean(sum_out^2) + eps) * weight.

    Dimensions:
        x, residual, sum_out, out: [R, D] views, any strides. rstd: R values (fp32) or None.
        weight: [D] or None. eps=None is finfo(float32).eps, as torch's rms_norm.
    """
    eps = float(np.finfo(np.float32).eps) if eps is None else eps
    _add_norm("add_rms_norm", out, sum_out, None, rstd, x, residual, weight, None, eps, False)


def add_layer_norm_forward(out, sum_out, mean, rstd, x, residual, weight, bias, *, eps: float):
    """sum_out = x + residual; out = (sum_out - mean) * rstd * weight + bias.

    Dimensions:
        as add_rms_norm_forward; mean: R values or None; bias: [D] or None.
    """
    _add_norm("add_layer_norm", out, sum_out, mean, rstd, x, residual, weight, bias, eps, True)


def _add_norm(what, out, sum_out, mean, rstd, x, residual, weight, bias, eps, centered) -> None:
    r, d = check_rows(what, x, out=out, residual=residual, sum_out=sum_out)
    vecs = Vectors(check_vectors(what, d, weight=weight, bias=bias), d)
    cols = {"x": x, "residual": residual, "sum": sum_out, "out": out}
    space = norm_row_space(what, r, x, cols, {"mean": mean, "rstd": rstd})
    col_bytes = sum(t.dtype.itemsize for t in cols.values()) + 8 + vecs.col_bytes
    plan = plan_rows(space, col_bytes, x.dtype.itemsize, what, vecs.fixed_bytes, MAX_CHUNK_COLS)
    eps_t = const_col(eps, "eps")
    passes = 1 if len(plan.chunks) == 1 else 2

    def load(req):
        t, p, (c0, c1) = req
        xt = space.fetch(t, "x", x.dtype, c0, c1)
        rt = space.fetch(t, "residual", residual.dtype, c0, c1)
        s = ro.sbuf(xt.shape, sum_out.dtype, "sum")
        # GpSimd: VectorE runs the statistics and the normalization of the previous chunk.
        nisa.tensor_tensor(dst=s, data1=xt, data2=rt, op=nl.add, engine=nisa.engine.gpsimd)
        if p == 0:
            space.store(t, "sum", s, c0, c1)
        got = {"x": s}
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
            nisa.tensor_scalar(dst=nmr, data=mu, op0=nl.multiply, operand0=rs,
                               op1=nl.multiply, operand1=-1.0)
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


def add_rms_norm_ref(x, residual, weight=None, eps=None):
    """(out, rstd, sum) in float64."""
    s = np.asarray(x, np.float64) + np.asarray(residual, np.float64)
    return (*rms_norm_ref(s, weight, eps), s)


def add_layer_norm_ref(x, residual, weight=None, bias=None, eps=1e-5):
    """(out, mean, rstd, sum) in float64."""
    s = np.asarray(x, np.float64) + np.asarray(residual, np.float64)
    return (*layer_norm_ref(s, weight, bias, eps), s)
