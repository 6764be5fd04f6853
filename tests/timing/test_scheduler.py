"""Scheduler behaviour in exact ticks on the tiny chip (1 GHz everywhere: 1 cycle = 1 tick = 1 ns).

Tiny chip numbers used below: MIN_II 64, engine latency 100 (sync 10, LoadStationary 50),
semaphore latency 10 ns, DMA trigger 64 cycles + 1000 ns, 4 DMA engines of 10 B/ns with 10 ns
per descriptor, HBM 40 B/ns for the whole chip.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from trnsim.timing.deps import ANTI, FLOW
from trnsim.timing.scheduler import Scheduler, base_clock_mhz

from .builders import ProgramBuilder, tile


def run(chip, b: ProgramBuilder):
    return Scheduler(chip).run(b.program)


def act(b, src_off, dst_off, n=512, core=0):
    return b.add(
        "activation",
        "scalar",
        [tile("sbuf", (128, n), offset=src_off, name="data", core=core)],
        [tile("sbuf", (128, n), offset=dst_off, name="dst", core=core)],
        core=core,
        op="exp",
    )


def test_base_clock_is_lcm_of_engine_clocks(tiny_chip):
    from trnsim.chip import load_chip

    assert base_clock_mhz(tiny_chip) == 1000
    assert base_clock_mhz(load_chip("trn2")) == 4800  # 2.4 / 0.96 / 1.2 GHz
    assert base_clock_mhz(load_chip("trn1")) == 5600  # 2.8 / 1.12 / 1.4 GHz


def test_ii_and_latency_are_separate(tiny_chip, builder):
    """Two independent ACTIVATEs: the second issues after the II (512), not the latency (612)."""
    act(builder, 0, 1024)
    act(builder, 2048, 3072)
    tl = run(tiny_chip, builder)
    assert (tl.start, tl.issue_end, tl.end) == ([0, 512], [512, 1024], [612, 1124])
    assert tl.wait == [0, 0]


def test_raw_dependency_waits_for_completion_plus_semaphore(tiny_chip, builder):
    act(builder, 0, 1024)
    builder.add(
        "tensor_copy",
        "vector",
        [tile("sbuf", (128, 512), offset=1024, name="src", dtype="float32")],
        [tile("sbuf", (128, 512), offset=8192, name="dst", dtype="float32")],
    )
    tl = run(tiny_chip, builder)
    assert tl.start[1] == 612 + 10
    assert tl.wait[1] == 622
    assert tl.blocker[1] == 0
    assert [d[:2] for d in tl.deps[1]] == [(0, FLOW)]
    # fp32 copy: no perf mode, II = 512; back-to-back dependent VectorE op pays +100
    assert tl.issue_end[1] - tl.start[1] == 512


def test_engines_overlap_and_queues_stay_in_order(tiny_chip, builder):
    act(builder, 0, 1024)  # scalar, 0..612
    act(builder, 1024, 4096)  # scalar, depends on 0: 622..
    builder.add(
        "memset",
        "vector",
        [],
        [tile("sbuf", (128, 512), offset=16384, name="dst", dtype="float32")],
        value=1.0,
    )
    tl = run(tiny_chip, builder)
    assert tl.start[2] == 0  # VectorE runs alongside ScalarE
    assert tl.start[1] == 622


def test_war_waits_for_the_reader_and_same_queue_war_does_not(tiny_chip, builder):
    act(builder, 0, 1024)  # reads [0, 1024)
    builder.add("memset", "vector", [], [tile("sbuf", (128, 512), offset=0, name="dst")], value=1.0)
    act(builder, 0, 8192)  # scalar reads what vector wrote: RAW on 1
    act(builder, 8192, 0)  # scalar overwrites what scalar 2 read: same-queue WAR, no wait
    tl = run(tiny_chip, builder)
    assert [d[:2] for d in tl.deps[1]] == [(0, ANTI)]
    assert tl.start[1] == 612 + 10
    assert (2, ANTI) not in [d[:2] for d in tl.deps[3]]
    assert tl.start[3] >= tl.end[2] + 10  # RAW on 2's output


def test_matmul_loadstationary_in_background(tiny_chip, builder):
    """LS ceil(128/4)=32, MM max(min(64,128), 512)=512; LS of the next loads during the MM."""
    for k in range(3):
        builder.matmul(
            tile("psum", (128, 512), dtype="float32", offset=2048 * k),
            tile("sbuf", (128, 128), offset=1024 * k),
            tile("sbuf", (128, 512), offset=8192 + 1024 * k),
        )
    tl = run(tiny_chip, builder)
    assert tl.ls[0] == (0, 32 + 50)
    assert (tl.start[0], tl.end[0]) == (32, 32 + 512 + 100)
    assert tl.ls[1] == (32, 32 + 82)  # loads while MM 0 streams
    assert tl.start[1] == 32 + 512
    assert tl.ls[2][0] == tl.start[1]  # third weights wait for a free buffer
    assert tl.start[2] == 32 + 2 * 512


def test_matmul_small_moving_is_min_ii_bound_and_fp32_is_4x(tiny_chip, builder):
    for dtype in ("bfloat16", "float32"):
        builder.matmul(
            tile("psum", (128, 16), dtype="float32", offset=0),
            tile("sbuf", (128, 128), dtype=dtype, offset=0),
            tile("sbuf", (128, 16), dtype=dtype, offset=4096),
        )
    tl = run(tiny_chip, builder)
    assert tl.issue_end[0] - tl.start[0] == 64
    assert tl.issue_end[1] - tl.start[1] == 4 * 64


def test_pe_transpose_cost(tiny_chip, builder):
    builder.add(
        "nc_transpose",
        "tensor",
        [tile("sbuf", (128, 32), name="data")],
        [tile("psum", (32, 128), name="dst")],
    )
    tl = run(tiny_chip, builder)
    assert tl.issue_end[0] - tl.start[0] == 128  # max(P=128, min(64, F=32))


def test_dma_single_transfer(tiny_chip, builder):
    """4 rows of 4000 B: one row per engine, 1 descriptor each: 10 + 4000/10 ns per engine."""
    builder.dma(tile("sbuf", (4, 1000), dtype="float32"), tile("hbm", (4, 1000), "float32"))
    tl = run(tiny_chip, builder)
    plan, trig_end, ready = tl.dma[0]
    assert (plan.queue, plan.descriptors, plan.chunks) == ("qSyncIO", 4, ((1, 4000),) * 4)
    assert (trig_end, ready) == (64, 1064)
    assert sorted((c.engine, c.start, c.end) for c in tl.chunks) == [
        (e, 1064, 1474) for e in range(4)
    ]
    assert tl.end[0] == 1474


def test_dma_dependency_and_small_descriptors(tiny_chip, builder):
    """A strided source row of 100 elements is 100 descriptors; the consumer waits +10 ns."""
    src = replace(tile("hbm", (4, 100), "float32"), contiguous_bytes=4)
    builder.dma(tile("sbuf", (4, 100), dtype="float32"), src)
    builder.add(
        "tensor_copy",
        "vector",
        [tile("sbuf", (4, 100), dtype="float32", name="src")],
        [tile("sbuf", (4, 100), dtype="float32", offset=4096, name="dst")],
    )
    tl = run(tiny_chip, builder)
    assert tl.end[0] == 1064 + 100 * 10 + 40
    assert tl.start[1] == tl.end[0] + 10
    assert tl.blocker[1] == 0


def test_hbm_bandwidth_shared_by_cores(tiny_chip, builder):
    """Alone, a core's 4 engines stream at 40 B/ns = the HBM cap; two cores share it."""
    for core in (0, 1):
        builder.dma(
            tile("sbuf", (4, 1000), dtype="float32", core=core),
            tile("hbm", (4, 1000), "float32", offset=core * 16000, core=core),
            core=core,
        )
    tl = run(tiny_chip, builder)
    assert {(c.start, c.end) for c in tl.chunks} == {(1064, 1074 + 800)}
    from trnsim.timing.metrics import hbm_throughput

    assert max(r for _, r in hbm_throughput(tl.chunks, tl.ticks_per_ns)) == 40


