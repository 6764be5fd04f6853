"""Compiler rule `allocation` (trnsim/timing/realloc.py): automatic tiles re-placed by their
true live ranges, in exact ticks on the tiny chip (1 GHz: 1 cycle = 1 tick = 1 ns).

Tiny chip numbers used below: MIN_II 64, engine latency 100, semaphore latency 10 ns; an fp32
memset or tensor_copy of N <= 64 elements per partition costs 64 cycles; 64 KiB of SBUF per
partition (alignment 64 B).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from trnsim.allocation import TileRecord, drop_from_records
from trnsim.chip import load_chip
from trnsim.errors import SimulationWarning
from trnsim.timing.compiler import ALLOCATIONS, CompilerRules
from trnsim.timing.profile import profile, time_program
from trnsim.timing.realloc import reallocate
from trnsim.timing.reorder import schedule
from trnsim.timing.scheduler import Scheduler

from .builders import TINY, ProgramBuilder, tile

SBUF = 65536  # tiny chip: bytes per partition


def rec(offset: int, nbytes: int, born: int, died: int = -1, auto: bool = True,
        partitions: int = 128, capacity: int = SBUF, space: str = "sbuf") -> TileRecord:
    """An allocation record as core.NeuronCore.allocate makes it, with its lifetime set."""
    r = TileRecord(space, 0, 0, partitions, offset, nbytes, 64 if space == "sbuf" else 2048,
                   capacity, auto, [])
    r.born, r.died = born, died
    return r


def sb(offset: int, free: int = 64, name: str = "t") -> object:
    return tile("sbuf", (128, free), "float32", offset, name=name)


def memset(b: ProgramBuilder, dst, engine: str = "vector") -> int:
    return b.add("memset", engine, (), [replace(dst, name="dst")], value=1.0)


def copy(b: ProgramBuilder, dst, src, engine: str = "scalar") -> int:
    return b.add("tensor_copy", engine, [replace(src, name="src")], [replace(dst, name="dst")])


def start_of(b: ProgramBuilder, records, policy: str) -> list[int]:
    rules = replace(CompilerRules.none(), allocation=policy)
    return Scheduler(load_chip(TINY), rules, records).run(b.program).start


def war_program() -> tuple[ProgramBuilder, list[TileRecord]]:
    """A written (VectorE), read by a copy into C (ScalarE); A is then freed and B, a new tile,
    gets A's bytes at trace time and is written on GpSimd: a false WAR wait on the copy."""
    b = ProgramBuilder()
    memset(b, sb(0, name="a"))  # 0: A
    copy(b, sb(4096, name="c"), sb(0, name="a"))  # 1: A -> C
    memset(b, sb(0, name="b"), engine="gpsimd")  # 2: B, at A's bytes
    return b, [rec(0, 256, 0, 2), rec(4096, 256, 0), rec(0, 256, 2)]


# ---------------------------------------------------------------- false WAR dependency
@pytest.mark.parametrize("policy", ["traced", "max_reuse", "fast"])
def test_a_tile_on_freed_bytes_waits_for_their_last_read(policy):
    """traced, max_reuse and fast put B on A's bytes: B's memset (GpSimd) waits until the copy
    reading A is done: the memset of A 0..164 (64 + latency 100), the copy from 174 (+ the
    semaphore 10) to 338, so B starts at 348."""
    b, records = war_program()
    assert start_of(b, records, policy) == [0, 174, 348]


def test_ring_gives_the_new_tile_fresh_bytes_and_the_wait_goes():
    """ring puts B after C (A at 0, C at 256, B at 512): nothing to wait for, it starts at 0."""
    b, records = war_program()
    assert start_of(b, records, "ring") == [0, 174, 0]
    moved, note = reallocate(b.program, records, "ring")
    assert note == ""
    assert [o.region.byte_start for ins in moved for o in ins.operands] == [0, 0, 256, 512]


def test_traced_is_the_rule_absent():
    """allocation="traced" with the records is the scheduler without them: whole timelines."""
    b, records = war_program()
    chip = load_chip(TINY)
    for reorder in (False, True):
        with_records = schedule(b.program, chip, reorder, CompilerRules(), records)
        without = schedule(b.program, chip, reorder, CompilerRules())
        assert _fields(with_records) == _fields(without)


def _fields(tl) -> tuple:
    return (tl.start, tl.end, tl.issue_end, tl.wait, tl.blocker, tl.deps, tl.queue,
            tl.chunk_rows, tl.ls, tl.table_loads, tl.notes)


