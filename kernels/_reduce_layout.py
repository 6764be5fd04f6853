"""The two tile layouts of the reduction device kernels (`reduce`, `arg_reduce`): which axes go
to partitions, how tiles are loaded, and where partial states meet.

Layer: kernel library (trnsim.kernels); public NKI API only. A layout drives a `Reducer` (the
arithmetic: states, leaf, combine, fold, results) over the tiles of x and stores its results:

* **rows** (`rows`): the kept axes are rows on partitions (`_rows.RowSpace`, G rows per
  partition when rows are short), the reduced axes the free axis (`_boxes.Group`, one DMA per
  box of at most TILE_ELEMS elements); each box reduces into a partial slot, the slots of a
  row combine at the end.
* **columns** (`columns`, few outputs with long reductions, e.g. full reductions): the reduced
  axes are spread over all 128 partitions (G consecutive elements per partition), the kept
  axes along the free axis; each tile reduces into a slot per partition, the slots combine,
  and the partitions fold into partition 0.
"""

from __future__ import annotations

import math

from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._args import Tensor
from ._boxes import Group, hbm
from ._common import fail
from ._rows import MIN_DMA_BYTES, P_MAX, Operand, Prefetch, RowSpace

TILE_ELEMS = 4096  # elements per partition of one data tile (16 KiB of fp32 temporaries)
COLUMN_MAX_OUTPUTS = 64  # at most this many outputs use the columns layout
COLUMN_MIN_REDUCED = 2048  # ... when each reduces at least this many elements
MAX_SLOTS = 16  # partial states per output held before they are combined


class Reducer:
    """The arithmetic a layout drives (see _reduce_ops / _arg_ops for the meanings)."""

    exact = False  # integer data reduced exactly on GpSimd (tiles loaded as int32)
    needs_pos = False  # leaf takes the flat positions of the elements (argmax/argmin)
    partition_fold = False  # fold is one GpSimd partition reduce (any number of outputs)

    def state(self, p: int, a: int, slots: int, fill: bool) -> dict: ...
    def reset(self, st: dict, k: int) -> None: ...  # slot k = the identity
    def leaf(self, data, d: dict, pos) -> None: ...
    def combine(self, st: dict) -> dict: ...
    def fold(self, st: dict) -> dict: ...
    def results(self, res: dict, shape: tuple[int, int]) -> list: ...


class Slots:
    """The partial states of one block of outputs: part k of the reduction goes to a slot; when
    all MAX_SLOTS slots hold parts they are combined into slot 0 (SBUF stays bounded however
    long the reduction)."""

    def __init__(self, red: Reducer, p: int, a: int, parts: int, fill: bool):
        self.red, self.p = red, p
        self.n = min(parts, MAX_SLOTS)
        self.st = red.state(p, a, self.n, fill)
        self.used = 0
        self.round = 0

    def next(self, parts: int) -> dict:
        """Slot views [parts, A] for the next part. A reused slot that the part fills only in
        part (parts < p) is reset to the identity first (fresh slots start as the identity)."""
        if self.used == self.n:
            res = self.red.combine(self.st)
            for c, t in self.st.items():
                nisa.tensor_copy(dst=t[:, :, 0], src=res[c])
            self.used, self.round = 1, self.round + 1
        k = self.used
        if parts < self.p and self.round > 0:
            self.red.reset(self.st, k)
        self.used += 1
        return {c: t[:parts, :, k] for c, t in self.st.items()}

    def result(self) -> dict:
        return self.red.combine({c: t[:, :, : self.used] for c, t in self.st.items()})


def run(red: Reducer, outs: list[Tensor], x: Tensor, dims: tuple[int, ...]) -> None:
    """Reduce x over `dims` into `outs` with the layout that suits the shapes: columns for few
    outputs with long reductions, and for outputs along x's innermost (unit-stride) axis
    when the fold is one partition reduce (a contiguous row per partition instead of one DMA
    descriptor per element); rows otherwise."""
    kept = [a for a in range(len(x.shape)) if a not in dims]
    axes = list(dims)
    if not red.needs_pos:  # the order of a commutative reduction is free: take memory order
        axes.sort(key=lambda a: -abs(int(x.view.strides[a])))
    n_out = math.prod(x.shape[a] for a in kept)
    n_red = math.prod(x.shape[a] for a in dims)
    sized = [a for a in range(len(x.shape)) if x.shape[a] > 1]
    inner = min(sized, key=lambda a: (abs(int(x.view.strides[a])) or 2**62, -a), default=None)
    inner_kept = inner in kept and abs(int(x.view.strides[inner])) == 1
    if (n_out <= COLUMN_MAX_OUTPUTS and n_red >= COLUMN_MIN_REDUCED) or (
        red.partition_fold and inner_kept and n_red >= P_MAX
    ):
        columns(red, outs, x, kept, axes)
    else:
        rows(red, outs, x, kept, axes)


def _dtype(red: Reducer, x: Tensor):
    return nl.int32 if red.exact else x.view.dtype


