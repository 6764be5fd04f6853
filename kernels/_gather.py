"""gather along one axis with one index per element (the device kernel of aten.gather), with
its reference; the element-offset helpers scatter shares.

Layer: kernel library (trnsim.kernels); public NKI API only. The index tensor's other axes
are rows on partitions (`_rows.RowSpace`, G rows per partition), x's whole `dim` axis in
SBUF; GpSimd nc_n_gather picks each row's elements, and its bounds check (an index outside
the row's elements is an error) checks the indices. An axis longer than one SBUF tile holds is
gathered by indirect DMA instead (one bounded probe DMA and one element-offset gather per
index column).
"""

from __future__ import annotations

import numpy as np

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._args import Tensor, axis
from ._common import fail
from ._index_rows import bounds, index_tensor
from ._rows import P_MAX, Operand, RowSpace

GATHER_ROW_ELEMS = 8192  # longest `dim` axis (elements, words for int64) gathered on chip
GATHER_TILE_ELEMS = 16384  # elements per partition of the x tile (G rows)
GPSIMD = nisa.engine.gpsimd


def check_index_shape(
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
    check_index_shape(what, it, xt, "x", d, strict_dim=False)
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


def cols(t: Tensor, d: int, n: int) -> list[list[int]]:
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
                    blk.patterns["x"] + cols(xt, d, xt.shape[d]), offset=blk.offsets["x"]
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
                dst=ot.full.ap(blk.patterns["o"] + cols(ot, d, ni), offset=blk.offsets["o"]),
                src=res[blk.p0 : blk.p0 + blk.parts],
            )


def _gather_dma(what, space, xt, it, ot, d, w) -> None:
    """Rows too long for SBUF: per index column, element offsets (row base + index * stride,
    exact int32 on GpSimd) and one indirect DMA gather; a bounded probe DMA checks the index."""
    ni = it.shape[d]
    xf = xt.full
    flat = flat_rows(xt)
    probe_src = xf.ap([[int(xt.view.strides[d]), xt.shape[d]]], offset=xf.offset)
    stride = ro.sbuf((P_MAX, 1), nl.int32, "stride")
    nisa.memset(dst=stride, value=int(xt.view.strides[d]))
    for tile in space.tiles(1):
        p = tile.parts
        base = row_bases(tile, "x", p)
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
                dst=ot.full.ap(blk.patterns["o"] + cols(ot, d, ni), offset=blk.offsets["o"]),
                src=res[blk.p0 : blk.p0 + blk.parts],
            )


def flat_rows(t: Tensor):
    """t's storage as rows of one element (two words for int64) from element 0, up to its
    last element: the base of a gather/scatter by element offset (offset = row number)."""
    v = t.view
    last = int(v.offset) + sum(
        (int(n) - 1) * abs(int(s)) for n, s in zip(v.shape, v.strides, strict=True)
    )
    return t.full.ap([[1, last + 1]] + ([[1, 2]] if t.pair else []), offset=0)


def row_bases(tile, name: str, p: int):
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


def gather_ref(x: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
    sl = tuple(slice(0, n) if k != dim % x.ndim else slice(None) for k, n in enumerate(index.shape))
    return np.take_along_axis(np.asarray(x)[sl], np.asarray(index, dtype=np.int64), axis=dim)
