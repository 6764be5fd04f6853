"""HBM races: accesses that nothing orders, across cores (no barrier) or on one core (no
dependency the tracker could see).

The cores of an LNC launch (and the programs of a grid placed on different cores) run their
instruction streams independently; only `core_barrier` orders them (every core's k-th barrier
completes when the last core reaches it), and an nki.collectives call, which both cores of a
rank issue together. trnsim runs the programs one after another, so a
kernel where one core writes HBM bytes that another core reads or writes in the same barrier
interval gets one particular answer here, while on hardware the answer depends on timing.
This pass finds such pairs in the program record so they can be reported instead of silently
taking trnsim's order. Reads by several cores never race. Launches that use `sendrecv` (a
pairwise synchronisation this pass does not follow) are not judged.

On one core, the dependency tracker (deps.py) orders two accesses when their regions overlap:
bounding boxes, refined for HBM rows by a row pitch it infers from each operand's size and span.
Two access patterns that alias differently (e.g. a 3-level pattern whose rows are unevenly
spaced yet fit a pitch) can then look disjoint while sharing bytes: the timeline lets the later
access run before the earlier one lands, where values (computed in program order) assumed it
landed: a stale read, or a write that lands out of order. `find_hidden_hazards` checks the
tracker's verdict against the exact bytes of each pair it calls disjoint. On-chip regions and
unpitched HBM regions are bounding boxes, which never miss an overlap. Knows nothing of values.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

import numpy as np

from trnsim.program import Instruction, Operand
from trnsim.semantics.collective import SYNCHRONIZING
from trnsim.timing.deps import DependencyTracker, row_pattern


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
        if ins.opcode == "core_barrier" or ins.opcode in SYNCHRONIZING:
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


# ---------------------------------------------------------------- one core

_MAX_RUNS = 1 << 20  # runs enumerated per operand for the exact test; larger pairs are skipped


def find_hidden_hazards(program: list[Instruction]) -> list[Race]:
    """Pairs of accesses on one core to HBM bytes that truly overlap, one a write, that the
    dependency tracker takes for disjoint and that no chain of its dependencies orders."""
    groups: dict[tuple[int, int], list[tuple[_Access, Operand]]] = {}
    for ins in program:
        for write, ops in ((False, ins.reads), (True, ins.writes)):
            for op in ops:
                if op.pattern is None:  # on chip (or a hand-made record): not judged
                    continue
                acc = _access(op, ins, write)
                if acc is not None and acc.pitch:
                    groups.setdefault((ins.core, acc.pitch), []).append((acc, op))
    found: dict[tuple[int, int], Race] = {}
    for accesses in groups.values():
        _hidden_in(accesses, found)
    if not found:
        return []
    deps = _dependencies(program)
    hazards = [r for r in found.values() if not _ordered(deps, r.first, r.second)]
    return sorted(hazards, key=lambda r: (r.second, r.first))


def _hidden_in(accesses: list[tuple[_Access, Operand]], found: dict[tuple[int, int], Race]
               ) -> None:
    """Pairs of one core and one pitch whose bounding boxes overlap, that the tracker's pitch
    test calls disjoint, and whose exact bytes overlap."""
    accesses = sorted(accesses, key=lambda x: x[0].start)
    longest = max(a.end - a.start for a, _ in accesses)
    # Operands whose bytes are exactly the tracker's rows: for two of them its pitch test is
    # exact, so it misses nothing between them and only pairs with an operand that is not
    # its rows are looked at (in a loop of column blocks, none: no longer a pass over all
    # pairs).
    others = [x for x in accesses if not _rows_only(x[1].pattern, x[1].nbytes, x[0].pitch,
                                                    x[0].run)]
    if not others:
        return
    pool = {False: (accesses, [a.start for a, _ in accesses]),
            True: (others, [a.start for a, _ in others])}
    other_ids = {id(op) for _, op in others}
    for a, aop in accesses:
        cands, starts = pool[id(aop) not in other_ids]
        lo = bisect.bisect_right(starts, a.start - longest)
        hi = bisect.bisect_left(starts, a.end)
        for b, bop in cands[lo:hi]:
            if b.index >= a.index or not (a.write or b.write) or b.end <= a.start:
                continue
            key = (b.index, a.index)
            if key in found or _overlap(a, b) or not exact_overlap(aop, bop):
                continue
            writer = a if a.write else b
            found[key] = Race(b.index, a.index, writer.tensor, max(a.start, b.start),
                              min(a.end, b.end), b.write, a.write)


def exact_overlap(a: Operand, b: Operand) -> bool:
    """Whether two HBM operands with recorded patterns share a byte (False when either has
    more than _MAX_RUNS contiguous runs: not judged)."""
    ra, rb = _runs(a), _runs(b)
    if ra is None or rb is None:
        return False
    (sa, la), (sb, lb) = ra, rb
    # For each run of a, the first run of b ending after it starts; overlap if that one
    # starts before the run of a ends.
    idx = np.searchsorted(sb, sa - lb, side="right")
    ok = idx < sb.size
    return bool(np.any(sb[idx[ok]] < sa[ok] + la))


@functools.lru_cache(maxsize=4096)
def _rows_only(pattern: tuple, nbytes: int, pitch: int, run: int) -> bool:
    """Whether an operand's bytes are exactly `nbytes // run` runs of `run` bytes at steps of
    `pitch` from its lowest byte (what deps.row_pattern assumes): positive strides whose
    dims, merged where one continues another, leave one run dim and one row dim."""
    first, dims = pattern
    count = math.prod(n for _, n in dims)
    if first or not count or nbytes % count:
        return False
    isz = nbytes // count
    merged: list[tuple[int, int]] = []  # (stride, count), innermost last
    for s, n in dims:
        if n == 1:
            continue
        if s <= 0:
            return False
        if merged and merged[-1][0] == s * n:  # the outer dim steps over exactly this one
            merged[-1] = (s, merged[-1][1] * n)
        else:
            merged.append((s, n))
    if merged and merged[-1][0] == isz:
        s, n = merged.pop()
        inner = n * isz
    else:
        inner = isz
    if inner != run:
        return False
    return not merged or (len(merged) == 1 and merged[0][0] == pitch
                          and merged[0][1] == nbytes // run)


def _runs(op: Operand) -> tuple[np.ndarray, int] | None:
    """Sorted absolute start bytes of the operand's contiguous runs, and the run length."""
    first, dims = op.pattern
    isz = op.nbytes // max(1, np.prod([n for _, n in dims], dtype=np.int64)) if dims else \
        op.nbytes
    dims = [(s, n) for s, n in dims if n > 1]
    run = isz
    while dims and dims[-1][0] == run:  # innermost dims contiguous: one run
        s, n = dims.pop()
        run *= n
    count = int(np.prod([n for _, n in dims], dtype=np.int64)) if dims else 1
    if count > _MAX_RUNS:
        return None
    starts = np.full(1, op.region.byte_start + first, dtype=np.int64)
    for s, n in dims:
        starts = (starts[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
    return np.sort(starts), run


def _dependencies(program: list[Instruction]) -> list[list[int]]:
    """The producers each instruction waits for, as the scheduler's tracker finds them (every
    instruction its own queue: no wait is implied by issue order)."""
    tracker = DependencyTracker()
    access = tracker.access
    out = []
    for ins in program:
        ideps = access(ins.index, ins.core, -1 - ins.index, ins.reads, ins.writes)
        out.append([d[0] for d in ideps] + [j for j in ins.deps if 0 <= j < ins.index])
    tracker.close()
    return out


def _ordered(deps: list[list[int]], first: int, second: int) -> bool:
    """Whether a chain of dependencies leads from `second` back to `first`."""
    seen, todo = {second}, [second]
    while todo:
        for j in deps[todo.pop()]:
            if j == first:
                return True
            if j > first and j not in seen:
                seen.add(j)
                todo.append(j)
    return False