def _load(xv, dtype, tile, box, i: int = 0):
    t = ro.sbuf((tile.parts, tile.g, box.size), dtype, "x_tile")
    for blk in tile.blocks:
        nisa.dma_copy(
            dst=t[blk.p0 : blk.p0 + blk.parts],
            src=hbm(xv, blk.patterns["x"], blk.offsets["x"], box, i),
        )
    return t


def _iota(shape, pattern, offset: int, per_partition: int):
    t = ro.sbuf(shape, nl.float32, "positions")
    nisa.iota(t, pattern, offset=offset, channel_multiplier=per_partition)
    return t


def rows(red: Reducer, outs: list[Tensor], x: Tensor, kept: list[int], axes: list[int]) -> None:
    xv = x.view
    operands = {"x": Operand(xv, tuple(xv.strides[a] for a in kept), None)}
    for i, o in enumerate(outs):
        operands[f"out{i}"] = Operand(o.view, tuple(o.view.strides[a] for a in kept), None)
    n_red = math.prod(x.shape[a] for a in axes)
    space = RowSpace(tuple(x.shape[a] for a in kept), n_red, operands)
    boxes = Group.of([xv], axes).boxes(TILE_ELEMS)
    g = 1
    if len(boxes) == 1:
        g = min(
            -(-MIN_DMA_BYTES // (n_red * max(1, xv.dtype.itemsize))),
            TILE_ELEMS // n_red,
            -(-space.n_rows // P_MAX),
        )
    tiles = space.tiles(max(1, g))
    dtype = _dtype(red, x)
    fetch = Prefetch([(t, b) for t in tiles for b in boxes], lambda req: _load(xv, dtype, *req))
    for tile in tiles:
        slots = Slots(red, tile.parts, tile.g, len(boxes), fill=False)
        for box in boxes:
            pos = None
            if red.needs_pos:
                pos = _iota(
                    (tile.parts, tile.g, box.size), [[0, tile.g], [1, box.size]], box.start, 0
                )
            red.leaf(fetch.next(), slots.next(tile.parts), pos)
        results = red.results(slots.result(), (tile.parts, tile.g))
        for i, (o, r) in enumerate(zip(outs, results, strict=True)):
            for blk in tile.blocks:
                pat = blk.patterns[f"out{i}"] + ([[1, 2]] if o.pair else [])
                nisa.dma_copy(
                    dst=hbm(o.full, pat, blk.offsets[f"out{i}"]), src=r[blk.p0 : blk.p0 + blk.parts]
                )


def columns(red: Reducer, outs: list[Tensor], x: Tensor, kept: list[int], axes: list[int]) -> None:
    xv = x.view
    space = RowSpace(
        tuple(x.shape[a] for a in axes),
        1,
        {"x": Operand(xv, tuple(xv.strides[a] for a in axes), None)},
    )
    n_red = space.n_rows
    if red.needs_pos and n_red > 2**24:
        fail(
            f"arg_reduce: {n_red} elements to reduce; positions are exact in fp32 only "
            f"below 2^24 ({2**24})"
        )
    cols = Group.of([xv] + [o.view for o in outs], kept)
    dtype = _dtype(red, x)
    for box in cols.boxes(TILE_ELEMS // 8):
        # floor(N / 128): the super-rows fill the partitions, the remainder is one small tile
        g = max(1, min(TILE_ELEMS // box.size, n_red // P_MAX, space.shape[-1]))
        if red.needs_pos and len(space.shape) > 1:
            # positions are affine in the partition only without a remainder segment
            g = max(d for d in range(1, g + 1) if space.shape[-1] % d == 0)
        tiles = space.tiles(g)
        slots = Slots(red, max(t.parts for t in tiles), box.size, len(tiles), fill=True)
        fetch = Prefetch(tiles, lambda tile, box=box: _load(xv, dtype, tile, box))
        for tile, (offset, step) in zip(tiles, _starts(tiles, g, space), strict=True):
            pos = None
            if red.needs_pos:
                pos = _iota(
                    (tile.parts, box.size, tile.g), [[0, box.size], [1, tile.g]], offset, step
                )
            data = fetch.next().permute((0, 2, 1))  # [parts, outputs, G]
            red.leaf(data, slots.next(tile.parts), pos)
        results = red.results(red.fold(slots.result()), (1, box.size))
        for i, (o, r) in enumerate(zip(outs, results, strict=True)):
            pat = box.pattern(i + 1) + ([[1, 2]] if o.pair else [])
            nisa.dma_copy(
                dst=o.full.ap(pat or [[1, 1]], offset=o.view.offset + box.offsets[i + 1]), src=r
            )


def _starts(tiles, g: int, space: RowSpace) -> list[tuple[int, int]]:
    """(flat position of partition 0 slot 0, positions per partition) of each tile of a 1-D
    row space (or one whose innermost size G divides): RowSpace.tiles gives the super-rows of
    G rows first, then the remainder rows with G = 1."""
    inner = space.shape[-1]
    body = inner // g * g
    out, s_body, s_rest = [], 0, 0
    for t in tiles:
        if t.g == g:
            out.append((s_body * g, g))
            s_body += t.parts
        else:
            out.append((body + s_rest, 1))
            s_rest += t.parts
    return out
