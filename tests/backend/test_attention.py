"""F.scaled_dot_product_attention on the device against the CPU over the paths it takes: the
fused kernel (equal heads, grouped-query heads with enable_gqa), and PyTorch's math path
(key/value heads that broadcast, head size above 128), each with no mask, a boolean mask
and an additive one, and causal; outputs and gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

SHAPES = {  # (q heads, kv heads, head size, enable_gqa)
    "fused": (4, 4, 16, False),
    "gqa": (4, 2, 16, True),
    "broadcast_kv_heads": (4, 1, 16, False),  # Falcon's multi-query attention
    "head_size_200": (2, 2, 200, False),
}


@pytest.mark.parametrize("mask", ["none", "bool", "additive", "causal"])
@pytest.mark.parametrize("path", sorted(SHAPES))
def test_sdpa_matches_the_cpu(dev, kernel_mode, path, mask):
    hq, hk, d, gqa = SHAPES[path]
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, h, 12, d, requires_grad=True) for h in (hq, hk, hk))
    keep = torch.ones(12, 12, dtype=torch.bool).tril()
    m = {"none": None, "causal": None, "bool": keep.expand(2, 1, 12, 12),
         "additive": torch.zeros(12, 12).masked_fill(~keep, -1e4)}[mask]
    kw = {"is_causal": mask == "causal", "enable_gqa": gqa}
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)
    qd, kd, vd = (t.detach().to(dev).requires_grad_() for t in (q, k, v))
    outd = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=None if m is None else m.to(dev),
                                          **kw)
    torch.testing.assert_close(outd.cpu(), out, rtol=1e-4, atol=1e-5)
    g = torch.randn(out.shape)
    out.backward(g)
    outd.backward(g.to(dev))
    for a, b in ((qd, q), (kd, k), (vd, v)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-4)
