"""Simulated memories and their allocators: lazy HBM per chip, SBUF/PSUM per core.

Knows errors and the host's memory budget; knows nothing about dtypes, views, instructions
or time.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import mmap
import sys
import weakref
from collections.abc import Callable

import numpy as np

from trnsim.errors import AllocationError
from trnsim.hostmem import HOST_CHUNK, HostBudget, PendingPoison, chunk_runs

# Linux value of MAP_NORESERVE; the mmap module only exposes it from Python 3.13 on.
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)

HBM_ALIGN = 64  # bytes; allocation granularity of HBM tensors


class Allocator:
    """Next-fit allocator over rectangles [p0, p1) x [b0, b1).

    Next-fit (search from just after the previous allocation, wrapping) makes successive
    allocations of a loop body land on different addresses until capacity runs out: the
    way the compiler multi-buffers tiles, so region-based dependencies stay true ones.
    """

    def __init__(self, space: str, partitions: int, nbytes: int, align: int,
                 capacity_note: str = ""):
        self.space = space
        self.partitions = partitions
        self.nbytes = nbytes
        self.align = align
        self.capacity_note = capacity_note  # appended to capacities in messages
        self._live: dict[int, tuple[int, int, int, int]] = {}
        self._next_id = 0
        self._cursor = 0

    @property
    def used_bytes(self) -> int:
        return sum((p1 - p0) * (b1 - b0) for p0, p1, b0, b1 in self._live.values())

    def _fits(self, p0: int, p1: int, b0: int, b1: int) -> int | None:
        """None if free, else the end byte of a blocking allocation."""
        block = None
        for q0, q1, c0, c1 in self._live.values():
            if q0 < p1 and p0 < q1 and c0 < b1 and b0 < c1:
                block = c1 if block is None else max(block, c1)
        return block

    def allocate(self, p0: int, partitions: int, size: int,
                 align: int | None = None) -> tuple[int, int]:
        """Find `size` bytes in partitions [p0, p0+partitions); returns (handle, byte_start)."""
        found = self.try_allocate(p0, partitions, size, align)
        if found is None:
            raise self._full_error(p0, partitions, max(size, 1))
        return found

    def try_allocate(self, p0: int, partitions: int, size: int,
                     align: int | None = None) -> tuple[int, int] | None:
        """allocate(), or None where it would raise (no message is made: callers that evict
        and try again, e.g. the Beta-1 spill pool, fail often)."""
        align = align or self.align
        size = max(size, 1)
        p1 = p0 + partitions
        b0 = _round_up(self._cursor, align)
        if b0 + size <= self.nbytes and self._fits(p0, p1, b0, b0 + size) is None:
            return self._take(p0, p1, b0, size), b0  # the common case: free at the cursor
        # The lowest aligned start >= the cursor (then >= 0) whose bytes no allocation of
        # these partitions overlaps, found over the merged occupied intervals (the same
        # start as probing and skipping past each blocking allocation, in one pass).
        busy = sorted((c0, c1) for q0, q1, c0, c1 in self._live.values()
                      if q0 < p1 and p0 < q1)
        for start in (self._cursor, 0):
            b0 = _round_up(start, align)
            for c0, c1 in busy:
                if b0 + size <= c0:
                    break
                if c1 > b0:
                    b0 = _round_up(c1, align)
            if b0 + size <= self.nbytes:
                return self._take(p0, p1, b0, size), b0
        return None

    def _full_error(self, p0: int, partitions: int, size: int) -> AllocationError:
        """requested / free / capacity, in bytes per partition (total bytes in HBM)."""
        unit = " per partition" if self.partitions > 1 else ""
        what = f"{size} bytes{unit}" + (f" x {partitions} partitions" if unit else "")
        usable = " usable" if self.capacity_note else ""
        if size > self.nbytes:
            holds = "a partition holds" if unit else "the space holds"
            return AllocationError(
                f"{self.space}: cannot allocate {what}: requested {size} bytes{unit} but "
                f"{holds} {self.nbytes}{usable and usable + ' bytes'}{self.capacity_note}"
            )
        used = [0] * self.partitions
        for q0, q1, c0, c1 in self._live.values():
            for p in range(max(q0, p0), min(q1, p0 + partitions)):
                used[p] += c1 - c0
        free = self.nbytes - max(used[p0:p0 + partitions], default=0)
        why = "fragmented" if free >= size else "full"
        where = f" in the fullest of partitions [{p0}, {p0 + partitions})" if unit else ""
        return AllocationError(
            f"{self.space}: cannot allocate {what}: requested {size}, free {free}{where} ({why}), "
            f"capacity {self.nbytes}{usable} bytes{unit}{self.capacity_note}; "
            f"{self.used_bytes} of {self.partitions * self.nbytes} bytes in use"
        )

    def place(self, p0: int, partitions: int, b0: int, size: int) -> int:
        """Claim an explicit address (nl.ndarray(address=...)); overlapping claims are allowed,
        as on hardware, where the user owns placement."""
        if p0 < 0 or p0 + partitions > self.partitions or b0 < 0 or b0 + size > self.nbytes:
            raise AllocationError(
                f"{self.space}: address (partition {p0}, byte {b0}) with {partitions} partitions x "
                f"{size} bytes is outside [0, {self.partitions}) x [0, {self.nbytes})"
                + (f" usable bytes{self.capacity_note}" if self.capacity_note else "")
            )
        return self._take(p0, p0 + partitions, b0, size, advance=False)

    def _take(self, p0: int, p1: int, b0: int, size: int, advance: bool = True) -> int:
        handle = self._next_id
        self._next_id += 1
        self._live[handle] = (p0, p1, b0, b0 + size)
        if advance:
            self._cursor = b0 + size if b0 + size < self.nbytes else 0
        return handle

    def free(self, handle: int) -> None:
        self._live.pop(handle, None)


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a


class LinearAllocator:
    """Allocator of one flat byte space (HBM): free gaps kept sorted, coalesced on free.

    Two policies over the same gaps: "next" (next-fit from just after the previous
    allocation, wrapping: a kernel's HBM scratch rotates as on-chip tiles do, as
    `Allocator` does) and "first" (the lowest gap that fits: a long-lived process such as
    the PyTorch device reuses freed, already-resident bytes). Each call costs a bisect plus
    a scan of the gaps it skips; live blocks are never scanned.
    """

    partitions = 1

    def __init__(self, space: str, nbytes: int, align: int, policy: str = "next"):
        if policy not in ("next", "first"):
            raise ValueError(policy)
        self.space = space
        self.nbytes = nbytes
        self.align = align
        self.policy = policy
        self.capacity_note = ""
        self._starts = [0]  # sorted starts of the free gaps
        self._ends = {0: nbytes}  # gap start -> gap end
        self._live: dict[int, tuple[int, int]] = {}  # handle -> (start, end)
        self._next_id = 0
        self._cursor = 0
        self.used_bytes = 0
        self.peak_bytes = 0
        # Called with the free gap [start, end) a free() leaves (coalesced with its neighbours):
        # HBM gives the host RAM of whole chunks inside it back.
        self.on_free: Callable[[int, int], None] | None = None

    def allocate(self, p0: int, partitions: int, size: int,
                 align: int | None = None) -> tuple[int, int]:
        """`size` bytes (p0/partitions: the on-chip Allocator's signature, ignored);
        returns (handle, byte_start)."""
        align = align or self.align
        size = max(size, 1)
        if self.policy == "next":
            b0 = self._find(self._cursor, size, align)
            if b0 is None and self._cursor:
                b0 = self._find(0, size, align)
        else:
            b0 = self._find(0, size, align)
        if b0 is None:
            raise self._full_error(size)
        return self._take(b0, size), b0

    def _find(self, lo: int, size: int, align: int) -> int | None:
        """Lowest aligned start >= lo of a gap holding `size` bytes."""
        starts, ends = self._starts, self._ends
        i = bisect.bisect_right(starts, lo) - 1
        if i < 0 or ends[starts[i]] <= lo:
            i += 1
        for k in range(i, len(starts)):
            s = starts[k]
            b0 = _round_up(max(s, lo), align)
            if b0 + size <= ends[s]:
                return b0
        return None

    def _take(self, b0: int, size: int) -> int:
        starts, ends = self._starts, self._ends
        i = bisect.bisect_right(starts, b0) - 1
        s = starts[i]
        e = ends.pop(s)
        b1 = b0 + size
        if b1 < e:  # the tail stays free
            ends[b1] = e
            starts.insert(i + 1, b1)
        if s < b0:  # and so does the head
            ends[s] = b0
        else:
            del starts[i]
        handle = self._next_id
        self._next_id += 1
        self._live[handle] = (b0, b1)
        self.used_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.used_bytes)
        self._cursor = b1 if b1 < self.nbytes else 0
        return handle

    def free(self, handle: int) -> None:
        block = self._live.pop(handle, None)
        if block is None:
            return
        b0, b1 = block
        self.used_bytes -= b1 - b0
        starts, ends = self._starts, self._ends
        i = bisect.bisect_left(starts, b0)
        if i < len(starts) and starts[i] == b1:  # merge with the gap after
            b1 = ends.pop(b1)
            del starts[i]
        if i > 0 and ends[starts[i - 1]] == b0:  # and with the gap before
            b0 = starts[i - 1]
            ends[b0] = b1
        else:
            starts.insert(i, b0)
            ends[b0] = b1
        if self.on_free is not None:
            self.on_free(b0, b1)

    def block(self, handle: int) -> tuple[int, int]:
        """(start, end) bytes of a live allocation."""
        return self._live[handle]

    def largest_free(self) -> int:
        return max((e - s for s, e in self._ends.items()), default=0)

    def _full_error(self, size: int) -> AllocationError:
        free = self.nbytes - self.used_bytes
        if size > self.nbytes:
            return AllocationError(f"{self.space}: cannot allocate {size} bytes: requested "
                                   f"{size} bytes but the space holds {self.nbytes}")
        why = "fragmented: the largest free block is " \
            f"{self.largest_free()} bytes" if free >= size else "full"
        return AllocationError(
            f"{self.space}: cannot allocate {size} bytes: requested {size}, free {free} ({why}), "
            f"capacity {self.nbytes} bytes; {self.used_bytes} of {self.nbytes} bytes in use"
        )


class HBM:
    """A chip's HBM: one lazily backed flat byte space. Host RAM is taken only for the chunks
    (HOST_CHUNK) something reaches, admitted first by a HostBudget (a HostMemoryError names
    the bytes needed and available instead of an OOM kill).

    `give_back`: whether a free that leaves whole chunks unallocated returns their RAM to the
    host (default: for next fit, whose rotation would otherwise touch ever new bytes; first
    fit, the long-lived PyTorch device's, keeps freed bytes resident for reuse, as a caching
    allocator does, and they stay counted in resident_bytes)."""

    def __init__(self, capacity_bytes: int, policy: str = "next", give_back: bool | None = None):
        self.capacity_bytes = capacity_bytes
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE
        self._map = mmap.mmap(-1, capacity_bytes, flags=flags)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):  # one touched byte must not fault in 2 MiB
            with contextlib.suppress(OSError):
                self._map.madvise(mmap.MADV_NOHUGEPAGE)
        self.data = np.frombuffer(self._map, dtype=np.uint8)
        self.allocator = LinearAllocator("hbm", capacity_bytes, HBM_ALIGN, policy)
        if give_back if give_back is not None else policy == "next":
            self.allocator.on_free = _GiveBack(self)
        self.budget = HostBudget()
        self._resident = np.zeros(-(-capacity_bytes // HOST_CHUNK), dtype=bool)
        self.resident_bytes = 0  # host RAM admitted for HBM chunks (an upper bound of RSS)
        self.peak_resident_bytes = 0  # since the last reset_peak()

    @property
    def base_address(self) -> int:
        """Host address of HBM byte 0 (zero-copy aliases: the PyTorch device's storages).
        Bytes reached only through it bypass the host budget: call materialize() first."""
        return self.data.ctypes.data

    def allocate(self, nbytes: int) -> tuple[int, int]:
        """(handle, byte offset) of a fresh block; raises AllocationError when full."""
        return self.allocator.allocate(0, 1, nbytes)

    def reset_peak(self) -> None:
        """Start a new peak window (a launch on a long-lived HBM)."""
        self.peak_resident_bytes = self.resident_bytes

    def materialize(self, start: int, end: int, what: str = "HBM") -> np.ndarray:
        """Admit host RAM for HBM bytes [start, end) before they are first touched; returns
        the indices of the chunks that were not resident yet."""
        c0, c1 = start // HOST_CHUNK, -(-end // HOST_CHUNK)
        if c1 == c0 + 1 and self._resident[c0]:  # the common case: one resident chunk
            return _NO_CHUNKS
        part = self._resident[c0:c1]
        if end <= start or part.all():
            return _NO_CHUNKS
        new = np.flatnonzero(~part)
        nbytes = self._chunks_bytes(new + c0)
        self.budget.admit(nbytes, what)
        part[new] = True
        self.resident_bytes += nbytes
        self.peak_resident_bytes = max(self.peak_resident_bytes, self.resident_bytes)
        return new + c0

    def _chunks_bytes(self, chunks: np.ndarray) -> int:
        nbytes = len(chunks) * HOST_CHUNK
        last = len(self._resident) - 1
        if len(chunks) and chunks[-1] == last:  # the last chunk may be short
            nbytes -= (last + 1) * HOST_CHUNK - self.capacity_bytes
        return nbytes

    def _give_back(self, start: int, end: int) -> None:
        """LinearAllocator.on_free: the host RAM of the whole chunks inside free [start, end)."""
        c0, c1 = -(-start // HOST_CHUNK), end // HOST_CHUNK
        if c1 <= c0:
            return
        held = np.flatnonzero(self._resident[c0:c1]) + c0
        if not held.size:
            return
        try:
            for a, b in chunk_runs(held):
                length = min(b * HOST_CHUNK, self.capacity_bytes) - a * HOST_CHUNK
                self._map.madvise(mmap.MADV_DONTNEED, a * HOST_CHUNK, length)
        except (ValueError, OSError):  # (a closed mapping at shutdown): the pages stay counted
            return
        self._resident[held] = False
        nbytes = self._chunks_bytes(held)
        self.resident_bytes -= nbytes
        self.budget.release(nbytes)

    def pending_poison(self, start: int, nbytes: int, bits: np.ndarray,
                       what: str) -> PendingPoison:
        return PendingPoison(self, start, nbytes, bits, what)


_NO_CHUNKS = np.zeros(0, dtype=np.int64)


class _GiveBack:
    """HBM._give_back for its allocator's on_free, through a weak reference: a bound method
    would make HBM and allocator a reference cycle, and a launch's HBM (its mapping and the
    host RAM it holds) would then outlive the launch until a full garbage collection."""

    __slots__ = ("hbm",)

    def __init__(self, hbm: HBM):
        self.hbm = weakref.ref(hbm)

    def __call__(self, start: int, end: int) -> None:
        hbm = self.hbm()
        if hbm is not None:
            hbm._give_back(start, end)


def _nobody() -> None:
    return None


class OnChipMemory:
    """SBUF or PSUM of one NeuronCore: partitions x bytes, backed lazily."""

    def __init__(self, space: str, partitions: int, bytes_per_partition: int, align: int,
                 usable_bytes_per_partition: int | None = None):
        self.space = space
        self.partitions = partitions
        self.bytes_per_partition = bytes_per_partition
        # The compiler reserves the top of each SBUF partition: kernels allocate (automatically
        # or at an explicit address) only below the usable size (nki-api.md §3.3, §3.6).
        usable = usable_bytes_per_partition or bytes_per_partition
        note = (f" (of {bytes_per_partition}; nl.tile_size.total_available_sbuf_size)"
                if usable < bytes_per_partition else "")
        self.allocator = Allocator(space, partitions, usable, align, note)
        self._owner: Callable[[], object] = _nobody  # weakly: the Device holds its memories

    @property
    def owner(self) -> object:
        """The Device (launch) whose NeuronCore holds this memory (None: none, or gone)."""
        return self._owner()

    @owner.setter
    def owner(self, device: object) -> None:
        self._owner = _nobody if device is None else weakref.ref(device)

    @functools.cached_property
    def data(self) -> np.ndarray:
        """The bytes, made on first use: a timing-only run never touches them. An anonymous
        mapping (zero pages on first touch) rather than np.zeros: numpy asks for huge pages on
        large arrays, and a tile spanning all partitions (one per 192-256 KiB) then faults in
        and zeroes every 2 MiB page of the memory, milliseconds for each launch."""
        size = self.partitions * self.bytes_per_partition
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        buf = mmap.mmap(-1, max(size, 1), flags=flags)
        return np.frombuffer(buf, dtype=np.uint8, count=size).reshape(
            self.partitions, self.bytes_per_partition
        )


class TileRecord:
    """One on-chip allocation of a launch, as the timing model's allocation rule sees it
    (trnsim/timing/realloc.py): where the trace placed it, whether trnsim chose the address
    (`auto`; an explicit address is the kernel's own and never moves), and when it was live
    under Python's lifetimes: from the program index of the first instruction that could use
    it (`born`, the program's length at the allocation) to the program's length when it was
    released (`died`, -1: never released). `decl` names the declaration an automatic tile
    was made by where the API says the compiler sees one declaration for several tiles (a
    Beta-1 sequential loop body: see timing/realloc.py), else None."""

    __slots__ = ("align", "auto", "born", "byte_start", "capacity", "core", "decl", "died",
                 "nbytes", "partition_start", "partitions", "program", "space")

    def __init__(self, space: str, core: int, partition_start: int, partitions: int,
                 byte_start: int, nbytes: int, align: int, capacity: int, auto: bool,
                 program: list):
        self.space = space
        self.core = core
        self.partition_start = partition_start
        self.partitions = partitions
        self.byte_start = byte_start
        self.nbytes = nbytes  # per partition
        self.align = align  # of an automatic address in this memory
        self.capacity = capacity  # usable bytes per partition of this memory
        self.auto = auto
        self.program = program  # the launch's program record (its length dates the release)
        self.born = len(program)
        self.died = -1
        self.decl = None

    def released(self) -> None:
        self.died = len(self.program)


def drop_from_records(records: list[TileRecord], dead: set[int]) -> None:
    """The instructions `dead` were removed from the program and the rest renumbered: move
    each record's born/died to the new numbering."""
    if not dead:
        return
    gone = sorted(dead)
    for r in records:
        r.born -= bisect.bisect_left(gone, r.born)
        if r.died >= 0:
            r.died -= bisect.bisect_left(gone, r.died)
