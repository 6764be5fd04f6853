"""trnsim.kernels.fused_linear: act(a @ b + c) in one launch, vs float64, and vs the eager
pair (gemm, then the pointwise activation) it replaces."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from trnsim.kernels import fused_linear as fl
from trnsim.kernels.gemm import gemm
from trnsim.kernels.pointwise import pointwise
from views_testing import assert_rejected_views, launch, transposed


def _weight_t(rng, k, n, dtype):
    """b = w.t() for a torch Linear weight w [N, K]: K contiguous (a transposed view)."""
    return transposed(rng, (k, n), dtype, (1, 0))


@pytest.mark.parametrize(
    ("m", "k", "n", "act", "bias"),
    [
        pytest.param(1, 1, 1, "relu", True, id="1x1x1-relu"),
        pytest.param(32, 32, 64, "gelu", True, id="32x32x64-gelu"),
        pytest.param(127, 129, 300, "gelu_tanh", True, id="127x129x300-gelu_tanh"),
        pytest.param(130, 64, 513, "silu", False, id="130x64x513-silu-nobias"),
        pytest.param(64, 200, 96, "tanh", True, id="64x200x96-tanh"),
        pytest.param(40, 16, 24, "sigmoid", False, id="40x16x24-sigmoid-nobias"),
    ],
)
def test_linear_act_fp32(rng, m, k, n, act, bias):
    a = randn(rng, (m, k), np.float32)
    b, b_arg = _weight_t(rng, k, n, np.float32)
    c = randn(rng, (n,), np.float32) if bias else None
    out = np.zeros((m, n), np.float32)
    if bias:
        got = launch(lambda o, x, y, z: fl.linear_act(o, x, y, c=z, act=act), out, a, b_arg,
                     c)[0]
    else:
        got = launch(lambda o, x, y: fl.linear_act(o, x, y, act=act), out, a, b_arg)[0]
    assert_close(got, fl.linear_act_ref(a, b, c, act=act), "float32", abs_frac=1)


@pytest.mark.parametrize("act", ["gelu", "silu", "relu"])
def test_linear_act_equals_gemm_then_activation(rng, act):
    """fp32, with a bias and the pre-activation saved: the same bits as eager's two launches
    (the activation reads the same fp32 pre-activation)."""
    m, k, n = 48, 40, 72
    a = randn(rng, (m, k), np.float32)
    _, b_arg = _weight_t(rng, k, n, np.float32)
    c = randn(rng, (n,), np.float32)
    out, pre = np.zeros((m, n), np.float32), np.zeros((m, n), np.float32)
    got, saved = launch(lambda o, p, x, y, z: fl.linear_act(o, x, y, c=z, act=act, pre=p), out,
                        pre, a, b_arg, c)[:2]
    z = launch(lambda o, x, y, cc: gemm(o, x, y, c=cc), np.zeros((m, n), np.float32), a, b_arg,
               c)[0]
    op, attrs = fl.REF_OPS[act]
    y = launch(lambda o, x: pointwise(o, x, op=op, **attrs), np.zeros((m, n), np.float32), z)[0]
    np.testing.assert_array_equal(saved, z)
    np.testing.assert_array_equal(got, y)


def test_linear_act_bf16_batched(rng):
    a = randn(rng, (2, 70, 48), BF16)
    b, b_arg = _weight_t(rng, 48, 130, BF16)
    c = randn(rng, (130,), BF16)
    out = np.zeros((2, 70, 130), BF16)
    got = launch(lambda o, x, y, z: fl.linear_act(o, x, y, c=z, act="gelu"), out, a, b_arg, c)[0]
    assert_close(got, fl.linear_act_ref(a, b, c, act="gelu"), "bfloat16", factor=2, abs_frac=1)


def test_linear_act_rejects_unknown_activation_and_bad_pre(rng):
    a = randn(rng, (4, 8), np.float32)
    b = randn(rng, (8, 6), np.float32)
    out = np.zeros((4, 6), np.float32)
    assert_rejected_views("act='elu' is not one of gelu", fl.linear_act, out, a, b, act="elu")
    assert_rejected_views("pre has shape", fl.linear_act, out, a, b, act="relu",
                          pre=np.zeros((6, 4), np.float32))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_linear_act_random_shapes(seed):
    rng = np.random.default_rng(seed)
    m, k, n = (int(v) for v in rng.integers(1, 700, 3))
    act = list(fl.ACTS)[seed % len(fl.ACTS)]
    dtype, name = (BF16, "bfloat16") if seed % 2 else (np.float32, "float32")
    a = randn(rng, (m, k), dtype)
    b, b_arg = _weight_t(rng, k, n, dtype)
    c = randn(rng, (n,), dtype)
    out, pre = np.zeros((m, n), dtype), np.zeros((m, n), dtype)
    got, saved = launch(lambda o, p, x, y, z: fl.linear_act(o, x, y, c=z, act=act, pre=p), out,
                        pre, a, b_arg, c)[:2]
    assert_close(got, fl.linear_act_ref(a, b, c, act=act), name, factor=2, abs_frac=1)
    assert_close(saved, fl.gemm_ref(a, b, c), name, abs_frac=1)