def test_dma_queue_in_order_per_engine(tiny_chip, builder):
    """Two transfers on one queue use the same engines one after the other."""
    builder.dma(tile("sbuf", (4, 1000), dtype="float32"), tile("hbm", (4, 1000), "float32"))
    builder.dma(
        tile("sbuf", (4, 1000), dtype="float32", offset=4096),
        tile("hbm", (4, 1000), "float32", offset=16000),
    )
    tl = run(tiny_chip, builder)
    # trigger 2 issues at 64 -> ready 1128; its chunks wait for engines busy until 1474
    assert tl.end[1] == 1474 + 410


def test_vector_static_overhead_for_tiny_instructions(tiny_chip, builder):
    builder.add("memset", "vector", [], [tile("sbuf", (128, 8), dtype="float32")], value=1.0)
    tl = run(tiny_chip, builder)
    assert tl.issue_end[0] == 64 + 100


def test_deterministic(tiny_chip):
    def build():
        b = ProgramBuilder()
        for k in range(20):
            b.dma(
                tile("sbuf", (128, 256), offset=512 * (k % 4)),
                tile("hbm", (128, 256), offset=65536 * k),
            )
            act(b, 512 * (k % 4), 8192 + 512 * (k % 4), n=256)
            b.dma(
                tile("hbm", (128, 256), offset=(1 << 24) + 65536 * k),
                tile("sbuf", (128, 256), offset=8192 + 512 * (k % 4)),
            )
        return b

    a, b = run(tiny_chip, build()), run(tiny_chip, build())
    assert (a.start, a.end, a.wait) == (b.start, b.end, b.wait)
    assert [(c.start, c.end) for c in a.chunks] == [(c.start, c.end) for c in b.chunks]


