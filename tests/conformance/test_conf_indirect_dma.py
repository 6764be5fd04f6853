"""Beta-1 indirect DMA: shape inference of `data[idx_tile, grid]`, out-of-bounds modes and
read-modify-write stores, against numpy row gathers/scatters (issue 12, class 3 and 6)."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from trnsim.errors import OutOfBoundsError, RuntimeIndexError

ROWS, COLS = 96, 48
TABLE = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) / 7.0


def gather_every(step: int, mode):
    """Rows 0, step, 2*step, ... of a (ROWS, COLS) table into 32 partitions, -2 elsewhere."""

    @nki.jit(mode="simulation")
    def kernel(table):
        out = nl.ndarray((32, COLS), dtype=table.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:32, 0:COLS]
        rows = nisa.iota(step * nl.arange(32)[:, None], dtype=np.int32)
        got = nisa.memset(shape=(32, COLS), value=-2, dtype=table.dtype)
        nisa.dma_copy(src=table[rows, jf], dst=got[ip, jf], oob_mode=mode)
        nl.store(out, value=got)
        return out

    return kernel


def test_grid_free_index_keeps_the_index_tiles_partitions():
    """An mgrid free index spans the index tile's partitions: the source is (32, COLS)."""
    got = gather_every(3, nisa.oob_mode.error)(TABLE)
    np.testing.assert_array_equal(got, TABLE[3 * np.arange(32)])


def test_skip_leaves_out_of_range_rows_untouched():
    got = gather_every(4, nisa.oob_mode.skip)(TABLE)
    want = np.full((32, COLS), -2, np.float32)
    keep = 4 * np.arange(32) < ROWS
    want[keep] = TABLE[4 * np.arange(32)[keep]]
    np.testing.assert_array_equal(got, want)


def test_error_mode_raises_numpys_index_error_with_trnsims_description():
    """Beta-1 simulation raises IndexError with numpy's text for the flattened tensor (the
    first out-of-range row is 24 * 4 = 96, element 96 * COLS); the note says where."""
    with pytest.raises(IndexError) as exc:
        gather_every(4, nisa.oob_mode.error)(TABLE)
    assert type(exc.value) is IndexError
    assert str(exc.value) == f"index {96 * COLS} is out of bounds for axis 0 with size {TABLE.size}"
    note = exc.value.__notes__[0]
    assert "nisa.dma_copy(src=table[rows, jf]" in note
    assert "runtime vector offset 96 is outside [0, 96)" in note
    assert isinstance(exc.value.__cause__, RuntimeIndexError)
    assert isinstance(exc.value.__cause__, OutOfBoundsError)


def test_indirect_store_read_modify_write_adds_onto_rows():
    @nki.jit(mode="simulation")
    def kernel(vals):
        out = nl.ndarray((2 * 32, COLS), dtype=vals.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:32, 0:COLS]
        src = nl.load(vals[ip, jf])
        rows = nisa.iota(2 * nl.arange(32)[:, None] + 1, dtype=np.int32)
        base = nisa.memset(shape=(2 * 32, COLS), value=0.5, dtype=vals.dtype)
        nl.store(out, value=base)
        nisa.dma_copy(dst=out[rows, jf], src=src, dst_rmw_op=np.add)
        return out

    vals = TABLE[:32]
    want = np.full((64, COLS), 0.5, np.float32)
    want[2 * np.arange(32) + 1] += vals
    np.testing.assert_array_equal(kernel(vals), want)
