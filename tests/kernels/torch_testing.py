"""torch for the kernel tests that compare with torch.autograd / torch CPU kernels."""

from __future__ import annotations

import pytest


def torch_or_skip():
    """The torch module, or skip the test when it cannot be imported (not installed, or its
    device-backend autoload failed: that is the PyTorch device's problem, tested in
    tests/backend, not the kernel's)."""
    try:
        import torch
    except (ImportError, RuntimeError) as e:
        pytest.skip(f"torch unavailable: {e}")
    return torch