def test_tensor_engine_throttle_ramps_and_reengages(tiny_chip):
    """Cap starts at 50 % (II 512 -> 1024), ramps to 100 % over 1000 ns; re-engages after idle."""
    from trnsim.chip import load_chip

    chip = load_chip(tiny_chip.path, throttle__enabled=True)
    b = ProgramBuilder()
    for k in range(8):
        b.matmul(
            tile("psum", (128, 512), dtype="float32", offset=2048 * (k % 8)),
            tile("sbuf", (128, 128)),
            tile("sbuf", (128, 512), offset=4096),
        )
    tl = run(chip, b)
    iis = [tl.issue_end[i] - tl.start[i] for i in range(8)]
    assert iis[0] == 1024
    assert iis[-1] == 512
    assert iis == sorted(iis, reverse=True)
    # after a long idle gap (a dependency on a slow DMA) the cap is back at 50 %
    b.dma(tile("sbuf", (128, 512), offset=65536 - 1024 * 8), tile("hbm", (128, 4096)))
    b.matmul(
        tile("psum", (128, 512), dtype="float32"),
        tile("sbuf", (128, 128)),
        tile("sbuf", (128, 512), offset=65536 - 1024 * 8),
    )
    tl = run(chip, b)
    assert tl.issue_end[9] - tl.start[9] == 1024
    assert tl.throttle[0].samples[0] == (tl.start[0], 0.5)


def test_psum_banks_let_tensor_engine_run_ahead_of_the_drain(tiny_chip, builder):
    """Accumulation groups in two banks: matmuls of a group run back to back (no waits on
    their own PSUM writes); the next group in the other bank overlaps the ScalarE drain."""
    for g in range(2):
        for _k in range(4):
            builder.matmul(
                tile("psum", (128, 512), "float32", 2048 * g),
                tile("sbuf", (128, 128)),
                tile("sbuf", (128, 512), offset=4096),
            )
        builder.add(
            "activation",
            "scalar",
            [tile("psum", (128, 512), "float32", 2048 * g, name="data")],
            [tile("sbuf", (128, 512), "float32", 16384 + 4096 * g, name="dst")],
        )
    tl = run(tiny_chip, builder)
    mm_starts = [tl.start[i] for i in (0, 1, 2, 3, 5, 6, 7, 8)]
    assert mm_starts == [32 + 512 * k for k in range(8)]  # never waits for the drains
    assert tl.start[4] == tl.end[3] + 10  # drain of bank 0 waits for the group's last matmul
    assert tl.start[4] < tl.end[8]  # ...while the bank-1 group is still running
    # a third group back in bank 0 must wait for the bank-0 drain (WAR)
    builder.matmul(
        tile("psum", (128, 512), "float32", 0),
        tile("sbuf", (128, 128)),
        tile("sbuf", (128, 512), offset=4096),
    )
    tl = run(tiny_chip, builder)
    assert tl.start[10] >= tl.end[4] + 10


