"""trnsim.kernels.norms: RMSNorm and LayerNorm against their float64 references."""

from __future__ import annotations

import nki
import numpy as np
import pytest
from kernel_testing import BF16, assert_close, assert_rejected, program_of, randn
from trnsim.kernels import norms

CASES = [
    pytest.param(256, 512, np.float32, id="fp32-256x512"),
    pytest.param(256, 1000, BF16, id="bf16-256x1000"),  # bn_stats chunks of 512 and 488
    pytest.param(1024, 64, np.float32, id="fp32-1024x64"),  # 8 rows per partition per DMA
    pytest.param(128, 2048, np.float16, id="fp16-128x2048"),
]


@pytest.mark.parametrize(("n", "d", "dtype"), CASES)
def test_rmsnorm_matches_reference(rng, n, d, dtype):
    x = randn(rng, (n, d), dtype, scale=3.0)
    w = randn(rng, (d,), np.float32)
    out = nki.simulate(norms.rmsnorm)(x, w, eps=1e-5)
    assert out.dtype == np.dtype(dtype)
    assert_close(out, norms.rmsnorm_ref(x, w, eps=1e-5), np.dtype(dtype).name, 2)


@pytest.mark.parametrize(("n", "d", "dtype"), CASES)
def test_layernorm_matches_reference(rng, n, d, dtype):
    x = (randn(rng, (n, d), np.float32, scale=2.0) + 5.0).astype(dtype)  # mean far from 0
    gamma, beta = randn(rng, (d,), np.float32), randn(rng, (d,), BF16)
    out = nki.simulate(norms.layernorm)(x, gamma, beta)
    assert_close(out, norms.layernorm_ref(x, gamma, beta), np.dtype(dtype).name, 2)


def test_norms_group_rows_into_large_dmas(rng):
    """D=64 fp32: 8 rows per partition, so each load and store moves 2 KiB per partition."""
    x, w = randn(rng, (1024, 64), np.float32), randn(rng, (64,), np.float32)
    dmas = [i for i in program_of(norms.rmsnorm, x, w) if i.opcode == "dma_copy"]
    rows = [
        o
        for i in dmas
        for o in (*i.reads, *i.writes)
        if o.region.space == "sbuf" and o.shape == (128, 8, 64)
    ]
    assert len(rows) == 2  # one load, one store
    assert all(o.nbytes // o.partitions == 2048 for o in rows)


@pytest.mark.parametrize(
    ("kernel", "shapes", "match"),
    [
        pytest.param(norms.rmsnorm, ((200, 64), (64,)), "N=200", id="rms-rows"),
        pytest.param(norms.rmsnorm, ((128, 64), (32,)), "w must have shape", id="rms-w"),
        pytest.param(norms.layernorm, ((128, 64), (64,), (65,)), "beta must", id="ln-beta"),
        pytest.param(norms.layernorm, ((128, 64, 2), (64,), (64,)), "2-D", id="ln-rank"),
    ],
)
def test_norms_reject_bad_operands(kernel, shapes, match):
    args = [np.zeros(s, np.float32) for s in shapes]
    assert_rejected(match, kernel, *args)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_norms_random_shapes(seed):
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(1, 9)) * 128
    d = int(rng.integers(1, 4097))
    dtype = (BF16, np.float32)[seed % 2]
    x = randn(rng, (n, d), dtype)
    w, b = randn(rng, (d,), np.float32), randn(rng, (d,), np.float32)
    name = np.dtype(dtype).name
    assert_close(nki.simulate(norms.rmsnorm)(x, w), norms.rmsnorm_ref(x, w), name, 2)
    assert_close(nki.simulate(norms.layernorm)(x, w, b), norms.layernorm_ref(x, w, b), name, 2)
