"""Reductions and scans asked for a result dtype no engine holds (float64 from float32 input:
renorm's backward sums with dtype=torch.float64) run on the host, counted, with the CPU's
values, rather than stopping at the device's dtype table."""

from __future__ import annotations

import pytest
import torch

CASES = {
    "sum": lambda t: t.sum(1, dtype=torch.float64),
    "sum_all": lambda t: t.sum(dtype=torch.float64),
    "mean": lambda t: t.mean(1, dtype=torch.float64),
    "prod": lambda t: t.prod(1, dtype=torch.float64),
    "cumsum": lambda t: t.cumsum(1, dtype=torch.float64),
    "cumprod": lambda t: t.cumprod(1, dtype=torch.float64),
    "nansum": lambda t: t.nansum(1, dtype=torch.float64),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_float64_result_of_a_float32_input_runs_on_the_host(dev, kernel_mode, name):
    x = torch.randn(4, 5)
    want = CASES[name](x)
    got = CASES[name](x.to(dev))
    assert got.dtype == torch.float64 and got.device.type == dev
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=1e-12)
    assert any("float64" in k for k in getattr(torch, dev).host_ops()), \
        getattr(torch, dev).host_ops()


def test_renorm_trains_as_on_the_cpu(dev, kernel_mode):
    x = torch.randn(5, 5, 5, requires_grad=True)
    xd = x.detach().to(dev).requires_grad_()
    for t in (x, xd):
        torch.renorm(t, 2, 1, 0.5).square().sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int32, torch.bool])
@pytest.mark.parametrize("shape", [(), (3,)])
def test_wrapped_numbers_promote_as_on_the_cpu(dev, kernel_mode, dtype, shape):
    """A Python number (`loss + 1.0`, a 0-d bf16 loss) is a wrapped number: it does not raise
    a tensor's dtype within its category. On meta it had been a plain 0-d float32 tensor, so a
    0-d bf16 tensor + 1.0 came back float32 (margin_ranking_loss in bf16)."""
    x = (torch.randn(shape) * 3).to(dtype)
    cases = [lambda t: t * 2.5, lambda t: t + 1, lambda t: torch.where(t > 0, t, 1.0),
             lambda t: t + True]
    if dtype != torch.bool:
        cases += [lambda t: torch.ops.aten.add.Scalar(t, 0.5), lambda t: 2 - t]
    for f in cases:
        want, got = f(x), f(x.to(dev))
        assert got.dtype == want.dtype
        assert torch.equal(got.cpu(), want)
