"""Registering the device with torch: the composition root of trnsim.backend.

`register()` (run by `import trnsim.backend`, and by torch's backend autoload) renames
PrivateUse1 to `trn` (or `neuron` under TRNSIM_DEVICE=neuron), installs the device module
`torch.<name>`, the tensor-level kernels every device needs (allocation, views, copies), every
op of the registry (trnsim.backend.ops), the catch-all for the rest, autocast, printing and
serialization. It runs once per process; later calls return the same Runtime.
"""

from __future__ import annotations

import gc
import warnings
from typing import Any

import torch
from trnsim.backend import dispatch, storage
from trnsim.backend.device_module import DeviceModule, device_index_error
from trnsim.backend.runtime import Runtime, has_runtime, runtime, set_runtime

from trnsim import device_config as config

_LIBS: list[Any] = []  # torch.library.Library objects must outlive the registrations
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self) -> bool:
        return True

    def has_primary_context(self, dev_id: int) -> bool:
        return True

    def is_built(self) -> bool:
        return True


class _Guard(torch._C._acc.DeviceGuard):
    def type_(self) -> Any:
        return torch._C._autograd.DeviceType.PrivateUse1


def register() -> Runtime:
    """Register the device (once per process) and return its Runtime."""
    if has_runtime():
        return runtime()
    settings = config.from_environment()
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", settings.device):
        raise RuntimeError(
            f"trnsim: PrivateUse1 is already the '{current}' device in this process (another "
            f"backend, such as torch-neuronx, registered it); one process holds one "
            f"PrivateUse1 device: run trnsim without it, or set TRNSIM_DEVICE={current}")
    rt = Runtime(settings)
    set_runtime(rt)
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    _setup_privateuseone_for_python_backend(settings.device, backend_module=DeviceModule(rt),
                                            hook=_Hooks(), device_guard=_Guard())
    rt.device = torch.device(settings.device, 0)
    views = storage.HostViews(rt)
    rt.host_views = views
    impl = torch.library.Library("aten", "IMPL")
    _LIBS.append(impl)
    _register_tensor_kernels(impl, rt)
    dispatch.install(impl, rt)
    fallback = torch.library.Library("_", "IMPL")
    _LIBS.append(fallback)
    fallback.fallback(dispatch.catch_all, "PrivateUse1")
    fallback.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    from trnsim.backend import autocast, distributed, pinned, printing, serialization, user_kernels

    pinned.install(impl, settings.device)
    autocast.install(impl, rt)
    printing.install(rt)
    serialization.install(rt)
    user_kernels.install(rt)
    distributed.install(rt)
    from trnsim.aliases import install_torch_aliases

    install_torch_aliases()
    if settings.gc_freeze:  # TRNSIM_GC_FREEZE (trnsim.device_config)
        gc.collect()
        gc.freeze()
    return rt


# ---------------------------------------------------------------- tensor-level kernels


def _check_device(rt: Runtime, device: Any) -> None:
    if device is None:
        return
    d = torch.device(device)
    if d.type == rt.name and d.index not in (None, 0):
        from trnsim.backend.distributed.devices import accept

        if not accept(rt, d.index):
            raise RuntimeError(device_index_error(rt, d.index))


def _register_tensor_kernels(lib: Any, rt: Runtime) -> None:
    def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
        _check_device(rt, device)
        return storage.empty_strided(rt, size, stride, dtype)

    def empty_memory_format(size, dtype=None, layout=None, device=None, pin_memory=None,
                            memory_format=None):
        _check_device(rt, device)
        if memory_format in (None, torch.contiguous_format, torch.preserve_format):
            return storage.empty(rt, size, dtype)
        cpu = torch.empty(size, dtype=dtype, device="meta", memory_format=memory_format)
        return storage.empty_strided(rt, size, cpu.stride(), dtype)

    def resize_(self, size, memory_format=None):
        stride = None
        if memory_format not in (None, torch.contiguous_format, torch.preserve_format):
            stride = torch.empty(size, device="meta", memory_format=memory_format).stride()
        return storage.resize(rt, self, size, stride)

    lib.impl("empty_strided", empty_strided, "PrivateUse1")
    lib.impl("empty.memory_format", empty_memory_format, "PrivateUse1")
    lib.impl("resize_", resize_, "PrivateUse1")
    # Views only write metadata: the CPU kernels do that for any storage.
    for name in ("view", "as_strided", "_reshape_alias", "unfold", "set_.source_Storage",
                 "set_.source_Storage_storage_offset", "set_.source_Tensor", "set_",
                 "view_as_real", "view_as_complex"):
        packet, _, overload = name.partition(".")
        target = getattr(getattr(torch.ops.aten, packet), overload or "default")
        lib.impl(name, _redispatch_cpu(target), "PrivateUse1")

    def copy_from(src, dst, non_blocking=False):
        return dispatch.copy(rt, src, dst)

    def copy_from_and_resize(src, dst):
        if list(dst.shape) != list(src.shape):
            storage.resize(rt, dst, src.shape)
        return dispatch.copy(rt, src, dst)

    lib.impl("_copy_from", copy_from, "PrivateUse1")
    lib.impl("_copy_from_and_resize", copy_from_and_resize, "PrivateUse1")
    # A conjugate or negative view reaching _copy_from: PyTorch's fallback for those bits
    # materializes the argument with clone, whose copy_ calls _copy_from again (unbounded C++
    # recursion, a segfault on `z.conj().cpu()`). The copy resolves the bits itself (the host
    # views carry them), as CUDA's copy_ does.
    for key in ("Conjugate", "Negative"):
        lib.impl("_copy_from", copy_from, key)
        lib.impl("_copy_from_and_resize", copy_from_and_resize, key)

    def to_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None,
                non_blocking=False, memory_format=None):
        # PyTorch's _to_copy stages a non_blocking copy to the CPU in pinned memory, whose
        # allocator a Python device cannot give (`x.to("cpu", non_blocking=True)` failed).
        # The device's copies are synchronous: the result is the ordinary copy.
        if layout not in (None, torch.strided):
            raise RuntimeError(f"_to_copy: layout {layout} is not supported for the "
                               f"'{rt.name}' device (only torch.strided)")
        fmt = torch.preserve_format if memory_format is None else memory_format
        target = torch.device(device) if device is not None else self.device
        out = torch.empty_like(self, dtype=dtype or self.dtype, device=target,
                               memory_format=fmt)
        out.copy_(self)
        return out.pin_memory() if pin_memory and target.type == "cpu" else out

    lib.impl("_to_copy", to_copy, "PrivateUse1")

    def local_scalar_dense(self):
        return rt.host_views.of(self).item()

    lib.impl("_local_scalar_dense", local_scalar_dense, "PrivateUse1")

    def has_compatible_shallow_copy_type(self, from_):
        # As upstream answers for two dense tensors of different devices (cpu and cuda):
        # Module.to() then moves each parameter in place (`param.data = moved`), so weights
        # tied across modules (an LM head sharing the embedding's) stay one Parameter on the
        # device. Sparse, quantized and meta tensors stay incompatible, as upstream.
        return all(t.layout == torch.strided and not t.is_quantized and not t.is_meta
                   for t in (self, from_))

    lib.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type,
             "PrivateUse1")


def _redispatch_cpu(op: Any) -> Any:
    def kernel(*args, **kwargs):
        return op.redispatch(_CPU_KEYS, *args, **kwargs)

    return kernel


def warn_once(rt: Runtime, key: str, message: str) -> None:
    if key not in rt.warned:
        rt.warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=4)
