"""The fused RNN cells PyTorch calls for an accelerator: nn.LSTM / nn.GRU (and LSTMCell /
GRUCell) on a PrivateUse1 device step through aten::_thnn_fused_lstm_cell and
_thnn_fused_gru_cell, which upstream only CUDA implements. Here each cell and its backward is
composed of the device's own ops (the input and hidden projections are already matmuls:
these are the gate nonlinearities and the state update), so in kernel mode they run as the
pointwise kernels, and in reference mode the same composition runs on the host.

Workspaces (what the forward keeps for the backward), as CUDA's: LSTM [B, 4H], the activated
gates i, f, g, o; GRU [B, 5H], r, z, n, the previous hidden state and the hidden gate of n."""

from __future__ import annotations

import torch
from trnsim.backend.registry import op


def _biased(gates: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return gates if bias is None else gates + bias


def lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = _biased(input_gates, input_bias) + _biased(hidden_gates, hidden_bias)
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat((i, f, g, o), 1)


def lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    if grad_hy is None:
        grad_hy = torch.zeros_like(cy)
    gcy = grad_hy * o * (1 - tanh_cy * tanh_cy)
    if grad_cy is not None:
        gcy = gcy + grad_cy
    grad_gates = torch.cat((gcy * g * i * (1 - i), gcy * cx * f * (1 - f),
                            gcy * i * (1 - g * g), grad_hy * tanh_cy * o * (1 - o)), 1)
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, gcy * f, grad_bias


def gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    ir, iz, in_ = _biased(input_gates, input_bias).chunk(3, 1)
    hr, hz, hn = _biased(hidden_gates, hidden_bias).chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (hx - n)
    return hy, torch.cat((r, z, n, hx, hn), 1)


def gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hx, hn = workspace.chunk(5, 1)
    grad_hx = grad_hy * z
    gn = grad_hy * (1 - z) * (1 - n * n)
    gz = grad_hy * (hx - n) * z * (1 - z)
    gr = gn * hn * r * (1 - r)
    grad_input_gates = torch.cat((gr, gz, gn), 1)
    grad_hidden_gates = torch.cat((gr, gz, gn * r), 1)
    if not has_bias:
        return grad_input_gates, grad_hidden_gates, grad_hx, None, None
    return (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_gates.sum(0),
            grad_hidden_gates.sum(0))


_NOTE = "composed of the device's pointwise ops (CUDA-only upstream)"
op("_thnn_fused_lstm_cell", host=lstm_cell, note=_NOTE)(lstm_cell)
op("_thnn_fused_lstm_cell_backward_impl", host=lstm_cell_backward, note=_NOTE)(
    lstm_cell_backward)
op("_thnn_fused_gru_cell", host=gru_cell, note=_NOTE)(gru_cell)
op("_thnn_fused_gru_cell_backward", host=gru_cell_backward, note=_NOTE)(gru_cell_backward)
