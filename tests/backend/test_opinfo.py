"""PyTorch's own OpInfo samples of every op family the device runs as NKI kernels, on the
device (kernel mode) against the CPU: outputs at per-dtype tolerances, float32 gradients of a
random projection too. The default tier takes the first samples of each op in float32; the
slow tier every sample, in float32 and bfloat16."""

from __future__ import annotations

import pytest
import torch
from opinfo_harness import SELECTED, run_op

FAST_SAMPLES, FAST_GRADS = 3, 1


@pytest.mark.parametrize("name", SELECTED)
def test_opinfo_samples_match_cpu(name):
    out = run_op(name, torch.float32, FAST_SAMPLES, FAST_GRADS)
    assert out.samples, f"no OpInfo samples for {name}"
    assert not out.failures, "\n".join(out.failures)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", SELECTED)
def test_opinfo_all_samples(name, dtype):
    out = run_op(name, dtype, None, 4 if dtype == torch.float32 else 0)
    assert not out.failures, "\n".join(out.failures)
