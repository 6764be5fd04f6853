"""SBUF overflow for Beta-1 kernels: tiles that do not fit under Python object lifetimes.

The B1 compiler allocates SBUF by liveness: a tile is dead after its last use even while a
Python name still refers to it (e.g. the (1, F) row a kernel broadcasts once, then never
reads again). trnsim keeps a tile allocated while Python holds it, so a kernel the compiler
fits can exhaust SBUF here. Rather than fail such a kernel, an auto-allocated SBUF tile that
does not fit goes to a per-core overflow space placed after the real SBUF addresses (so the
timing model sees no false overlap with real tiles), with a SimulationWarning naming the
tile. Values are unaffected; SBUF usage counters then exceed the physical capacity. Direct
allocations (ncc) and PSUM never overflow: PSUM is banked and the compiler spills it instead.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from trnsim import dtypes as dt
from trnsim.allocation import Allocator
from trnsim.errors import SimulationWarning
from trnsim.memory import Buffer, Layout, View, poison_value
from trnsim.program import capture_location

OVERFLOW_ALIGN = 64  # bytes, as SBUF_ALIGN
_INITIAL_BYTES = 1 << 20  # per partition; doubled as needed


class OverflowMemory:
    """Bytes past the end of one core's SBUF (same partitions), growing on demand."""

    def __init__(self, partitions: int, base: int):
        self.space = "sbuf"
        self.partitions = partitions
        self.base = base  # first byte address: the real SBUF's size per partition
        self.data = np.zeros((partitions, base + _INITIAL_BYTES), dtype=np.uint8)
        self.allocator = Allocator("sbuf overflow", partitions, 1 << 40, OVERFLOW_ALIGN)

    def reserve(self, end: int) -> None:
        if end <= self.data.shape[1]:
            return
        width = self.data.shape[1]
        while width < end:
            width *= 2
        grown = np.zeros((self.partitions, width), dtype=np.uint8)
        grown[:, : self.data.shape[1]] = self.data
        self.data = grown


def allocate(ctx: Any, parts: int, nbytes: int, dtype: dt.DType, name: str) -> View:
    """A (parts, nbytes / itemsize) SBUF tile in the overflow space of the current core."""
    store = ctx.extra.setdefault("b1_overflow", {})
    mem = store.get(ctx.core.index)
    if mem is None:
        mem = store[ctx.core.index] = OverflowMemory(
            ctx.core.sbuf.partitions, ctx.core.sbuf.bytes_per_partition
        )
    handle, b0 = mem.allocator.allocate(0, parts, nbytes)
    mem.reserve(mem.base + b0 + nbytes)
    buf = Buffer(mem, "sbuf", ctx.core.index, 0, parts, mem.base + b0, nbytes, "sbuf", name, handle)
    f = nbytes // dtype.itemsize
    view = View(buf, Layout(dtype, 0, (parts, f), (f, 1)))
    if ctx.device.values:
        view.array()[...] = dt.cast(np.asarray(poison_value(dtype)), dtype)
    message = (
        f"SBUF is full under Python object lifetimes: tile '{name}' ({parts} partitions x "
        f"{nbytes} bytes) is simulated in overflow memory past the physical SBUF (the B1 "
        "compiler frees dead tiles; `del` tiles you no longer use to stay within SBUF)"
    )
    loc = capture_location()
    if loc is None:
        warnings.warn(message, SimulationWarning, stacklevel=2)
    else:
        warnings.warn_explicit(message, SimulationWarning, loc.filename, loc.lineno)
    return view
