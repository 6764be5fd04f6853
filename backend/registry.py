"""The op registry: ATen overload -> how the device runs it. One entry per overload.

An entry's `kernel` runs the op in kernel mode: it takes the op's own arguments (device
tensors), launches kernels from trnsim.kernels through `trnsim.backend.launch`, and returns
what the ATen op returns. It may raise `HostOnly` for inputs no engine serves (float64, say):
the dispatcher then runs PyTorch's CPU kernel on the same bytes and counts it. An entry with
no kernel is *reference only*: it always runs on the host (and so has no device time).
Reference mode runs every registered op on the host.

Registered ops are listed by `coverage()` (`trnsim ops`, docs/torch-ops.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class HostOnly(Exception):
    """Raised by a kernel implementation for inputs no device kernel serves."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class OpEntry:
    name: str  # ATen overload, e.g. "add.Tensor" (namespace aten unless given)
    kernel: Callable[..., Any] | None  # kernel-mode implementation (None: reference only)
    kernels: tuple[str, ...] = ()  # trnsim.kernels functions it launches (coverage table)
    note: str = ""  # what the table says beside it
    group: str = ""  # the module that registered it (coverage table sections)
    host: Callable[..., Any] | None = None  # CPU-side op to run instead of the overload itself

    @property
    def qualified(self) -> str:
        return self.name if "::" in self.name else f"aten::{self.name}"


REGISTRY: dict[str, OpEntry] = {}


def op(*names: str, kernels: tuple[str, ...] | str = (), note: str = "", group: str = "",
       host: Callable[..., Any] | None = None) -> Callable[[Callable[..., Any]], Any]:
    """Register `fn` as the kernel-mode implementation of each ATen overload in `names`
    (`host`: the CPU op of reference mode, when it is not the overload itself)."""
    ks = (kernels,) if isinstance(kernels, str) else tuple(kernels)

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        g = group or fn.__module__.rsplit(".", 1)[-1]
        for n in names:
            _add(OpEntry(n, fn, ks, note, g, host))
        return fn

    return deco


def reference_only(*names: str, note: str = "", group: str = "",
                   host: Callable[..., Any] | None = None) -> None:
    """Register overloads that run on the host in every mode (listed as reference only);
    `host`: the CPU op to call on the host aliases, when it is not the overload itself."""
    for n in names:
        _add(OpEntry(n, None, (), note, group, host))


def reference_rest(*names: str, note: str = "", group: str = "") -> None:
    """reference_only for those of `names` no module has registered (kernel entries of a
    family come first; the family's remaining overloads then run on the host)."""
    reference_only(*(n for n in names if n not in REGISTRY), note=note, group=group)


def _add(entry: OpEntry) -> None:
    if entry.name in REGISTRY:
        raise ValueError(f"{entry.name} is registered twice")
    REGISTRY[entry.name] = entry


def coverage() -> list[OpEntry]:
    """Every registered overload, by group then name."""
    _load_all()
    return sorted(REGISTRY.values(), key=lambda e: (e.group, e.name))


def _load_all() -> None:
    from trnsim.backend import ops  # noqa: F401  (registers every op module)


def cpu_overloads(*bases: str) -> list[str]:
    """Every overload of aten::<base> (and its in-place <base>_) that has a CPU kernel: the
    overloads a device must provide itself (the rest decompose into these)."""
    import torch

    names = []
    for base in bases:
        for b in (base, base + "_"):
            packet = getattr(torch.ops.aten, b, None)
            if packet is None:
                continue
            for ov in packet.overloads():
                full = f"aten::{b}" + ("" if ov == "default" else f".{ov}")
                try:
                    has = torch._C._dispatch_has_kernel_for_dispatch_key(full, "CPU")
                except RuntimeError:  # a TorchScript-only overload (add.t, ...)
                    continue
                if has:
                    names.append(f"{b}.{ov}" if ov != "default" else b)
    return names
