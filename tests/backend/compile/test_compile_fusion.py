"""The fusion pass: each pattern is found in a small model, and the fused graph computes what
the unfused graph computes (outputs and parameter gradients), with each region's simulated
time fused and as its eager ops in compile_stats().

Tolerances: fp32 within 1e-5 (the fused kernels sum in another order: flash attention's
online softmax, one-pass norms; most regions come out bit for bit); bf16 within 2e-2 (a
fused kernel rounds once where eager rounds each op's output, so a bf16 step can differ).
"""

from __future__ import annotations

import copy

import compile_models as cm
import pytest
import torch
import torch._dynamo
import trnsim.backend
from trnsim.backend.compile import reset_compile_stats

TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


def _x(shape=(2, 16, 32)):
    return (torch.randn(*shape),)


CASES = [
    pytest.param(cm.LinearAct, _x, ["linear_act", "linear_act", "linear_act"], id="linear_act"),
    pytest.param(cm.GeluMLP, _x, ["mlp"], id="gelu_mlp"),
    pytest.param(cm.SwiGLU, _x, ["swiglu_mlp"], id="swiglu_mlp"),
    pytest.param(cm.Attention, _x, ["attention"], id="attention-masked_fill"),
    pytest.param(lambda: cm.Attention(additive=True), _x, ["attention"],
                 id="attention-additive"),
    pytest.param(cm.ManualRMSNorm, _x, ["rms_norm"], id="rms_norm-written-out"),
    pytest.param(cm.AddNorm, _x, ["add_norm", "add_norm"], id="add_rms_norm-add_layer_norm"),
    pytest.param(cm.Classifier, lambda: (torch.randn(64, 32), torch.randint(0, 40, (64,))),
                 ["cross_entropy", "cross_entropy"], id="cross_entropy-nll_loss"),
]


def _run(model, inputs, dev, **options):
    """Output and parameter gradients of one compiled forward/backward."""
    torch._dynamo.reset()
    reset_compile_stats()
    m = copy.deepcopy(model).to(dev)
    out = torch.compile(m, backend="trn", options=options)(*[t.to(dev) for t in inputs])
    (out if out.dim() == 0 else out.float().square().mean()).backward()
    return out.detach().cpu().float(), [p.grad.detach().cpu().float() for p in m.parameters()]


def _close(got, want, dtype, what):
    tol = TOL[dtype]
    torch.testing.assert_close(got, want, rtol=tol, atol=tol, msg=what)


@pytest.mark.parametrize(("ctor", "inputs", "patterns"), CASES)
def test_pattern_is_fused_and_equals_unfused(dev, kernel_mode, ctor, inputs, patterns):
    torch.manual_seed(0)
    model, args = ctor(), inputs()
    out, grads = _run(model, args, dev)
    stats = trnsim.backend.compile_stats()
    assert sorted(r.pattern for r in stats.regions) == sorted(patterns)
    for r in stats.regions:
        assert r.fused_launches >= 1 and r.eager_launches > r.fused_launches, r
        assert 0 < r.fused_ns < r.eager_ns, r  # one launch instead of several
        assert r.fused_backward_ns > 0 and r.eager_backward_ns > 0, r
        assert r.loc is not None and r.loc.filename == cm.__file__, r
    ref_out, ref_grads = _run(model, args, dev, fusion=False)
    assert not trnsim.backend.compile_stats().regions
    _close(out, ref_out, torch.float32, "output")
    for (name, _), g, rg in zip(model.named_parameters(), grads, ref_grads, strict=True):
        _close(g, rg, torch.float32, name)


@pytest.mark.parametrize(("ctor", "patterns"), [
    pytest.param(cm.SwiGLU, ["swiglu_mlp"], id="swiglu_mlp"),
    pytest.param(cm.FusableBlock, ["add_norm", "attention", "rms_norm", "swiglu_mlp"],
                 id="block", marks=pytest.mark.slow),
])
def test_fused_in_bf16(dev, kernel_mode, ctor, patterns):
    """bf16 weights and inputs: a SwiGLU MLP, and a written-out decoder block (manual RMS
    norm, attention, add + RMS norm, SwiGLU) are fused; outputs and gradients as the unfused
    graph's at bf16 tolerance."""
    torch.manual_seed(0)
    model = ctor().to(torch.bfloat16)
    args = (torch.randn(2, 16, 32, dtype=torch.bfloat16),)
    out, grads = _run(model, args, dev)
    got = sorted(r.pattern for r in trnsim.backend.compile_stats().regions)
    assert got == patterns
    ref_out, ref_grads = _run(model, args, dev, fusion=False)
    _close(out, ref_out, torch.bfloat16, "output")
    for (name, _), g, rg in zip(model.named_parameters(), grads, ref_grads, strict=True):
        scale = max(1.0, rg.abs().max().item())
        _close(g / scale, rg / scale, torch.bfloat16, name)


def test_no_fusion_when_an_intermediate_is_used_elsewhere(dev, kernel_mode):
    class Shared(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            z = self.fc(x)
            return torch.relu(z) + z  # the pre-activation is needed: no linear_act

    _run(Shared(), (torch.randn(4, 8),), dev)
    assert trnsim.backend.compile_stats().regions == []


def test_reference_mode_runs_the_fused_ops_unfused(dev, reference_mode):
    """In reference mode a fused op runs the region's own torch ops on the host."""
    torch.manual_seed(0)
    model, args = cm.SwiGLU(), _x()
    out, _ = _run(model, args, dev, measure=False)
    ref = copy.deepcopy(model)(*args)
    _close(out, ref.detach(), torch.float32, "output")
