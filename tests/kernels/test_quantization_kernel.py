"""trnsim.kernels.quantization: FP8 per-row quantization, scaled FP8 matmul, MXFP8 matmul."""

from __future__ import annotations

import ml_dtypes
import nki
import numpy as np
import pytest
from kernel_testing import BF16, assert_close, assert_rejected, randn
from trnsim.kernels import quantization as qz

FP8 = ml_dtypes.float8_e4m3


@pytest.mark.parametrize("dtype", [BF16, np.float32], ids=["bf16", "fp32"])
def test_quantize_fp8_matches_reference(rng, dtype):
    x = randn(rng, (1024, 96), dtype, scale=5.0)  # 8 rows per partition per DMA (bf16)
    x[3] = 0  # an all-zero row
    xq, scale = nki.simulate(qz.quantize_fp8)(x)
    want_q, want_scale = qz.quantize_fp8_ref(x)
    assert xq.dtype == np.dtype(FP8)
    assert scale.shape == (1024, 1)
    np.testing.assert_allclose(scale, want_scale, rtol=1e-6)
    # The kernel scales in fp32, the reference in float64: a value on a rounding boundary may
    # land one fp8 step (relative 2^-3) away; most match exactly.
    got, want = xq.astype(np.float32), want_q.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2**-3, atol=2**-9)
    assert np.mean(got == want) > 0.99
    assert np.abs(got).max() == 240.0
    assert not got[3].any()


def test_fp8_round_trip(rng):
    x = randn(rng, (256, 512), BF16)
    xq, scale = nki.simulate(qz.quantize_fp8)(x)
    back = nki.simulate(qz.dequantize_fp8)(xq, scale)
    assert back.dtype == np.dtype(BF16)
    assert_close(back, qz.dequantize_fp8_ref(xq, scale), "bfloat16")
    # e4m3 keeps 4 significant bits: |x - back| <= 2^-4 |x| plus the subnormal step.
    x64 = x.astype(np.float64)
    err = np.abs(back.astype(np.float64) - x64)
    assert (err <= 2**-4 * np.abs(x64) + scale.astype(np.float64) * 2**-9 + 1e-6).all()


def test_matmul_fp8_matches_reference(rng):
    a, b = randn(rng, (256, 384), np.float32), randn(rng, (384, 1024), np.float32)
    aq, a_scale = qz.quantize_fp8_ref(a)  # A [M, K] per row
    bq_t, b_scale = qz.quantize_fp8_ref(b.T)  # B [K, N] per column
    lhs_t, rhs = np.ascontiguousarray(aq.T), np.ascontiguousarray(bq_t.T)
    out = nki.simulate(qz.matmul_fp8)(lhs_t, rhs, a_scale, b_scale)
    assert out.dtype == np.dtype(BF16)
    assert_close(out, qz.matmul_fp8_ref(lhs_t, rhs, a_scale, b_scale), "bfloat16")
    # and it approximates the unquantized product
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out.astype(np.float64) - exact).max() < 0.1 * np.abs(exact).max()


def test_matmul_mx_matches_reference(rng):
    lhs_t, rhs = randn(rng, (1024, 256), BF16), randn(rng, (1024, 1024), BF16)
    lhs_t[:, 5] = 0  # all-zero scale groups
    out = nki.simulate(qz.matmul_mx)(lhs_t, rhs)
    assert_close(out, qz.matmul_mx_ref(lhs_t, rhs), "bfloat16")
    exact = lhs_t.astype(np.float64).T @ rhs.astype(np.float64)
    assert np.abs(out.astype(np.float64) - exact).max() < 0.1 * np.abs(exact).max()


def test_matmul_mx_needs_trn3():
    lhs_t, rhs = np.zeros((512, 128), BF16), np.zeros((512, 512), BF16)
    assert_rejected("NeuronCore-v4", qz.matmul_mx, lhs_t, rhs, chip="trn2")


@pytest.mark.parametrize(
    ("kernel", "args", "match"),
    [
        pytest.param(qz.quantize_fp8, [((100, 64), BF16)], "N=100", id="quant-rows"),
        pytest.param(
            qz.dequantize_fp8,
            [((128, 64), FP8), ((128, 2), np.float32)],
            "scale must have shape",
            id="dequant-scale",
        ),
        pytest.param(
            qz.matmul_fp8,
            [((128, 128), BF16), ((128, 512), FP8), ((128, 1), np.float32), ((512, 1), np.float32)],
            "must be float8_e4m3",
            id="fp8-dtype",
        ),
        pytest.param(
            qz.matmul_fp8,
            [((128, 128), FP8), ((128, 512), FP8), ((128, 1), np.float32), ((1, 512), np.float32)],
            "rhs_scale",
            id="fp8-scale",
        ),
        pytest.param(
            qz.matmul_mx, [((256, 128), BF16), ((256, 512), BF16)], "multiple of 512", id="mx-K"
        ),
    ],
)
def test_quantization_rejects_bad_operands(kernel, args, match):
    assert_rejected(match, kernel, *(np.zeros(s, d) for s, d in args))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_quantized_matmuls_random_shapes(seed):
    rng = np.random.default_rng(400 + seed)
    k = int(rng.integers(1, 5)) * 512
    m, n = int(rng.integers(1, 13)) * 128, int(rng.integers(1, 7)) * 512
    a, b = randn(rng, (k, m), BF16), randn(rng, (k, n), BF16)
    assert_close(nki.simulate(qz.matmul_mx)(a, b), qz.matmul_mx_ref(a, b), "bfloat16")
    aq, a_scale = qz.quantize_fp8_ref(a.T)
    bq_t, b_scale = qz.quantize_fp8_ref(b.T)
    lhs_t, rhs = np.ascontiguousarray(aq.T), np.ascontiguousarray(bq_t.T)
    out = nki.simulate(qz.matmul_fp8)(lhs_t, rhs, a_scale, b_scale)
    assert_close(out, qz.matmul_fp8_ref(lhs_t, rhs, a_scale, b_scale), "bfloat16")