# ---------------------------------------------------------------- what moves
def test_explicit_address_tiles_keep_their_address():
    """E has an explicit address at 0 over the whole program; A (automatic, traced at 8192,
    live while E is) goes to the lowest free bytes above E under max_reuse and E's operands
    are the same objects; P, automatic but sharing bytes with E while both were alive
    (aliasing), is pinned."""
    b = ProgramBuilder()
    memset(b, sb(0, 512, "e"))  # 0: E, 2 KiB
    memset(b, sb(8192, name="a"))  # 1: A
    copy(b, sb(0, 64, "e"), sb(8192, name="a"))  # 2: A -> E
    memset(b, sb(1024, name="p"))  # 3: P, inside E's bytes
    records = [rec(0, 2048, 0, auto=False), rec(8192, 256, 1), rec(1024, 256, 3)]
    moved, note = reallocate(b.program, records, "max_reuse")
    assert note == ""
    assert moved[0] is b.program[0] and moved[3] is b.program[3]
    assert moved[2].writes[0] is b.program[2].writes[0]
    assert moved[1].writes[0].region.byte_start == 2048
    assert moved[2].reads[0].region == moved[1].writes[0].region


def test_a_tile_read_after_a_later_allocation_keeps_its_bytes():
    """A is written, then B is allocated and written, then A is read: A is live across B's
    write, so max_reuse puts B beside A, not on it; when A's last read comes before B's first
    write, B reuses A's bytes (max_reuse, best fit: the freed 256 B at 0 beat the tail)."""
    b = ProgramBuilder()
    memset(b, sb(0, name="a"))  # 0
    memset(b, sb(256, name="b"))  # 1
    copy(b, sb(8192, name="c"), sb(0, name="a"))  # 2: A read after B's allocation
    records = [rec(0, 256, 0), rec(256, 256, 1), rec(8192, 256, 2)]
    moved, _ = reallocate(b.program, records, "max_reuse")
    a, bb = moved[0].writes[0].region, moved[1].writes[0].region
    assert not a.overlaps(bb)
    assert (a.byte_start, bb.byte_start) == (0, 256)

    b2 = ProgramBuilder()
    memset(b2, sb(0, name="a"))  # 0
    copy(b2, sb(8192, name="c"), sb(0, name="a"))  # 1: A's last read
    memset(b2, sb(256, name="b"))  # 2: B
    copy(b2, sb(8192, name="c"), sb(256, name="b"))  # 3
    records = [rec(0, 256, 0), rec(8192, 256, 0, auto=False), rec(256, 256, 2)]
    moved, _ = reallocate(b2.program, records, "max_reuse")
    assert moved[2].writes[0].region.byte_start == 0  # B on A's freed bytes


def test_fast_stacks_nested_tiles_where_max_reuse_takes_the_tightest_hole():
    """Five tiles (bytes per partition, first..last access) in an 8 KiB what-if memory: T0
    2 KiB 0..2, T1 2 KiB 1..2, T2 2 KiB 2..3, T3 1 KiB 3..5, T4 1 KiB 4..4. T0 and T1 stack
    (0, 2048), T2 does not nest in T1 and goes to 4096. At T3 both are freed: fast starts the
    stack again at 0 (T3 0, T4 nested in it at 1024); max_reuse takes the tightest gap, the
    2 KiB after T2 (T3 6144, T4 7168)."""
    b = ProgramBuilder()
    t = [sb(k * 8192, 512 if k < 3 else 256, f"t{k}") for k in range(5)]
    memset(b, t[0])  # 0
    memset(b, t[1])  # 1
    b.add("tensor_tensor", "vector", [t[0], t[1]], [replace(t[2], name="dst")], op="add")  # 2
    copy(b, t[3], t[2])  # 3
    memset(b, t[4])  # 4
    copy(b, sb(40960, name="out"), t[3])  # 5
    records = [rec(k * 8192, 2048 if k < 3 else 1024, 0, capacity=8192) for k in range(5)]
    records.append(rec(40960, 256, 0, auto=False, capacity=8192))
    where = {}
    for policy in ("fast", "max_reuse"):
        moved, note = reallocate(b.program, records, policy)
        assert note == ""
        firsts = {}
        for ins in moved:
            for o in ins.operands:
                firsts.setdefault(o.tensor_name, o.region.byte_start)
        where[policy] = [firsts[f"t{k}"] for k in range(5)]
    assert where["fast"] == [0, 2048, 4096, 0, 1024]
    assert where["max_reuse"] == [0, 2048, 4096, 6144, 7168]


