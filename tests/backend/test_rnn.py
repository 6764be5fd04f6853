"""nn.LSTM, nn.GRU and their cells on the device (the fused cells PyTorch calls for an
accelerator, composed of the device's ops): outputs, final states and every gradient against
the CPU's, with and without biases, bidirectional and projected, in kernel and reference mode."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.utils._pytree import tree_leaves, tree_map

CASES = {
    "lstm": lambda: torch.nn.LSTM(6, 8, num_layers=2, batch_first=True),
    "lstm-nobias-bidir": lambda: torch.nn.LSTM(6, 8, bias=False, bidirectional=True),
    "lstm-proj": lambda: torch.nn.LSTM(6, 8, proj_size=4),
    "gru": lambda: torch.nn.GRU(6, 8, num_layers=2),
    "gru-nobias-bidir": lambda: torch.nn.GRU(6, 8, bias=False, bidirectional=True,
                                             batch_first=True),
}


def _check(dev, cpu_mod, inputs):
    """Outputs and states, then every parameter's gradient of a random weighting of them."""
    dev_mod = copy.deepcopy(cpu_mod).to(dev)
    flat = tree_leaves(cpu_mod(*inputs))
    flat_d = tree_leaves(dev_mod(*tree_map(lambda t: t.to(dev), inputs)))
    for a, b in zip(flat, flat_d, strict=True):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-5, atol=1e-6)
    w = [torch.randn_like(a) for a in flat]
    sum((a * g).sum() for a, g in zip(flat, w, strict=True)).backward()
    sum((b * g.to(dev)).sum() for b, g in zip(flat_d, w, strict=True)).backward()
    for (name, p), pd in zip(cpu_mod.named_parameters(), dev_mod.parameters(), strict=True):
        torch.testing.assert_close(pd.grad.cpu(), p.grad, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("case", CASES)
def test_rnn_matches_cpu(dev, kernel_mode, rt, case):
    torch.manual_seed(1)
    mod = CASES[case]()
    x = torch.randn(3, 5, 6)
    before = dict(rt.kernel_runs)
    _check(dev, mod, (x,))
    cell = "aten::_thnn_fused_" + ("lstm" if case.startswith("lstm") else "gru") + "_cell"
    assert rt.kernel_runs[cell] > before.get(cell, 0)
    backward = cell + ("_backward_impl" if case.startswith("lstm") else "_backward")
    assert rt.kernel_runs[backward] > before.get(backward, 0)


def test_rnn_in_reference_mode(dev, reference_mode):
    torch.manual_seed(2)
    _check(dev, torch.nn.LSTM(4, 5), (torch.randn(2, 3, 4),))
    _check(dev, torch.nn.GRU(4, 5), (torch.randn(2, 3, 4),))


def test_cells_with_initial_states(dev, kernel_mode):
    torch.manual_seed(3)
    x, h, c = torch.randn(4, 6), torch.randn(4, 8), torch.randn(4, 8)
    _check(dev, torch.nn.LSTMCell(6, 8), (x, (h, c)))
    _check(dev, torch.nn.GRUCell(6, 8, bias=False), (x, h))
