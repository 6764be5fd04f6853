"""Models train on the device as on the CPU: an MLP, a CNN block and a decoder-only
transformer block (embedding, SDPA attention, RMS norm, SwiGLU MLP, cross-entropy), 5 steps
with SGD and AdamW, fp32 and bf16 autocast, in reference mode and in kernel mode.

Tolerances (documented in the README's PyTorch section):
* reference mode runs PyTorch's own CPU kernels on the device's bytes, but PyTorch takes
  other paths for the device than for the CPU (foreach optimizer steps, RMS norm as one
  fused op, the CUDA autocast lists): fp32 losses and parameters agree to 1e-5 (the MLP and
  CNN with SGD, whose ops are the same on both, bit for bit), bf16 as kernel mode's.
* kernel mode, fp32: the engines accumulate in fp32 in another order than the CPU's kernels;
  losses agree to rtol 1e-4 and parameters to atol 2e-4 after 5 steps.
* bf16 autocast: matmul outputs round to bf16 from sums in another order, and the autocast
  op lists differ from the CPU's, so a bf16 rounding step (2^-8 relative) can differ:
  losses rtol 2e-2, parameters atol 2e-2.
"""

from __future__ import annotations

import pytest
import torch
from training import train, workload

STEPS = 5
TOL = {"fp32": (1e-4, 2e-4), "bf16": (2e-2, 2e-2), "fp32-reference": (1e-5, 1e-5)}
EXACT = {("mlp", "sgd", "fp32"), ("cnn", "sgd", "fp32")}  # the same ops as on the CPU

CASES = [
    ("mlp", "sgd", "fp32"), ("mlp", "adamw", "bf16"), ("cnn", "sgd", "fp32"),
    ("transformer", "adamw", "fp32"), ("transformer", "sgd", "bf16"),
]
SLOW_CASES = [
    ("mlp", "adamw", "fp32"), ("mlp", "sgd", "bf16"), ("mlp", "adamw_fused", "fp32"),
    ("mlp", "adam_foreach", "fp32"), ("cnn", "adamw", "fp32"), ("cnn", "sgd", "bf16"),
    ("transformer", "sgd", "fp32"), ("transformer", "adamw", "bf16"),
    ("transformer", "adamw_fused", "fp32"),
]


def _compare(dev, name, opt, precision, reference):
    model, batch, loss_fn = workload(name)
    bf16 = precision == "bf16"
    cpu_losses, cpu_params = train(model, batch, loss_fn, opt, STEPS, "cpu", autocast=bf16)
    dev_losses, dev_params = train(model, batch, loss_fn, opt, STEPS, dev, autocast=bf16)
    assert cpu_losses[-1] < cpu_losses[0], "the CPU run itself must learn"
    if reference and (name, opt, precision) in EXACT:
        assert dev_losses == cpu_losses
        for k, v in cpu_params.items():
            assert torch.equal(dev_params[k], v), k
        return
    rtol, atol = TOL["fp32-reference" if reference and precision == "fp32" else precision]
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=rtol,
                               atol=0)
    for k, v in cpu_params.items():
        torch.testing.assert_close(dev_params[k].float(), v.float(), rtol=0, atol=atol, msg=k)


@pytest.mark.parametrize(("name", "opt", "precision"), CASES)
def test_reference_mode_tracks_cpu(dev, reference_mode, name, opt, precision):
    _compare(dev, name, opt, precision, reference=True)


@pytest.mark.parametrize(("name", "opt", "precision"), CASES)
def test_kernel_mode_tracks_cpu(dev, kernel_mode, name, opt, precision):
    _compare(dev, name, opt, precision, reference=False)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "opt", "precision"), SLOW_CASES)
@pytest.mark.parametrize("mode", ["reference", "kernel"])
def test_training_matrix(dev, rt, name, opt, precision, mode):
    old = rt.mode
    rt.mode = mode
    try:
        _compare(dev, name, opt, precision, reference=mode == "reference")
    finally:
        rt.mode = old
