"""Rule refetch_clean_blocks (trnsim/compat/neuronxcc/nki/_refetch.py) on the tiny chip: an
evicted Beta-1 block that is a clean copy of HBM is re-read from its source, not spilled; a
block written after its load, or whose source was written after the load, still spills; with
the rule off every block spills as before. Values are the same with the rule on and off."""

from __future__ import annotations

from pathlib import Path

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest

import trnsim
from trnsim.chip import load_chip
from trnsim.timing.compiler import CompilerRules

TINY = load_chip(Path(__file__).parents[1] / "data" / "tiny_chip.yaml")  # 64 KiB SBUF
BLOCKS, P, F = 32, 128, 1024  # 32 blocks of 4 KiB per partition: 128 KiB, twice the SBUF
BLOCK_BYTES = P * F * 4
RNG = np.random.default_rng(11)
X = RNG.standard_normal((BLOCKS, P, F)).astype(np.float32)
OFF = CompilerRules(refetch_clean_blocks=False)


@nki.jit(mode="simulation", platform_target="trn2")
def clean_blocks(x):
    """Every block is loaded before any is read, and never written: clean copies of x."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((x.shape[0], nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(x.shape[0]):
        big[b] = nl.load(x[b])
    for b in nl.affine_range(x.shape[0]):
        nl.store(out[b], value=nl.multiply(big[b], 3.0))
    return out


@nki.jit(mode="simulation", platform_target="trn2")
def dirty_blocks(x):
    """Each block is written again after its load: its contents are no copy of x."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((x.shape[0], nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(x.shape[0]):
        big[b] = nl.load(x[b])
        big[b] = nl.add(big[b], 1.0)
    for b in nl.affine_range(x.shape[0]):
        nl.store(out[b], value=nl.multiply(big[b], 3.0))
    return out


