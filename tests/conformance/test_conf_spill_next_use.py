"""Rule evict_by_next_use (trnsim/compat/neuronxcc/nki/_nextuse.py) on the tiny chip: when SBUF
is full, the Beta-1 block evicted is the one whose value is needed again last (Belady's rule),
so blocks read in a cycle longer than what fits are re-read as often as the optimal order
needs, not once per pass as least recently used does. Values are the same with the rule on and
off; the bytes moved are those of a textbook MIN simulation of the kernel's block accesses."""

from __future__ import annotations

from pathlib import Path

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

import trnsim
from trnsim.chip import load_chip
from trnsim.compat.neuronxcc.nki._nextuse import NEVER, NextUse
from trnsim.timing.compiler import CompilerRules

TINY = load_chip(Path(__file__).parents[1] / "data" / "tiny_chip.yaml")  # 64 KiB SBUF
BLOCKS, ROUNDS, P, F = 20, 2, 128, 1024  # 20 blocks of 4 KiB per partition, read twice
BLOCK_BYTES = P * F * 4
FIT = 64 * 1024 // (F * 4)  # 16 blocks fit in the tiny chip's SBUF
RNG = np.random.default_rng(17)
X = RNG.standard_normal((BLOCKS, P, F)).astype(np.float32)
OFF = CompilerRules(evict_by_next_use=False)


