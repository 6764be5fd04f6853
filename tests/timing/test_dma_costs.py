"""The DMA cost table of each chip file (dma: per descriptor, per transfer and engine) in exact
ticks on the tiny chip, and the built-in chips' descriptor cost against the documented size
guidance."""

from __future__ import annotations

from pathlib import Path

import pytest

from trnsim.chip import load_chip
from trnsim.errors import SpecError
from trnsim.timing.scheduler import Scheduler

from .builders import ProgramBuilder, tile


def test_transfer_overhead_is_paid_once_per_engine_per_transfer(tiny_chip):
    """4 rows of 4000 B on 4 engines (1 descriptor each, 10 ns; 400 ns streaming): a 200 ns
    per-transfer cost delays each engine's chunk by 200, and a second transfer queued behind
    on the same engines pays it again."""
    chip = load_chip(tiny_chip, **{"dma.transfer_overhead_ns": 200})
    b = ProgramBuilder()
    for k in range(2):
        b.dma(
            tile("sbuf", (4, 1000), "float32", offset=4096 * k),
            tile("hbm", (4, 1000), "float32", offset=16000 * k),
        )
    tl = Scheduler(chip).run(b.program)
    assert tl.dma[0][2] == 1064  # trigger 64 + 1000 ns latency
    assert sorted({(c.transfer, c.start, c.stream_start, c.end) for c in tl.chunks}) == [
        (0, 1064, 1064 + 210, 1064 + 210 + 400),
        (1, 1674, 1674 + 210, 1674 + 210 + 400),
    ]


@pytest.mark.parametrize("name", ["trn1", "trn2", "trn3"])
def test_descriptor_cost_matches_the_documented_size_guidance(name):
    """NKI-DMA-BW: a 2 KiB descriptor reaches 70-90 % of the practical engine rate, 4 KiB
    more (the chip's descriptor cost table, fitted or inferred, must stay inside that band)."""
    dma = load_chip(name).dma

    def efficiency(nbytes: int) -> float:
        fixed, factor = dma.descriptor_cost_at(nbytes)
        stream = nbytes / dma.engine_bytes_per_ns
        return stream / (stream * factor + fixed)

    assert 0.70 <= efficiency(2048) <= 0.90
    assert efficiency(4096) > efficiency(2048)


def test_queue_takes_its_transfers_one_at_a_time(tiny_chip):
    """dma.queue_dma_overhead_ns = 300: the two qSyncIO transfers (triggered at 64 and 128,
    data ready 1000 ns later) start moving at 1064 + 300 and 1364 + 300; the qScalarIO one
    pays only its own 300."""
    chip = load_chip(tiny_chip, **{"dma.queue_dma_overhead_ns": 300})
    b = ProgramBuilder()
    for k in range(2):
        b.dma(
            tile("sbuf", (4, 1000), "float32", offset=4096 * k),
            tile("hbm", (4, 1000), "float32", offset=16000 * k),
        )
    b.dma(
        tile("sbuf", (4, 1000), "float32", offset=8192),
        tile("hbm", (4, 1000), "float32", offset=32000),
        queue_engine="scalar",
    )
    tl = Scheduler(chip).run(b.program)
    assert [tl.dma[i][0].queue for i in range(3)] == ["qSyncIO", "qSyncIO", "qScalarIO"]
    assert [tl.dma[i][2] for i in range(3)] == [1364, 1664, 1364]


def _tiny_with_table(tmp_path, tiny_chip, rows: str):
    """The tiny chip with its descriptor cost table replaced by `rows` (YAML, 4-space indent)."""
    text = Path(tiny_chip.path).read_text()
    start = text.index("  descriptor_cost:\n")
    end = text.index("\n  trigger_latency_ns")
    path = tmp_path / "chip.yaml"
    path.write_text(text[:start] + "  descriptor_cost:\n" + rows + text[end:])
    return str(path)


def _row(name: str, from_bytes, overhead, factor) -> str:
    leaf = "{{value: {}, source: test, kind: what-if}}"
    out = f"    {name}:\n"
    for key, v in (("from_bytes", from_bytes), ("overhead_ns", overhead), ("time_factor", factor)):
        if v is not None:
            out += f"      {key}: {leaf.format(v)}\n"
    return out.rstrip("\n")


def test_descriptor_cost_comes_from_the_size_class(tmp_path, tiny_chip):
    """A table of two classes, below 2048 B (4 ns each, 2.5x slower) and from 2048 B (10 ns,
    the engine rate): 4 rows of 1000 B (one descriptor each; 100 ns at 10 B/ns) pay 4 ns and
    stream in 250 ns, rows of 4000 B pay 10 ns and stream in the plain 400 ns; an
    element-strided store into SBUF (4 B runs, 250 per row) pays 250 x 4 ns and streams its
    1000 B per row at 2.5x."""
    rows = _row("small", 0, 4, 2.5) + "\n" + _row("big", 2048, 10, 1)
    chip = load_chip(_tiny_with_table(tmp_path, tiny_chip, rows))
    for elems, fixed, stream in ((250, 4, 250), (1000, 10, 400)):
        b = ProgramBuilder()
        b.dma(tile("sbuf", (4, elems), "float32"), tile("hbm", (4, elems), "float32"))
        tl = Scheduler(chip).run(b.program)
        assert {(c.start, c.stream_start, c.end) for c in tl.chunks} == {
            (1064, 1064 + fixed, 1064 + fixed + stream)
        }
    b = ProgramBuilder()
    b.dma(tile("sbuf", (4, 250), "float32", stride=2), tile("hbm", (4, 250), "float32"))
    tl = Scheduler(chip).run(b.program)
    assert {(c.descriptors, c.start, c.stream_start, c.end) for c in tl.chunks} == {
        (250, 1064, 1064 + 1000, 1064 + 1000 + 250)
    }


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (_row("any", 0, 1, None), "any: missing time_factor"),
        (_row("any", 64, 1, 1), "needs a class with from_bytes 0"),
        (_row("any", 0, 1, 0.5), "time_factor: 0.5 < 1"),
        (_row("a", 0, 1, 1) + "\n" + _row("b", 0, 2, 1), "two classes have the same"),
    ],
)
def test_a_malformed_descriptor_table_is_refused(tmp_path, tiny_chip, rows, message):
    with pytest.raises(SpecError, match=f"dma.descriptor_cost: .*{message}"):
        load_chip(_tiny_with_table(tmp_path, tiny_chip, rows))
