"""Tile planning of elementwise device kernels (the algorithm behind kernels/_tiles.py, which
documents it and is the module to import): operands as strides over the output's shape, the
candidate layouts and their scores, and the tiles they emit.

Layer: kernel library (trnsim.kernels); pure Python (no instructions are issued here).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

P_MAX = 128  # partitions per tile (pmax)
MAX_FREE = 4096  # elements per partition per tile: 16 KiB of fp32, well above the 2 KiB DMA floor
MAX_FREE_DIMS = 3  # SBUF tiles stay [P, f0, f1, f2]: instructions take at most 4-D operands
MIN_SPLIT_PARTS = 64  # a divisor of a dim in [64, 128] splits it into rows with no remainder
# Fixed cost of one tile (its DMAs' ~2 us set-up and a few instructions' issue), in elements
# streamed per partition: one more tile pays off when it saves more than this per partition.
TILE_COST = 2048


# ---------------------------------------------------------------- operands


@dataclass(frozen=True)
class Operand:
    """One tensor of a pointwise launch, as element strides over the planned shape S.

    tensor: the HBM tensor (NkiTensor), or None for a virtual index operand.
    strides: one per dim of S (0 where the operand is broadcast), in elements of the tensor.
    offset: element offset of S's origin in the tensor's storage.
    pair: an int64 pair view: each element is two int32 words (low, high), adjacent.
    """

    tensor: Any | None
    strides: tuple[int, ...]
    offset: int
    pair: bool = False


# ---------------------------------------------------------------- tiles


@dataclass(frozen=True)
class Access:
    """One operand's elements in one tile: offset, partition step, free-dim steps."""

    offset: int
    pstep: int
    fsteps: tuple[int, ...]


@dataclass(frozen=True)
class Tile:
    """A [parts, *free] box of the output's index space and every operand's access to it."""

    parts: int
    free: tuple[int, ...]
    access: tuple[Access, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.parts, *self.free)

    @property
    def free_size(self) -> int:
        return math.prod(self.free)

    def pattern(self, i: int) -> list[list[int]]:
        """Operand i's [step, count] access pattern: partition pair first, then free dims."""
        a = self.access[i]
        return [[a.pstep, self.parts], *([s, n] for s, n in zip(a.fsteps, self.free, strict=True))]

    def hbm(self, op: Operand, i: int) -> Any:
        """Operand i's elements of this tile as an HBM access-pattern view (a pair operand
        carries a trailing [1, 2] for its two words)."""
        pat = self.pattern(i)
        if op.pair:
            pat.append([1, 2])
        return op.tensor.ap(pat, offset=self.access[i].offset)


# ---------------------------------------------------------------- planning


@dataclass(frozen=True)
class _Block:
    dims: tuple[int, ...]
    strides: tuple[tuple[int, ...], ...]  # per operand, one per dim
    offsets: tuple[int, ...]  # per operand


