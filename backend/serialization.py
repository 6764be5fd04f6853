"""torch.save / torch.load(map_location='trn') and `Storage.trn()` for device tensors.

PyTorch's generic paths build a device storage with `torch.UntypedStorage(n, device=...)`,
which needs a C++ allocator a Python device does not have (it crashes). Here a storage is
moved to the device by allocating an HBM block and copying the bytes: `Storage.<device>()`
is replaced, and a deserializer registered ahead of PyTorch's own handles locations of this
device. Saving needs nothing: torch copies device storages to the host through _copy_from.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from trnsim.backend import storage
from trnsim.backend.device_module import device_index_error
from trnsim.backend.runtime import Runtime


def to_device_storage(rt: Runtime, st: Any) -> torch.UntypedStorage:
    """A device copy of a (CPU) untyped storage."""
    if isinstance(st, torch.TypedStorage):
        st = st._untyped_storage
    if st.device.type == rt.name:
        return st
    if st.device.type != "cpu":
        st = st.cpu()
    nbytes = st.nbytes()
    dev = storage.new_storage(rt, nbytes)
    if nbytes:
        src = torch.empty(0, dtype=torch.uint8).set_(st)
        off = dev.data_ptr() - rt.base
        rt.host_views.of_bytes(off, nbytes).copy_(src)
    return dev


def install(rt: Runtime) -> None:
    name = rt.name

    def storage_to_device(self: Any, device: Any = None, non_blocking: bool = False,
                          **_: Any) -> torch.UntypedStorage:
        _check(rt, device)
        return to_device_storage(rt, self)

    def typed_storage_to_device(self: Any, device: Any = None, non_blocking: bool = False,
                                **_: Any) -> Any:
        _check(rt, device)
        return self._new_wrapped_storage(to_device_storage(rt, self._untyped_storage))

    setattr(torch.storage._StorageBase, name, storage_to_device)
    setattr(torch.TypedStorage, name, typed_storage_to_device)

    def tag(obj: Any) -> str | None:
        return f"{name}:0" if obj.device.type == name else None

    def deserialize(obj: Any, location: str) -> Any:
        if location == name or re.match(rf"{name}(:|[0-9]+)", location):
            _check(rt, location)
            return to_device_storage(rt, obj)
        return None

    torch.serialization.register_package(5, tag, deserialize)


def _check(rt: Runtime, device: Any) -> None:
    if device is None:
        return
    d = torch.device(device) if not isinstance(device, int) else torch.device(rt.name, device)
    if d.type == rt.name and d.index not in (None, 0):
        raise RuntimeError(device_index_error(rt, d.index))
