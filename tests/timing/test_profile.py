"""trnsim.profile on real kernels: outputs, metrics, values=False, determinism."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import trnsim.nki as nki
import trnsim.nki.isa as nisa
import trnsim.nki.language as nl
from trnsim.timing.profile import Profile, profile


@nki.jit
def matmul_kernel(a_t, b):
    """out[M, N] = a_t.T @ b, tiles of 128 x 128 x 512, fp32 accumulation in PSUM."""
    k_dim, m_dim = a_t.shape
    _, n_dim = b.shape
    out = nl.ndarray((m_dim, n_dim), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_dim // 128):
        for n in nl.affine_range(n_dim // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_dim // 128):
                at = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
                bt = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=at, src=a_t[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                nisa.dma_copy(dst=bt, src=b[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                nisa.nc_matmul(dst=acc, stationary=at, moving=bt)
            res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=res)
    return out


@pytest.fixture
def inputs():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 1024)).astype(np.float32)
    return a, b


def test_profile_returns_outputs_and_timeline(inputs):
    a, b = inputs
    p = profile(matmul_kernel, a, b, chip="trn2")
    assert isinstance(p, Profile)
    np.testing.assert_allclose(p.outputs, a.T @ b, rtol=1e-4, atol=1e-3)
    assert p.latency_ns > 0
    assert p.dma_count == 2 * 2 * 2 * 2 + 2 * 2
    assert p.hbm_read_bytes == 2 * 2 * 2 * (128 * 128 + 128 * 512) * 4
    assert p.hbm_write_bytes == 256 * 1024 * 4
    rows = {ev.row for ev in p.events}
    assert {"sync", "tensor", "tensor_matrix", "vector"} <= rows
    assert all(ev.end_ns >= ev.start_ns >= 0 for ev in p.events)
    assert p.average_dma_bytes == pytest.approx(
        (p.hbm_read_bytes + p.hbm_write_bytes) / p.dma_count
    )


def test_flops_and_utilization(inputs):
    a, b = inputs
    p = profile(matmul_kernel, a, b, chip="trn2")
    assert p.hardware_flops == 2 * 256 * 256 * 1024
    assert p.model_flops == p.hardware_flops
    peak = p.chip.peak_tflops("bf16") * 1e12
    assert p.mfu == pytest.approx(100 * p.model_flops / (p.latency_ns * 1e-9 * peak))
    assert p.mfu_percent(bf16_adjusted=True) == pytest.approx(4 * p.mfu)  # fp32 inputs
    assert 0 < p.mbu < 100
    active = p.engine_active_ns[(0, "tensor_matrix")]
    assert 0 < active <= p.latency_ns
    assert p.instruction_counts[(0, "tensor_matrix")] == 8


def test_values_false_gives_the_same_program_and_timeline(inputs):
    a, b = inputs
    with_values = profile(matmul_kernel, a, b, chip="trn3")
    timing_only = profile(matmul_kernel, a, b, chip="trn3", values=False)
    assert timing_only.outputs is None
    assert [(i.opcode, i.engine, i.reads, i.writes) for i in with_values.program] == [
        (i.opcode, i.engine, i.reads, i.writes) for i in timing_only.program
    ]
    assert with_values.timeline.start == timing_only.timeline.start
    assert with_values.timeline.end == timing_only.timeline.end


def test_bit_identical_run_after_run(inputs):
    a, b = inputs
    runs = [profile(matmul_kernel, a, b, chip="trn2") for _ in range(2)]
    assert runs[0].latency_ns == runs[1].latency_ns
    assert runs[0].events == runs[1].events
    assert runs[0].dma_transfers == runs[1].dma_transfers
    assert runs[0].outputs.tobytes() == runs[1].outputs.tobytes()


def test_counters_and_summary(inputs):
    a, b = inputs
    p = profile(matmul_kernel, a, b, chip="trn2")
    c = p.counters
    assert max(v for _, v in c["pending_dma"]) >= 1
    assert max(v for _, v in c["hbm_throughput"]) <= p.chip.hbm.bandwidth_gbps
    assert max(v for _, v in c["sbuf_usage[0]"]) > 0
    assert max(v for _, v in c["psum_usage[0]"]) >= 2048
    assert c["throttle[0]"][0][1] == pytest.approx(0.5)
    s = p.summary()
    assert s["total_time"] == pytest.approx(p.latency_ns * 1e-9)
    assert s["nc0_tensor_matrix_instruction_count"] == 8


@pytest.mark.slow
def test_timing_only_over_100_gib_of_trn3_hbm():
    """values=False: a kernel streaming 100 GiB through SBUF is timed without the memory."""
    import ml_dtypes

    @nki.jit
    def stream(x, y):
        rows, free = x.shape
        for r in nl.affine_range(rows // 128):
            t = nl.ndarray((128, free), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[r * 128 : (r + 1) * 128, :])
            nisa.dma_copy(dst=y[r * 128 : (r + 1) * 128, :], src=t)

    x = np.broadcast_to(np.zeros((), ml_dtypes.bfloat16), (128 * 3200, 64 * 1024))
    p = profile(stream, x, x, chip="trn3", values=False)
    assert p.hbm_read_bytes + p.hbm_write_bytes == 100 * 2**30
    assert p.dma_count == 6400
    assert 50 < p.mbu <= 100


def _column_tiles(tiled: bool):
    @nki.jit
    def kernel(a, b):
        at = nl.ndarray((32, 128), nl.bfloat16, buffer=nl.sbuf)
        bt = nl.ndarray((32, 512), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a)
        nisa.dma_copy(dst=bt, src=b)
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        for j in range(4):  # result rows 32j.. come from PE columns 32j..
            tiles = {"tile_position": (0, 32 * j), "tile_size": (32, 32)} if tiled else {}
            rows = slice(32 * j, 32 * (j + 1))
            nisa.nc_matmul(ps[rows, :], at[:, rows], bt, **tiles)
        res = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=ps)
        nisa.dma_copy(dst=out, src=res)
        return out

    return kernel


def test_matmuls_tiled_onto_disjoint_pe_columns_run_concurrently():
    """Four 32-column tiles (trn2: 4 x 32 column tiling) stream their moving data at once;
    untiled, the same four matmuls take turns on the whole array. Values are the same."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 128)).astype(nl.bfloat16.storage)
    b = rng.standard_normal((32, 512)).astype(nl.bfloat16.storage)
    spans = {}
    for tiled in (True, False):
        prof = profile(_column_tiles(tiled), a, b, chip="trn2")
        mms = [i for i, ins in enumerate(prof.program) if ins.opcode == "nc_matmul"]
        spans[tiled] = [(prof.start_ns(i), prof.timeline.issue_end[i] / prof._tpn) for i in mms]
        np.testing.assert_allclose(
            prof.outputs, a.astype(np.float32).T @ b.astype(np.float32), rtol=2e-2, atol=1e-2
        )
    first_end = spans[True][0][1]
    assert all(start < first_end for start, _ in spans[True][1:])  # all four overlap
    untiled = spans[False]
    assert all(s1 >= e0 for (_, e0), (s1, _) in itertools.pairwise(untiled))
    assert spans[True][-1][1] < spans[False][-1][1]
