"""Occupancy of a NeuronCore's PE array, for matmuls tiled onto part of it.

`nc_matmul(tile_position=(row, col), tile_size=(rows, cols))` runs a small matmul on a
rows x cols rectangle of the 128 x 128 systolic array (rows: contraction partitions, cols:
stationary columns = result partitions), and matmuls on disjoint rectangles run concurrently
(nki-api.md §7.1 "Tiling"; trainium-hw.md: the chip table's "PE tiling" row and item 4 of
"What a cycle model must represent"). Tile sizes and positions are multiples of 32, so the
array is kept as a 4 x 4 grid of 32 x 32 cells, each with the time its MultiplyMoving work
ends and the time the last matmul on it started (a LoadStationary may refill a cell's weights
once the matmul using them has started: the background weight load).

An untiled matmul covers every cell, so a stream of untiled matmuls is timed exactly as with
one "matmul free" and one "matmul started" time for the whole array.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

PE_SIZE = 128  # rows (partitions) and columns of the systolic array
CELL = 32  # tile sizes and positions are multiples of this
_SIDE = PE_SIZE // CELL
ALL_CELLS: tuple[int, ...] = tuple(range(_SIDE * _SIDE))


def cells_of(position: Any, size: Any) -> tuple[int, ...]:
    """The cells a matmul's tile covers (every cell when it is not tiled, or when the tile is
    not one the rules allow: those are refused before timing, so this never guesses)."""
    try:
        return _cells(tuple(int(v) for v in position), tuple(int(v) for v in size))
    except (TypeError, ValueError):
        return ALL_CELLS


@functools.lru_cache(maxsize=64)
def _cells(position: tuple[int, ...], size: tuple[int, ...]) -> tuple[int, ...]:
    if len(position) != 2 or len(size) != 2:
        return ALL_CELLS
    (r0, c0), (rs, cs) = position, size
    if min(rs, cs) <= 0 or any(v % CELL for v in (r0, c0, rs, cs)):
        return ALL_CELLS
    if r0 < 0 or c0 < 0 or r0 + rs > PE_SIZE or c0 + cs > PE_SIZE:
        return ALL_CELLS
    rows = range(r0 // CELL, (r0 + rs) // CELL)
    cols = range(c0 // CELL, (c0 + cs) // CELL)
    cells = tuple(r * _SIDE + c for r in rows for c in cols)
    return ALL_CELLS if cells == ALL_CELLS else cells


class PEArray:
    """Per-cell times (ticks) of one core's PE array. The maxima over all cells are kept as
    they change, so a matmul over the whole array (the common case) reads two numbers."""

    __slots__ = ("free", "last_free", "last_start", "started")

    def __init__(self) -> None:
        self.free = [0] * len(ALL_CELLS)  # when the cell's MultiplyMoving work ends
        self.started = [0] * len(ALL_CELLS)  # when the last matmul on the cell started
        self.last_free = 0  # max(free)
        self.last_start = 0  # max(started)

    def free_at(self, cells: Sequence[int]) -> int:
        if cells is ALL_CELLS:
            return self.last_free
        free = self.free
        return max(free[c] for c in cells)

    def started_at(self, cells: Sequence[int]) -> int:
        if cells is ALL_CELLS:
            return self.last_start
        started = self.started
        return max(started[c] for c in cells)

    def occupy(self, cells: Sequence[int], start: int, end: int) -> None:
        if cells is ALL_CELLS:  # every cell: two fresh lists, not a Python loop
            n = len(ALL_CELLS)
            self.free, self.started = [end] * n, [start] * n
        else:
            free, started = self.free, self.started
            for c in cells:
                free[c] = end
                started[c] = start
        if end > self.last_free:
            self.last_free = end
        if start > self.last_start:
            self.last_start = start
