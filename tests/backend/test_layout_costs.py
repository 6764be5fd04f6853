"""Device ops whose inputs come in awkward layouts (transposed gradients) stay on tiled paths:
their simulated time is that of a layout copy, not of element-sized DMAs."""

from __future__ import annotations

import pytest
import torch

import trnsim

pytestmark = pytest.mark.usefixtures("kernel_mode")


def test_cat_of_a_transposed_input_costs_a_layout_copy(dev):
    torch.manual_seed(0)
    a, b, c = (torch.randn(2, 128, 128) for _ in range(3))
    bt = b.transpose(1, 2)  # strides (16384, 1, 128): a split's gradient after a transpose
    ad, btd, cd = a.to(dev), b.to(dev).transpose(1, 2), c.to(dev)
    with trnsim.profile_torch() as cat:
        got = torch.cat([ad, btd, cd], -1)
    assert torch.equal(got.cpu(), torch.cat([a, bt, c], -1))
    with trnsim.profile_torch() as copy:
        btd.contiguous()
    with trnsim.profile_torch() as plain:
        torch.cat([ad, cd, cd], -1)
    assert cat.step_ns <= copy.step_ns + 2 * plain.step_ns