def test_descriptor_generation_modes(tiny_chip, builder):
    """Static: trigger only. HWDGE: + 500 ns in a DGE block (2 per core). SWDGE: GpSimd
    builds descriptors, GPSIMD_START + 1 cycle per descriptor. Then 1000 ns to the engines."""
    src = tile("hbm", (4, 1000), "float32")
    builder.dma(tile("sbuf", (4, 1000), "float32"), src, dge_mode="none")
    for k in range(3):
        builder.dma(
            tile("sbuf", (4, 1000), "float32", offset=4096 * (k + 1)),
            src,
            dge_mode="hwdge",
            queue_engine="scalar",
        )
    builder.dma(tile("sbuf", (4, 1000), "float32", offset=32768), src, dge_mode="swdge")
    tl = run(tiny_chip, builder)
    assert [tl.dma[i][0].queue for i in range(5)] == [
        "qSyncIO",
        "qScalarDynamicHW",
        "qScalarDynamicHW",
        "qScalarDynamicHW",
        "qGpSimdDynamic",
    ]
    assert tl.dma[0][2] == 64 + 1000
    assert [tl.dma[i][1] for i in (1, 2, 3)] == [64 + 500, 128 + 500, 64 + 500 + 500]
    assert (tl.start[4], tl.issue_end[4]) == (0, 150 + 4)
    assert tl.dma[4][2] == 154 + 1000


def test_dma_transpose_runs_at_its_efficiency(tiny_chip, builder):
    builder.add(
        "dma_transpose",
        "dma",
        [tile("hbm", (4, 1000), "float32", name="src")],
        [tile("sbuf", (4, 1000), "float32", name="dst")],
    )
    tl = run(tiny_chip, builder)
    assert {(c.start, c.end) for c in tl.chunks} == {(1064, 1064 + 10 + 800)}


def test_nc_v2_vector_and_scalar_do_not_share_psum(tiny_chip):
    from trnsim.chip import load_chip

    for version, overlap in ((2, False), (3, True)):
        b = ProgramBuilder()
        b.add(
            "activation",
            "scalar",
            [tile("psum", (128, 512), "float32", 0, name="data")],
            [tile("sbuf", (128, 512), "float32", 0, name="dst")],
        )
        b.add(
            "tensor_copy",
            "vector",
            [tile("psum", (128, 512), "float32", 2048, name="src")],
            [tile("sbuf", (128, 512), "float32", 4096, name="dst")],
        )
        tl = run(load_chip(tiny_chip.path, nc_version=version), b)
        assert (tl.start[1] < tl.issue_end[0]) is overlap


def test_dma_plans_of_different_dst_ranks_are_not_shared(tiny_chip, builder):
    # A [128] and a [128, 1] HBM destination move the same bytes in the same contiguous run,
    # but the 2-D one is 128 rows (split across engines) and the 1-D one a single row: the
    # plan cache must tell them apart whichever comes first.
    def plan_of_last(shapes):
        b = ProgramBuilder()
        for k, shape in enumerate(shapes):
            b.dma(
                tile("hbm", shape, offset=4096 * k, name="d"),
                tile("hbm", shape, offset=65536 + 4096 * k, name="s"),
            )
        return Scheduler(tiny_chip).run(b.program).dma[len(shapes) - 1][0]

    for first, second in (((128,), (128, 1)), ((128, 1), (128,))):
        assert plan_of_last([first, second]) == plan_of_last([second])
    assert plan_of_last([(128,)]) != plan_of_last([(128, 1)])


