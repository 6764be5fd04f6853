"""Calibration: one-instruction kernels reproduce the measured instruction timings within 10 %.

Targets are the instruction-level measurements of trainium-hw.md (NKI-PERF screenshots,
NC-v2 / Trn1 unless noted): nothing here is fitted to whole-kernel latencies.
"""

from __future__ import annotations

import pytest

from trnsim.chip import load_chip
from trnsim.timing.scheduler import Scheduler

from .builders import ProgramBuilder, tile


def timeline(chip_name: str, b: ProgramBuilder, **overrides):
    return Scheduler(load_chip(chip_name, **overrides)).run(b.program)


def ns(tl, ticks: int) -> float:
    return ticks / tl.ticks_per_ns


def activate(b: ProgramBuilder, src: int, dst: int) -> int:
    """A 1-element ACTIVATE on 128 partitions."""
    return b.add(
        "activation",
        "scalar",
        [tile("sbuf", (128, 1), "float32", src, name="data")],
        [tile("sbuf", (128, 1), "float32", dst, name="dst")],
        op="exp",
    )


def test_activate_duration_159ns():
    b = ProgramBuilder()
    activate(b, 0, 64)
    tl = timeline("trn1", b)
    assert ns(tl, tl.end[0] - tl.start[0]) == pytest.approx(159, rel=0.10)


def test_dependent_activate_chain_ii_189ns():
    b = ProgramBuilder()
    for k in range(8):
        activate(b, 64 * k, 64 * (k + 1))
    tl = timeline("trn1", b)
    ii = ns(tl, tl.start[7] - tl.start[0]) / 7
    assert ii == pytest.approx(189, rel=0.10)


@pytest.mark.parametrize(("columns", "target_ns"), [(1, 188), (96, 219)])
def test_matmul_latency(columns, target_ns):
    b = ProgramBuilder()
    b.matmul(
        tile("psum", (128, columns), "float32"),
        tile("sbuf", (128, 128), "bfloat16"),
        tile("sbuf", (128, columns), "bfloat16", offset=4096),
    )
    tl = timeline("trn1", b)
    assert ns(tl, tl.end[0] - tl.start[0]) == pytest.approx(target_ns, rel=0.10)


def test_ldweights_one_element_67ns():
    b = ProgramBuilder()
    b.matmul(
        tile("psum", (128, 1), "float32"),
        tile("sbuf", (128, 1), "bfloat16"),
        tile("sbuf", (128, 1), "bfloat16", offset=4096),
    )
    tl = timeline("trn1", b)
    s, e = tl.ls[0]
    assert ns(tl, e - s) == pytest.approx(67, rel=0.10)


def test_large_tensor_tensor_fp32_8192():
    """Measured 14.97-14.99 us for TENSOR_TENSOR fp32, N = 8192 (formula 2N = 14.63 us)."""
    b = ProgramBuilder()
    b.add(
        "tensor_tensor",
        "vector",
        [
            tile("sbuf", (128, 8192), "float32", 0, name="data1"),
            tile("sbuf", (128, 8192), "float32", 32768, name="data2"),
        ],
        [tile("sbuf", (128, 8192), "float32", 65536, name="dst")],
        op="add",
    )
    tl = timeline("trn1", b)
    assert ns(tl, tl.end[0] - tl.start[0]) == pytest.approx(14980, rel=0.10)


@pytest.mark.parametrize(("chip", "target_ns"), [("trn1", 1810), ("trn2", 1416)])
def test_single_dma_packet_32kib(chip, target_ns):
    """One 32 KiB packet on one DMA engine (one partition's contiguous slice)."""
    b = ProgramBuilder()
    b.dma(tile("sbuf", (1, 8192), "float32"), tile("hbm", (1, 8192), "float32"))
    tl = timeline(chip, b)
    (c,) = tl.chunks
    assert c.nbytes == 32768
    assert ns(tl, c.end - c.start) == pytest.approx(target_ns, rel=0.10)


def test_documented_matmul_steady_state_ii():
    """Back-to-back matmuls: II = max(N, 64) TensorE cycles; fp32 4x (NKI-ISA-226).
    Throttling is switched off to see the unthrottled II."""
    cases = ((512, "bfloat16", 512), (32, "bfloat16", 64), (512, "float32", 2048))
    for n, dtype, cycles in cases:
        b = ProgramBuilder()
        for k in range(4):
            b.matmul(
                tile("psum", (128, n), "float32", 2048 * k),
                tile("sbuf", (128, 128), dtype),
                tile("sbuf", (128, n), dtype, 4096),
            )
        tl = timeline("trn2", b, throttle__enabled=False)
        period = (tl.start[3] - tl.start[1]) / 2
        assert period / tl.ticks_per_ns * 2.4 == pytest.approx(cycles)


@pytest.mark.parametrize(("chip", "engine_bytes_per_ns"), [("trn1", 17.0), ("trn2", 23.0)])
def test_dma_small_partitions_underperform(chip, engine_bytes_per_ns):
    """Effective bandwidth of a 128-partition load: < 256 B/partition is overhead-bound,
    2 KiB reaches most of the rate, 4 KiB and more saturate (NKI-DMA-BW). On trn1 the fitted
    small-descriptor factor (below 2 KiB) must keep to the same guidance."""

    def rate(bytes_per_partition: int) -> float:
        b = ProgramBuilder()
        n = bytes_per_partition // 2
        b.dma(tile("sbuf", (128, n)), tile("hbm", (128, n)))
        tl = timeline(chip, b)
        _, _, ready = tl.dma[0]
        return 128 * bytes_per_partition / ns(tl, tl.end[0] - ready)

    peak = 16 * engine_bytes_per_ns
    assert rate(256) < 0.4 * peak
    assert 0.7 * peak < rate(2048) < 0.9 * peak
    assert rate(4096) > 0.85 * peak
    assert rate(32768) > 0.97 * peak
