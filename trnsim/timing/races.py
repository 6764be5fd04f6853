"""Cross-core HBM races: accesses by different cores of one launch that no barrier orders.

The cores of an LNC launch (and the programs of a grid placed on different cores) run their
instruction streams independently; only `core_barrier` orders them (every core's k-th barrier
completes when the last core reaches it). trnsim runs the programs one after another, so a
kernel where one core writes HBM bytes that another core reads or writes in the same barrier
interval gets one particular answer here, while on hardware the answer depends on timing.
This pass finds such pairs in the program record so they can be reported instead of silently
taking trnsim's order. Reads by several cores never race. Launches that use `sendrecv` (a
pairwise synchronisation this pass does not follow) are not judged. Knows nothing of values.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from trnsim.program import Instruction, Operand
from trnsim.timing.deps import row_pattern


@dataclass(frozen=True)
class Race:
    """Two unordered accesses to overlapping HBM bytes, at least one a write."""

    first: int  # instruction indices, in program order
    second: int
    tensor: str  # the written tensor's name ("" when it has none)
    start: int  # the bytes both touch (bounding box), in the chip's HBM address space
    end: int
    first_writes: bool  # whether each access writes (else it reads)
    second_writes: bool


@dataclass(frozen=True)
class _Access:
    start: int
    end: int
    pitch: int
    run: int
    core: int
    write: bool
    index: int
    tensor: str


def find_races(program: list[Instruction]) -> list[Race]:
    """Pairs of HBM accesses from different cores in the same barrier interval that overlap,
    one of them a write (at most one pair per pair of instructions, in program order)."""
    if len({ins.core for ins in program}) < 2 or any(i.opcode == "sendrecv" for i in program):
        return []
    intervals: dict[int, list[_Access]] = {}
    barriers: dict[int, int] = {}
    for ins in program:
        if ins.opcode == "core_barrier":
            barriers[ins.core] = barriers.get(ins.core, 0) + 1
            continue
        epoch = barriers.get(ins.core, 0)
        for write, ops in ((False, ins.reads), (True, ins.writes)):
            for op in ops:
                acc = _access(op, ins, write)
                if acc is not None:
                    intervals.setdefault(epoch, []).append(acc)
    races: dict[tuple[int, int], Race] = {}
    for accesses in intervals.values():
        _sweep(accesses, races)
    return sorted(races.values(), key=lambda r: (r.second, r.first))


def _access(op: Operand, ins: Instruction, write: bool) -> _Access | None:
    r = op.region
    if r.space != "hbm" or r.byte_end <= r.byte_start:
        return None
    pitch, run = row_pattern(op)
    return _Access(r.byte_start, r.byte_end, pitch, run, ins.core, write, ins.index, op.tensor_name)


def _sweep(accesses: list[_Access], races: dict[tuple[int, int], Race]) -> None:
    """Every overlapping (write, other access) pair of different cores: writes sorted by start,
    and for each access the writes that start within the longest write's length before it."""
    writes = sorted((a for a in accesses if a.write), key=lambda a: a.start)
    if not writes:
        return
    starts = [w.start for w in writes]
    longest = max(w.end - w.start for w in writes)
    for a in accesses:
        lo = bisect.bisect_right(starts, a.start - longest)
        hi = bisect.bisect_left(starts, a.end)
        for w in writes[lo:hi]:
            if w is a or w.core == a.core or w.end <= a.start or not _overlap(w, a):
                continue
            first, second = (w, a) if w.index < a.index else (a, w)
            key = (first.index, second.index)
            if key not in races:
                writer = second if second.write else first
                races[key] = Race(
                    first.index,
                    second.index,
                    writer.tensor,
                    max(w.start, a.start),
                    min(w.end, a.end),
                    first.write,
                    second.write,
                )


def _overlap(a: _Access, b: _Access) -> bool:
    """Whether two accesses share a byte: bounding boxes, refined for rows of one pitch."""
    if a.end <= b.start or b.end <= a.start:
        return False
    if a.pitch and a.pitch == b.pitch:
        d = (b.start - a.start) % a.pitch
        return d < a.run or (a.pitch - d) % a.pitch < b.run
    return True
