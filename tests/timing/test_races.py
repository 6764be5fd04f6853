"""Cross-core HBM races in a program record (trnsim/timing/races.py)."""

from __future__ import annotations

from dataclasses import replace

from trnsim.timing.races import find_races

from .builders import ProgramBuilder, tile


def _copy(b, core, dst, src):
    return b.dma(dst, src, core=core)


def test_a_write_and_a_read_of_the_same_bytes_on_two_cores_race():
    b = ProgramBuilder()
    w = _copy(b, 0, tile("hbm", (8, 64), "float32", tensor="s"), tile("sbuf", (8, 64), "float32"))
    r = _copy(
        b,
        1,
        tile("sbuf", (8, 64), "float32", core=1),
        tile("hbm", (8, 64), "float32", offset=1024, tensor="s"),
    )
    (race,) = find_races(b.program)
    assert (race.first, race.second, race.tensor) == (w, r, "s")
    assert (race.first_writes, race.second_writes) == (True, False)


def test_reads_disjoint_bytes_one_core_and_barriers_do_not_race():
    b = ProgramBuilder()
    # both cores read the same input: no race
    for core in (0, 1):
        _copy(b, core, tile("sbuf", (8, 64), "float32", core=core), tile("hbm", (8, 64), "float32"))
    # disjoint halves of an output: no race
    for core in (0, 1):
        _copy(
            b,
            core,
            tile("hbm", (8, 64), "float32", offset=8192 + 2048 * core),
            tile("sbuf", (8, 64), "float32", core=core),
        )
    # one core writing then reading: ordered by its own queues
    _copy(b, 0, tile("hbm", (8, 64), "float32", offset=16384), tile("sbuf", (8, 64), "float32"))
    _copy(b, 0, tile("sbuf", (8, 64), "float32"), tile("hbm", (8, 64), "float32", offset=16384))
    assert find_races(b.program) == []
    # a write on core 0 and a read on core 1 with a barrier on each core between them
    _copy(b, 0, tile("hbm", (8, 64), "float32", offset=32768), tile("sbuf", (8, 64), "float32"))
    for core in (0, 1):
        b.add("core_barrier", "gpsimd", core=core)
    _copy(
        b,
        1,
        tile("sbuf", (8, 64), "float32", core=1),
        tile("hbm", (8, 64), "float32", offset=32768),
    )
    assert find_races(b.program) == []


def test_interleaved_columns_of_one_tensor_do_not_race():
    """Core c writes columns [32c, 32c + 32) of a [16, 64] fp32 tensor: rows of 128 B at a
    256 B pitch, bounding boxes overlapping but no byte shared."""
    b = ProgramBuilder()
    for core in (0, 1):
        dst = tile("hbm", (16, 32), "float32", tensor="out")
        start = 128 * core
        region = replace(dst.region, byte_start=start, byte_end=start + 15 * 256 + 128)
        dst = replace(dst, region=region, contiguous_bytes=128)
        _copy(b, core, dst, tile("sbuf", (16, 32), "float32", core=core))
    assert find_races(b.program) == []
