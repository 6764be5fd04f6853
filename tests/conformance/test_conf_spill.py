"""Beta-1 block tensors larger than SBUF (issue 12, class 1a): allocated block by block, live
blocks spilled to HBM and reloaded on the qSyncSpillReload queue, dead blocks never saved."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest

import trnsim
from trnsim.errors import AllocationError
from trnsim.timing.compiler import CompilerRules

BLOCKS, P, F = 64, 128, 1024  # 64 blocks of 4 KiB per partition: 256 KiB, more than SBUF
RNG = np.random.default_rng(3)
X = RNG.standard_normal((BLOCKS, P, F)).astype(np.float32)


@nki.jit(mode="simulation", platform_target="trn2")
def fill_then_consume(x):
    """Every block is loaded before any is read: some must wait in HBM."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((x.shape[0], nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(x.shape[0]):
        big[b] = nl.load(x[b])
    for b in nl.affine_range(x.shape[0]):
        nl.store(out[b], value=nl.multiply(big[b], 3.0))
    return out


@nki.jit(mode="simulation", platform_target="trn2")
def per_block_temporaries(x):
    """Each block is written and read in its own iteration: never live across the loop."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray((x.shape[0], nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    acc = nl.zeros(
        (x.shape[0], nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf, lazy_initialization=True
    )
    for b in nl.affine_range(x.shape[0]):
        a[b] = nl.load(x[b])
        acc[b] = nl.add(acc[b], a[b])  # zeros + x
        nl.store(out[b], value=acc[b])
    return out


def _spill_dmas(prof):
    return [i for i in prof.program if i.attrs.get("spill_reload")]


def test_live_blocks_spill_and_reload_on_the_spill_queue():
    """(Rule refetch_clean_blocks off: these blocks are clean copies of x, which the rule
    re-reads from x instead of spilling them; tests/conformance/test_conf_spill_refetch.py.)"""
    np.testing.assert_array_equal(fill_then_consume(X), 3 * X)
    prof = trnsim.profile(
        fill_then_consume, X, chip="trn2", rules=CompilerRules(refetch_clean_blocks=False)
    )
    np.testing.assert_array_equal(prof.outputs, 3 * X)
    dmas = _spill_dmas(prof)
    saves = [i for i in dmas if i.attrs["spill_reload"] == "save"]
    reloads = [i for i in dmas if i.attrs["spill_reload"] == "reload"]
    block_bytes = P * F * 4
    # what does not fit is saved once and read back once; the rest never leaves SBUF
    assert 0 < len(saves) == len(reloads) < BLOCKS
    assert {o.nbytes for i in dmas for o in i.writes} == {block_bytes}
    summary = prof.summary()
    assert summary["spill_save_bytes"] == len(saves) * block_bytes
    assert summary["spill_reload_bytes"] == len(reloads) * block_bytes
    queues = {t.queue for t in prof.dma_transfers}
    assert "qSyncSpillReload" in queues and "qSyncIO" in queues
    for i, (plan, _, _) in prof.timeline.dma.items():  # the spill DMAs, and only they
        assert (plan.queue == "qSyncSpillReload") == bool(prof.program[i].attrs.get("spill_reload"))
    # the slots are reused: SBUF never holds more than its usable capacity
    cap = prof.chip.sbuf.usable_bytes_per_partition
    assert max(v for _, v in prof.counters["sbuf_usage[0]"]) <= cap


def test_dead_blocks_are_never_saved_and_lazy_zeros_fill_each_block():
    np.testing.assert_array_equal(per_block_temporaries(X), X)
    prof = trnsim.profile(per_block_temporaries, X, chip="trn2")
    assert _spill_dmas(prof) == []
    assert prof.summary()["spill_reload_bytes"] == 0
    memsets = [i for i in prof.program if i.opcode == "memset"]
    assert len(memsets) == BLOCKS  # one per block, when it first lives
    assert [i.index for i in prof.program] == list(range(len(prof.program)))


def test_a_tile_that_cannot_fit_names_what_is_live():
    import nki as ga
    import nki.isa as nisa
    import nki.language as gl

    def kernel(x):
        keep = []
        for _ in range(5):
            t = gl.ndarray((128, 16384), dtype=gl.float32, buffer=gl.sbuf)
            nisa.memset(dst=t, value=0.0)
            keep.append(t)
        for t in keep:  # every tile is used after the last allocation: all five are live
            nisa.dma_copy(dst=x, src=t[:, 0:4])
        return x

    with pytest.raises(AllocationError, match=r"live: sbuf tensor \[128, 16384\] float32"):
        ga.simulate(kernel)(np.zeros((128, 4), np.float32))
