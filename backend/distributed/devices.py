"""Which device indices name a process's NeuronCore.

A process simulates one NeuronCore, `trn:0`. In a distributed run a script may address its
core by its local rank, as CUDA scripts do (`torch.trn.set_device(local_rank)`,
`"trn:<local_rank>"`, `DDP(device_ids=[local_rank])`): that index is accepted as another
name of the same core (the local rank is LOCAL_RANK under torchrun, else the process's rank
in the initialised world, as under mp.spawn on one host). Tensors still report `trn:0`
(PyTorch's Python device hooks create device tensors on index 0). Other indices are refused.
"""

from __future__ import annotations

import os
from typing import Any


def local_rank() -> int | None:
    """This process's local rank in a distributed run, or None."""
    local = os.environ.get("LOCAL_RANK", "").strip()
    if local.isdigit():
        return int(local)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return None


def accept(rt: Any, index: int | None) -> bool:
    """True when `index` names this process's core: 0, or its local rank."""
    return index is None or index == 0 or index == local_rank()