# ---------------------------------------------------------------- fallback
def fragmenting_program() -> tuple[ProgramBuilder, list[TileRecord]]:
    """A, B, C, D of 16 KiB, then E of 32 KiB; live: A 0..7, B 1..2, C 3..8, D 4..5, E 6..9.
    Traced (B and D freed early, C and E on their bytes) fits; ring, going round, leaves A and
    C live at 0 and 32 KiB with 16 KiB holes between: no room for E."""
    b = ProgramBuilder()
    hbm = tile("hbm", (128, 4096), "float32", 0, name="out")
    size = 16384
    t = {k: sb(off, size // 4, k) for k, off in
         (("a", 0), ("b", size), ("c", size), ("d", 2 * size))}
    t["e"] = sb(2 * size, 2 * size // 4, "e")
    for k in "ab":
        memset(b, t[k])  # 0, 1
    b.dma(hbm, t["b"])  # 2
    memset(b, t["c"])  # 3
    memset(b, t["d"])  # 4
    b.dma(hbm, t["d"])  # 5
    memset(b, t["e"])  # 6
    for k in "ace":
        b.dma(hbm, t[k])  # 7, 8, 9
    records = [rec(0, size, 0), rec(size, size, 1, 3), rec(size, size, 3),
               rec(2 * size, size, 4, 6), rec(2 * size, 2 * size, 6)]
    return b, records


def test_a_policy_that_cannot_fit_keeps_the_traced_addresses_and_says_so():
    b, records = fragmenting_program()
    chip = load_chip(TINY)
    moved, note = reallocate(b.program, records, "ring")
    assert moved is b.program
    assert "allocation 'ring': sbuf of core 0: no room for a tile of 32768 bytes" in note
    assert "traced addresses" in note
    with pytest.warns(SimulationWarning, match="no room for a tile of 32768 bytes"):
        ring = schedule(b.program, chip, True, CompilerRules(allocation="ring"), records)
    traced = schedule(b.program, chip, True, CompilerRules(), records)
    assert ring.notes == [note]
    assert _fields(ring)[:-1] == _fields(traced)[:-1]
    assert reallocate(b.program, records, "max_reuse")[1] == ""  # best fit fits


def test_a_policy_without_allocation_records_says_so():
    b, _ = war_program()
    moved, note = reallocate(b.program, None, "ring")
    assert moved is b.program
    assert "without its allocation records" in note


# ---------------------------------------------------------------- the rule's switch
def test_invalid_policy_name_lists_the_allowed_ones():
    with pytest.raises(ValueError, match=r"allocation 'linear' is not an allocation policy "
                       r"\(allowed: traced, ring, fast, max_reuse, or None for the chip's\)"):
        CompilerRules(allocation="linear")
    assert ALLOCATIONS == ("traced", "ring", "fast", "max_reuse")


def test_the_default_is_the_chips_policy_and_none_keeps_the_traced_addresses():
    assert CompilerRules().allocation is None
    assert CompilerRules.none().allocation == "traced"
    for chip in ("tiny", "trn2", "trn3"):
        assert CompilerRules().allocation_for(chip) == "traced"
    assert CompilerRules(allocation="fast").allocation_for("trn2") == "fast"


def test_records_follow_dropped_instructions():
    records = [rec(0, 256, 0, 5), rec(256, 256, 3), rec(512, 256, 6, 9)]
    drop_from_records(records, {1, 2, 7})
    assert [(r.born, r.died) for r in records] == [(0, 3), (1, -1), (4, 6)]


# ---------------------------------------------------------------- a traced kernel
def test_a_kernel_records_its_tiles_and_every_policy_keeps_its_values():
    """trnsim.profile records every on-chip allocation (automatic ones as auto, with the
    program's length at allocation and release) and times the kernel under each policy; the
    outputs do not change, and traced is the default's whole timeline."""
    from tests.timing.test_profile import matmul_kernel

    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 128)).astype(np.float32)
    b = rng.standard_normal((256, 1024)).astype(np.float32)
    chip = load_chip(TINY)
    base = profile(matmul_kernel, a, b, chip=chip)
    for policy in ALLOCATIONS:
        p = profile(matmul_kernel, a, b, chip=chip, rules=CompilerRules(allocation=policy))
        np.testing.assert_array_equal(p.outputs, base.outputs)
        assert p.notes == []
        if policy == "traced":
            assert _fields(p.timeline) == _fields(base.timeline)
    absent = time_program(base.program, chip)  # no records: traced needs none
    assert _fields(absent.timeline) == _fields(base.timeline)


def test_a_chip_listed_in_compiler_yaml_gets_its_policy(monkeypatch, tmp_path):
    """isa/compiler.yaml allocation_policies names a chip's policy (none is listed now): with
    the tiny chip listed as ring, the default rules re-place the tiles (B's wait goes); a
    record without allocation records keeps its addresses silently; a name that is not a
    policy is a SpecError."""
    import warnings

    from trnsim.errors import SpecError
    from trnsim.timing import compiler

    text = compiler._data_path().read_text()
    assert "chips: {}" in text
    path = tmp_path / "compiler.yaml"
    path.write_text(text.replace("chips: {}", "chips: {tiny: ring}"))
    monkeypatch.setattr(compiler, "_data_path", lambda: path)
    compiler.compiler_data.cache_clear()
    try:
        assert CompilerRules().allocation_for("tiny") == "ring"
        b, records = war_program()
        chip = load_chip(TINY)
        assert Scheduler(chip, CompilerRules(), records).run(b.program).start == [0, 174, 0]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tl = Scheduler(chip, CompilerRules()).run(b.program)
        assert (tl.start, tl.notes) == ([0, 174, 348], [])
        path.write_text(text.replace("chips: {}", "chips: {tiny: linear}"))
        compiler.compiler_data.cache_clear()
        with pytest.raises(SpecError, match=r"allocation_policies.chips.tiny: 'linear' is not"):
            compiler.compiler_data()
    finally:
        compiler.compiler_data.cache_clear()
