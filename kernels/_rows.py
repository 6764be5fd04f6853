"""Row tiling of strided HBM views for the row-wise device kernels (softmax, norms, losses): the
reduced axis on the free axis, rows on partitions, G rows per partition.

Layer: kernel library (trnsim.kernels). Knows views, access patterns and DMAs; nothing about
the math of the kernels that use it.

A *row space* is a set of HBM operands that share a row index space (any shape, any strides,
stride 0 included): column operands hold `n_cols` values per row (x, out, grad), row operands
one value per row (mean, rstd, lse, loss, target). Row dims that are mergeable in every
operand are coalesced, so a contiguous tensor has one row dim whatever its rank. Rows are
tiled as *super-rows* of G consecutive rows of the innermost row dim, up to 128 super-rows per
tile (one per partition); a tile whose rows do not form one rectangle of the row dims is loaded
with one DMA per rectangle (`flat_blocks`). Rows of the innermost dim that do not fill a super-row
go to tiles with G = 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from ._common import P_MAX, fail

MIN_DMA_BYTES = 2048  # bytes per partition below which a DMA's fixed cost dominates
SBUF_SHARE = 0.7  # share of usable SBUF for the tiles of two iterations in flight
CHUNK_ALIGN = 512  # column chunks are multiples of this (bn_stats_fmax, PSUM bank)


@dataclass(frozen=True)
class Operand:
    """One HBM tensor of a row space: strides over the row dims, and along the columns
    (None for a row operand: one value per row); `tail` [step, count] pairs follow (the two
    words of an int64 pair view)."""

    view: Any
    row_strides: tuple[int, ...]
    col_stride: int | None
    tail: tuple[tuple[int, int], ...] = ()


def col_operand(view: Any, dim: int) -> Operand:
    """`view` with its axis `dim` as the columns and the other axes, in order, as rows."""
    strides = tuple(view.strides)
    return Operand(view, strides[:dim] + strides[dim + 1 :], strides[dim])


def row_operand(view: Any) -> Operand:
    """`view` holding one value per row (its shape is the row shape)."""
    return Operand(view, tuple(view.strides), None)


def vector_operand(view: Any, n: int, what: str, name: str) -> Operand:
    """A row operand for a 1-D row space of n rows: `view` has n elements along one dim
    (other dims of size 1, e.g. torch's keepdim statistics [R, 1])."""
    return shaped_row_operand(view, (n,), what, name)


def shaped_row_operand(view: Any, row_shape: tuple[int, ...], what: str, name: str) -> Operand:
    """A row operand of a row space of shape `row_shape`: `view` has that shape (any strides),
    or holds its values in row-major order along one dim (a flat [R] or a keepdim view)."""
    if tuple(view.shape) == tuple(row_shape):
        return Operand(view, tuple(view.strides), None)
    n = math.prod(row_shape)
    dims = [(size, st) for size, st in zip(view.shape, view.strides, strict=True) if size != 1]
    if math.prod(view.shape) != n or len(dims) > 1:
        fail(
            f"{what}: {name} must hold one value per row ({list(row_shape)}), got shape "
            f"{list(view.shape)}"
        )
    step = dims[0][1] if dims else 0
    strides, inner = [], step
    for size in reversed(row_shape):
        strides.append(inner)
        inner *= size
    return Operand(view, tuple(reversed(strides)), None)


def coalesce(shape: tuple[int, ...], strides: list[tuple[int, ...]]):
    """(shape, strides per operand) with size-1 dims dropped and adjacent dims merged where
    every operand allows (outer stride == inner stride * inner size). At least one dim."""
    dims = [(n, [s[i] for s in strides]) for i, n in enumerate(shape) if n != 1]
    out: list[tuple[int, list[int]]] = []
    for n, ss in dims:
        if out and all(po == si * n for po, si in zip(out[-1][1], ss, strict=True)):
            out[-1] = (out[-1][0] * n, ss)
        else:
            out.append((n, ss))
    if not out:
        out = [(1, [0] * len(strides))]
    return tuple(n for n, _ in out), [tuple(ss[k] for _, ss in out) for k in range(len(strides))]


def flat_blocks(a: int, b: int, sizes: tuple[int, ...]) -> Iterator[tuple[tuple, int, int]]:
    """Flat row-major range [a, b) of an index space of `sizes`, as rectangles
    (prefix index, lo, hi): dim len(prefix) runs over [lo, hi), the inner dims in full."""
    if len(sizes) == 1:
        yield (), a, b
        return
    inner = math.prod(sizes[1:])
    i0, r0 = divmod(a, inner)
    i1, r1 = divmod(b, inner)
    if i0 == i1:
        for pre, lo, hi in flat_blocks(r0, r1, sizes[1:]):
            yield (i0, *pre), lo, hi
        return
    if r0:
        for pre, lo, hi in flat_blocks(r0, inner, sizes[1:]):
            yield (i0, *pre), lo, hi
        i0 += 1
    if i1 > i0:
        yield (), i0, i1
    if r1:
        for pre, lo, hi in flat_blocks(0, r1, sizes[1:]):
            yield (i1, *pre), lo, hi


@dataclass(frozen=True)
class Block:
    """Partitions p0..p0+parts of a tile: one rectangle of rows. Per operand, the element
    offset of its first row and the [step, count] pairs of its row dims (the G slot last)."""

    p0: int
    parts: int
    offsets: dict
    patterns: dict


@dataclass(frozen=True)
class RowTile:
    """Up to 128 super-rows of G rows: `parts` partitions, loaded by `blocks`."""

    parts: int
    g: int
    blocks: tuple[Block, ...]


class RowSpace:
    """The row tiles of a set of operands sharing a row shape (see the module docstring)."""

    def __init__(self, row_shape: tuple[int, ...], n_cols: int, operands: dict[str, Operand]):
        self.n_cols = n_cols
        self.operands = operands
        names = list(operands)
        shape, strides = coalesce(tuple(row_shape), [operands[k].row_strides for k in names])
        self.shape = shape
        self.strides = dict(zip(names, strides, strict=True))
        self.n_rows = math.prod(shape)

    def tiles(self, g: int) -> list[RowTile]:
        """The tiles: super-rows of G rows over the inner dim, then the rows left over (G=1)."""
        inner = self.shape[-1]
        g = max(1, min(g, inner))
        body = (inner // g) * g
        out = self._segment_tiles(g, 0, inner // g)
        if body < inner:
            out += self._segment_tiles(1, body, inner - body)
        return out

    def _segment_tiles(self, g: int, start: int, count: int) -> list[RowTile]:
        """Tiles of super-rows j = 0..count-1 of G rows each starting at inner index
        start + j*G (the outer row dims in full)."""
        sizes = (*self.shape[:-1], count)
        total = math.prod(sizes)
        tiles = []
        for a in range(0, total, P_MAX):
            b = min(total, a + P_MAX)
            blocks, p = [], 0
            for pre, lo, hi in flat_blocks(a, b, sizes):
                offs, pats = {}, {}
                for name, op in self.operands.items():
                    st = self.strides[name]
                    j = len(pre)
                    steps = (*st[:-1], st[-1] * g)  # super-row strides
                    off = sum(i * s for i, s in zip(pre, steps, strict=False))
                    off += lo * steps[j] + start * st[-1]
                    pat = [[steps[j], hi - lo]]
                    pat += [[steps[k], sizes[k]] for k in range(j + 1, len(sizes))]
                    pat.append([st[-1], g])
                    offs[name] = op.view.offset + off
                    pats[name] = pat
                m = (hi - lo) * math.prod(sizes[len(pre) + 1 :])
                blocks.append(Block(p, m, offs, pats))
                p += m
            tiles.append(RowTile(b - a, g, tuple(blocks)))
        return tiles

    # ---------------------------------------------------------------- DMAs
    def _hbm(self, name: str, blk: Block, c0: int, c1: int):
        op = self.operands[name]
        pat, off = list(blk.patterns[name]), blk.offsets[name]
        if op.col_stride is not None:
            pat.append([op.col_stride, c1 - c0])
            off += c0 * op.col_stride
        pat += [list(t) for t in op.tail]
        return op.view.ap(pat, offset=off)

    def load(self, tile: RowTile, name: str, dst, c0: int = 0, c1: int | None = None) -> None:
        """DMA operand `name` (columns c0..c1) of `tile` into dst [parts, G(, c1-c0)]."""
        c1 = self.n_cols if c1 is None else c1
        for blk in tile.blocks:
            nisa.dma_copy(dst=dst[blk.p0 : blk.p0 + blk.parts], src=self._hbm(name, blk, c0, c1))

    def store(self, tile: RowTile, name: str, src, c0: int = 0, c1: int | None = None) -> None:
        """DMA src [parts, G(, c1-c0)] to operand `name` (columns c0..c1) of `tile`."""
        c1 = self.n_cols if c1 is None else c1
        for blk in tile.blocks:
            nisa.dma_copy(dst=self._hbm(name, blk, c0, c1), src=src[blk.p0 : blk.p0 + blk.parts])

    def fetch(self, tile: RowTile, name: str, dtype, c0: int = 0, c1: int | None = None):
        """A new SBUF tile holding operand `name` of `tile` (columns c0..c1), in `dtype`."""
        c1 = self.n_cols if c1 is None else c1
        op = self.operands[name]
        cols = () if op.col_stride is None else (c1 - c0,)
        tail = tuple(n for _, n in op.tail)
        t = nl.ndarray((tile.parts, tile.g, *cols, *tail), dtype=dtype, buffer=nl.sbuf, name=name)
        self.load(tile, name, t, c0, c1)
        return t


# ---------------------------------------------------------------- planning
@dataclass(frozen=True)
class Plan:
    """How a row space is processed: G rows per partition, and the column chunks."""

    g: int
    chunks: tuple[tuple[int, int], ...]


def sbuf_budget(fixed_bytes: int = 0) -> float:
    """Bytes per partition for the tiles of one iteration (two iterations are in flight)."""
    return (nl.tile_size.total_available_sbuf_size - fixed_bytes) * SBUF_SHARE / 2


def plan_rows(
    space: RowSpace,
    col_bytes: int,
    io_itemsize: int,
    what: str,
    fixed_bytes: int = 0,
    max_chunk: int | None = None,
    allow_chunks: bool = True,
) -> Plan:
    """G and the column chunks for per-column bytes `col_bytes` (all tiles of one iteration,
    per partition and row): G rows per partition for >= 2 KiB DMAs (never more than the rows
    need), and rows longer than the SBUF budget (or `max_chunk`) cut into chunks."""
    d = space.n_cols
    budget = sbuf_budget(fixed_bytes)
    limit = int(budget // col_bytes)
    if max_chunk is not None:
        limit = min(limit, max_chunk)
    if d <= limit:
        g = max(1, -(-MIN_DMA_BYTES // (d * io_itemsize)))
        g = min(g, -(-space.n_rows // P_MAX), int(budget // (col_bytes * d)))
        return Plan(max(1, g), ((0, d),))
    if not allow_chunks:
        fail(
            f"{what}: rows of {d} elements need {d * col_bytes} bytes per partition; at most "
            f"{int(budget)} fit"
        )
    step = limit if limit < CHUNK_ALIGN else limit // CHUNK_ALIGN * CHUNK_ALIGN
    if step < 1:
        fail(
            f"{what}: no room in SBUF for a column chunk ({fixed_bytes} bytes per partition "
            "are held for the whole kernel)"
        )
    return Plan(1, tuple((c, min(d, c + step)) for c in range(0, d, step)))


class Prefetch:
    """Hands out load(request) results in order, issuing the next request's loads first.

    The DMA queues are in order, so a load issued after the current tile's store would wait
    for the current tile's compute; issuing it before lets it overlap (double buffering)."""

    def __init__(self, requests: list, load: Callable[[Any], Any]):
        self._requests = requests
        self._load = load
        self._i = 0
        self._next = load(requests[0]) if requests else None

    def next(self) -> Any:
        cur = self._next
        self._i += 1
        self._next = self._load(self._requests[self._i]) if self._i < len(self._requests) else None
        return cur


def broadcast_vector(vec: Any, parts: int, c0: int, c1: int, dtype: Any, name: str):
    """Elements c0..c1 of a 1-D HBM vector (any stride) on each of `parts` partitions: one
    partition-broadcast DMA (stride 0 over the partitions) into a new SBUF tile."""
    step = vec.strides[0]
    t = nl.ndarray((parts, c1 - c0), dtype=dtype, buffer=nl.sbuf, name=name)
    nisa.dma_copy(dst=t, src=vec.ap([[0, parts], [step, c1 - c0]], offset=vec.offset + c0 * step))
    return t