@dataclass(frozen=True)
class _Layout:
    block: _Block
    pdim: int | None  # partition dim (chunks of <= 128), or None: one partition
    free: tuple[int, ...]  # free dims, outer to inner
    chunk: tuple[int, int] | None  # (dim, chunk size) of the one chunked free dim
    rest: tuple[_Layout, ...]  # layouts of a split's remainder block

    def count(self) -> int:
        """Tiles of this layout (with its remainder's)."""
        n = self.block.dims
        c = 1
        for d, nd in enumerate(n):
            if d == self.pdim:
                c *= -(-nd // P_MAX)
            elif self.chunk is not None and d == self.chunk[0]:
                c *= -(-nd // self.chunk[1])
            elif d not in self.free:
                c *= nd
        return c + sum(r.count() for r in self.rest)

    def cost(self) -> int:
        """Estimated time in per-partition elements: TILE_COST per tile plus the elements each
        tile streams per partition (summed over the tiles)."""
        n = self.block.dims
        rows = -(-n[self.pdim] // P_MAX) if self.pdim is not None else 1
        per_part = math.prod(nd for d, nd in enumerate(n) if d != self.pdim) * rows
        own = self.count() - sum(r.count() for r in self.rest)
        return own * TILE_COST + per_part + sum(r.cost() for r in self.rest)

    def score(self) -> tuple[int, int, int]:
        n, s0 = self.block.dims, self.block.strides[0]
        parts = min(P_MAX, n[self.pdim]) if self.pdim is not None else 1
        inner = self.free[-1] if self.free else None
        unit = inner is not None and abs(s0[inner]) == 1
        return (self.cost(), -parts, -int(unit))


def _coalesce(dims: list[int], strides: list[list[int]]) -> None:
    """Merge adjacent dims in place wherever every operand's strides allow it."""
    d = len(dims) - 1
    while d > 0:
        if all(s[d - 1] == s[d] * dims[d] for s in strides):
            dims[d - 1] *= dims[d]
            for s in strides:
                s[d - 1] = s[d]
            del dims[d]
            for s in strides:
                del s[d]
        d -= 1


def _free_dims(n: tuple[int, ...], pdim: int | None, max_free: int):
    """Free dims from the innermost outwards while they fit; the first misfit is chunked."""
    free: list[int] = []
    size, chunk = 1, None
    for d in reversed(range(len(n))):
        if d == pdim:
            continue
        if len(free) == MAX_FREE_DIMS:
            break
        if size * n[d] <= max_free:
            free.append(d)
            size *= n[d]
            continue
        c = max_free // size
        if c >= 2 or size == 1:
            c = max(1, c)
            c = -(-n[d] // -(-n[d] // c))  # balanced chunks
            free.append(d)
            chunk = (d, c)
        break
    return tuple(sorted(free)), chunk


def _split(block: _Block, j: int) -> tuple[_Block, _Block | None] | None:
    """Dim j split into [p, C] rows (+ a remainder block of < p rows), or None."""
    nj = block.dims[j]
    p = next((q for q in range(P_MAX, MIN_SPLIT_PARTS - 1, -1) if nj % q == 0 and nj > q), None)
    if p is None:
        if nj < 2 * P_MAX:
            return None
        p = P_MAX
    c, r = nj // p, nj % p
    dims = (*block.dims[:j], p, c, *block.dims[j + 1 :])
    strides = tuple((*s[:j], s[j] * c, s[j], *s[j + 1 :]) for s in block.strides)
    main = _Block(dims, strides, block.offsets)
    if r == 0:
        return main, None
    rdims = (*block.dims[:j], r, *block.dims[j + 1 :])
    roffs = tuple(o + p * c * s[j] for o, s in zip(block.offsets, block.strides, strict=True))
    return main, _Block(rdims, block.strides, roffs)


def _best(block: _Block, max_free: int, depth: int = 0) -> _Layout:
    cands = []
    for pdim in (None, *range(len(block.dims))):
        free, chunk = _free_dims(block.dims, pdim, max_free)
        cands.append(_Layout(block, pdim, free, chunk, ()))
    if depth < 2:
        for j in range(len(block.dims)):
            sp = _split(block, j)
            if sp is None:
                continue
            main, rem = sp
            free, chunk = _free_dims(main.dims, j, max_free)
            rest = () if rem is None else (_best(rem, max_free, depth + 1),)
            cands.append(_Layout(main, j, free, chunk, rest))
    return min(cands, key=_Layout.score)


def _emit(lay: _Layout, out: list[Tile]) -> None:
    b = lay.block
    ranges = []
    for d, nd in enumerate(b.dims):
        if d == lay.pdim:
            step = P_MAX
        elif lay.chunk is not None and d == lay.chunk[0]:
            step = lay.chunk[1]
        elif d in lay.free:
            step = nd
        else:
            step = 1
        ranges.append([(i, min(step, nd - i)) for i in range(0, nd, step)])
    for pos in itertools.product(*ranges):
        parts = pos[lay.pdim][1] if lay.pdim is not None else 1
        free = tuple(pos[d][1] for d in lay.free) or (1,)  # tiles keep a free dim
        acc = []
        for s, o in zip(b.strides, b.offsets, strict=True):
            off = o + sum(start * s[d] for d, (start, _) in enumerate(pos))
            pstep = s[lay.pdim] if lay.pdim is not None else 0
            acc.append(Access(off, pstep, tuple(s[d] for d in lay.free) or (0,)))
        out.append(Tile(parts, free, tuple(acc)))
    for r in lay.rest:
        _emit(r, out)


def plan(shape: Sequence[int], operands: Sequence[Operand], max_free: int = MAX_FREE) -> list[Tile]:
    """The tiles covering `shape` once, with every operand's access pattern in each.

    Args:
        shape: the output's shape S (every operand is already broadcast to it, see `operand`).
        operands: the output(s) first by convention (the layout prefers a unit-stride
            innermost free dim for operand 0), then the inputs.
        max_free: elements per partition per tile (the caller's SBUF budget, see
            `free_budget`).
    """
    dims = [int(n) for n in shape]
    strides = [list(op.strides) for op in operands]
    keep = [d for d, n in enumerate(dims) if n != 1]
    dims = [dims[d] for d in keep] or [1]
    strides = [[s[d] for d in keep] or [0] for s in strides]
    _coalesce(dims, strides)
    block = _Block(
        tuple(dims), tuple(tuple(s) for s in strides), tuple(op.offset for op in operands)
    )
    tiles: list[Tile] = []
    _emit(_best(block, max(1, int(max_free))), tiles)
    return tiles