@nki.jit(mode="simulation", platform_target="trn2")
def overwritten_source(x: nt.mutable_tensor, y):
    """Every block is loaded from x, then x is overwritten (from y) before the blocks are read:
    the evicted blocks cannot be re-read from x."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((x.shape[0], nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(x.shape[0]):
        big[b] = nl.load(x[b])
    nl.store(x[0], value=nl.load(y))
    for b in nl.affine_range(x.shape[0]):
        nl.store(out[b], value=nl.multiply(big[b], 3.0))
    return out, x


def _spills(prof, kind):
    return [i for i in prof.program if i.attrs.get("spill_reload") == kind]


def _loads_of(prof, name):
    """Ordinary DMAs reading HBM tensor `name`, by the block they write."""
    out: dict[str, list] = {}
    for i in prof.program:
        plain = i.opcode == "dma_copy" and not i.attrs.get("spill_reload")
        into_sbuf = plain and i.writes[0].region.space == "sbuf"
        if into_sbuf and [o.tensor_name for o in i.reads] == [name]:
            out.setdefault(i.writes[0].tensor_name, []).append(i)
    return out


def test_an_evicted_clean_copy_is_re_read_from_its_source_not_spilled():
    on = trnsim.profile(clean_blocks, X, chip=TINY)
    off = trnsim.profile(clean_blocks, X, chip=TINY, rules=OFF)
    np.testing.assert_array_equal(on.outputs, 3 * X)
    np.testing.assert_array_equal(on.outputs, off.outputs)  # bit-identical
    evicted = len(_spills(off, "save"))
    assert 0 < evicted == len(_spills(off, "reload")) < BLOCKS
    assert _spills(on, "save") == _spills(on, "reload") == []
    s_on, s_off = on.summary(), off.summary()
    assert s_on["spill_save_bytes"] == s_on["spill_reload_bytes"] == 0
    # the re-reads are ordinary HBM reads of the source: the same bytes as the spill reloads
    assert s_on["hbm_read_bytes"] == (BLOCKS + evicted) * BLOCK_BYTES == s_off["hbm_read_bytes"]
    assert s_on["hbm_write_bytes"] == BLOCKS * BLOCK_BYTES  # only `out`: nothing saved
    assert s_off["hbm_write_bytes"] == (BLOCKS + evicted) * BLOCK_BYTES
    loads = _loads_of(on, "x")
    again = {blk: ins for blk, ins in loads.items() if len(ins) > 1}
    assert len(again) == evicted and all(len(ins) == 2 for ins in again.values())
    for first, second in again.values():  # the same source bytes, into a fresh slot
        assert second.reads[0].region == first.reads[0].region
        assert second.reads[0].pattern == first.reads[0].pattern
        assert second.reads[0].nbytes == BLOCK_BYTES
    assert {t.queue for t in on.dma_transfers} == {"qSyncIO"}
    assert on.latency_ns < off.latency_ns


@pytest.mark.parametrize("rules", [None, OFF], ids=["rule on", "rule off"])
def test_a_block_written_after_its_load_still_spills(rules):
    prof = trnsim.profile(dirty_blocks, X, chip=TINY, rules=rules)
    np.testing.assert_array_equal(prof.outputs, 3 * (X + 1))
    saves, reloads = _spills(prof, "save"), _spills(prof, "reload")
    assert 0 < len(saves) == len(reloads) < BLOCKS
    assert all(len(v) == 1 for v in _loads_of(prof, "x").values())  # x read once
    assert prof.summary()["spill_reload_bytes"] == len(reloads) * BLOCK_BYTES


def test_a_block_whose_source_was_overwritten_still_spills():
    y = np.full((P, F), 7.0, np.float32)
    runs = {}
    for name, rules in (("on", None), ("off", OFF)):
        x = X.copy()  # the kernel writes x
        runs[name] = trnsim.profile(overwritten_source, x, y, chip=TINY, rules=rules)
        np.testing.assert_array_equal(runs[name].outputs[0], 3 * X)
        np.testing.assert_array_equal(runs[name].outputs[1][0], y)
    on, off = runs["on"], runs["off"]
    for a, b in zip(on.outputs, off.outputs, strict=True):
        np.testing.assert_array_equal(a, b)
    assert 0 < len(_spills(on, "reload")) == len(_spills(off, "reload"))
    assert on.summary() == off.summary()
    assert on.latency_ns == off.latency_ns


def test_rule_off_spills_every_evicted_block_as_before():
    """With the rule off the clean copies are saved and reloaded on the spill queue."""
    off = trnsim.profile(clean_blocks, X, chip=TINY, rules=OFF)
    saves = _spills(off, "save")
    assert 0 < len(saves) == len(_spills(off, "reload"))
    assert {o.tensor_name for i in saves for o in i.writes} == {"big_spill"}
    assert all(len(v) == 1 for v in _loads_of(off, "x").values())
    assert off.summary()["spill_save_bytes"] == len(saves) * BLOCK_BYTES
    assert "qSyncSpillReload" in {t.queue for t in off.dma_transfers}


@nki.jit(mode="simulation", platform_target="trn2")
def re_read_then_written(x):
    """Clean blocks are evicted, re-read from x for an update, then evicted again dirty."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((x.shape[0], nl.par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(x.shape[0]):
        big[b] = nl.load(x[b])
    for b in nl.affine_range(x.shape[0]):
        big[b] = nl.add(big[b], 1.0)
    for b in nl.affine_range(x.shape[0]):
        nl.store(out[b], value=nl.multiply(big[b], 3.0))
    return out


def test_a_re_read_block_written_again_keeps_only_the_spills_it_needs():
    """The saves made while the blocks were clean copies are dropped (nothing reloads them);
    the saves of their updated values are kept, each reloaded once."""
    on = trnsim.profile(re_read_then_written, X, chip=TINY)
    off = trnsim.profile(re_read_then_written, X, chip=TINY, rules=OFF)
    np.testing.assert_array_equal(on.outputs, 3 * (X + 1))
    np.testing.assert_array_equal(on.outputs, off.outputs)
    saves, reloads = _spills(on, "save"), _spills(on, "reload")
    assert 0 < len(saves) == len(reloads) < len(_spills(off, "save"))
    spilled = {o.region for i in saves for o in i.writes}
    assert spilled == {o.region for i in reloads for o in i.reads}
    assert any(len(v) == 2 for v in _loads_of(on, "x").values())  # re-read for the update
