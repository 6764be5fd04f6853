"""Beta-1 memory: tiles of a finished loop iteration are freed (and out of scope), SBUF that
fills up under Python lifetimes overflows with a warning, direct allocation addresses."""

from __future__ import annotations

import warnings

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
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


def test_direct_allocated_blocks_live_at_their_addresses_and_alias():
    """A PSUM block tensor under mod_alloc: 4 x 3 logical banks cycle over 3 physical banks
    (more than PSUM holds if placed whole), each block at base_bank + its index mod 3; blocks
    sharing a bank share bytes, so a later block's matmul overwrites an earlier one's."""
    banks = {}
    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((128, 12 * 512)).astype(np.float32)

    @nki.jit
    def kernel(at, bt):
        lhs = nl.load(at)
        out = nl.ndarray((128, 12 * 512), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((4, 3, nl.par_dim(128), 512), dtype=nl.float32,
                        buffer=ncc.psum.mod_alloc(base_bank=2, num_bank_tiles=(1, 3)))
        for i in nl.affine_range(4):
            for j in nl.affine_range(3):
                n = i * 3 + j
                rhs = nl.load(bt[:, n * 512:(n + 1) * 512])
                ps[i, j] = nisa.nc_matmul(lhs, rhs)
                banks[(i, j)] = ps._buf.slots[n].buffer.byte_start // 2048
                nl.store(out[:, n * 512:(n + 1) * 512], value=ps[i, j])
        # block (0, 0) shares bank 2 with (3, 0): it now holds (3, 0)'s product
        last = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(last, value=ps[0, 0])
        return out, last

    out, last = kernel(a, b)
    ref = a.astype(np.float64).T @ b.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(last, ref[:, 9 * 512:10 * 512], rtol=1e-4, atol=1e-4)
    assert banks == {(i, j): 2 + j for i in range(4) for j in range(3)}


def test_psum_accumulate_into_an_uninitialized_tile_starts_from_the_first_product():
    """`psum[...] += nisa.nc_matmul(...)` into an nl.ndarray PSUM tile is the auto rule: the
    first write overwrites, later ones add (nki-api.md §6; AWS's attn_fwd_v8a relies on it)."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((256, 64)).astype(np.float32)
    b = rng.standard_normal((256, 96)).astype(np.float32)

    @nki.jit
    def kernel(at, bt):
        acc = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            acc[...] += nisa.nc_matmul(nl.load(at[k * 128:(k + 1) * 128]),
                                       nl.load(bt[k * 128:(k + 1) * 128]))
        out = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=acc)
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("error", SimulationWarning)  # no "accumulate onto undefined"
        out = kernel(a, b)
    np.testing.assert_allclose(out, a.astype(np.float64).T @ b, rtol=1e-4, atol=1e-4)


def test_direct_allocation_in_a_loop_body_is_declared_once():
    """B1 traces a loop body once: a Python address counter advanced after each declaration
    (AWS's allocated SD attention) advances once, so every iteration's tile sits where the
    first one's does; blocks are placed at the declaration, so a tensor declared at another's
    address reads what that one wrote (no fresh undefined bytes at its first access)."""
    starts = []

    @nki.jit
    def kernel(x):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        cur = 1024
        for i in nl.affine_range(4):
            t = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32,
                           buffer=ncc.sbuf.mod_alloc(base_addr=cur, num_free_tiles=(2,)))
            alias = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32,
                               buffer=ncc.sbuf.mod_alloc(base_addr=cur, num_free_tiles=(2,)))
            cur += 2 * 64 * 4
            t[0] = nl.load(x[:, i * 64:(i + 1) * 64])
            starts.append(t._buf.slots[0].buffer.byte_start)
            nl.store(out[i], value=nl.copy(alias[0]))
        return out

    out = kernel(X)
    np.testing.assert_array_equal(out, X[:, :256].reshape(128, 4, 64).transpose(1, 0, 2))
    assert starts == [1024] * 4
