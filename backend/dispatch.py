"""From the dispatcher to the device: registry entries, the catch-all, copies.

Every registry entry becomes one PrivateUse1 kernel: in kernel mode it runs the entry's
kernel implementation (NKI kernels on the simulated core), in reference mode or for dtypes no
engine serves it runs PyTorch's CPU kernel on the same bytes (trnsim.backend.host). Ops with no
entry reach `catch_all`: an error naming the op and how to opt in to the host fallback, or,
under TRNSIM_FALLBACK=cpu, the host run with a warning once per op and a count.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from trnsim.backend import host
from trnsim.backend.registry import REGISTRY, HostOnly, OpEntry
from trnsim.backend.runtime import Runtime, runtime

from trnsim.errors import UnsupportedError


class FallbackWarning(RuntimeWarning):
    """An ATen op ran on the host (TRNSIM_FALLBACK=cpu): it has no device time."""


def resolve(qualified: str) -> Any:
    """torch.ops OpOverload of "aten::add.Tensor"."""
    ns, _, rest = qualified.partition("::")
    packet, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), packet), overload or "default")


def install(lib: Any, rt: Runtime) -> None:
    """Register every entry of the registry as the op's PrivateUse1 kernel."""
    from trnsim.backend import ops  # noqa: F401  (fills REGISTRY)

    for entry in REGISTRY.values():
        if entry.qualified.startswith("aten::"):
            lib.impl(entry.name, make_kernel(entry, resolve(entry.qualified), rt), "PrivateUse1")
    from trnsim.backend.ops.attention import sdpa_autograd
    from trnsim.backend.ops.norms import rms_norm_autograd

    # Composite in PyTorch: given autograd-level kernels here, so each is one fused op.
    lib.impl("rms_norm", rms_norm_autograd, "AutogradPrivateUse1")
    lib.impl("scaled_dot_product_attention", sdpa_autograd, "AutogradPrivateUse1")


def make_kernel(entry: OpEntry, overload: Any, rt: Runtime) -> Any:
    kernel = entry.kernel
    name = entry.qualified
    if entry.host is not None:
        overload = entry.host

    def run_op(*args: Any, **kwargs: Any) -> Any:
        if kernel is not None and rt.mode == "kernel":
            host.check_devices(rt, name, args, kwargs)
            try:
                result = kernel(*args, **kwargs)
                rt.kernel_runs[name] += 1
                return result
            except HostOnly as why:
                rt.note_host_run(f"{name} ({why.reason})")
        elif rt.mode == "kernel":
            rt.note_host_run(f"{name} (no device kernel)")
        return host.run(rt, rt.host_views, overload, args, kwargs)

    run_op.__name__ = name
    return run_op


def catch_all(op: Any, *args: Any, **kwargs: Any) -> Any:
    """The PrivateUse1 fallback: an op no registry entry serves."""
    rt = runtime()
    name = op.name()
    if rt.fallback == "cpu":
        with rt.lock:
            rt.fallback_counts[name] += 1
            first = name not in rt.warned
            rt.warned.add(name)
        if first:
            warnings.warn(
                f"{name} has no {rt.name} implementation: it ran on the host "
                f"(TRNSIM_FALLBACK=cpu; the same bytes, no simulated device time). "
                f"torch.{rt.name}.fallback_ops() counts such ops", FallbackWarning, stacklevel=2)
        return host.run(rt, rt.host_views, op, args, kwargs)
    what = (f"{name} is not implemented for the '{rt.name}' device in trnsim (shapes: "
            f"{_shapes(args, kwargs) or 'no tensors'})")
    if name in _INSTEAD:
        raise UnsupportedError(f"{what}: {_INSTEAD[name]}")
    raise UnsupportedError(
        f"{what}. Set TRNSIM_FALLBACK=cpu to run such ops "
        f"on the host over the same bytes (with a warning and no device time; "
        f"torch.{rt.name}.fallback_ops() counts them); `trnsim ops` lists what the device "
        f"implements")


_NESTED = ("the device has no nested tensors (nor does the host fallback make them device "
           "tensors). nn.TransformerEncoder makes one in eval mode when given "
           "src_key_padding_mask (enable_nested_tensor=True, its default): construct it with "
           "enable_nested_tensor=False")
# Missing ops a PyTorch module reaches on its own, with what to do instead.
_INSTEAD = {"aten::_nested_tensor_from_mask_left_aligned": _NESTED,
            "aten::_nested_tensor_from_mask": _NESTED}


def _shapes(args: Any, kwargs: Any) -> str:
    from trnsim.backend.launch import describe

    return describe(args, kwargs)


def copy(rt: Runtime, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """aten::_copy_from: host -> device, device -> host, device -> device (casts included)."""
    on = rt.name
    if src.device.type == on and dst.device.type == on:
        lazy = src.is_conj() or src.is_neg() or dst.is_conj() or dst.is_neg()
        if rt.mode == "kernel" and not lazy:  # the kernel copies bytes; the host resolves bits
            from trnsim.backend.ops.copying import device_copy

            try:
                device_copy(dst, src)
                return dst
            except HostOnly as why:
                rt.note_host_run(f"aten::copy_ ({why.reason})")
        rt.host_views.of(dst).copy_(rt.host_views.of(src))
    elif dst.device.type == on:
        if src.device.type != "cpu":
            raise RuntimeError(f"copy from {src.device} to {dst.device}: only cpu <-> {on} "
                               f"copies exist in trnsim")
        rt.host_views.of(dst).copy_(src)
    else:
        if dst.device.type != "cpu":
            raise RuntimeError(f"copy from {src.device} to {dst.device}: only cpu <-> {on} "
                               f"copies exist in trnsim")
        dst.copy_(rt.host_views.of(src))
    return dst
