"""The kernel being simulated right now: device, core, program id and loop nest (a ContextVar).

NKI's free functions (nisa.*, nl.*) find their NeuronCore here, as JAX finds its trace.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trnsim.core import Device, NeuronCore
from trnsim.errors import KernelError
from trnsim.program import capture_location


@dataclass
class KernelContext:
    device: Device
    core: NeuronCore
    program_id: tuple[int, ...] = ()
    grid: tuple[int, ...] = ()
    generation: str = "ga"  # "ga" (import nki) or "beta1" (neuronxcc.nki)
    loops: list[tuple[int, str, int]] = field(default_factory=list)
    next_loop_id: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def chip(self) -> Any:
        return self.device.chip


_CURRENT: contextvars.ContextVar[KernelContext | None] = contextvars.ContextVar(
    "trnsim_kernel", default=None)


def current(api: str = "") -> KernelContext:
    """The active kernel; NKI calls outside a kernel are user errors."""
    ctx = _CURRENT.get()
    if ctx is None:
        raise KernelError(f"{api or 'NKI API'}: called outside of a running NKI kernel "
                          "(call the kernel through nki.simulate, nki.jit or trnsim.profile)",
                          capture_location())
    return ctx


def maybe_current() -> KernelContext | None:
    return _CURRENT.get()


def activate(ctx: KernelContext) -> contextvars.Token:
    return _CURRENT.set(ctx)


def deactivate(token: contextvars.Token) -> None:
    _CURRENT.reset(token)


@contextlib.contextmanager
def scoped_marker(ctx: KernelContext, kind: str) -> Iterator[None]:
    """Instructions issued inside the block carry a (block id, `kind`, 0) loop marker, as
    `nl.no_reorder()` needs."""
    loop_id = ctx.next_loop_id
    ctx.next_loop_id += 1
    depth = len(ctx.loops)
    ctx.loops.append((loop_id, kind, 0))
    try:
        yield
    finally:
        del ctx.loops[depth:]