@nki.jit(mode="simulation", platform_target="trn2")
def cyclic_reads(x):
    """Every block of x is loaded, then all are stored ROUNDS times over in the same order: a
    cycle of 20 blocks through 16 slots. The stores read the blocks directly (no other tile)."""
    out = nl.ndarray((ROUNDS, *x.shape), dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((x.shape[0], nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(x.shape[0]):
        w[k] = nl.load(x[k])
    for r in nl.affine_range(ROUNDS):
        for k in nl.affine_range(x.shape[0]):
            nl.store(out[r, k], value=w[k])
    return out


@nki.jit(mode="simulation", platform_target="trn2")
def cyclic_reads_of_results(x):
    """As cyclic_reads, but each block is updated in place after its load: an evicted block's
    value exists only in SBUF, so it is saved to a spill and reloaded from there."""
    out = nl.ndarray((ROUNDS, *x.shape), dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((x.shape[0], nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(x.shape[0]):
        w[k] = nl.load(x[k])
        w[k] = nisa.tensor_scalar(data=w[k], op0=nl.add, operand0=1.0)
    for r in nl.affine_range(ROUNDS):
        for k in nl.affine_range(x.shape[0]):
            nl.store(out[r, k], value=w[k])
    return out


def _accesses(updated: bool) -> list[tuple[int, bool]]:
    """The kernels' block accesses in program order: (block, whether it writes it whole)."""
    seq = []
    for k in range(BLOCKS):
        seq.append((k, True))  # the load fills the block
        if updated:
            seq += [(k, False), (k, True)]  # tensor_scalar reads it, then writes it whole
    for _ in range(ROUNDS):
        seq += [(k, False) for k in range(BLOCKS)]
    return seq


def _min_simulation(seq: list[tuple[int, bool]], slots: int) -> tuple[int, int]:
    """Belady's MIN over `seq` with `slots` blocks of memory, written from its definition
    (scan ahead for each resident block's next read; a whole write first means dead):
    (blocks read back into SBUF, evictions of a block written since it came in whose value is
    needed again: what a spill must save unless the block is a clean copy of HBM)."""

    def next_need(block: int, after: int) -> float:
        for t in range(after + 1, len(seq)):
            if seq[t][0] == block:
                return float("inf") if seq[t][1] else t
        return float("inf")

    resident: list[int] = []
    spilled_value: set[int] = set()  # blocks whose value is kept in HBM (source or spill)
    dirty: set[int] = set()
    read_back = saved = 0
    for t, (block, whole) in enumerate(seq):
        if block not in resident:
            if len(resident) == slots:
                victim = max(resident, key=lambda b: next_need(b, t))  # first of equals
                resident.remove(victim)
                if victim in dirty and next_need(victim, t) != float("inf"):
                    saved += 1
                    spilled_value.add(victim)
                dirty.discard(victim)
            if not whole:
                assert block in spilled_value
                read_back += 1
            resident.append(block)
        if whole:
            dirty.add(block)
    return read_back, saved


def test_next_use_records_when_each_access_needs_its_block_again():
    # blocks 7, 8, 7 (whole write), 7, 8: the write makes access 0's value dead
    uses = NextUse([7, 8, 7, 7, 8], [True, True, True, False, False])
    assert uses.needed_next == [NEVER, 4, 3, NEVER, NEVER]
    assert uses.at(1, 8) == 4
    assert uses.at(1, 7) is None  # not the recorded access: the caller stops using foresight
    assert uses.at(5, 8) is None


def test_a_cycle_longer_than_sbuf_re_reads_only_what_the_optimal_order_must():
    on = trnsim.profile(cyclic_reads, X, chip=TINY)
    off = trnsim.profile(cyclic_reads, X, chip=TINY, rules=OFF)
    np.testing.assert_array_equal(on.outputs, np.stack([X] * ROUNDS))
    np.testing.assert_array_equal(on.outputs, off.outputs)  # bit-identical
    re_read, saved = _min_simulation(_accesses(updated=False), FIT)
    # loads 16..19 each evict the newest block (read last), leaving 0..14 and 19; each round
    # then misses 4 blocks: 20 + 4 + 4 reads of x. 5 evicted values are needed again (15..18
    # while loading, 14 when 15 comes back): clean copies, re-read from x, none saved
    assert (re_read, saved) == (8, 5)
    s_on, s_off = on.summary(), off.summary()
    assert s_on["hbm_read_bytes"] == (BLOCKS + re_read) * BLOCK_BYTES
    # least recently used: the first round misses 5 (the newest-unread rule keeps 0..14
    # resident), the second all 20
    assert s_off["hbm_read_bytes"] == (BLOCKS + 5 + BLOCKS) * BLOCK_BYTES
    for s in (s_on, s_off):  # clean copies: re-read from x (refetch_clean_blocks), no spill
        assert s["hbm_write_bytes"] == ROUNDS * BLOCKS * BLOCK_BYTES
        assert s["spill_save_bytes"] == s["spill_reload_bytes"] == 0
    assert on.latency_ns < off.latency_ns


@pytest.mark.parametrize("refetch", [True, False], ids=["refetch on", "refetch off"])
def test_evicted_results_are_saved_and_reloaded_as_the_optimal_order_needs(refetch):
    rules_on = CompilerRules(refetch_clean_blocks=refetch)
    rules_off = CompilerRules(refetch_clean_blocks=refetch, evict_by_next_use=False)
    on = trnsim.profile(cyclic_reads_of_results, X, chip=TINY, rules=rules_on)
    off = trnsim.profile(cyclic_reads_of_results, X, chip=TINY, rules=rules_off)
    np.testing.assert_array_equal(on.outputs, np.stack([X + 1] * ROUNDS))
    np.testing.assert_array_equal(on.outputs, off.outputs)
    reloaded, saved = _min_simulation(_accesses(updated=True), FIT)
    # blocks 15..18 saved while loading, 14 when 15 comes back; 8 reloads as above
    assert (reloaded, saved) == (8, 5)
    s = on.summary()
    assert s["spill_reload_bytes"] == reloaded * BLOCK_BYTES
    assert s["spill_save_bytes"] == saved * BLOCK_BYTES
    assert s["hbm_read_bytes"] == (BLOCKS + reloaded) * BLOCK_BYTES  # x once, then spills
    assert s["hbm_write_bytes"] == (ROUNDS * BLOCKS + saved) * BLOCK_BYTES
    s_off = off.summary()  # least recently used: 5 + 20 reloads, every block saved once
    assert s_off["spill_reload_bytes"] == (5 + BLOCKS) * BLOCK_BYTES
    assert s_off["spill_save_bytes"] == BLOCKS * BLOCK_BYTES
    assert on.latency_ns < off.latency_ns


@pytest.fixture
def placements(monkeypatch):
    """Every Placement a launch makes (one per run of the launch), in order."""
    from trnsim.compat.neuronxcc.nki import _placement

    made = []
    real = _placement.Placement

    def counting(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(_placement, "Placement", counting)
    return made


def test_a_launch_whose_evictions_cost_nothing_runs_once(placements):
    """Blocks that are dead when evicted (never read again) need no foresight: the launch is
    not run a second time."""
    made = placements

    @nki.jit(mode="simulation", platform_target="trn2")
    def stream(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        w = nl.ndarray((x.shape[0], nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(x.shape[0]):
            w[k] = nl.load(x[k])
            nl.store(out[k], value=w[k])
        return out

    prof = trnsim.profile(stream, X, chip=TINY)
    np.testing.assert_array_equal(prof.outputs, X)
    assert len(made) == 1
    made.clear()
    trnsim.profile(cyclic_reads, X, chip=TINY)
    assert len(made) == 2  # the recorded run, then the one knowing its accesses
    assert not made[1].diverged


def test_an_spmd_launch_runs_again_once_for_all_its_programs(placements):
    """Both programs of a [2] grid read evicted blocks: one recorded run and one run knowing
    each program's accesses, each program re-reading what MIN says."""
    made = placements
    on = trnsim.profile(cyclic_reads[2], X, chip=TINY)
    assert len(made) == 2 and not made[1].diverged
    assert set(made[1].next_use) == {0, 1}  # each program's block pool, known ahead
    off = trnsim.profile(cyclic_reads[2], X, chip=TINY, rules=OFF)
    re_read, _ = _min_simulation(_accesses(updated=False), FIT)
    assert on.summary()["hbm_read_bytes"] == 2 * (BLOCKS + re_read) * BLOCK_BYTES
    assert off.summary()["hbm_read_bytes"] == 2 * (BLOCKS + 5 + BLOCKS) * BLOCK_BYTES
    for a, b in zip(on.outputs, off.outputs, strict=True):
        np.testing.assert_array_equal(a, b)
