"""trnsim.kernels.matmul: blocked and naive matmul against the float64 reference."""

from __future__ import annotations

import nki
import numpy as np
import pytest
from kernel_testing import BF16, assert_close, assert_rejected, program_of, randn
from trnsim.kernels import matmul as mm


@pytest.mark.parametrize(
    ("chip", "k", "m", "n", "dtype"),
    [
        pytest.param("trn3", 256, 256, 1024, BF16, id="trn3-bf16-256x256x1024"),
        pytest.param("trn3", 128, 128, 512, np.float32, id="trn3-fp32-128x128x512"),
        pytest.param("trn2", 256, 384, 1024, BF16, id="trn2-bf16-256x384x1024"),
        pytest.param("trn2", 384, 128, 512, np.float32, id="trn2-fp32-384x128x512"),
        pytest.param("trn1", 128, 128, 1536, BF16, id="trn1-bf16-128x128x1536"),
    ],
)
def test_matmul_matches_reference(rng, chip, k, m, n, dtype):
    """out = lhsT.T @ rhs, rounded once to the input dtype."""
    lhs_t, rhs = randn(rng, (k, m), dtype), randn(rng, (k, n), dtype)
    out = nki.simulate(mm.matmul, chip=chip)(lhs_t, rhs)
    assert out.dtype == np.dtype(dtype)
    assert_close(out, mm.matmul_ref(lhs_t, rhs), np.dtype(dtype).name)


def test_matmul_ragged_blocks_match_naive(rng, monkeypatch):
    """Several rhs blocks and lhsT blocks, the last of each narrower: bit-identical to the
    naive kernel, which sums K in the same order."""
    monkeypatch.setattr(mm, "MAX_BLOCK_N", 1024)  # N=1536 -> rhs blocks 1024 + 512
    monkeypatch.setattr(mm, "MIN_DMA_BYTES", 512)  # bf16 -> lhsT blocks of 256: 256 + 128
    lhs_t, rhs = randn(rng, (256, 384), BF16), randn(rng, (256, 1536), BF16)
    blocked = nki.simulate(mm.matmul)(lhs_t, rhs)
    naive = nki.simulate(mm.matmul_naive)(lhs_t, rhs)
    assert np.array_equal(blocked.view(np.uint16), naive.view(np.uint16))
    assert_close(blocked, mm.matmul_ref(lhs_t, rhs), "bfloat16")


def test_matmul_uses_large_dmas_and_fewer_loads_than_naive(rng):
    """The blocked kernel moves >= 1 KiB per partition per DMA and loads each input once."""
    lhs_t, rhs = randn(rng, (256, 512), BF16), randn(rng, (256, 1024), BF16)
    blocked = [i for i in program_of(mm.matmul, lhs_t, rhs) if i.opcode == "dma_copy"]
    naive = [i for i in program_of(mm.matmul_naive, lhs_t, rhs) if i.opcode == "dma_copy"]
    on_chip = [o for i in blocked for o in (*i.reads, *i.writes) if o.region.space == "sbuf"]
    assert min(o.nbytes // o.partitions for o in on_chip) >= 1024
    loaded = sum(o.nbytes for i in blocked for o in i.reads if o.region.space == "hbm")
    assert loaded == lhs_t.nbytes + rhs.nbytes
    assert len(blocked) < len(naive) / 4


@pytest.mark.parametrize(
    ("lhs_shape", "rhs_shape", "dtypes", "match"),
    [
        pytest.param((256, 128), (128, 512), (BF16, BF16), "contraction sizes differ", id="K"),
        pytest.param((128, 100), (128, 512), (BF16, BF16), "M=100 is not", id="M"),
        pytest.param((128, 128), (128, 640), (BF16, BF16), "N=640 is not", id="N"),
        pytest.param((128, 128), (128, 512), (BF16, np.float32), "dtypes are", id="dtype"),
        pytest.param((128, 128), (128, 512), (np.int32, np.int32), "dtypes are", id="int"),
        pytest.param((128,), (128, 512), (BF16, BF16), "must be 2-D", id="rank"),
    ],
)
def test_matmul_rejects_bad_operands(lhs_shape, rhs_shape, dtypes, match):
    lhs_t, rhs = np.zeros(lhs_shape, dtypes[0]), np.zeros(rhs_shape, dtypes[1])
    assert_rejected(match, mm.matmul, lhs_t, rhs)
    assert_rejected(match, mm.matmul_naive, lhs_t, rhs)


def test_matmul_rejects_k_too_large_for_sbuf():
    """One K x 512 rhs block must fit in the SBUF budget (K <= 12160 in bf16 on trn3)."""
    lhs_t, rhs = np.zeros((12288, 128), BF16), np.zeros((12288, 512), BF16)
    assert_rejected("too large to keep", mm.matmul, lhs_t, rhs)


@pytest.mark.slow
@pytest.mark.parametrize("chip", ["trn2", "trn3"])
@pytest.mark.parametrize("seed", range(4))
def test_matmul_random_shapes(chip, seed):
    rng = np.random.default_rng(100 + seed)
    k, m = (int(x) * 128 for x in rng.integers(1, 17, size=2))
    n = int(rng.integers(1, 9)) * 512
    dtype = (BF16, np.float32)[seed % 2]
    lhs_t, rhs = randn(rng, (k, m), dtype), randn(rng, (k, n), dtype)
    out = nki.simulate(mm.matmul, chip=chip)(lhs_t, rhs)
    assert_close(out, mm.matmul_ref(lhs_t, rhs), np.dtype(dtype).name)


@pytest.mark.slow
@pytest.mark.parametrize("chip", ["trn2", "trn3"])
def test_blocked_matmul_is_faster_than_naive(rng, chip):
    """On the timing model the blocked kernel beats the naive one by a wide margin."""
    from trnsim.timing.profile import profile

    lhs_t, rhs = randn(rng, (1024, 1024), BF16), randn(rng, (1024, 1024), BF16)
    blocked = profile(mm.matmul, lhs_t, rhs, chip=chip)
    naive = profile(mm.matmul_naive, lhs_t, rhs, chip=chip)
    assert blocked.latency_ns < naive.latency_ns / 2
