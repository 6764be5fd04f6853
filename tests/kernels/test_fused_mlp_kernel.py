"""trnsim.kernels.fused_mlp: a GELU or SwiGLU MLP block in one launch, vs float64 (and the
saved pre-activations vs the eager linear's)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_testing import BF16, assert_close, randn
from trnsim.kernels import fused_mlp as fm
from views_testing import assert_rejected_views, launch, transposed


def _case(rng, m, d, h, n, dtype, gated, biases, x_layout="n"):
    if x_layout == "t":
        x, x_arg = transposed(rng, (m, d), dtype, (1, 0))
    else:
        x = randn(rng, (m, d), dtype)
        x_arg = x
    ws = {"w_in": randn(rng, (h, d), dtype, 0.3), "w_out": randn(rng, (n, h), dtype, 0.3)}
    if gated:
        ws["w_up"] = randn(rng, (h, d), dtype, 0.3)
    if biases:
        ws["b_in"] = randn(rng, (h,), dtype)
        ws["b_out"] = randn(rng, (n,), dtype)
        if gated:
            ws["b_up"] = randn(rng, (h,), dtype)
    return x, x_arg, ws


def _run(out, x_arg, ws, act, **extra):
    names = list(ws)

    def kernel(o, xx, *vals, **outs):
        fm.mlp(o, xx, act=act, **dict(zip(names, vals, strict=True)), **outs)

    if not extra:
        return launch(kernel, out, x_arg, *ws.values())[0]
    keys = list(extra)

    def kernel2(o, *rest):
        vals, saved = rest[:-len(keys)], rest[-len(keys):]
        kernel(o, *vals, **dict(zip(keys, saved, strict=True)))

    got = launch(kernel2, out, x_arg, *ws.values(), *extra.values())
    return got[0], got[-len(keys):]


@pytest.mark.parametrize(
    ("m", "d", "h", "n", "act", "gated", "biases"),
    [
        pytest.param(32, 32, 64, 32, "gelu", False, True, id="gelu-32x32x64"),
        pytest.param(32, 32, 64, 32, "silu", True, False, id="swiglu-32x32x64"),
        pytest.param(130, 129, 200, 70, "gelu_tanh", False, True, id="gelu_tanh-ragged"),
        pytest.param(1, 5, 3, 1, "relu", False, False, id="tiny"),
        pytest.param(257, 64, 300, 600, "silu", True, True, id="swiglu-ragged-n600"),
    ],
)
def test_mlp_fp32(rng, m, d, h, n, act, gated, biases):
    x, x_arg, ws = _case(rng, m, d, h, n, np.float32, gated, biases)
    got = _run(np.zeros((m, n), np.float32), x_arg, ws, act)
    assert_close(got, fm.mlp_ref(x, act=act, **ws), "float32", abs_frac=1)


def test_mlp_bf16_transposed_input_saves_activations(rng):
    m, d, h, n = 70, 48, 160, 40
    x, x_arg, ws = _case(rng, m, d, h, n, BF16, True, True, x_layout="t")
    out = np.zeros((m, n), BF16)
    saved = {k: np.zeros((m, h), BF16) for k in ("pre", "up", "act_out", "hidden")}
    got, (pre, up, act, hid) = _run(out, x_arg, ws, "silu", **saved)
    assert_close(got, fm.mlp_ref(x, act="silu", **ws), "bfloat16", factor=4, abs_frac=1)
    x64 = x.astype(np.float64)
    z = x64 @ ws["w_in"].astype(np.float64).T + ws["b_in"].astype(np.float64)
    u = x64 @ ws["w_up"].astype(np.float64).T + ws["b_up"].astype(np.float64)
    assert_close(pre, z, "bfloat16", abs_frac=1)
    assert_close(up, u, "bfloat16", abs_frac=1)
    # act and hidden are computed from the bf16-rounded pre-activations, as eager does
    zr = pre.astype(np.float64)
    assert_close(act, zr / (1 + np.exp(-zr)), "bfloat16", factor=2)
    assert_close(hid, act.astype(np.float64) * up.astype(np.float64), "bfloat16")


def test_mlp_fits_counts_the_resident_weights():
    sbuf = 192 * 1024
    assert fm.mlp_fits(768, 2048, 768, 2, True, sbuf)
    assert not fm.mlp_fits(4096, 11008, 4096, 2, True, sbuf)


def test_mlp_rejects_bad_shapes(rng):
    x = randn(rng, (4, 8), np.float32)
    w_in, w_out = randn(rng, (6, 8), np.float32), randn(rng, (5, 7), np.float32)
    assert_rejected_views("w_out has shape", fm.mlp, np.zeros((4, 5), np.float32), x, w_in,
                          w_out, act="gelu")
    assert_rejected_views("act='elu'", fm.mlp, np.zeros((4, 5), np.float32), x, w_in,
                          randn(rng, (5, 6), np.float32), act="elu")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_mlp_random_shapes(seed):
    rng = np.random.default_rng(seed)
    m, d, h, n = (int(v) for v in rng.integers(1, 400, 4))
    gated, biases = bool(seed % 2), bool(seed % 3)
    act = ("silu", "gelu")[seed % 2] if gated else ("gelu", "relu", "gelu_tanh")[seed % 3]
    dtype, name = (BF16, "bfloat16") if seed > 2 else (np.float32, "float32")
    x, x_arg, ws = _case(rng, m, d, h, n, dtype, gated, biases)
    got = _run(np.zeros((m, n), dtype), x_arg, ws, act)
    assert_close(got, fm.mlp_ref(x, act=act, **ws), name, factor=4, abs_frac=1)
