"""Rows of a strided tensor addressed by integer index tensors: the indirect-DMA core of the
index_select / index / index_put / index_add / embedding_backward device kernels.

Layer: kernel library (trnsim.kernels); public NKI API only.

`IndexedRows` pairs a *data* tensor D (read by a gather, written by a put) with index tensors
on some of its axes (one common shape B, already broadcast by the caller) and a *rows* tensor T
holding one row of D's other axes per element of B (torch's advanced-indexing layout: B in
place of adjacent indexed axes, else B first). Rows go to partitions (`_rows.RowSpace` over B,
one row per partition): per tile of 128 rows the index words are loaded into SBUF and one DMA
per block moves the rows, its D side a `vector_select` of the indexed axis (an HBM->HBM
gather or scatter, or a DMA read-modify-write for accumulation). With one indexed axis the
DMA checks each index against that axis; with several, the indices are combined into element
offsets on GpSimd (exact int32) after one small bounded gather per index tensor checks each
against its own axis. An index outside its axis raises OutOfBoundsError naming the op, the
value and the axis size (`bounds`).
"""

from __future__ import annotations

import re

from trnsim.errors import OutOfBoundsError
from trnsim.nki import isa as nisa
from trnsim.nki import language as nl

from . import _rowops as ro
from ._args import Tensor
from ._boxes import Group, hbm
from ._common import caller_location, fail
from ._rows import P_MAX, Operand, RowSpace

GPSIMD = nisa.engine.gpsimd
ROW_ELEMS = 4096  # elements per partition of an SBUF rows tile (accumulating DMAs)
_VALUE = re.compile(  # the index value in the messages of the DMA and nc_n_gather bounds checks
    r"runtime vector offset (-?\d+)|nc_n_gather: indices\[.*\] = (-?\d+) is outside"
)


class bounds:
    """Re-raise an indirect access's out-of-bounds index (a DMA's runtime offset, or
    nc_n_gather's index) as `what`'s error: the index value as the user gave it (negative
    indices wrap once when `wrapped`), the axis and its size. Other errors pass through."""

    def __init__(self, what: str, axis: int, size: int, wrapped: bool = False):
        self.what, self.axis, self.size, self.wrapped = what, axis, size, wrapped

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, e, tb) -> None:
        if not isinstance(e, OutOfBoundsError):
            return
        m = _VALUE.search(e.message)
        if m is None:
            return
        value = int(m.group(1) or m.group(2))
        value = value - 2**32 if value >= 2**31 else value
        value = value - self.size if self.wrapped and value < 0 else value
        lo = -self.size if self.wrapped else 0
        raise OutOfBoundsError(
            f"{self.what}: index {value} is out of bounds for dimension {self.axis} with size "
            f"{self.size} (valid: {lo} to {self.size - 1})",
            caller_location(),
        ) from e


def index_tensor(what: str, name: str, view, int64) -> Tensor:
    t = Tensor(what, name, view, int64)
    if not t.pair and t.dtype != "int32":
        fail(
            f"{what}: {name} dtype {t.dtype}; index tensors are int32 or int64 (an int32 "
            "pair view named in int64=)"
        )
    return t


