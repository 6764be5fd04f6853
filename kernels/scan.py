"""Cumulative sums and products along one axis of a strided tensor (the device kernels of
aten.cumsum and aten.cumprod), with float64 references.

Layer: kernel library (trnsim.kernels); written against the public NKI API only.

The scanned axis is the free axis, the other axes rows on partitions (`_rows.RowSpace`, G rows
per partition when rows are short, column chunks when they are long). A chunk of one row per
partition is one VectorE tensor_tensor_scan (fp32), continued from the previous chunk's last
value; G rows per partition scan together by log-step doubling (Hillis-Steele: ceil(log2 n)
shifted adds or multiplies, each row on its own), which is also how integers scan exactly
on GpSimd: an int64 cumsum as 16-bit split words (exact while the sum of |x| is below 2^47,
`_intops`), int32 results and products wrapping modulo 2^32.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _intops as io
from . import _rowops as ro
from ._args import Tensor, axis
from ._boxes import hbm
from ._common import fail
from ._int64 import store_int32_as_pairs
from ._rows import Prefetch, RowSpace, col_operand, plan_rows

F32 = nl.float32
MAX_CHUNK = 4096  # columns per chunk of a long row


def cumsum(out, x, *, dim: int, int64=()) -> None:
    """out = torch.cumsum(x, dim).

    Dimensions:
        x, out: one shape, any strides; dim: negative allowed.

    Args:
        out: float (x float: accumulated in fp32, each result cast once), or int32 / int64
            (a pair view named in int64=) for integer and bool x (exact on GpSimd: int64
            while the sum of |x| is below 2^47, int32 modulo 2^32).
        x: float32/bfloat16/float16/int32/int16/int8/uint8/bool, or int64 (pair, low words).
    """
    _scan("cumsum", out, x, dim, int64, nl.add)


def cumprod(out, x, *, dim: int, int64=()) -> None:
    """out = torch.cumprod(x, dim). Dtypes as `cumsum` (integer products wrap modulo 2^32)."""
    _scan("cumprod", out, x, dim, int64, nl.multiply)


def _scan(what: str, out, x, dim, int64, op) -> None:
    xt, ot = Tensor(what, "x", x, int64), Tensor(what, "out", out, int64)
    if xt.shape != ot.shape:
        fail(f"{what}: out has shape {list(ot.shape)}, x {list(xt.shape)}; they must match")
    d = axis(what, "dim", dim, len(xt.shape))
    exact = not xt.is_float
    if exact and ot.is_float:
        exact = False  # an integer scan into a float output accumulates in fp32
    if not exact and not ot.is_float:
        fail(f"{what}: float x into {ot.dtype} out; a float scan writes a float tensor")
    n = xt.shape[d]
    rows = tuple(s for k, s in enumerate(xt.shape) if k != d)
    space = RowSpace(rows, n, {"x": col_operand(xt.view, d), "out": col_operand(ot.view, d)})
    plan = plan_rows(space, 16 + (8 if ot.pair else 0), 4, what, max_chunk=MAX_CHUNK)
    load_dt = nl.int32 if exact else xt.view.dtype
    reqs = [(t, c) for t in space.tiles(plan.g) for c in plan.chunks]
    fetch = Prefetch(reqs, lambda r: space.fetch(r[0], "x", load_dt, *r[1]))
    wide = exact and ot.pair and op is nl.add  # an int64 cumsum: 16-bit split words
    carry = None
    for tile, (c0, c1) in reqs:
        xs = fetch.next()
        if wide:
            res, carry = _wide_chunk(xs, carry if c0 > 0 else None, c1 < n)
        else:
            acc = _chunk(xs, op, exact, tile.g, carry if c0 > 0 else None)
            if c1 < n:  # the next chunk continues from this chunk's last value
                carry = ro.sbuf((tile.parts, tile.g), acc.dtype, "carry")
                (io.copy if exact else nisa.tensor_copy)(dst=carry, src=acc[:, :, c1 - c0 - 1])
            res = _result(acc, ot, exact)
        if not ot.pair:
            space.store(tile, "out", res, c0, c1)
            continue
        step = int(ot.view.strides[d])
        for blk in tile.blocks:  # an int64 result: both words of each element
            nisa.dma_copy(
                dst=hbm(
                    ot.full,
                    blk.patterns["out"] + [[step, c1 - c0], [1, 2]],
                    blk.offsets["out"] + c0 * step,
                ),
                src=res[blk.p0 : blk.p0 + blk.parts],
            )


def _chunk(xs, op, exact: bool, g: int, carry):
    """The scan of one chunk [p, g, n], continued from carry [p, g] (or None)."""
    acc = ro.sbuf(xs.shape, nl.int32 if exact else F32, "scan")
    if exact or g > 1:
        _doubling(acc, xs, op, exact)
        if carry is not None:
            _apply_carry(acc, carry, op, exact)
    else:
        _native(acc, xs, op, carry)
    return acc


def _wide_chunk(xs, carry, more: bool):
    """An int32 chunk's cumulative sums as int64 words: the low 16 bits and the rest of each
    value scan separately (exact: `_intops` 64-bit sums), then carry into the high part.
    Returns (words [p, g, n, 2], the (lo, hi) carry for the next chunk or None)."""
    lo, hi = ro.sbuf(xs.shape, nl.int32, "lo16"), ro.sbuf(xs.shape, nl.int32, "hi16")
    io.split16(lo, hi, xs)
    parts = []
    for k, t in enumerate((lo, hi)):
        acc = ro.sbuf(xs.shape, nl.int32, "scan")
        _doubling(acc, t, nl.add, True)
        if carry is not None:
            _apply_carry(acc, carry[k], nl.add, True)
        parts.append(acc)
    io.carry16(*parts)
    nxt = None
    if more:
        nxt = []
        for acc in parts:
            c = ro.sbuf(acc.shape[:2], nl.int32, "carry")
            io.copy(c, acc[:, :, acc.shape[2] - 1])
            nxt.append(c)
    words = ro.sbuf((*xs.shape, 2), nl.int32, "scan_i64")
    io.words16(words, *parts)
    return words, nxt


def _native(acc, xs, op, carry) -> None:
    """One row per partition: r[i] = r[i-1] (+ or *) x[i], from carry (or the identity)."""
    flat = acc[:, 0, :]
    data = xs[:, 0, :]
    init = carry[:, 0:1] if carry is not None else (0.0 if op is nl.add else 1.0)
    other = ro.sbuf(flat.shape, F32, "scan_other")
    if op is nl.add:  # r = (1 * r) + x
        nisa.memset(dst=other, value=1.0)
        nisa.tensor_tensor_scan(
            dst=flat, data0=other, data1=data, initial=init, op0=nl.multiply, op1=nl.add
        )
    else:  # r = (x * r) + 0
        nisa.memset(dst=other, value=0.0)
        nisa.tensor_tensor_scan(
            dst=flat, data0=data, data1=other, initial=init, op0=nl.multiply, op1=nl.add
        )


def _doubling(acc, xs, op, exact: bool) -> None:
    """acc [p, g, n] = inclusive scan of xs along the last axis, each row alone: after the step
    with shift s every element holds the combination of the 2s elements ending at it."""
    p, g, n = xs.shape
    eng = {"engine": io.GPSIMD} if exact else {}
    cur = acc
    (io.copy if exact else nisa.tensor_copy)(dst=cur, src=xs)
    s = 1
    while s < n:
        nxt = ro.sbuf((p, g, n), acc.dtype, "scan_step")
        (io.copy if exact else nisa.tensor_copy)(dst=nxt[:, :, :s], src=cur[:, :, :s])
        nisa.tensor_tensor(
            dst=nxt[:, :, s:], data1=cur[:, :, s:], data2=cur[:, :, : n - s], op=op, **eng
        )
        cur = nxt
        s *= 2
    if cur is not acc:
        (io.copy if exact else nisa.tensor_copy)(dst=acc, src=cur)


def _apply_carry(acc, carry, op, exact: bool) -> None:
    n = acc.shape[2]
    eng = {"engine": io.GPSIMD} if exact else {}
    nisa.tensor_tensor(dst=acc, data1=acc, data2=ro.bcast(carry, n), op=op, **eng)


def _result(acc, ot: Tensor, exact: bool):
    if ot.pair:
        w = ro.sbuf((*acc.shape, 2), nl.int32, "scan_i64")
        store_int32_as_pairs(acc, w, io.GPSIMD)
        return w
    if acc.dtype == ot.view.dtype:
        return acc
    r = ro.sbuf(acc.shape, ot.view.dtype, "scan_out")
    (io.copy if exact else nisa.tensor_copy)(dst=r, src=acc)
    return r


def _ref_values(x: np.ndarray) -> np.ndarray:
    a = np.asarray(x)
    return a.astype(np.int64) if a.dtype.kind in "biu" else a.astype(np.float64)


def cumsum_ref(x: np.ndarray, dim: int) -> np.ndarray:
    """float64 (int64 for integer x) cumulative sum."""
    return np.cumsum(_ref_values(x), axis=dim)


def cumprod_ref(x: np.ndarray, dim: int) -> np.ndarray:
    """float64 (int64 for integer x) cumulative product."""
    return np.cumprod(_ref_values(x), axis=dim)
