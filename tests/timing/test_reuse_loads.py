"""The compiler rule reuse_loads (trnsim/timing/compiler.py) in exact ticks on the tiny chip
(1 GHz: 1 cycle = 1 tick = 1 ns), on and off, and which loads it finds.

Tiny chip numbers used below: a load of 4 rows x 4000 B is one row per DMA engine: its trigger
ends at 64 (MIN_II on the Sync queue), the data moves 1000 ns later for 10 + 4000 / 10 ns, so it
completes at 1474; a second load triggered right after (ends 128) streams behind it on the same
engines, 1474 -> 1884. A copy of [4, 1000] fp32 costs max(64, 1000) + latency 100 and starts
10 ns (semaphore latency) after its producer completes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from trnsim.chip import load_chip
from trnsim.timing.compiler import CompilerRules, reused_loads
from trnsim.timing.scheduler import Scheduler

from .builders import ProgramBuilder, tile

ROW = (4, 1000)  # 4 partitions x 1000 fp32: 4000 B per partition


def window_chip(tiny_chip, window: int):
    return load_chip(tiny_chip, **{"timing.load_reuse_window": window})


def load(b: ProgramBuilder, sbuf_off: int, hbm_off: int = 0) -> int:
    return b.dma(tile("sbuf", ROW, "float32", sbuf_off), tile("hbm", ROW, "float32", hbm_off))


def copy(b: ProgramBuilder, src_off: int, dst_off: int, engine: str = "vector") -> int:
    return b.add(
        "tensor_copy",
        engine,
        [tile("sbuf", ROW, "float32", src_off, name="src")],
        [tile("sbuf", ROW, "float32", dst_off, name="dst")],
    )


def test_a_second_load_of_the_same_bytes_is_not_issued(tiny_chip, builder):
    """load A -> tile 0, copy it (VectorE), load A -> tile 16384, copy that (ScalarE).
    On (window 1): the second load is a zero-length bar where the Sync queue reaches it (64),
    moves no data, and its reader waits for the first load (1474 + 10). Off: it streams behind
    the first (done at 1884) and its reader starts at 1894."""
    first = load(builder, 0)
    copy(builder, 0, 32768)
    second = load(builder, 16384)
    reader = copy(builder, 16384, 49152, engine="scalar")
    on = Scheduler(window_chip(tiny_chip, 1)).run(builder.program)
    assert sorted(on.dma) == [first]
    assert (on.start[second], on.end[second]) == (64, 64)
    assert on.start[reader] == 1484
    assert on.blocker[reader] == first
    rules_off = replace(CompilerRules(), reuse_loads=False)
    for off in (
        Scheduler(window_chip(tiny_chip, 1), rules_off).run(builder.program),
        Scheduler(window_chip(tiny_chip, 0)).run(builder.program),
        Scheduler(window_chip(tiny_chip, 1), CompilerRules.none()).run(builder.program),
    ):
        assert sorted(off.dma) == [first, second]
        assert off.end[second] == 1884
        assert off.start[reader] == 1894


@pytest.mark.parametrize(
    ("window", "reused"),
    [pytest.param(1, {}, id="window-1-too-short"), pytest.param(2, {2: 0}, id="window-2")],
)
def test_the_window_counts_loads_in_between(builder, window, reused):
    """load A, load B (other bytes), load A again: the earlier A is 2 loads back."""
    load(builder, 0)
    load(builder, 16384, hbm_off=16000)
    load(builder, 32768)
    assert reused_loads(builder.program, window) == reused


def test_a_write_to_the_kept_tile_or_its_source_makes_the_load_again(builder):
    """A copy into the first load's tile, or a store into the HBM bytes it read, between the
    two loads: the second is issued (as it is when the layout differs)."""
    load(builder, 0)
    copy(builder, 32768, 0)  # overwrites the kept tile
    load(builder, 16384)
    builder.add(
        "dma_copy", "dma", [tile("sbuf", ROW, "float32", 49152, name="src")],
        [tile("hbm", ROW, "float32", 0, name="dst")],
    )  # writes the source: what the next load reads is new
    load(builder, 20480)
    # a different tile shape over the same first bytes
    builder.dma(tile("sbuf", (4, 500), "float32", 24576), tile("hbm", (4, 500), "float32", 0))
    assert reused_loads(builder.program, 8) == {}


def test_reused_loads_chain_to_the_load_that_moved_the_data(builder):
    """load A -> tile 0; load A -> tile 16384 (reused); tile 0 overwritten; load A -> tile 32768:
    the second load's tile stands for the data, so the third reuses it too, and both wait for
    the first load."""
    load(builder, 0)
    load(builder, 16384)
    copy(builder, 49152, 0)
    load(builder, 32768)
    assert reused_loads(builder.program, 4) == {1: 0, 3: 0}
