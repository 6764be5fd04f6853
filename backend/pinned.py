"""Pinned host memory for the device: `Tensor.pin_memory()`, `torch.empty(..., pin_memory=True)`
users and `DataLoader(pin_memory=True)`, which pins batches for the current accelerator (this
device, once it is registered). PyTorch asks the accelerator's C++ hooks for a pinned-memory
allocator, which a Python device cannot give (torch._C._acc.PrivateUse1Hooks binds none), so
every pin failed, for CPU-only code too in a process where the device is registered.

The simulated device reads any host memory (its copies are host memcpys), so pinning for it
is a contiguous copy of the tensor in ordinary host memory, as pin_memory returns a copy: the
values are the tensor's. `aten::_pin_memory` on CPU tensors is given that kernel; a pin for
another device type is refused (one process has one accelerator, this device)."""

from __future__ import annotations

from typing import Any

import torch

OPS = ("aten::_pin_memory",)
"""The overloads this module gives a kernel (the op coverage table's "core")."""


def install(lib: Any, device_name: str) -> None:
    def pin(self: torch.Tensor, device: Any = None) -> torch.Tensor:
        kind = torch.device(device).type if device is not None else device_name
        if kind != device_name:
            raise RuntimeError(
                f"pin_memory for device '{kind}': this process's accelerator is "
                f"'{device_name}' (trnsim), whose pinning is the only one available here")
        with torch._C._ExcludeDispatchKeyGuard(_AUTOGRAD_CPU):
            return self.clone(memory_format=torch.contiguous_format)

    lib.impl("_pin_memory", pin, "CPU")


_AUTOGRAD_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU)
