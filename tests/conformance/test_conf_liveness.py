"""Tiles are freed after their last use when memory is full (trnsim.nki.liveness): a tile a
variable still names but the kernel never uses again does not block an allocation, as it does
not for the compiler; a tile freed too early (used again later) makes the launch run again
keeping it, and the values are those of a run that never freed it."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

import trnsim

RNG = np.random.default_rng(2024)
K, M, N = 32, 128, 512  # one matmul result [128, 512] fp32 fills one 2 KiB PSUM bank
S = RNG.uniform(-1, 1, (K, M)).astype(np.float32)
MV = RNG.uniform(-1, 1, (8, K, N)).astype(np.float32)
REF = np.einsum("km,bkn->bmn", S.astype(np.float64), MV.astype(np.float64))


def _matmul_into(dst, s_sb, mv_hbm):
    mv = nl.ndarray((K, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv, src=mv_hbm)
    nisa.nc_matmul(dst=dst, stationary=s_sb, moving=mv)


def _store(out, p):
    r = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=p)
    nisa.dma_copy(dst=out, src=r)


@nki.jit
def eight_banks_after_a_dead_tile(s, mv, bias, out, out_bias):
    """A small PSUM tile used once and left bound to `tmp`, then all eight banks."""
    s_sb = nl.ndarray((K, M), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s_sb, src=s)
    b_sb = nl.ndarray((K, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_sb, src=bias)
    tmp = nl.ndarray((M, 8), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=tmp, stationary=s_sb, moving=b_sb)
    t_sb = nl.ndarray((M, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t_sb, src=tmp)
    nisa.dma_copy(dst=out_bias, src=t_sb)
    banks = []
    for _ in range(8):
        banks.append(nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum))
    for b in range(8):
        _matmul_into(banks[b], s_sb, mv[b])
    for b in range(8):
        _store(out[b], banks[b])


def test_a_dead_tile_named_by_a_variable_does_not_block_eight_banks():
    bias = RNG.uniform(-1, 1, (K, 8)).astype(np.float32)
    out = np.zeros((8, M, N), np.float32)
    out_bias = np.zeros((M, 8), np.float32)
    prof = trnsim.profile(eight_banks_after_a_dead_tile, S, MV, bias, out, out_bias)
    np.testing.assert_allclose(out, REF, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out_bias, S.T.astype(np.float64) @ bias, rtol=1e-5, atol=1e-5)
    assert sum(i.opcode == "nc_matmul" for i in prof.program) == 9  # one run's program


@nki.jit
def first_tile_used_again(s, mv, out):
    """Eight banks hold results; a ninth allocation frees the least recently used (bank 0),
    which the kernel reads at the end: the launch runs again keeping bank 0 and frees bank 1,
    which is never read again after its first store."""
    s_sb = nl.ndarray((K, M), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s_sb, src=s)
    banks = []
    for b in range(8):
        p = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
        _matmul_into(p, s_sb, mv[b])
        banks.append(p)
    for b in range(1, 8):
        _store(out[b], banks[b])
    extra = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    _matmul_into(extra, s_sb, mv[1])
    _store(out[8], extra)
    _store(out[0], banks[0])  # bank 0 was the least recently used, but it is still live


def test_a_tile_freed_too_early_makes_the_launch_run_again_keeping_it():
    out = np.zeros((9, M, N), np.float32)
    prof = trnsim.profile(first_tile_used_again, S, MV, out)
    np.testing.assert_allclose(out[:8], REF, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[8], REF[1], rtol=1e-5, atol=1e-5)
    assert sum(i.opcode == "nc_matmul" for i in prof.program) == 9  # the last run only


@nki.jit
def spare_tiles_then_banks(s, mv, out, late: bool):
    """Eight half-bank PSUM tiles made at once (each starts a bank), one used; then three
    full banks. The seven untouched tiles hold no space for the compiler until first used;
    with `late`, one of them is used at the end: the launch runs again keeping it."""
    h = N // 2
    s_sb = nl.ndarray((K, M), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s_sb, src=s)
    spare = [nl.ndarray((M, h), dtype=nl.float32, buffer=nl.psum) for _ in range(8)]
    mv0 = nl.ndarray((K, h), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv0, src=mv[0][:, 0:h])
    nisa.nc_matmul(dst=spare[0], stationary=s_sb, moving=mv0)
    r = nl.ndarray((M, h), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=spare[0])
    nisa.dma_copy(dst=out[0][:, 0:h], src=r)
    banks = [nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum) for _ in range(3)]
    for b in range(3):  # all three live at once
        _matmul_into(banks[b], s_sb, mv[b + 1])
    for b in range(3):
        _store(out[b + 1], banks[b])
    if late:
        nisa.nc_matmul(dst=spare[5], stationary=s_sb, moving=mv0)
        nisa.tensor_copy(dst=r, src=spare[5])
        nisa.dma_copy(dst=out[4][:, 0:h], src=r)


def test_tiles_never_used_yet_are_freed_after_the_used_ones():
    h = N // 2
    for late in (False, True):
        out = np.zeros((5, M, N), np.float32)
        prof = trnsim.profile(spare_tiles_then_banks, S, MV, out, late)
        np.testing.assert_allclose(out[0][:, :h], REF[0][:, :h], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out[1:4], REF[1:4], rtol=1e-5, atol=1e-5)
        assert sum(i.opcode == "nc_matmul" for i in prof.program) == 4 + late  # one run's
        if late:
            np.testing.assert_array_equal(out[4][:, :h], out[0][:, :h])


def test_a_multi_rank_launch_frees_and_reruns_per_rank():
    """run_ranks frees tiles after their last use too: each rank's tile is its own (a tile
    kept for rank 1 is not rank 0's), and a miss on any rank runs every rank again."""
    from trnsim.nki.ranks import run_ranks

    outs = [np.zeros((9, M, N), np.float32) for _ in range(2)]
    mvs = [MV, MV[::-1].copy()]
    run = run_ranks(first_tile_used_again, [(S, mvs[r], outs[r]) for r in range(2)],
                    chip="trn2", topology="trn2-instance")
    for r in range(2):
        ref = np.einsum("km,bkn->bmn", S.astype(np.float64), mvs[r].astype(np.float64))
        np.testing.assert_allclose(outs[r][:8], ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(outs[r][8], ref[1], rtol=1e-5, atol=1e-5)
        prog = run.world.devices[r].program
        assert sum(i.opcode == "nc_matmul" for i in prog) == 9  # the last run only
