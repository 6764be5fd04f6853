"""torch.arange on the device as the CPU computes it: lengths and checks on the numbers given,
integer outputs from the truncated start and step (int64 sized in integers), values that
wrap an integer type, and the errors."""

from __future__ import annotations

import itertools

import pytest
import torch

GRID = list(itertools.product([0, 0.5, -2.5, 3.7], [0, 5.7, -3.1, 64], [2.0, 1.5, -1.5, 1, 0.5,
                                                                       -0.7]))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.float32],
                         ids=str)
def test_arange_matches_the_cpu(dev, kernel_mode, dtype):
    for start, end, step in GRID:
        try:
            want = torch.arange(start, end, step, dtype=dtype)
        except (RuntimeError, ValueError) as e:
            with pytest.raises(type(e), match=str(e).split("\n")[0][:30]):
                torch.arange(start, end, step, dtype=dtype, device=dev)
            continue
        got = torch.arange(start, end, step, dtype=dtype, device=dev).cpu()
        assert got.shape == want.shape, (start, end, step)
        if dtype.is_floating_point:  # the device's float32 iota times step (the CPU's double)
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-5)
        else:
            assert torch.equal(got, want), (start, end, step)


def test_arange_with_a_float_step_for_integers(dev, kernel_mode):
    """XLNet's `torch.arange(0, d, 2.0, dtype=torch.int64)` (refused before: "step=2.0 is not
    an integer")."""
    assert torch.equal(torch.arange(0, 64, 2.0, dtype=torch.int64, device=dev).cpu(),
                       torch.arange(0, 64, 2))
