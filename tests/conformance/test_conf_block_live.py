"""Beta-1 block tensors allocated by liveness (issue 12, class 1a, NKIBench's compiler-dumped
kernels): a tensor declared early that would fit whole does not keep a block tensor used before
it from running, and nl.loop_reduce accumulates into one block of a block tensor."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

import trnsim

RNG = np.random.default_rng(1213)
BANK_F = 512  # fp32 elements in one 2 KiB PSUM bank
BANKS = 8  # PSUM: 16 KiB per partition (trn2), 8 banks
A = RNG.standard_normal((4, 128, 128)).astype(np.float32)
B = RNG.standard_normal((128, BANK_F)).astype(np.float32)


@nki.jit(mode="simulation", platform_target="trn2")
def early_and_late(a, b):
    """`late` (all of PSUM, declared first) is used only after `early`'s blocks are dead."""
    out_e = nl.ndarray((a.shape[0], 128, BANK_F), dtype=nl.float32, buffer=nl.shared_hbm)
    out_l = nl.ndarray((BANKS, 128, BANK_F), dtype=nl.float32, buffer=nl.shared_hbm)
    late = nl.zeros((BANKS, nl.par_dim(128), BANK_F), dtype=nl.float32, buffer=nl.psum)
    early = nl.ndarray((a.shape[0], nl.par_dim(128), BANK_F), dtype=nl.float32, buffer=nl.psum)
    rhs = nl.load(b)
    for i in nl.affine_range(a.shape[0]):
        early[i] = nisa.nc_matmul(nl.load(a[i]), rhs)
        nl.store(out_e[i], nl.copy(early[i]))
    for j in nl.affine_range(BANKS):
        late[j] += nisa.nc_matmul(nl.load(a[j % a.shape[0]]), rhs)
        nl.store(out_l[j], nl.copy(late[j]))
    return out_e, out_l


def test_a_block_tensor_declared_early_gives_way_to_one_used_before_it():
    out_e, out_l = early_and_late(A, B)
    want = np.einsum("ikp,kf->ipf", A.astype(np.float64), B)  # nc_matmul: stationary^T @ moving
    np.testing.assert_allclose(out_e, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out_l, want[np.arange(BANKS) % 4], rtol=1e-4, atol=1e-4)
    # the second placement holds at most the 8 banks at any time
    prof = trnsim.profile(early_and_late, A, B, chip="trn2")
    assert max(v for _, v in prof.counters["psum_usage[0]"]) <= BANKS * 4 * BANK_F


@nki.jit(mode="simulation", platform_target="trn2")
def fits_whole(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.zeros((x.shape[0], nl.par_dim(128), x.shape[2]), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(x.shape[0]):
        t[i] = nl.add(t[i], nl.load(x[i]))
        nl.store(out[i], t[i])
    return out


def test_a_block_tensor_that_fits_is_still_one_allocation_when_nothing_runs_out():
    x = RNG.standard_normal((4, 128, 64)).astype(np.float32)
    prof = trnsim.profile(fits_whole, x, chip="trn2")
    np.testing.assert_array_equal(prof.outputs, x)
    assert [i.opcode for i in prof.program].count("memset") == 1  # one fill of the whole


@nki.jit(mode="simulation", platform_target="trn2")
def running_max(x):
    """The per-block maximum over j of x[b, j], kept in one block of `acc` per b."""
    out = nl.ndarray((x.shape[0], 128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((x.shape[0], nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(x.shape[0]):
        acc[b, nl.arange(128)[:, None], 0] = nl.full((128, 1), -1e30, dtype=nl.float32)
        for j in nl.affine_range(x.shape[1]):
            m = nisa.tensor_reduce(nl.max, data=nl.load(x[b, j]), axis=[1])
            acc[b, nl.arange(128)[:, None], 0] = nl.loop_reduce(m, op=np.max, loop_indices=[j])
        nl.store(out[b], acc[b])
    return out


def test_loop_reduce_accumulates_into_one_block_of_a_block_tensor():
    x = RNG.standard_normal((2, 3, 128, 64)).astype(np.float32)
    np.testing.assert_array_equal(running_max(x)[..., 0], x.max(axis=(1, 3)))
