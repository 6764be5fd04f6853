"""Host RAM behind the simulated memories: how much there is, a budget that refuses before
the OOM killer would, the poison fill of fresh HBM written chunk by chunk on first touch, and
how the C heap serves the semantics' temporaries (tune_malloc). Knows errors; knows nothing
about tensors, chips or time.

The limit is the smallest of MemAvailable (/proc/meminfo), the cgroup's memory limit less its
usage (containers), and TRNSIM_HOST_MEMORY_LIMIT (bytes; "4G"-style suffixes allowed) less
what the simulated memories already hold.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

import numpy as np

from trnsim.errors import HostMemoryError

ENV_LIMIT = "TRNSIM_HOST_MEMORY_LIMIT"
# Host RAM behind HBM is admitted, poisoned and given back in chunks of this many bytes: a
# fresh 100 GiB tensor costs nothing until an instruction reaches a chunk of it.
HOST_CHUNK = 1 << 20
RECHECK_BYTES = 1 << 30  # re-read the host's free memory at least every GiB materialized
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


ENV_MALLOC = "TRNSIM_MALLOC_TUNING"
MALLOC_MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's own ceiling for its dynamic threshold
MALLOC_TOP_PAD_BYTES = 16 << 20
_M_TOP_PAD, _M_MMAP_THRESHOLD = -2, -3  # glibc <malloc.h>


@functools.cache
def tune_malloc() -> bool:
    """Once per process (at the first launch) unless TRNSIM_MALLOC_TUNING=0, on glibc: serve
    allocations up to 32 MiB from the heap and keep 16 MiB free at its top. The semantics make
    fresh numpy temporaries of 0.5-8 MiB per instruction (a tile's fp32 and float64 copies);
    glibc otherwise maps each in fresh pages, or trims the heap top they were freed to, so every
    one page-faults anew (a 4096x4096 fp32 softmax with values: ~110k faults, ~40 % of its CPU
    time). Returns whether the settings were applied."""
    if os.environ.get(ENV_MALLOC, "1").strip() == "0":
        return False
    try:
        os.confstr("CS_GNU_LIBC_VERSION")  # ValueError / OSError where libc is not glibc
        mallopt = ctypes.CDLL(None).mallopt
    except (ValueError, OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD_BYTES)
                and mallopt(_M_TOP_PAD, MALLOC_TOP_PAD_BYTES))


def parse_bytes(text: str) -> int:
    """'4294967296', '4G', '512M', '1.5GiB' -> bytes; ValueError otherwise."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _SUFFIX and not t[-1:].isdigit() else ""
    number = float(t[: len(t) - len(unit)])
    if not number >= 0 or number == float("inf"):
        raise ValueError(text)
    return int(number * _SUFFIX[unit])


def _meminfo() -> dict[str, int]:
    out = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    out[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return out


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_free() -> int | None:
    """Bytes the cgroup may still allocate (v2, then v1), None if unlimited or unknown."""
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                          "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        lim, used = _read_int(limit), _read_int(usage)
        if lim is not None and used is not None and lim < 1 << 60:
            return max(0, lim - used)
    return None


def host_available_bytes() -> int | None:
    """Bytes of host RAM that can still be allocated (None when the host does not say)."""
    candidates = [v for v in (_meminfo().get("MemAvailable"), _cgroup_free()) if v is not None]
    return min(candidates) if candidates else None


def host_total_bytes() -> int:
    return _meminfo().get("MemTotal", 0)


def configured_limit() -> int | None:
    """TRNSIM_HOST_MEMORY_LIMIT in bytes, or None when unset; SpecError-free: a malformed
    value raises HostMemoryError naming the variable."""
    text = os.environ.get(ENV_LIMIT, "").strip()
    if not text:
        return None
    try:
        return parse_bytes(text)
    except ValueError:
        raise HostMemoryError(f"{ENV_LIMIT}={text!r} is not a number of bytes "
                              "(e.g. 4294967296, 4G, 512M)") from None


class HostBudget:
    """Admits host RAM for simulated memory before it is touched; refuses with a
    HostMemoryError naming the bytes needed and available instead of letting the process be
    OOM-killed. The host is asked again at least every RECHECK_BYTES admitted."""

    def __init__(self) -> None:
        self.held_bytes = 0  # admitted and not given back
        self._allowance = 0  # bytes admissible before the host is asked again
        total = host_total_bytes()
        # Kept free for the simulator's own work (numpy temporaries, the program record); small,
        # so that other processes' use of memory does not refuse kernels that still fit.
        self.reserve_bytes = min(256 << 20, total // 16) if total else 256 << 20

    def admit(self, nbytes: int, what: str) -> None:
        """Admit `nbytes` more (raises HostMemoryError if the host cannot hold them)."""
        if nbytes <= self._allowance:
            self._allowance -= nbytes
            self.held_bytes += nbytes
            return
        free, source = self._free_bytes()
        if free is not None and nbytes > free:
            raise HostMemoryError(
                f"host memory: {what} needs {nbytes} more bytes of host RAM, but only "
                f"{max(free, 0)} are available ({source}; the simulated memories hold "
                f"{self.held_bytes}). Simulate a smaller problem, or time it with "
                "values=False, which keeps no values")
        self._allowance = RECHECK_BYTES if free is None else min(free - nbytes, RECHECK_BYTES)
        self.held_bytes += nbytes

    def release(self, nbytes: int) -> None:
        self.held_bytes -= nbytes
        self._allowance += nbytes

    def _free_bytes(self) -> tuple[int | None, str]:
        limit = configured_limit()
        avail = host_available_bytes()
        options = []
        if limit is not None:
            options.append((limit - self.held_bytes, f"{ENV_LIMIT}={limit}"))
        if avail is not None:
            options.append((avail - self.reserve_bytes,
                            f"the host has {avail} free, {self.reserve_bytes} kept in reserve"))
        if not options:
            return None, ""
        return min(options)


def chunk_runs(chunks: np.ndarray) -> list[tuple[int, int]]:
    """Sorted chunk indices as runs [a, b) of consecutive ones."""
    if not chunks.size:
        return []
    breaks = np.flatnonzero(np.diff(chunks) != 1) + 1
    firsts = np.concatenate(([0], breaks))
    lasts = np.concatenate((breaks, [chunks.size]))
    return [(int(chunks[f]), int(chunks[la - 1]) + 1) for f, la in zip(firsts, lasts, strict=True)]


class PendingPoison:
    """The poison fill of a fresh HBM block, written chunk by chunk when something first
    reaches the chunk (memory.strided_array): never-written memory reads as poison, yet a
    fresh tensor costs no host RAM until then."""

    __slots__ = ("bits", "done", "end", "first", "hbm", "left", "start", "what")

    def __init__(self, hbm: Any, start: int, nbytes: int, bits: np.ndarray, what: str):
        self.hbm, self.bits, self.what = hbm, bits, what
        self.start, self.end = start, start + nbytes
        self.first = start // HOST_CHUNK
        self.done = np.zeros((self.end - 1) // HOST_CHUNK - self.first + 1, dtype=bool)
        self.left = len(self.done)

    def touch(self, lo: int, hi: int) -> bool:
        """Poison the not yet poisoned chunks of HBM bytes [lo, hi) (inside the block);
        True once every chunk of the block is."""
        c0 = max(lo, self.start) // HOST_CHUNK - self.first
        c1 = (min(hi, self.end) - 1) // HOST_CHUNK + 1 - self.first
        part = self.done[c0:c1]
        if part.all():
            return not self.left
        todo = np.flatnonzero(~part) + c0
        data = self.hbm.data
        for a, b in chunk_runs(todo):
            s = max(self.start, (a + self.first) * HOST_CHUNK)
            e = min(self.end, (b + self.first) * HOST_CHUNK)
            self.hbm.materialize(s, e, self.what)
            data[s:e].view(self.bits.dtype).fill(self.bits)
        self.done[todo] = True
        self.left -= len(todo)
        return not self.left

    def overwrite(self, lo: int, hi: int) -> bool:
        """Bytes [lo, hi) are about to be written, every one: the chunks whose part of the
        block lies inside need no poison (their host RAM is admitted, nothing written); True
        once every chunk of the block is done. The chunks at the edges stay for `touch`."""
        lo, hi = max(lo, self.start), min(hi, self.end)
        if lo >= hi:
            return not self.left
        c0 = lo // HOST_CHUNK - self.first
        c1 = (hi - 1) // HOST_CHUNK + 1 - self.first
        if max(self.start, (c0 + self.first) * HOST_CHUNK) < lo:
            c0 += 1
        if min(self.end, (c1 + self.first) * HOST_CHUNK) > hi:
            c1 -= 1
        if c0 >= c1:
            return not self.left
        todo = np.flatnonzero(~self.done[c0:c1]) + c0
        for a, b in chunk_runs(todo):
            s = max(self.start, (a + self.first) * HOST_CHUNK)
            e = min(self.end, (b + self.first) * HOST_CHUNK)
            self.hbm.materialize(s, e, self.what)
        self.done[todo] = True
        self.left -= len(todo)
        return not self.left

    def touch_all(self) -> None:
        self.touch(self.start, self.end)


class PendingFills:
    """The poison fills of fresh SBUF/PSUM tiles, deferred until the bytes are next reached.

    A fill is the rectangle [p0, p0 + parts) x [b0, b0 + nbytes) of a (partitions, bytes)
    array and the bits to fill it with; what is still pending of it is a list of rectangles
    inside it, cut at its element boundaries. Pending rectangles never overlap: a newer fill
    takes its rectangle out of the older ones (its poison comes later, as with eager fills),
    and a write that will set every byte of a box takes the box out (`overwrite`). Before an
    access, the pending rectangles its box reaches are written out (`flush_box`; `flush`: all
    of them). So every access sees the bytes it would see had each tile been filled when it
    was allocated, and a tile written piece by piece before it is read is never filled."""

    __slots__ = ("data", "fills", "ticket")

    # Pending rectangles kept at most; beyond, everything is written out (bounded bookkeeping).
    MAX_RECTS = 256

    def __init__(self, data: Any):
        self.data = data  # a callable returning the (partitions, bytes) uint8 array
        # ticket -> (origin byte, bits, [(p0, p1, b0, b1), ...] still pending)
        self.fills: dict[int, tuple[int, np.ndarray, list[tuple[int, int, int, int]]]] = {}
        self.ticket = 0

    def add(self, p0: int, parts: int, b0: int, nbytes: int, bits: np.ndarray) -> int:
        """Defer one fill; returns its ticket."""
        if nbytes and parts:
            if self.fills:
                self._cut(p0, p0 + parts, b0, b0 + nbytes)
            self.ticket += 1
            self.fills[self.ticket] = (b0, bits, [(p0, p0 + parts, b0, b0 + nbytes)])
        else:
            self.ticket += 1
        return self.ticket

    def overwrite(self, q0: int, q1: int, c0: int, c1: int) -> None:
        """Every byte of the box [q0, q1) x [c0, c1) is about to be written: no pending fill
        needs to write it."""
        if self.fills:
            self._cut(q0, q1, c0, c1)

    def flush_box(self, q0: int, q1: int, c0: int, c1: int) -> None:
        """Write out the pending rectangles that reach the box [q0, q1) x [c0, c1)."""
        data = None
        for ticket, (origin, bits, rects) in list(self.fills.items()):
            keep = []
            for r in rects:
                if r[1] <= q0 or q1 <= r[0] or r[3] <= c0 or c1 <= r[2]:
                    keep.append(r)
                    continue
                if data is None:
                    data = self.data()
                data[r[0]:r[1], r[2]:r[3]].view(bits.dtype).fill(bits)
            if len(keep) != len(rects):
                if keep:
                    self.fills[ticket] = (origin, bits, keep)
                else:
                    del self.fills[ticket]

    def flush(self) -> None:
        """Write out every pending fill."""
        fills, self.fills = self.fills, {}
        if not fills:
            return
        data = self.data()
        for _, bits, rects in fills.values():
            for p0, p1, b0, b1 in rects:
                data[p0:p1, b0:b1].view(bits.dtype).fill(bits)

    def pending(self, ticket: int) -> bool:
        return ticket in self.fills

    def _cut(self, q0: int, q1: int, c0: int, c1: int) -> None:
        """Take the box out of every pending rectangle. A rectangle the box would cut off its
        element boundaries is written out instead (the write or fill that follows then lands
        on it, as with eager fills)."""
        data = None
        count = 0
        for ticket, (origin, bits, rects) in list(self.fills.items()):
            isz = bits.itemsize
            out = []
            changed = False
            for r in rects:
                p0, p1, b0, b1 = r
                if p1 <= q0 or q1 <= p0 or b1 <= c0 or c1 <= b0:
                    out.append(r)
                    continue
                changed = True
                lo, hi = max(b0, c0), min(b1, c1)
                if (lo - origin) % isz or (hi - origin) % isz:
                    if data is None:
                        data = self.data()
                    data[p0:p1, b0:b1].view(bits.dtype).fill(bits)
                    continue
                m0, m1 = max(p0, q0), min(p1, q1)
                if p0 < m0:
                    out.append((p0, m0, b0, b1))
                if m1 < p1:
                    out.append((m1, p1, b0, b1))
                if b0 < lo:
                    out.append((m0, m1, b0, lo))
                if hi < b1:
                    out.append((m0, m1, hi, b1))
            if changed:
                if out:
                    self.fills[ticket] = (origin, bits, out)
                else:
                    del self.fills[ticket]
            count += len(out)
        if count > self.MAX_RECTS:
            self.flush()
