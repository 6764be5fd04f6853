"""aten::histc on device tensors of every dtype a device's histc takes: integer inputs (which
PyTorch's CPU kernel refuses; transformers' Mixtral passes int32 expert ids off the CPU) are
counted as CUDA's kernel counts them, in exact integer arithmetic."""

from __future__ import annotations

import pytest
import torch


def _brute(values, bins, lo, hi):
    """Bin by bin in Python integers: [lo, hi] cut into `bins` equal parts, hi in the last."""
    counts = [0] * bins
    for x in values:
        if lo <= x <= hi:
            counts[min((x - lo) * bins // (hi - lo), bins - 1)] += 1
    return counts


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16, torch.uint8])
def test_integer_histc_counts_exactly(dev, dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 120, (500,), generator=g).to(dtype)
    for bins, lo, hi in ((100, 0, 100), (7, 3, 90), (120, 0, 119)):
        got = torch.histc(x.to(dev), bins, lo, hi)
        assert got.dtype == dtype and got.device.type == dev
        assert got.cpu().tolist() == _brute(x.tolist(), bins, lo, hi)


def test_integer_histc_edges(dev):
    x = torch.tensor([29, 0, 100, -4, 101, 5, 5], dtype=torch.int32)
    d = x.to(dev)
    # 29 of [0, 100] in 100 bins is bin 29; 100 (max) is in the last bin
    assert torch.histc(d, 100, 0, 100)[29].item() == 1
    assert torch.histc(d, 100, 0, 100)[99].item() == 1
    assert torch.histc(d, 100, 0, 100).sum().item() == 5  # -4 and 101 are outside
    # min == max: the data's own range, [-4, 101]
    assert torch.histc(d, 3, 7, 7).cpu().tolist() == _brute(x.tolist(), 3, -4, 101)
    # one distinct value: the range is widened by one each way
    assert torch.histc(torch.full((4,), 5, dtype=torch.int32, device=dev), 2).cpu().tolist() \
        == [0, 4]
    # min and max convert to the input's type first (truncation)
    assert torch.histc(d, 4, 0.9, 3.7).cpu().tolist() == _brute(x.tolist(), 4, 0, 3)
    out = torch.empty(0, dtype=torch.int32, device=dev)
    torch.histc(d, 4, 0, 8, out=out)
    assert out.cpu().tolist() == _brute(x.tolist(), 4, 0, 8)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(d, 0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(d, 4, 5, 2)


def test_float_histc_is_the_cpus(dev):
    x = torch.randn(1000, generator=torch.Generator().manual_seed(1))
    for dtype in (torch.float32, torch.bfloat16):
        torch.testing.assert_close(torch.histc(x.to(dtype).to(dev), 13, -2, 2).cpu(),
                                   torch.histc(x.to(dtype), 13, -2, 2), rtol=0, atol=0)
