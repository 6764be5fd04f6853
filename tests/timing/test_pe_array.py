"""PE-array occupancy in 32 x 32 cells (trnsim/timing/pe_array.py)."""

from __future__ import annotations

from trnsim.timing.pe_array import ALL_CELLS, PEArray, cells_of


def test_untiled_and_invalid_tiles_cover_the_whole_array():
    assert cells_of((), ()) == ALL_CELLS
    assert cells_of(None, None) == ALL_CELLS
    assert cells_of((0, 0), (128, 128)) == ALL_CELLS
    assert cells_of((16, 0), (32, 32)) == ALL_CELLS  # not on the 32 grid: never guessed
    assert cells_of((96, 0), (64, 128)) == ALL_CELLS  # leaves the array


def test_tiles_map_to_their_cells():
    # rows (contraction partitions) 64..127, columns 0..63: the lower-left quadrant
    assert cells_of((64, 0), (64, 64)) == (8, 9, 12, 13)
    assert cells_of((0, 96), (32, 32)) == (3,)
    assert set(cells_of((0, 0), (128, 64))).isdisjoint(cells_of((0, 64), (128, 64)))
    assert len(cells_of((0, 0), (64, 128))) == 8


def test_disjoint_tiles_keep_their_own_times():
    pe = PEArray()
    left, right = cells_of((0, 0), (128, 64)), cells_of((0, 64), (128, 64))
    pe.occupy(left, 10, 500)
    assert pe.free_at(right) == 0 and pe.started_at(right) == 0
    assert (pe.free_at(left), pe.started_at(left)) == (500, 10)
    pe.occupy(right, 20, 700)
    assert (pe.free_at(ALL_CELLS), pe.started_at(ALL_CELLS)) == (700, 20)
