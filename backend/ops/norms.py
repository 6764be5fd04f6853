"""RMS norm as one fused op: `rms_norm` (composite in PyTorch) is routed to `_fused_rms_norm`
and its backward `_fused_rms_norm_backward` on this device, whose host forms are PyTorch's own
decompositions (float32 statistics for 16-bit inputs)."""

from __future__ import annotations

import torch
from torch._decomp import decompositions as decomp
from trnsim.backend.registry import reference_only


def rms_norm_autograd(input, normalized_shape, weight=None, eps=None):
    """AutogradPrivateUse1 kernel of aten::rms_norm: the fused op, whose autograd formula
    calls _fused_rms_norm_backward."""
    return torch.ops.aten._fused_rms_norm(input, normalized_shape, weight, eps)[0]


def _fused_rms_norm_backward_host(grad_out, input, normalized_shape, rstd, weight, output_mask):
    return decomp._fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight,
                                           output_mask)


reference_only("_fused_rms_norm", host=decomp._fused_rms_norm, group="norms")
reference_only("_fused_rms_norm_backward", host=_fused_rms_norm_backward_host, group="norms")
