"""Calendar: busy intervals of one shared resource (an SBUF/PSUM port, a DGE block), first fit.

The scheduler places instructions as soon as their dependencies are known, which is not in time
order across engines, so a shared resource keeps its reservations and a new one takes the first
gap that fits at or after its requested start. Knows nothing about instructions.
"""

from __future__ import annotations

import bisect


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
