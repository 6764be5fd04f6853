"""Beta-1 memory: tiles of a finished loop iteration are freed (and out of scope), SBUF that
fills up under Python lifetimes overflows with a warning, direct allocation addresses."""

from __future__ import annotations

import warnings

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from trnsim.errors import AllocationError, SimulationWarning

X = np.random.default_rng(0).random((128, 8192)).astype(np.float32)


def test_loop_tiles_are_freed_each_iteration():
    """A 128 KiB-per-partition tile per iteration fits only if the previous iteration's tile
    is released before the next one is allocated (no overflow warning)."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 128), dtype=nl.float32)
        for _ in nl.affine_range(8):
            big = nl.ndarray((128, 32768), dtype=nl.float32)
            big[:, 0:8192] = nl.load(x)
            acc += big[:, 0:128]
        nl.store(out, value=acc)
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("error", SimulationWarning)
        np.testing.assert_allclose(kernel(X), 8 * X[:, :128], rtol=1e-6)


def test_sbuf_overflow_warns_and_keeps_values():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 8192), dtype=x.dtype, buffer=nl.shared_hbm)
        tiles = [nl.load(x) for _ in range(8)]  # 8 x 32 KiB per partition: above SBUF
        total = tiles[0]
        for t in tiles[1:]:
            total = nl.add(total, t)
        nl.store(out, value=total)
        return out

    with pytest.warns(SimulationWarning, match="overflow memory"):
        got = kernel(X)
    np.testing.assert_allclose(got, 8 * X, rtol=1e-6)


def test_a_tile_larger_than_sbuf_is_an_error():
    @nki.jit
    def kernel(x):
        t = nl.ndarray((128, 70000), dtype=nl.float32)
        return t

    with pytest.raises(AllocationError):
        kernel(X)


def test_direct_allocation_places_tiles_at_their_address():
    seen = {}

    @nki.jit
    def kernel(x):
        a = nl.ndarray((128, 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
        p = nl.ndarray((128, 64), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=3))
        seen["a"] = a._buf.byte_start
        seen["p"] = p._buf.byte_start
        a[...] = nl.load(x[:, 0:64])
        p[...] = nl.copy(a)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=p)
        return out

    np.testing.assert_array_equal(kernel(X), X[:, :64])
    assert seen == {"a": 4096, "p": 3 * 2048}
