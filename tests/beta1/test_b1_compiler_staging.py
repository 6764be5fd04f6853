"""Beta-1 forms AWS's reference kernels (nki-samples flash attention, vision, allocated
attention) use, which the B1 compiler lowers: PSUM operands staged through SBUF for engines that
read SBUF only, a transpose written into a destination of another dtype, an int8 mask in
nl.where, integer indices in front of an indirect index, a multi-line loop_reduce assignment and
an allocation function taking its block index by keyword. Each against numpy."""

from __future__ import annotations

import functools

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
from neuronxcc.nki.language import par_dim

RNG = np.random.default_rng(7)
A = RNG.standard_normal((128, 128)).astype(np.float32)
B = RNG.standard_normal((128, 128)).astype(np.float32)
F64 = np.float64


def test_affine_select_reads_a_psum_tile_through_sbuf():
    @nki.jit
    def kernel(a, b):
        ps = nisa.nc_matmul(nl.load(a), nl.load(b))  # PSUM, as flash attention's qk_psum
        iq, ik = nl.arange(128)[:, None], nl.arange(128)[None, :]
        masked = nisa.affine_select(pred=(iq >= ik), on_true_tile=ps, on_false_value=-1e4,
                                    dtype=nl.float32)
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=masked)
        return out

    want = np.where(np.tri(128, dtype=bool), A.astype(F64).T @ B, -1e4)
    np.testing.assert_allclose(kernel(A, B), want, rtol=1e-4, atol=1e-4)


def test_nc_transpose_into_an_fp32_psum_tile_and_matmul_from_psum():
    """bf16 data transposed into a declared fp32 PSUM tile (a cast after the transpose), and
    an unassigned transpose (in PSUM) used as a matmul's stationary operand."""
    a16 = A.astype(ml_dtypes.bfloat16)

    @nki.jit
    def kernel(a, b):
        x = nl.load(a)
        t32 = nl.ndarray((par_dim(128), 128), dtype=nl.float32, buffer=nl.psum)
        t32[:, :] = nisa.nc_transpose(x)
        out_t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out_t, value=t32)
        cast = nisa.nc_transpose(x, dtype=nl.float32)
        out_c = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out_c, value=cast)
        xt = nisa.nc_transpose(x)  # stays in PSUM
        mm = nisa.nc_matmul(xt, nl.load(b))
        out_m = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out_m, value=mm)
        return out_t, out_c, out_m

    b16 = B.astype(ml_dtypes.bfloat16)
    t, c, m = kernel(a16, b16)
    exact = a16.astype(np.float32).T
    np.testing.assert_array_equal(t, exact)
    np.testing.assert_array_equal(c, exact)
    np.testing.assert_allclose(m, a16.astype(F64) @ b16.astype(F64), rtol=2e-2, atol=2e-2)


def test_where_takes_an_int8_mask():
    @nki.jit
    def kernel(a, b):
        x, y = nl.load(a), nl.load(b)
        m = nl.equal(x > 0, 1, dtype=nl.int8)  # an int8 mask, as select_and_scatter makes
        sel = nl.where(m, x, 7.0, dtype=nl.float32)
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(sel, y))
        return out

    np.testing.assert_array_equal(kernel(A, B), np.where(A > 0, A, 7.0).astype(np.float32) + B)


def test_indirect_index_after_integer_indices_and_a_mask():
    """data[b, idx_tile, i_f] under a partition mask (AWS's resize_nearest): rows past the
    mask are neither read nor bounds-checked."""
    data = RNG.standard_normal((3, 100, 16)).astype(np.float32)

    @nki.jit
    def kernel(d):
        out = nl.ndarray((3, 100, 16), dtype=d.dtype, buffer=nl.shared_hbm)
        for b in nl.affine_range(3):
            i_p, i_f = nl.arange(128)[:, None], nl.arange(16)[None, :]
            idx = nisa.iota(99 - i_p, dtype=nl.int32)  # reversed rows; negative past row 99
            t = nl.load(d[b, idx, i_f], mask=(i_p < 100))
            nl.store(out[b, i_p, i_f], value=t, mask=(i_p < 100))
        return out

    np.testing.assert_array_equal(kernel(data), data[:, ::-1, :])


def test_loop_reduce_assignment_over_several_lines():
    x = RNG.standard_normal((4, 128, 64)).astype(np.float32)

    @nki.jit
    def kernel(a):
        acc = nl.zeros((par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            t = nl.load(a[i])
            acc[...] = nl.loop_reduce(
                t, op=np.add, loop_indices=(i,),
                dtype=nl.float32)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=acc)
        return out

    np.testing.assert_allclose(kernel(x), x.astype(F64).sum(0), rtol=1e-5, atol=1e-5)


def test_allocation_function_takes_its_block_index_by_keyword():
    """ncc.psum.alloc(functools.partial(f, bank_map=...)) with f(bank_map, idx, pdim_size,
    fdim_size), as AWS's allocated SD attention writes it: called with idx=, pdim_size=,
    fdim_size= when the positions are taken."""
    banks = {}

    def psum_addr(bank_map, idx, pdim_size, fdim_size):
        banks[idx] = bank_map[idx]
        return (bank_map[idx], 0, 0)

    @nki.jit
    def kernel(a, b):
        ps = nl.ndarray((2, par_dim(128), 128), dtype=nl.float32,
                        buffer=ncc.psum.alloc(functools.partial(psum_addr,
                                                                bank_map={(0,): 1, (1,): 5})))
        out = nl.ndarray((2, 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            ps[i] = nisa.nc_matmul(nl.load(a), nl.load(b))
            nl.store(out[i], value=ps[i])
        return out

    out = kernel(A, B)
    np.testing.assert_allclose(out[1], A.astype(F64).T @ B, rtol=1e-4, atol=1e-4)
    assert banks == {(0,): 1, (1,): 5}
