"""FSDP2 on the device: its storage resizes become no-ops for device tensors.

FSDP2 frees an unsharded parameter's memory by resizing its storage to 0 bytes and
re-allocates it before the next all-gather (`alloc_storage` / `free_storage` in
torch.distributed.fsdp._fully_shard._fsdp_param). A device storage is a non-owning view of
simulated HBM with no allocator behind it, so it cannot be resized (torch-backend.md §3.4):
for device tensors both helpers do nothing. The unsharded parameters then keep their HBM
between forward and backward (peak memory is higher than on hardware); values are the same,
since every all-gather writes the whole buffer.
"""

from __future__ import annotations

from typing import Any


def install(device_name: str) -> None:
    """Wrap FSDP2's storage helpers, once per process (a no-op without FSDP2)."""
    try:
        from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group
    except ImportError:  # no FSDP2 in this torch
        return
    alloc, free = _fsdp_param.alloc_storage, _fsdp_param.free_storage
    if getattr(alloc, "trnsim_device", None) == device_name:
        return

    def alloc_storage(tensor: Any) -> None:
        if tensor.device.type != device_name:
            alloc(tensor)

    def free_storage(tensor: Any) -> None:
        if tensor.device.type != device_name:
            free(tensor)

    alloc_storage.trnsim_device = device_name  # type: ignore[attr-defined]
    _fsdp_param.alloc_storage = alloc_storage
    _fsdp_param.free_storage = free_storage
    _fsdp_param_group.alloc_storage = alloc_storage
