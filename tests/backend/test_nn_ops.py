"""Device ops whose checks need more than an OpInfo sample: dropout's random masks (drawn from
the CPU generator, so equal to the CPU run's), and the fused optimizer steps."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F


def test_dropout_masks_equal_the_cpu_run(dev, kernel_mode):
    x = torch.randn(64, 33, requires_grad=True)
    xd = x.detach().to(dev).requires_grad_()
    torch.manual_seed(11)
    y = F.dropout(x, 0.3)
    torch.manual_seed(11)
    yd = F.dropout(xd, 0.3)
    assert torch.equal(yd.detach().cpu(), y.detach())
    g = torch.randn_like(y)
    y.backward(g)
    yd.backward(g.to(dev))
    assert torch.equal(xd.grad.cpu(), x.grad)
    assert any(k.startswith("aten::native_dropout") for k in _ran())
    assert torch.equal(F.dropout(xd, 0.3, training=False).cpu(), x.detach())


def _ran():
    import trnsim.backend

    return trnsim.backend.runtime.kernel_runs


@pytest.mark.parametrize("make", [
    lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, fused=True),
    lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True, fused=True),
    lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, fused=True),
], ids=["adamw", "adam-amsgrad", "sgd-nesterov"])
def test_fused_optimizers_track_the_cpu(dev, kernel_mode, make):
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 8)
    dmodel = copy.deepcopy(model).to(dev)
    opt, dopt = make(model.parameters()), make(dmodel.parameters())
    x = torch.randn(4, 16)
    before = sum(v for k, v in _ran().items() if k.startswith("aten::_fused_"))
    for _ in range(3):
        for m, o, xx in ((model, opt, x), (dmodel, dopt, x.to(dev))):
            o.zero_grad()
            m(xx).pow(2).mean().backward()
            o.step()
    for a, b in zip(model.parameters(), dmodel.parameters(), strict=True):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)
    assert sum(v for k, v in _ran().items() if k.startswith("aten::_fused_")) == before + 3


def test_adaptive_avg_pool_to_one(dev, kernel_mode):
    """The global average pool of CNN heads. F.adaptive_avg_pool2d(x, 1) is a mean in
    PyTorch's composite; the ATen op itself (what exported graphs call) is run directly
    (OpInfo's samples use other output sizes, which run on the host)."""
    x = torch.randn(2, 5, 7, 9, requires_grad=True)
    xd = x.detach().to(dev).requires_grad_()
    pool = torch.ops.aten._adaptive_avg_pool2d
    y, yd = pool(x, [1, 1]), pool(xd, [1, 1])
    torch.testing.assert_close(yd.detach().cpu(), y.detach(), rtol=1e-5, atol=1e-6)
    g = torch.randn_like(y)
    y.backward(g)
    yd.backward(g.to(dev))
    torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-5, atol=1e-6)
    assert _ran()["aten::_adaptive_avg_pool2d"] and _ran()["aten::_adaptive_avg_pool2d_backward"]


def test_grad_scaler_steps_and_skips_as_on_the_cpu(dev, kernel_mode):
    """torch.amp.GradScaler on device gradients: unscale, step and grow the scale; a step
    whose gradients hold an inf is skipped and the scale backs off; the same as the CPU's."""
    def run(device):
        p = torch.nn.Parameter(torch.arange(4.0, device=device))
        opt = torch.optim.SGD([p], lr=0.1)
        sc = torch.amp.GradScaler(device.split(":")[0], init_scale=8.0, growth_interval=1)
        seen = []
        for bad in (False, True, False):
            opt.zero_grad()
            sc.scale((p * p).sum()).backward()
            if bad:
                p.grad[1] = float("inf")
            sc.step(opt)
            sc.update()
            seen.append((p.detach().cpu().clone(), sc.get_scale()))
        return seen

    for (pc, sc), (pd, sd) in zip(run("cpu"), run(dev), strict=True):
        assert sd == sc
        torch.testing.assert_close(pd, pc, rtol=0, atol=0)
    assert [s for _, s in run("cpu")] == [16.0, 8.0, 16.0]
