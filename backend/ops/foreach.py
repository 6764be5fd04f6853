"""PyTorch's multi-tensor `_foreach_*` ops (what torch.optim's default foreach path calls):
on this device one op over a list of tensors is one launch, as on GPUs."""

from __future__ import annotations

import torch
from trnsim.backend.registry import reference_only


def _overloads() -> list[str]:
    names = []
    for full in torch._C._dispatch_get_all_op_names():
        if full.startswith("aten::_foreach_"):
            names.append(full.removeprefix("aten::"))
    return sorted(n for n in names if not n.endswith(".out"))


reference_only(*_overloads(), group="foreach")
