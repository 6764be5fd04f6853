"""Shared resources: SBUF/PSUM ports and hardware DGE blocks, booked on calendars.

The scheduler places instructions as soon as their dependencies are known, which is not in time
order across engines, so a shared resource keeps its reservations and a new one takes the first
gap that fits at or after its requested start. Knows nothing about values.
"""

from __future__ import annotations

import bisect

from trnsim.chipspec import ChipSpec
from trnsim.program import Instruction
from trnsim.timing.models import Cost


class Calendar:
    """Sorted, non-overlapping [start, end) reservations in integer ticks."""

    __slots__ = ("_ends", "_floor", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._floor: dict[object, int] = {}

    def reserve(self, t: int, duration: int, who: object = None) -> int:
        """Book `duration` ticks at the first free time >= t; return the start.

        `who` names the requester; each requester's requests must not go back in time, which
        lets reservations that end before every requester's latest request be dropped.
        """
        starts, ends = self._starts, self._ends
        i = bisect.bisect_right(ends, t)
        while i < len(starts) and starts[i] < t + duration:
            t = max(t, ends[i])
            i += 1
        if duration > 0:
            starts.insert(i, t)
            ends.insert(i, t + duration)
        if who is not None:
            self._floor[who] = t
            if len(starts) > 64:
                self._prune(min(self._floor.values()))
        return t

    def probe(self, t: int, duration: int) -> int:
        """The start `reserve` would give, without booking."""
        starts, ends = self._starts, self._ends
        i = bisect.bisect_right(ends, t)
        while i < len(starts) and starts[i] < t + duration:
            t = max(t, ends[i])
            i += 1
        return t

    def _prune(self, floor: int) -> None:
        k = bisect.bisect_right(self._ends, floor)
        if k:
            del self._starts[:k]
            del self._ends[:k]

    def __len__(self) -> int:
        return len(self._starts)


class Ports:
    """The shared SBUF/PSUM ports and DGE blocks of every core of a chip."""

    def __init__(self, chip: ChipSpec, ticks_per_ns: float):
        self.chip = chip
        self.ticks_per_ns = ticks_per_ns
        self._cals: dict[tuple, Calendar] = {}

    def keys_of(self, ins: Instruction, eng: str, cost: Cost) -> tuple | None:
        """Shared SBUF/PSUM ports an instruction occupies for its II (NKI-ARCH-V2/V3)."""
        if eng not in ("vector", "scalar", "gpsimd"):
            return None
        core = ins.core
        keys: list[tuple] = []
        if self.chip.nc_version <= 2:
            spaces = {o.region.space for o in ins.operands}
            if "psum" in spaces and eng != "gpsimd":
                keys.append(("psum", core))  # VectorE and ScalarE cannot share PSUM
            if "sbuf" in spaces and eng != "scalar":
                keys.append(("sbuf-vg", core))  # nor VectorE and GpSimdE SBUF
        else:
            if eng != "gpsimd":
                bank = self.chip.psum.bank_bytes  # same-bank PSUM access serialises
                banks = {
                    o.region.byte_start // bank for o in ins.operands if o.region.space == "psum"
                }
                keys.extend(("bank", core, b) for b in sorted(banks))
            if eng == "gpsimd" or (eng == "vector" and cost.perf_mode):
                keys.append(("sbuf-vg", core))  # the DVE perf mode's bus is GpSimd's
        return tuple(keys) or None

    def reserve(self, keys: tuple, who: str, t: int, dur: int) -> int:
        """Book every port of `keys` for `dur` ticks from the first time all are free."""
        cals = [self._cals.setdefault(k, Calendar()) for k in keys]
        while True:
            t2 = max(c.probe(t, dur) for c in cals)
            if t2 == t:
                break
            t = t2
        for c in cals:
            c.reserve(t, dur, who)
        return t

    def dge(self, core: int, t: int) -> int:
        """A hardware DGE block generates a DMA's descriptors (hwdge_issue_ns) from tick t, on
        whichever of the core's blocks frees first; returns when the descriptors are ready."""
        dur = round(self.chip.dma.hwdge_issue_ns * self.ticks_per_ns)
        cals = [
            self._cals.setdefault(("dge", core, b), Calendar())
            for b in range(self.chip.dma.hwdge_blocks_per_core)
        ]
        best = min(cals, key=lambda c: c.probe(t, dur))
        return best.reserve(t, dur) + dur
