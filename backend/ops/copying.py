"""Copies between device tensors (aten::_copy_from on trn -> trn): strides and casts."""

from __future__ import annotations

import torch
from trnsim.backend.registry import HostOnly


def device_copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """dst[...] = src (broadcast, cast) with the pointwise copy kernel."""
    raise HostOnly("no device copy kernel yet")
