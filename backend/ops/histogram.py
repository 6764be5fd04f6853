"""aten::histc on the host for every dtype a device's histc takes. PyTorch's CPU kernel counts
floating-point inputs only; CUDA's counts integers too, and models written for accelerators
call it on int32 expert ids (transformers' Mixtral load-balancing loss, its MoE integration).
Integer inputs are counted as CUDA's kernel counts them: min and max converted to the input's
type, the data's own range when they are equal (widened by one each way if that is empty),
element x in bin (x - min) * bins // (max - min) in 64-bit integers, max in the last bin,
elements outside [min, max] left out, counts in the input's dtype."""

from __future__ import annotations

import torch
from trnsim.backend.registry import reference_only

_INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def histc(self: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0) -> torch.Tensor:
    if self.dtype not in _INTS:
        return torch.ops.aten.histc.default(self, bins, min, max)
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins}")
    v = self.reshape(-1).to(torch.int64)
    lo, hi = int(min), int(max)  # (a C++ cast to the input type truncates too)
    if lo == hi and v.numel():
        lo, hi = int(v.min()), int(v.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(f"torch.histc: max must be larger than min (min {min}, max {max})")
    kept = v[(v >= lo) & (v <= hi)]
    idx = ((kept - lo) * bins).div_(hi - lo, rounding_mode="floor").clamp_(max=bins - 1)
    return torch.bincount(idx, minlength=bins).to(self.dtype)


def histc_out(self: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0, *,
              out: torch.Tensor) -> torch.Tensor:
    r = histc(self, bins, min, max)
    if out.dtype != r.dtype:
        raise RuntimeError(f"torch.histc: out has dtype {out.dtype}, expected {r.dtype}")
    return out.resize_(r.shape).copy_(r)


# The host call finds its out= arguments in the schema (trnsim.backend.host.out_arguments).
histc_out._schema = torch.ops.aten.histc.out._schema  # type: ignore[attr-defined]

reference_only("histc", host=histc, group="indexing",
               note="integer inputs counted as CUDA does (the CPU kernel takes floats only)")
reference_only("histc.out", host=histc_out, group="indexing",
               note="integer inputs counted as CUDA does (the CPU kernel takes floats only)")
