"""scatter along one axis with one index per element (the device kernels of aten.scatter.src,
scatter.value, scatter.reduce and scatter_add), with its reference.

Layer: kernel library (trnsim.kernels); public NKI API only. `dim` goes on partitions (128
index entries per DMA), one DMA per position of the other axes: an HBM->HBM scatter
(reduce=None; with duplicate indices the last write wins, torch leaves it undefined), a DMA
read-modify-write in fp32 (reduce="add": duplicates accumulate one after the other), or for
reduce="multiply" a one-hot product: each index entry's factor spread over a [entries,
positions] tile, moved onto one partition by an SBUF->SBUF DMA and multiplied along the free
axis (exact per factor, in fp32). The DMA bound checks each index against the axis. Many
positions with few entries each (one_hot) go the other way round: positions on partitions,
element offsets, indices checked by nc_n_gather.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._args import Tensor, axis
from ._boxes import Group
from ._common import fail
from ._gather import GPSIMD, check_index_shape, cols, flat_rows, row_bases
from ._index_rows import bounds, index_tensor
from ._int64 import split_int64
from ._rows import P_MAX, Operand, RowSpace

CHECK_ELEMS = 16384  # longest out axis whose indices nc_n_gather checks (bytes per partition)
ONEHOT_COLS = 64  # output positions per one-hot block of scatter(reduce="multiply")


def scatter(out, index, src, *, dim: int, reduce: str | None = None, int64=()) -> None:
    """out.scatter_(dim, index, src[, reduce]): out[i][index[i][j][k]][k] = src[i][j][k]
    (dim=1), or += / *= with reduce="add" / "multiply". out holds self's values already.

    Dimensions:
        index.shape[d] <= src.shape[d] for all d, <= out.shape[d] for d != dim.

    Notes:
        Duplicate indices: reduce=None keeps one write (the last); "add" and "multiply"
        apply every entry (DMA read-modify-write in fp32, or a one-hot product).
    """
    what = "scatter" if reduce is None else f"scatter(reduce={reduce!r})"
    ot, st = Tensor(what, "out", out, int64), Tensor(what, "src", src, int64)
    if st.pair != ot.pair or (not st.pair and st.dtype != ot.dtype):
        fail(f"{what}: src is {st.dtype} but out is {ot.dtype}; they must match")
    _scatter(what, ot, index, st, None, dim, reduce, int64)


def scatter_value(
    out, index, *, value: float, dim: int, reduce: str | None = None, int64=()
) -> None:
    """out.scatter_(dim, index, value[, reduce]): every addressed element set to `value` (or
    value added / multiplied in)."""
    what = "scatter_value" if reduce is None else f"scatter_value(reduce={reduce!r})"
    _scatter(what, Tensor(what, "out", out, int64), index, None, value, dim, reduce, int64)


def _scatter(what, ot: Tensor, index, st: Tensor | None, value, dim, reduce, int64) -> None:
    if reduce not in (None, "add", "multiply"):
        fail(f"{what}: reduce must be None, 'add' or 'multiply'")
    if reduce is not None and ot.pair:
        fail(f"{what}: int64 out with reduce; the arithmetic is fp32 (int32 and floats only)")
    it = index_tensor(what, "index", index, int64)
    d = axis(what, "dim", dim, len(ot.shape))
    check_index_shape(what, it, ot, "out", d, strict_dim=False)
    if st is not None:
        check_index_shape(what, it, st, "src", d, strict_dim=True)
    kept = [k for k in range(len(it.shape)) if k != d]
    n_pos = int(np.prod([it.shape[k] for k in kept], dtype=np.int64))
    n, nout = it.shape[d], ot.shape[d]
    if (
        reduce != "multiply"
        and nout <= CHECK_ELEMS
        and -(-n_pos // P_MAX) * n < n_pos * -(-n // P_MAX)
    ):
        _scatter_rows(what, ot, it, st, value, d, kept, reduce)
        return
    views = [it.view, ot.view] + ([st.view] if st is not None else [])
    positions = Group(
        tuple(it.shape[k] for k in kept), [tuple(int(v.strides[k]) for k in kept) for v in views]
    ).boxes(1)
    const = None
    if st is None:
        const = _constant(value, ot)
    for j0 in range(0, n, P_MAX):
        nj = min(P_MAX, n - j0)
        for pos in positions:
            idx = ro.sbuf((nj, 1), nl.int32, "index")
            nisa.dma_copy(
                dst=idx,
                src=it.view.ap(
                    [[int(it.view.strides[d]), nj]],
                    offset=it.view.offset + pos.offsets[0] + j0 * int(it.view.strides[d]),
                ),
            )
            line = _line(ot, d, nout, pos.offsets[1])
            vals = (
                None
                if st is None
                else _line(st, d, nj, pos.offsets[2] + j0 * int(st.view.strides[d]))
            )
            dst = line.vector_select(0, idx)
            if reduce == "multiply":
                _multiply(what, ot, d, nout, pos.offsets[1], idx, vals, const, nj)
                continue
            if reduce is None:
                with bounds(what, d, nout):
                    nisa.dma_copy(dst=dst, src=vals if vals is not None else const[:nj])
                continue
            v = const[:nj] if vals is None else ro.sbuf((nj, 1), nl.float32, "src")
            if vals is not None:
                nisa.dma_copy(dst=v, src=vals)
            with bounds(what, d, nout):
                nisa.dma_compute(dst=dst, srcs=[dst, v], reduce_op=nl.add, unique_indices=False)


def _scatter_rows(what, ot, it, st, value, d, kept, reduce) -> None:
    """Many positions with few index entries each: the positions are rows on partitions, each
    index column one DMA of 128 elements addressed by element offset (row base + index *
    stride, exact int32 on GpSimd). nc_n_gather against a row of out's length checks the
    indices first (the DMA's own bound is the whole tensor)."""
    n, nout = it.shape[d], ot.shape[d]
    ops = {
        "i": Operand(it.view, tuple(it.view.strides[k] for k in kept), None),
        "o": Operand(ot.view, tuple(ot.view.strides[k] for k in kept), None),
    }
    if st is not None:
        ops["s"] = Operand(st.view, tuple(st.view.strides[k] for k in kept), None)
    space = RowSpace(tuple(it.shape[k] for k in kept), n, ops)
    flat = flat_rows(ot)
    w = 2 if ot.pair else 1
    stride = ro.sbuf((P_MAX, 1), nl.int32, "stride")
    nisa.memset(dst=stride, value=int(ot.view.strides[d]))
    check = ro.sbuf((P_MAX, nout), nl.uint8, "bounds")
    nisa.memset(dst=check, value=0)
    const = _constant(value, ot) if st is None else None
    for tile in space.tiles(1):
        p = tile.parts
        idx = ro.sbuf((p, n), nl.int32, "index")
        vals = None
        if st is not None:
            vals = ro.sbuf((p, n, w), nl.float32 if reduce else st.full.dtype, "src")
        for blk in tile.blocks:
            sl = slice(blk.p0, blk.p0 + blk.parts)
            nisa.dma_copy(
                dst=idx[sl],
                src=it.full.ap(
                    blk.patterns["i"] + [[int(it.view.strides[d]), n]], offset=blk.offsets["i"]
                ),
            )
            if vals is not None:
                nisa.dma_copy(
                    dst=vals[sl],
                    src=st.full.ap(blk.patterns["s"] + cols(st, d, n), offset=blk.offsets["s"]),
                )
        junk = ro.sbuf((p, n), nl.uint8, "checked")
        with bounds(what, d, nout):
            nisa.nc_n_gather(dst=junk, data=check[:p], indices=idx.view(nl.uint32))
        base = row_bases(tile, "o", p)
        off = ro.sbuf((p, 1), nl.int32, "offset")
        for j in range(n):
            nisa.tensor_tensor(
                dst=off, data1=idx[:, j : j + 1], data2=stride[:p], op=nl.multiply, engine=GPSIMD
            )
            nisa.tensor_tensor(dst=off, data1=off, data2=base, op=nl.add, engine=GPSIMD)
            dst = flat.vector_select(0, off)
            src = vals[:, j, :] if vals is not None else const[:p]
            if reduce is None:
                nisa.dma_copy(dst=dst, src=src)
            else:
                nisa.dma_compute(dst=dst, srcs=[dst, src], reduce_op=nl.add, unique_indices=False)


def _line(t: Tensor, d: int, n: int, offset: int):
    """Axis d of t from element offset `offset`: [n] (or [n, 2] words of an int64 tensor)."""
    f = t.full
    return f.ap(
        [[int(t.view.strides[d]), n]] + ([[1, 2]] if t.pair else []), offset=f.offset + offset
    )


def _constant(value, ot: Tensor):
    c = ro.sbuf(
        (P_MAX, 2) if ot.pair else (P_MAX, 1), nl.float32 if not ot.pair else nl.int32, "value"
    )
    if ot.pair:
        lo, hi = split_int64(value, "scatter_value: value")
        nisa.memset(dst=c[:, 0:1], value=lo)
        nisa.memset(dst=c[:, 1:2], value=hi)
    else:
        nisa.memset(dst=c, value=float(value))
    return c


def _multiply(what, ot, d, nout, offset, idx, vals, const, nj) -> None:
    """line[idx[e]] *= factor[e] for the nj entries: per block of output positions, a one-hot
    [entries, positions] tile of factors (1 where the entry does not address the position),
    moved onto one partition and multiplied along the entries."""
    probe = ro.sbuf((nj, 1), ot.view.dtype, "probe")
    line = _line(ot, d, nout, offset)
    with bounds(what, d, nout):
        nisa.dma_copy(dst=probe, src=line.vector_select(0, idx))
    f = ro.sbuf((nj, 1), nl.float32, "factor")
    nisa.dma_copy(dst=f, src=vals if vals is not None else const[:nj])
    idx_f = ro.sbuf((nj, 1), nl.float32, "index_f")
    nisa.tensor_copy(dst=idx_f, src=idx)
    for c0 in range(0, nout, ONEHOT_COLS):
        nc = min(ONEHOT_COLS, nout - c0)
        hit = ro.sbuf((nj, nc), nl.uint8, "hit")
        cols = ro.sbuf((nj, nc), nl.float32, "columns")
        nisa.iota(cols, [[1, nc]], offset=c0)
        nisa.tensor_scalar(dst=hit, data=cols, op0=nl.equal, operand0=idx_f)
        fac = ro.sbuf((nj, nc), nl.float32, "factors")
        nisa.memset(dst=fac, value=1.0)
        nisa.tensor_copy_predicated(dst=fac, src=f.broadcast(1, nc), predicate=hit)
        one = ro.sbuf((1, nj * nc), nl.float32, "one_partition")
        nisa.dma_copy(dst=one, src=fac)
        prod = ro.sbuf((1, nc), nl.float32, "product")
        nisa.tensor_reduce(
            dst=prod, op=nl.multiply, data=one.reshape((1, nj, nc)).permute((0, 2, 1)), axis=2
        )
        cur = ro.sbuf((1, nc), ot.view.dtype, "current")
        seg = _line(ot, d, nc, offset + c0 * int(ot.view.strides[d]))
        nisa.dma_copy(dst=cur, src=seg)
        nisa.tensor_tensor(dst=cur, data1=cur, data2=prod, op=nl.multiply)
        nisa.dma_copy(dst=seg, src=cur)


def scatter_ref(out: np.ndarray, dim: int, index: np.ndarray, src, reduce=None) -> np.ndarray:
    """Sequential scatter in index order (float64 arithmetic for add / multiply)."""
    res = np.array(out, dtype=np.float64 if reduce else np.asarray(out).dtype)
    idx = np.asarray(index, dtype=np.int64)
    dim %= res.ndim
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[dim] = idx[pos]
        v = src[pos] if isinstance(src, np.ndarray) else src
        tgt = tuple(tgt)
        if reduce is None:
            res[tgt] = v
        elif reduce == "add":
            res[tgt] += v
        else:
            res[tgt] *= v
    return res
