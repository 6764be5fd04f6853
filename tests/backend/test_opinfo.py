"""PyTorch's own OpInfo samples of every op family the device runs as NKI kernels, on the
device (kernel mode) against the CPU: outputs at per-dtype tolerances, float32 gradients of a
random projection too. The default tier takes the first samples of each op in float32; the
slow tier every sample, in float32 and bfloat16."""

from __future__ import annotations

import pytest
import torch
from opinfo_harness import SELECTED, run_op

FAST_SAMPLES, FAST_GRADS = 3, 1
# Ops whose first samples take other paths (SDPA's dropout and 3-D samples run the math path,
# nll_loss's first are 2-D): enough samples to reach their device kernels.
MORE_SAMPLES = {"nn.functional.scaled_dot_product_attention": 14, "nn.functional.nll_loss": 16}
MORE_GRADS = {"nn.functional.scaled_dot_product_attention": 14, "nn.functional.nll_loss": 16}
# tan near its poles: range reduction in fp32 leaves ~3e-4 relative error (kernels/
# pointwise_extra.py), which the float64 referee sees too.
RTOL = {"tan": 1e-3, "_foreach_tan": 1e-3}


def _fast(name):
    return run_op(name, torch.float32, MORE_SAMPLES.get(name, FAST_SAMPLES),
                  MORE_GRADS.get(name, FAST_GRADS), RTOL.get(name))


@pytest.mark.parametrize("name", SELECTED)
def test_opinfo_samples_match_cpu(name):
    out = _fast(name)
    assert out.samples, f"no OpInfo samples for {name}"
    assert not out.failures, "\n".join(out.failures)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", SELECTED)
def test_opinfo_all_samples(name, dtype):
    out = run_op(name, dtype, None, 4 if dtype == torch.float32 else 0,
                 RTOL.get(name) if dtype == torch.float32 else None)
    assert not out.failures, "\n".join(out.failures)


def _family(qualified: str) -> str:
    return qualified.split("::")[-1].split(".")[0].rstrip("_")


# Kernel families OpInfo samples cannot reach, and the test that checks each instead.
EXEMPT = {
    "native_dropout": "test_nn_ops.py::test_dropout_masks_equal_the_cpu_run",
    "native_dropout_backward": "test_nn_ops.py::test_dropout_masks_equal_the_cpu_run",
    "_fused_adam": "test_nn_ops.py::test_fused_optimizers_track_the_cpu",
    "_fused_adamw": "test_nn_ops.py::test_fused_optimizers_track_the_cpu",
    "_fused_sgd": "test_nn_ops.py::test_fused_optimizers_track_the_cpu",
    "_adaptive_avg_pool2d": "test_nn_ops.py::test_adaptive_avg_pool_to_one",
    "_adaptive_avg_pool2d_backward": "test_nn_ops.py::test_adaptive_avg_pool_to_one",
}


def test_every_kernel_family_ran_in_the_opinfo_samples():
    """Each family the coverage table claims a kernel for was run on its kernels (forward or
    by a gradient check) by the samples above, or is exempted naming the test that runs it."""
    from trnsim.backend.registry import coverage

    ran = set()
    for name in SELECTED:
        ran |= {_family(k) for k in _fast(name).kernels}
    claimed = {_family(e.qualified) for e in coverage()
               if e.kernel is not None and e.kernels and e.qualified.startswith("aten::")}
    missing = sorted(claimed - ran - set(EXEMPT))
    assert not missing, f"kernel families no OpInfo sample ran: {missing}"


def _reference_tier(name):
    # every sixth op in the default tier, all of them under -m slow
    return name if SELECTED.index(name) % 6 == 0 else pytest.param(name, marks=pytest.mark.slow)


@pytest.mark.parametrize("name", [_reference_tier(n) for n in SELECTED])
def test_opinfo_samples_in_reference_mode(name):
    """Reference mode (CPU kernels over the HBM bytes, results written in place through out=
    overloads once a signature is known: backend/host_direct.py) gives the CPU's results,
    on the second run of each sample as on the first."""
    for _ in range(2):
        out = run_op(name, torch.float32, FAST_SAMPLES, 0, None, mode="reference")
        assert not out.failures, "\n".join(out.failures)
        assert not out.kernels