class IndexedRows:
    """D's rows addressed by index tensors (see the module docstring)."""

    def __init__(
        self, what: str, data: Tensor, index: list[Tensor | None], rows: Tensor, wrap: bool
    ):
        r = len(data.shape)
        if len(index) > r:
            fail(f"{what}: {len(index)} index tensors for a {r}-d tensor")
        index = list(index) + [None] * (r - len(index))
        self.what, self.data, self.rows, self.wrap = what, data, rows, wrap
        self.ax = [k for k, t in enumerate(index) if t is not None]
        if not self.ax:
            fail(f"{what}: no index tensor given")
        self.idx = [index[k] for k in self.ax]
        b = self.idx[0].shape
        for t in self.idx:
            if t.shape != b:
                fail(
                    f"{what}: index tensors have shapes {[list(t.shape) for t in self.idx]}; "
                    "they must be broadcast to one shape"
                )
        if data.pair != rows.pair or (not data.pair and data.dtype != rows.dtype):
            fail(
                f"{what}: {data.dtype} and {rows.dtype} tensors; the rows move as they are, so "
                "the dtypes must match"
            )
        rest = [k for k in range(r) if k not in self.ax]
        m = len(self.ax)
        adjacent = self.ax == list(range(self.ax[0], self.ax[0] + m))
        a0 = self.ax[0] if adjacent else 0
        want = (
            tuple(data.shape[:a0]) + b + tuple(data.shape[a0 + m :])
            if adjacent
            else b + tuple(data.shape[k] for k in rest)
        )
        if rows.shape != want:
            fail(
                f"{what}: {list(rows.shape)} rows tensor; indexing {list(data.shape)} with "
                f"index shape {list(b)} on axes {self.ax} gives {list(want)}"
            )
        bpos = list(range(a0, a0 + len(b)))
        rpos = [k for k in range(len(want)) if k not in bpos]
        if data.pair:  # the words of a pair move with their element
            rest, rpos = [*rest, r], [*rpos, len(want)]
        self.data_rest = Group(
            tuple(int(data.full.shape[k]) for k in rest),
            [
                tuple(int(data.full.strides[k]) for k in rest),
                tuple(int(rows.full.strides[k]) for k in rpos),
            ],
        )
        ops = {
            f"i{j}": Operand(t.view, tuple(t.view.strides), None) for j, t in enumerate(self.idx)
        }
        ops["rows"] = Operand(rows.view, tuple(rows.view.strides[k] for k in bpos), None)
        self.space = RowSpace(b, 1, ops)

    # ---------------------------------------------------------------- per tile
    def tiles(self):
        return self.space.tiles(1)

    def addressed(self):
        """(tile, row addresses int32 [parts, 1]) for every tile: the wrapped index of the one
        indexed axis, or the rows' element offsets (checked against each axis first). With a
        1-D index space the indices of all full tiles load in one DMA per index tensor."""
        tiles = self.tiles()
        full = [t for t in tiles if t.parts == P_MAX and len(t.blocks) == 1]
        if len(self.space.shape) != 1 or len(full) < 2:
            for tile in tiles:
                yield tile, self._addresses([tile], self._words(tile))[:, 0:1]
            return
        words = []
        for j, t in enumerate(self.idx):
            st = int(self.space.strides[f"i{j}"][0])
            w = ro.sbuf((P_MAX, len(full)), nl.int32, f"index{j}")
            base = full[0].blocks[0].offsets[f"i{j}"]
            nisa.dma_copy(dst=w, src=t.view.ap([[st, P_MAX], [st * P_MAX, len(full)]], offset=base))
            words.append(w)
        off = self._addresses(full, words)
        for c, tile in enumerate(full):
            yield tile, off[:, c : c + 1]
        for tile in tiles[len(full) :]:
            yield tile, self._addresses([tile], self._words(tile))[:, 0:1]

    def _words(self, tile) -> list:
        """The index words of one tile, int32 [parts, 1] per index tensor."""
        words = []
        for j, t in enumerate(self.idx):
            w = ro.sbuf((tile.parts, 1), nl.int32, f"index{j}")
            for blk in tile.blocks:
                nisa.dma_copy(
                    dst=w[blk.p0 : blk.p0 + blk.parts],
                    src=hbm(t.view, blk.patterns[f"i{j}"], blk.offsets[f"i{j}"]),
                )
            words.append(w)
        return words

    def _addresses(self, tiles: list, words: list):
        """Row addresses [parts, len(tiles)] from index words (column c: tiles[c])."""
        shape = tuple(words[0].shape)
        for k, w in zip(self.ax, words, strict=True):
            if self.wrap:  # torch wraps negative indices once: w += size * (w < 0)
                neg = ro.sbuf(shape, nl.int32, "wrap")
                n = float(self.data.shape[k])
                nisa.tensor_scalar(
                    dst=neg, data=w, op0=nl.less, operand0=0.0, op1=nl.multiply, operand1=n
                )
                nisa.tensor_tensor(dst=w, data1=w, data2=neg, op=nl.add, engine=GPSIMD)
        if len(words) == 1:
            return words[0]
        for c, tile in enumerate(tiles):
            for k, w in zip(self.ax, words, strict=True):
                self._check(tile, k, w[:, c : c + 1])
        off = ro.sbuf(shape, nl.int32, "row_offset")
        step = ro.sbuf(shape, nl.int32, "stride")
        for j, (k, w) in enumerate(zip(self.ax, words, strict=True)):
            nisa.memset(dst=step, value=int(self.data.full.strides[k]))
            dst = off if j == 0 else step
            nisa.tensor_tensor(dst=dst, data1=w, data2=step, op=nl.multiply, engine=GPSIMD)
            if j:
                nisa.tensor_tensor(dst=off, data1=off, data2=step, op=nl.add, engine=GPSIMD)
        return off

    def _check(self, tile, k: int, w) -> None:
        """One element per row gathered through axis k alone: the DMA's bounds check."""
        d = self.data.full
        n = int(self.data.shape[k])
        probe = d.ap([[int(d.strides[k]), n]], offset=d.offset)
        junk = ro.sbuf((tile.parts, 1), d.dtype, "probe")
        for blk in tile.blocks:
            src = probe.vector_select(0, w[blk.p0 : blk.p0 + blk.parts])
            with bounds(self.what, k, n, self.wrap):
                nisa.dma_copy(dst=junk[blk.p0 : blk.p0 + blk.parts], src=src)

    def data_rows(self, off, blk, box=None):
        """D's rows at the addresses off[blk] (over the rest box `box`, default all)."""
        d = self.data.full
        if len(self.ax) == 1:
            k = self.ax[0]
            head = [[int(d.strides[k]), int(self.data.shape[k])]]
        else:  # element offsets: at most the extent of the indexed axes
            head = [
                [1, 1 + sum((int(self.data.shape[k]) - 1) * int(d.strides[k]) for k in self.ax)]
            ]
        pat = head + (box.pattern(0) if box is not None else self._rest(0))
        base = d.offset + (box.offsets[0] if box is not None else 0)
        return d.ap(pat, offset=base).vector_select(0, off[blk.p0 : blk.p0 + blk.parts])

    def rows_view(self, blk, box=None):
        t = self.rows.full
        pat = blk.patterns["rows"] + (box.pattern(1) if box is not None else self._rest(1))
        off = blk.offsets["rows"] + (box.offsets[1] if box is not None else 0)
        return t.ap(pat, offset=off)

    def _rest(self, i: int) -> list[list[int]]:
        g = self.data_rest
        return [[s, n] for s, n in zip(g.strides[i], g.sizes, strict=True)]

    def guard(self):
        """The bounds context of the row DMAs (one indexed axis: the DMA checks it)."""
        k = self.ax[0]
        return bounds(self.what, k, int(self.data.shape[k]), self.wrap)

    # ---------------------------------------------------------------- whole launches
    def gather(self) -> None:
        """rows = D[index] (HBM -> HBM, one DMA per block)."""
        for tile, off in self.addressed():
            for blk in tile.blocks:
                dst, src = self.rows_view(blk), self.data_rows(off, blk)
                with self.guard():
                    nisa.dma_copy(dst=dst, src=src)

    def put(self) -> None:
        """D[index] = rows (HBM -> HBM scatter; with duplicate indices the last row wins)."""
        for tile, off in self.addressed():
            for blk in tile.blocks:
                dst, src = self.data_rows(off, blk), self.rows_view(blk)
                with self.guard():
                    nisa.dma_copy(dst=dst, src=src)

    def accumulate(self, scale=None) -> None:
        """D[index] += rows * scale (scale: a number, or a function of the tile giving a
        (parts, 1) fp32 tile), through the DMA engines' read-modify-write in fp32; duplicate
        indices accumulate one after the other (unique_indices=False)."""
        boxes = self.data_rest.boxes(ROW_ELEMS)
        for tile, off in self.addressed():
            s = scale(tile) if callable(scale) else scale
            for box in boxes:
                v = ro.sbuf((tile.parts, box.size), nl.float32, "rows")
                for blk in tile.blocks:
                    nisa.dma_copy(dst=v[blk.p0 : blk.p0 + blk.parts], src=self.rows_view(blk, box))
                if s is not None and not (isinstance(s, (int, float)) and s == 1):
                    nisa.tensor_scalar(dst=v, data=v, op0=nl.multiply, operand0=s)
                for blk in tile.blocks:
                    dst = self.data_rows(off, blk, box)
                    with self.guard():
                        nisa.dma_compute(
                            dst=dst,
                            srcs=[dst, v[blk.p0 : blk.p0 + blk.parts]],
                            reduce_op=nl.add,
                            unique_indices=False,
                        )
