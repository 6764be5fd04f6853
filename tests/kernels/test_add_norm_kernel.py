"""trnsim.kernels.add_norm: residual add + RMSNorm / LayerNorm in one launch, vs float64, and
vs eager's two launches (pointwise add, then the norm kernel)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from trnsim.kernels import add_norm as an
from trnsim.kernels import layer_norm as ln
from trnsim.kernels.pointwise import pointwise
from views_testing import assert_rejected_views, launch, transposed

SHAPES = [
    pytest.param(1, 8, id="1x8"),
    pytest.param(129, 20, id="129x20"),
    pytest.param(1000, 24, id="1000x24"),  # several rows per partition
    pytest.param(130, 700, id="130x700"),
    pytest.param(3, 10000, id="3x10000-two-passes"),  # rows longer than one chunk
]


@pytest.mark.parametrize(("r", "d"), SHAPES)
def test_add_rms_norm_fp32(rng, r, d):
    x, res = randn(rng, (r, d), np.float32), randn(rng, (r, d), np.float32)
    w = randn(rng, (d,), np.float32)
    out, s, rstd = (np.zeros((r, d), np.float32), np.zeros((r, d), np.float32),
                    np.zeros(r, np.float32))
    got, got_s, got_rstd = launch(an.add_rms_norm_forward, out, s, rstd, x, res, w,
                                  eps=1e-5)[:3]
    want, want_rstd, want_s = an.add_rms_norm_ref(x, res, w, 1e-5)
    assert_close(got_s, want_s, "float32")
    assert_close(got, want, "float32", factor=4)
    assert_close(got_rstd, want_rstd, "float32", factor=4)


@pytest.mark.parametrize(("r", "d"), SHAPES[:4])
def test_add_layer_norm_fp32(rng, r, d):
    x, res = randn(rng, (r, d), np.float32), randn(rng, (r, d), np.float32)
    w, b = randn(rng, (d,), np.float32), randn(rng, (d,), np.float32)
    out, s = np.zeros((r, d), np.float32), np.zeros((r, d), np.float32)
    mean, rstd = np.zeros(r, np.float32), np.zeros(r, np.float32)
    got = launch(an.add_layer_norm_forward, out, s, mean, rstd, x, res, w, b, eps=1e-5)
    want = an.add_layer_norm_ref(x, res, w, b, 1e-5)
    assert_close(got[1], want[3], "float32")
    assert_close(got[0], want[0], "float32", factor=4)
    assert_close(got[2], want[1], "float32", factor=4)
    assert_close(got[3], want[2], "float32", factor=4)


def test_add_rms_norm_bf16_transposed_residual(rng):
    r, d = 200, 96
    x = randn(rng, (r, d), BF16)
    res, res_arg = transposed(rng, (r, d), BF16, (1, 0))
    out, s = np.zeros((r, d), BF16), np.zeros((r, d), BF16)
    got, got_s = launch(an.add_rms_norm_forward, out, s, None, x, res_arg, None)[:2]
    want, _, want_s = an.add_rms_norm_ref(x, res)
    assert_close(got_s, want_s, "bfloat16")
    assert_close(got, want, "bfloat16", factor=2)


def test_add_rms_norm_equals_add_then_rms_norm(rng):
    """fp32 with one row per partition: the same bits as eager's add and rms_norm launches."""
    r, d = 100, 512
    x, res = randn(rng, (r, d), np.float32), randn(rng, (r, d), np.float32)
    w = randn(rng, (d,), np.float32)
    got, got_s = launch(an.add_rms_norm_forward, np.zeros((r, d), np.float32),
                        np.zeros((r, d), np.float32), None, x, res, w, eps=1e-6)[:2]
    s = launch(lambda o, a, b: pointwise(o, a, b, op="add"), np.zeros((r, d), np.float32), x,
               res)[0]
    y = launch(ln.rms_norm_forward, np.zeros((r, d), np.float32), None, s, w, eps=1e-6)[0]
    np.testing.assert_array_equal(got_s, s)
    np.testing.assert_array_equal(got, y)


def test_add_norm_rejects_mismatched_residual(rng):
    x = randn(rng, (4, 8), np.float32)
    assert_rejected_views("residual has shape", an.add_rms_norm_forward,
                          np.zeros((4, 8), np.float32), np.zeros((4, 8), np.float32), None, x,
                          randn(rng, (4, 9), np.float32), None)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_add_norm_random_shapes(seed):
    rng = np.random.default_rng(seed)
    r, d = int(rng.integers(1, 3000)), int(rng.integers(1, 3000))
    dtype, name = (BF16, "bfloat16") if seed % 2 else (np.float32, "float32")
    x, res = randn(rng, (r, d), dtype), randn(rng, (r, d), dtype)
    w, b = randn(rng, (d,), dtype), randn(rng, (d,), dtype)
    out, s = np.zeros((r, d), dtype), np.zeros((r, d), dtype)
    if seed < 3:
        got = launch(an.add_rms_norm_forward, out, s, None, x, res, w, eps=1e-5)[:2]
        norm = ln.rms_norm_ref(got[1], w, 1e-5)[0]
    else:
        got = launch(an.add_layer_norm_forward, out, s, None, None, x, res, w, b, eps=1e-5)[:2]
        norm = ln.layer_norm_ref(got[1], w, b, 1e-5)[0]
    assert_close(got[1], x.astype(np.float64) + res.astype(np.float64), name)
    # the norm of the sum as stored (rounded to its dtype), as eager's add then norm computes
    assert_close(got[0], norm, name, factor=4)