def _tiled_matmul(b, k, position=None, size=None, m=64):
    """Matmul k (own PSUM bank and SBUF tiles) on the PE tile at position/size (row =
    contraction partitions, column = stationary columns); untiled when position is None."""
    attrs = {} if position is None else {"tile_position": position, "tile_size": size}
    row, rows = (position[0], size[0]) if position is not None else (0, 128)
    return b.matmul(
        tile("psum", (m, 512), dtype="float32", offset=2048 * k),
        tile("sbuf", (rows, m), offset=1024 * k, partition=row),
        tile("sbuf", (rows, 512), offset=16384 + 1024 * k, partition=row),
        **attrs,
    )


def test_matmuls_on_disjoint_pe_tiles_overlap(tiny_chip, builder):
    """Column tiles [0, 64) and [64, 128): LS ceil(64/4)=16 each, one after the other; MM
    max(min(64, 64), 512)=512 each, the second starting as soon as its own weights are in.
    An untiled matmul after them waits for the whole array."""
    _tiled_matmul(builder, 0, (0, 0), (128, 64))
    _tiled_matmul(builder, 1, (0, 64), (128, 64))
    _tiled_matmul(builder, 2, m=128)
    tl = run(tiny_chip, builder)
    assert [tl.ls[i][0] for i in range(3)] == [0, 16, 32]
    assert tl.start[:2] == [16, 32]
    assert tl.issue_end[:2] == [16 + 512, 32 + 512]
    assert tl.start[2] == 32 + 512  # LS 32..64, then all cells free at 544


def test_matmuls_on_the_same_pe_tile_run_one_after_the_other(tiny_chip, builder):
    _tiled_matmul(builder, 0, (0, 0), (128, 64))
    _tiled_matmul(builder, 1, (0, 0), (128, 64))
    _tiled_matmul(builder, 2, (64, 64), (64, 64))  # a quadrant of its own
    tl = run(tiny_chip, builder)
    assert tl.start[:2] == [16, 16 + 512]
    assert tl.ls[1][0] == 16  # the second weight buffer of those cells is free
    # In order: the third MM may not start before the second, though its cells are free.
    assert tl.start[2] == tl.start[1]


@pytest.mark.parametrize("hbm_gbps", [40, 1000])  # HBM sharing possible / never binding
def test_dma_engines_serve_their_queues_round_robin(tiny_chip, builder, hbm_gbps):
    """Two transfers wait on the Sync queue (T0 streaming 1064-1474 on all four engines, T1
    queued behind it from 1128); T2 arrives on the Scalar queue at ~1264 (its trigger waits
    for a 200-cycle activation). Each engine then takes the Scalar queue's turn before T1,
    also when HBM bandwidth can never bind (the scheduler's fast path)."""
    tiny_chip = replace(tiny_chip, hbm=replace(tiny_chip.hbm, bandwidth_gbps=float(hbm_gbps)))
    act(builder, 0, 4096, n=200)
    t0 = builder.dma(
        tile("sbuf", (4, 1000), dtype="float32", offset=8192), tile("hbm", (4, 1000), "float32")
    )
    t1 = builder.dma(
        tile("sbuf", (4, 1000), dtype="float32", offset=12288),
        tile("hbm", (4, 1000), "float32", offset=16000),
    )
    t2 = builder.dma(
        tile("sbuf", (4, 1000), dtype="float32", offset=16384),
        tile("hbm", (4, 1000), "float32", offset=32000),
        queue_engine="scalar",
    )
    tl = run(tiny_chip, builder)
    assert [tl.dma[i][0].queue for i in (t0, t1, t2)] == ["qSyncIO", "qSyncIO", "qScalarIO"]
    assert tl.dma[t1][2] < tl.dma[t2][2] < 1474  # T1 arrived first, T2 before T0 ends
    assert tl.end[t0] == 1474
    assert tl.end[t2] == 1474 + 410
    assert tl.end[t1] == 1474 + 2 * 410
