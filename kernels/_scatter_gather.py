"""gather and scatter along one axis with one index per element (the device kernels of
aten.gather, scatter.src / scatter.value / scatter.reduce, scatter_add), with references.

Layer: kernel library (trnsim.kernels); public NKI API only.

* gather: the index tensor's other axes are rows on partitions (`_rows.RowSpace`, G rows per
  partition), x's whole `dim` axis in SBUF; GpSimd nc_n_gather picks each row's elements, and
  its bounds check (an index outside the row's elements is an error) checks the indices. An
  axis longer than one SBUF tile holds is gathered by indirect DMA instead (one bounded probe
  DMA and one element-offset gather per index column).
* scatter: `dim` on partitions (128 index entries per DMA), one DMA per position of the other
  axes: an HBM->HBM scatter (reduce=None; with duplicate indices the last write wins, torch
  leaves it undefined), a DMA read-modify-write in fp32 (reduce="add": duplicates accumulate
  one after the other), or for reduce="multiply" a one-hot product: each index entry's factor
  spread over a [entries, positions] tile, moved onto one partition by an SBUF->SBUF DMA and
  multiplied along the free axis (exact per factor, in fp32). The DMA bound checks each index
  against the axis.
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._args import Tensor, axis
from ._boxes import Group
from ._common import fail
from ._index_rows import bounds, index_tensor
from ._int64 import split_int64
from ._rows import P_MAX, Operand, RowSpace

GATHER_ROW_ELEMS = 8192  # longest `dim` axis (elements, words for int64) gathered on chip
GATHER_TILE_ELEMS = 16384  # elements per partition of the x tile (G rows)
CHECK_ELEMS = 16384  # longest out axis whose indices nc_n_gather checks (bytes per partition)
ONEHOT_COLS = 64  # output positions per one-hot block of scatter(reduce="multiply")
GPSIMD = nisa.engine.gpsimd


def _check_index_shape(
    what, index: Tensor, other: Tensor, name: str, dim: int, strict_dim: bool
) -> None:
    if len(index.shape) != len(other.shape):
        fail(f"{what}: index has {len(index.shape)} dims but {name} has {len(other.shape)}")
    for k, (a, b) in enumerate(zip(index.shape, other.shape, strict=True)):
        if (k != dim or strict_dim) and a > b:
            fail(
                f"{what}: index shape {list(index.shape)} exceeds {name} shape "
                f"{list(other.shape)} at dim {k}"
            )


# ---------------------------------------------------------------- gather
def gather(out, x, index, *, dim: int, int64=()) -> None:
    """out = torch.gather(x, dim, index): out[i][j][k] = x[i][index[i][j][k]][k] (dim=1).

    Dimensions:
        index, out: one shape; index.shape[d] <= x.shape[d] for d != dim.

    Args:
        out, x: same dtype (int64 pairs included); index: int32 or int64 (named in int64=).
        dim: negative allowed. Negative indices are an error, as in torch.
    """
    what = "gather"
    xt, ot = Tensor(what, "x", x, int64), Tensor(what, "out", out, int64)
    it = index_tensor(what, "index", index, int64)
    d = axis(what, "dim", dim, len(xt.shape))
    _check_index_shape(what, it, xt, "x", d, strict_dim=False)
    if it.shape != ot.shape:
        fail(f"{what}: out has shape {list(ot.shape)}; it must be index's {list(it.shape)}")
    if xt.pair != ot.pair or (not xt.pair and xt.dtype != ot.dtype):
        fail(f"{what}: x is {xt.dtype} but out is {ot.dtype}; they must match")
    rows = [k for k in range(len(it.shape)) if k != d]
    row_shape = tuple(it.shape[k] for k in rows)
    ops = {
        n: Operand(t.view, tuple(t.view.strides[k] for k in rows), None)
        for n, t in (("x", xt), ("i", it), ("o", ot))
    }
    space = RowSpace(row_shape, it.shape[d], ops)
    w = 2 if xt.pair else 1
    if xt.shape[d] * w <= GATHER_ROW_ELEMS:
        _gather_on_chip(what, space, xt, it, ot, d, w)
    else:
        _gather_dma(what, space, xt, it, ot, d, w)


def _cols(t: Tensor, d: int, n: int) -> list[list[int]]:
    """[step, count] of axis d (n elements), then the word pair of an int64 tensor."""
    return [[int(t.view.strides[d]), n]] + ([[1, 2]] if t.pair else [])


def _gather_on_chip(what, space, xt, it, ot, d, w) -> None:
    nx, ni = xt.shape[d] * w, it.shape[d]
    g = max(1, min(GATHER_TILE_ELEMS // (nx + 3 * ni * w), -(-space.n_rows // P_MAX)))
    for tile in space.tiles(g):
        p, gg = tile.parts, tile.g
        xs = ro.sbuf((p, gg, nx), xt.full.dtype, "x_rows")
        idx = ro.sbuf((p, gg, ni), nl.int32, "index")
        for blk in tile.blocks:
            sl = slice(blk.p0, blk.p0 + blk.parts)
            nisa.dma_copy(
                dst=xs[sl],
                src=xt.full.ap(
                    blk.patterns["x"] + _cols(xt, d, xt.shape[d]), offset=blk.offsets["x"]
                ),
            )
            nisa.dma_copy(
                dst=idx[sl],
                src=it.full.ap(
                    blk.patterns["i"] + [[int(it.view.strides[d]), ni]], offset=blk.offsets["i"]
                ),
            )
        flat_x = xs.reshape((p, gg * nx))
        if gg > 1 or w > 1:
            # check every index against the axis first (nc_n_gather's bounds are the data's
            # elements per partition: here the first row's first x.shape[d] elements) ...
            probe = ro.sbuf((p, gg * ni), xt.full.dtype, "probe")
            with bounds(what, d, xt.shape[d]):
                nisa.nc_n_gather(
                    dst=probe,
                    data=xs[:, 0, : xt.shape[d]],
                    indices=idx.reshape((p, gg * ni)).view(nl.uint32),
                )
            # ... then gather from the whole tile: index * words + word + row * row length
            pos = ro.sbuf((p, gg, ni, w), nl.int32, "positions")
            nisa.iota(pos, [[nx, gg], [0, ni], [1, w]], offset=0)
            nisa.scalar_tensor_tensor(
                dst=pos,
                data=idx.expand_dim(3).broadcast(3, w),
                op0=nl.multiply,
                operand0=float(w),
                op1=nl.add,
                operand1=pos,
            )
            sel = pos.reshape((p, gg * ni * w)).view(nl.uint32)
        else:
            sel = idx.reshape((p, gg * ni)).view(nl.uint32)
        res = ro.sbuf((p, gg, ni * w), xt.full.dtype, "gathered")
        with bounds(what, d, xt.shape[d]):
            nisa.nc_n_gather(dst=res.reshape((p, gg * ni * w)), data=flat_x, indices=sel)
        for blk in tile.blocks:
            nisa.dma_copy(
                dst=ot.full.ap(blk.patterns["o"] + _cols(ot, d, ni), offset=blk.offsets["o"]),
                src=res[blk.p0 : blk.p0 + blk.parts],
            )


def _gather_dma(what, space, xt, it, ot, d, w) -> None:
    """Rows too long for SBUF: per index column, element offsets (row base + index * stride,
    exact int32 on GpSimd) and one indirect DMA gather; a bounded probe DMA checks the index."""
    ni = it.shape[d]
    xf = xt.full
    flat = _flat(xt)
    probe_src = xf.ap([[int(xt.view.strides[d]), xt.shape[d]]], offset=xf.offset)
    stride = ro.sbuf((P_MAX, 1), nl.int32, "stride")
    nisa.memset(dst=stride, value=int(xt.view.strides[d]))
    for tile in space.tiles(1):
        p = tile.parts
        base = _row_bases(tile, "x", p)
        idx = ro.sbuf((p, ni), nl.int32, "index")
        for blk in tile.blocks:
            nisa.dma_copy(
                dst=idx[blk.p0 : blk.p0 + blk.parts],
                src=it.full.ap(
                    blk.patterns["i"] + [[int(it.view.strides[d]), ni]], offset=blk.offsets["i"]
                ),
            )
        res = ro.sbuf((p, ni, w), xf.dtype, "gathered")
        off = ro.sbuf((p, 1), nl.int32, "offset")
        probe = ro.sbuf((p, 1), xf.dtype, "probe")
        for j in range(ni):
            with bounds(what, d, xt.shape[d]):
                nisa.dma_copy(dst=probe, src=probe_src.vector_select(0, idx[:, j : j + 1]))
            nisa.tensor_tensor(
                dst=off, data1=idx[:, j : j + 1], data2=stride[:p], op=nl.multiply, engine=GPSIMD
            )
            nisa.tensor_tensor(dst=off, data1=off, data2=base, op=nl.add, engine=GPSIMD)
            nisa.dma_copy(dst=res[:, j, :], src=flat.vector_select(0, off))
        for blk in tile.blocks:
            nisa.dma_copy(
                dst=ot.full.ap(blk.patterns["o"] + _cols(ot, d, ni), offset=blk.offsets["o"]),
                src=res[blk.p0 : blk.p0 + blk.parts],
            )


def _flat(t: Tensor):
    """t's storage as rows of one element (two words for int64) from element 0, up to its
    last element: the base of a gather/scatter by element offset (offset = row number)."""
    v = t.view
    last = int(v.offset) + sum(
        (int(n) - 1) * abs(int(s)) for n, s in zip(v.shape, v.strides, strict=True)
    )
    return t.full.ap([[1, last + 1]] + ([[1, 2]] if t.pair else []), offset=0)


def _row_bases(tile, name: str, p: int):
    """int32 [p, 1]: the element offset of each row of `tile` in operand `name`: an iota over
    each block's row pattern along one partition's free axis, moved to the partitions by an
    SBUF->SBUF DMA."""
    out = ro.sbuf((p, 1), nl.int32, "row_base")
    for blk in tile.blocks:
        pat = [[int(s), int(n)] for s, n in blk.patterns[name] if n > 1] or [[0, 1]]
        line = ro.sbuf((1, blk.parts), nl.int32, "row_base_line")
        nisa.iota(line, pat, offset=int(blk.offsets[name]))
        nisa.dma_copy(dst=out[blk.p0 : blk.p0 + blk.parts], src=line)
    return out


# ---------------------------------------------------------------- scatter
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
    _check_index_shape(what, it, ot, "out", d, strict_dim=False)
    if st is not None:
        _check_index_shape(what, it, st, "src", d, strict_dim=True)
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
    flat = _flat(ot)
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
                    src=st.full.ap(blk.patterns["s"] + _cols(st, d, n), offset=blk.offsets["s"]),
                )
        junk = ro.sbuf((p, n), nl.uint8, "checked")
        with bounds(what, d, nout):
            nisa.nc_n_gather(dst=junk, data=check[:p], indices=idx.view(nl.uint32))
        base = _row_bases(tile, "o", p)
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


# ---------------------------------------------------------------- references
def gather_ref(x: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
    sl = tuple(slice(0, n) if k != dim % x.ndim else slice(None) for k, n in enumerate(index.shape))
    return np.take_along_axis(np.asarray(x)[sl], np.asarray(index, dtype=np.int64), axis=dim)


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


__all__ = ["gather", "gather_ref", "scatter", "scatter_ref", "scatter_value"]
