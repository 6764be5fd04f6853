"""The kernel library's MoE and quantization kernels as torch ops on device tensors
(torch.ops.trnsim.*), against the kernels' float64 references."""

from __future__ import annotations

import numpy as np
import torch
from trnsim.kernels import moe, quantization


def _rel(got, want) -> float:
    return float(np.abs(np.asarray(got, np.float64) - want).max() / (np.abs(want).max() or 1))


def test_moe_ffn_op(dev):
    torch.manual_seed(0)
    t, h, e, f = 128, 128, 4, 128
    x = torch.randn(t, h).bfloat16()
    ws = [torch.randn(h, e).bfloat16(), (0.1 * torch.randn(e, h, f)).bfloat16(),
          (0.1 * torch.randn(e, h, f)).bfloat16(), (0.1 * torch.randn(e, f, h)).bfloat16()]
    out = torch.ops.trnsim.moe_ffn(x.to(dev), *(w.to(dev) for w in ws))
    assert out.device.type == dev and out.dtype == torch.bfloat16 and out.shape == (t, h)
    ref = moe.moe_ffn_ref(x.float().numpy(), *(w.float().numpy() for w in ws))
    assert _rel(out.cpu().float(), ref) < 2e-2


def test_fp8_quantize_dequantize_and_matmul(dev):
    torch.manual_seed(1)
    a = torch.randn(256, 128)
    q, s = torch.ops.trnsim.quantize_fp8(a.to(dev))
    assert q.dtype == torch.uint8 and s.shape == (256, 1) and s.dtype == torch.float32
    want_q, want_s = quantization.quantize_fp8_ref(a.numpy())
    np.testing.assert_allclose(s.cpu().numpy(), want_s, rtol=1e-6)
    codes = q.cpu().numpy().view(want_q.dtype).astype(np.float32)
    assert np.mean(codes != want_q.astype(np.float32)) < 0.01  # rounding ties may differ
    back = torch.ops.trnsim.dequantize_fp8(q, s)
    assert back.dtype == torch.bfloat16 and _rel(back.cpu().float(), a.numpy()) < 0.07
    # lhsT_q [K, M] = quantized A^T (A [M, K] per row), rhs_q [K, N] = B (per column)
    k, m, n = 128, 128, 512
    am, bm = torch.randn(m, k), torch.randn(k, n)
    qa, sa = torch.ops.trnsim.quantize_fp8(am.to(dev))
    qb, sb = torch.ops.trnsim.quantize_fp8(bm.t().contiguous().to(dev))
    out = torch.ops.trnsim.matmul_fp8(qa.t().contiguous(), qb.t().contiguous(), sa, sb)
    assert out.shape == (m, n) and out.dtype == torch.bfloat16
    assert _rel(out.cpu().float(), (am @ bm).numpy()) < 0.08


def test_matmul_mx(dev):
    torch.manual_seed(2)
    k, m, n = 512, 128, 512
    lhs_t, rhs = torch.randn(k, m).bfloat16(), torch.randn(k, n).bfloat16()
    out = torch.ops.trnsim.matmul_mx(lhs_t.to(dev), rhs.to(dev))
    ref = quantization.matmul_mx_ref(lhs_t.float().numpy(), rhs.float().numpy())
    assert _rel(out.cpu().float(), ref) < 2e-2
