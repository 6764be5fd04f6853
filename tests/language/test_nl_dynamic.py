"""Dynamic views through real instructions: DMA gathers with scalar / vector offsets."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


def test_dma_gather_rows_with_vector_select():
    table = np.arange(20 * 8, dtype=np.float32).reshape(20, 8)
    rows = np.array([[5], [19], [0], [7]], dtype=np.int32)

    def kernel(t, idx):
        ix = nl.load(idx)
        out_t = nl.ndarray((4, 8), t.dtype)
        nisa.dma_copy(dst=out_t, src=t.vector_select(0, ix))
        out = nl.ndarray((4, 8), t.dtype, buffer=nl.shared_hbm)
        nl.store(out, out_t)
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(table, rows), table[rows[:, 0]])


def test_dma_with_scalar_offset_from_tile_and_register():
    table = np.arange(6 * 128 * 4, dtype=np.float32).reshape(6, 128, 4)

    def kernel(t):
        out = nl.ndarray((2, 128, 4), t.dtype, buffer=nl.shared_hbm)
        idx = nl.full((1, 1), 4, nl.int32)
        tile = nl.ndarray((128, 4), t.dtype)
        nisa.dma_copy(
            dst=tile, src=t.ap([[4, 128], [1, 4]], offset=0, scalar_offset=idx, indirect_dim=0)
        )
        nl.store(out[0], tile)
        reg = nisa.register_alloc(2)
        nisa.dma_copy(dst=tile, src=t.select(0, reg))
        nl.store(out[1], tile)
        return out

    out = nki.simulate(kernel)(table)
    np.testing.assert_array_equal(out[0], table[4])
    np.testing.assert_array_equal(out[1], table[2])


def test_register_index_and_ds_are_runtime_offsets():
    table = np.arange(8 * 128 * 4, dtype=np.float32).reshape(8, 128, 4)
    flat = np.arange(1024, dtype=np.float32).reshape(1, 1024)

    def kernel(t, f):
        out = nl.ndarray((3, 128, 4), t.dtype, buffer=nl.shared_hbm)
        tile = nl.ndarray((128, 4), t.dtype)
        reg = nisa.register_alloc(5)
        view = t[reg]  # resolved when the instruction runs, not here
        nisa.dma_copy(dst=tile, src=view)
        nl.store(out[0], tile)
        nisa.register_move(reg, 6)
        nisa.dma_copy(dst=tile, src=view)
        nl.store(out[1], tile)
        row = nl.ndarray((1, 4), t.dtype)
        nisa.dma_copy(dst=row, src=f[0:1, nl.ds(reg, 4)])
        nl.store(out[2, 0:1, :], row)
        return out

    out = nki.simulate(kernel)(table, flat)
    np.testing.assert_array_equal(out[0], table[5])
    np.testing.assert_array_equal(out[1], table[6])
    np.testing.assert_array_equal(out[2, 0], flat[0, 6:10])
