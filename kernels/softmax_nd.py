"""Softmax and log-softmax over any dim of a strided tensor, forward and backward (the
device kernels of aten._softmax, _log_softmax and their _backward_data), with references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._common import fail
from ._rows import Prefetch, RowSpace, col_operand, plan_rows

DTYPES = ("bfloat16", "float16", "float32")
MAX_CHUNK_COLS = 8192  # columns per chunk when a row is longer than one SBUF tile holds
F32 = nl.float32


def _row_space(what: str, dim: int, **views) -> tuple[RowSpace, int]:
    """The row space of same-shape views with axis `dim` as the columns."""
    first = next(iter(views.values()))
    shape = tuple(first.shape)
    for name, v in views.items():
        if tuple(v.shape) != shape:
            fail(f"{what}: {name} has shape {list(v.shape)}, expected {list(shape)}")
        if v.dtype not in DTYPES:
            fail(f"{what}: {name} dtype {v.dtype} is not one of {', '.join(DTYPES)}")
    if not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
        fail(f"{what}: dim={dim!r} is out of range for a {len(shape)}-d tensor")
    d = dim % len(shape)
    ops = {name: col_operand(v, d) for name, v in views.items()}
    rows = shape[:d] + shape[d + 1 :]
    return RowSpace(rows, shape[d], ops), d


def softmax_forward(out, x, *, dim: int, log: bool) -> None:
    """out = softmax(x, dim) (log_softmax with log=True), statistics in fp32.

    The softmax axis goes to the free axis through a strided view (rows on partitions, G
    rows per partition when rows are short). Per tile: VectorE takes the negated row maxima;
    ScalarE computes exp(x - max) with the row sums in its accumulator; softmax scales by the
    reciprocal sums, log_softmax adds -max - log(sum). Rows longer than one SBUF chunk take
    two passes: per chunk max and sum (rescaled to the row maximum when combined), then
    exp(x - lse) (or x - lse) per chunk.

    Dimensions:
        x, out: any shape (same), any strides; `dim` any axis (negative allowed).

    Args:
        out: result, bfloat16/float16/float32 (may differ from x: half_to_float).
        x: input, bfloat16/float16/float32.
        dim: the softmax axis.
        log: log_softmax instead of softmax.
    """
    what = "log_softmax" if log else "softmax"
    space, _ = _row_space(what, dim, x=x, out=out)
    col_bytes = x.dtype.itemsize + out.dtype.itemsize + 8  # x, out, two fp32 scratch rows
    plan = plan_rows(space, col_bytes, x.dtype.itemsize, what, max_chunk=MAX_CHUNK_COLS)
    tiles = space.tiles(plan.g)
    if len(plan.chunks) == 1:
        pf = Prefetch(tiles, lambda t: space.fetch(t, "x", x.dtype))
        for tile in tiles:
            y = _forward_tile(pf.next(), out.dtype, log)
            space.store(tile, "out", y)
        return
    reqs = [(t, c) for t in tiles for _ in range(2) for c in plan.chunks]
    pf = Prefetch(reqs, lambda r: space.fetch(r[0], "x", x.dtype, *r[1]))
    for tile in tiles:
        nb = _chunked_lse(pf, tile.parts, len(plan.chunks))
        for c0, c1 in plan.chunks:
            xt = pf.next()
            y = ro.sbuf(xt.shape, out.dtype, "y")
            ro.act_rows(y, xt, nl.copy if log else nl.exp, bias=nb)
            space.store(tile, "out", y, c0, c1)


def _forward_tile(xt, out_dtype, log: bool):
    """softmax / log_softmax of one row tile held whole in SBUF."""
    m, g, _ = xt.shape
    neg_max = ro.sbuf((m, g), F32, "neg_max")
    ro.row_reduce(neg_max, xt, nl.maximum, negate=True)
    ex = ro.sbuf(xt.shape, F32, "exp")
    sums = ro.sbuf((m, g), F32, "sums")
    ro.act_rows(ex, xt, nl.exp, bias=neg_max, sums=sums)
    y = ro.sbuf(xt.shape, out_dtype, "y")
    if log:
        nb = ro.sbuf((m, g), F32, "neg_lse")
        nisa.activation(dst=nb, op=nl.log, data=sums)
        _sub(nb, neg_max, nb)
        ro.apply_col(y, xt, nl.add, nb)
    else:
        inv = ro.sbuf((m, g), F32, "inv_sums")
        nisa.reciprocal(dst=inv, data=sums)
        ro.apply_col(y, ex, nl.multiply, inv)
    return y


def _sub(dst, a, b) -> None:
    nisa.tensor_tensor(dst=dst, data1=a, data2=b, op=nl.subtract)


def _chunked_lse(pf: Prefetch, m: int, n_chunks: int):
    """Pass 1 over the chunks of one row tile (G = 1): -(max + log(sum exp(x - max)))."""
    neg_maxes = ro.sbuf((m, 1, n_chunks), F32, "chunk_neg_max")
    sums = ro.sbuf((m, 1, n_chunks), F32, "chunk_sums")
    for c in range(n_chunks):
        ro.lse_chunk(neg_maxes[:, :, c], sums[:, :, c], pf.next())
    return ro.neg_lse(neg_maxes, sums)


def softmax_backward(grad_in, grad_out, out, *, dim: int, log: bool) -> None:
    """grad_in of softmax / log_softmax from grad_out and the forward result `out`.

    softmax: grad_in = out * (grad_out - sum(grad_out * out)); log_softmax:
    grad_in = grad_out - exp(out) * sum(grad_out). Sums over `dim` in fp32; rows longer than
    one SBUF chunk take two passes (the sums, then the result).

    Dimensions:
        grad_in, grad_out, out: the same shape, any strides; `dim` any axis.

    Args:
        grad_in: result, bfloat16/float16/float32 (may be grad_out itself: in place).
        grad_out: incoming gradient.
        out: the forward output (softmax probabilities or log-probabilities).
        dim: the softmax axis.
        log: the forward was log_softmax.
    """
    what = "log_softmax_backward" if log else "softmax_backward"
    space, _ = _row_space(what, dim, grad_in=grad_in, grad_out=grad_out, out=out)
    col_bytes = grad_out.dtype.itemsize + out.dtype.itemsize + grad_in.dtype.itemsize + 8
    plan = plan_rows(space, col_bytes, grad_out.dtype.itemsize, what, max_chunk=MAX_CHUNK_COLS)
    tiles = space.tiles(plan.g)
    n_chunks = len(plan.chunks)
    passes = 1 if n_chunks == 1 else 2

    def load(r):
        t, p, (c0, c1) = r
        gt = space.fetch(t, "grad_out", grad_out.dtype, c0, c1)
        # log_softmax's first pass of a chunked row needs grad_out only
        yt = None if log and p == 0 and passes == 2 else space.fetch(t, "out", out.dtype, c0, c1)
        return gt, yt

    reqs = [(t, p, c) for t in tiles for p in range(passes) for c in plan.chunks]
    pf = Prefetch(reqs, load)
    for tile in tiles:
        m, g = tile.parts, tile.g
        part = ro.sbuf((m, g, n_chunks), F32, "part_sums")
        kept = []
        for c in range(n_chunks):
            gt, yt = pf.next()
            src = gt
            if not log:
                src = ro.sbuf(gt.shape, F32, "g_times_y")
                nisa.tensor_tensor(dst=src, data1=gt, data2=yt, op=nl.multiply)
            ro.row_sum(part[:, :, c], src)
            kept.append((gt, yt))
        s = part[:, :, 0] if n_chunks == 1 else ro.sbuf((m, g), F32, "sums")
        if n_chunks > 1:
            ro.row_reduce(s, part, nl.add)
        for c, (c0, c1) in enumerate(plan.chunks):
            gt, yt = kept[c] if n_chunks == 1 else pf.next()
            gi = ro.sbuf(gt.shape, grad_in.dtype, "grad_in")
            if log:
                e = ro.sbuf(gt.shape, F32, "exp_out")
                ro.act_rows(e, yt, nl.exp)
                ro.fma_col(gi, e, nl.multiply, s, nl.subtract, gt, reverse1=True)
            else:
                ro.fma_col(gi, gt, nl.subtract, s, nl.multiply, yt)
            space.store(tile, "grad_in", gi, c0, c1)


# ---------------------------------------------------------------- references
def softmax_forward_ref(x: np.ndarray, dim: int, log: bool) -> np.ndarray:
    """softmax / log_softmax in float64."""
    x64 = np.asarray(x, dtype=np.float64)
    sh = x64 - x64.max(axis=dim, keepdims=True)
    lse = np.log(np.exp(sh).sum(axis=dim, keepdims=True))
    return sh - lse if log else np.exp(sh - lse)


def softmax_backward_ref(grad_out: np.ndarray, out: np.ndarray, dim: int, log: bool) -> np.ndarray:
    """grad_in of softmax / log_softmax in float64 (torch's _backward_data formulas)."""
    g = np.asarray(grad_out, dtype=np.float64)
    y = np.asarray(out, dtype=np.float64)
    if log:
        return g - np.exp(y) * g.sum(axis=dim, keepdims=True)
    return y * (g - (g * y).sum(axis=dim, keepdims=True))
