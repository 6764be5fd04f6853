"""Dependencies from byte regions: RAW, WAR and WAW on SBUF, PSUM and HBM. Knows nothing of time.

The compiler turns every data hazard between instructions into a semaphore wait; here each
access is checked against the live records of its memory space. A record is a region with its
last writer and the readers since; a write that covers a record retires it (the new writer
waited for it, so later accesses need only the new writer). Records are found through a bucket
index over byte offsets. Strided HBM tiles (rows of a row-major tensor) keep their row pitch so
that column blocks of the same rows do not falsely depend on each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from trnsim.program import Operand

FLOW, ANTI, OUTPUT = "flow", "anti", "output"  # RAW, WAR, WAW in the profiler's words
_BUCKET_SHIFT = {"sbuf": 12, "psum": 11, "hbm": 20}


@dataclass(frozen=True)
class Dep:
    """Instruction `producer` must complete before this one: kind flow/anti/output, via operand."""

    producer: int
    kind: str
    operand: str


class _Rec:
    __slots__ = ("alive", "b0", "b1", "key", "p0", "p1", "pitch", "readers", "run", "writer")

    def __init__(self, key: tuple, p0: int, p1: int, b0: int, b1: int, pitch: int, run: int):
        self.key = key
        self.p0, self.p1, self.b0, self.b1 = p0, p1, b0, b1
        self.pitch, self.run = pitch, run
        self.writer = -1
        self.readers: dict[object, int] = {}
        self.alive = True

    def overlaps(self, p0: int, p1: int, b0: int, b1: int, pitch: int, run: int) -> bool:
        if self.b1 <= b0 or b1 <= self.b0 or self.p1 <= p0 or p1 <= self.p0:
            return False
        if pitch and pitch == self.pitch:
            d = (b0 - self.b0) % pitch
            return d < self.run or (pitch - d) % pitch < run
        return True

    def covered_by(self, p0: int, p1: int, b0: int, b1: int, pitch: int) -> bool:
        if pitch and pitch != self.pitch:
            return False
        return p0 <= self.p0 and self.p1 <= p1 and b0 <= self.b0 and self.b1 <= b1 and (
            not pitch or (self.b0 - b0) % pitch == 0)


class _Index:
    """Live records of one memory space of one core (HBM: of the chip)."""

    __slots__ = ("buckets", "exact", "shift")

    def __init__(self, shift: int):
        self.shift = shift
        self.buckets: dict[int, list[_Rec]] = {}
        self.exact: dict[tuple, _Rec] = {}

    def find(self, p0: int, p1: int, b0: int, b1: int, pitch: int, run: int) -> list[_Rec]:
        out: list[_Rec] = []
        seen: set[int] = set()
        buckets = self.buckets
        for b in range(b0 >> self.shift, ((b1 - 1) >> self.shift) + 1):
            lst = buckets.get(b)
            if not lst:
                continue
            dead = 0
            for r in lst:
                if not r.alive:
                    dead += 1
                elif id(r) not in seen and r.overlaps(p0, p1, b0, b1, pitch, run):
                    seen.add(id(r))
                    out.append(r)
            if dead > 8 and dead * 2 > len(lst):
                buckets[b] = [r for r in lst if r.alive]
        return out

    def add(self, rec: _Rec) -> None:
        self.exact[rec.key] = rec
        for b in range(rec.b0 >> self.shift, ((rec.b1 - 1) >> self.shift) + 1):
            self.buckets.setdefault(b, []).append(rec)

    def retire(self, rec: _Rec) -> None:
        rec.alive = False
        if self.exact.get(rec.key) is rec:
            del self.exact[rec.key]


def row_pattern(op: Operand) -> tuple[int, int]:
    """(pitch, run) when an HBM operand is evenly spaced contiguous runs, else (0, 0)."""
    r = op.region
    if r.space != "hbm":
        return 0, 0
    run = op.contiguous_bytes
    span = r.byte_end - r.byte_start
    if run <= 0 or op.nbytes >= span or op.nbytes % run:
        return 0, 0
    rows = op.nbytes // run
    if rows < 2 or (span - run) % (rows - 1):
        return 0, 0
    pitch = (span - run) // (rows - 1)
    return (pitch, run) if pitch >= run else (0, 0)


class DependencyTracker:
    """Derives each instruction's waits from the regions it reads and writes, in program order."""

    def __init__(self) -> None:
        # (space, core) -> (records with a writer, records with readers)
        self._spaces: dict[tuple[str, int], tuple[_Index, _Index]] = {}

    def _index(self, space: str, core: int) -> tuple[_Index, _Index]:
        key = (space, core)
        pair = self._spaces.get(key)
        if pair is None:
            shift = _BUCKET_SHIFT.get(space, 12)
            pair = self._spaces[key] = (_Index(shift), _Index(shift))
        return pair

    def access(self, idx: int, core: int, queue: object, reads: tuple[Operand, ...],
               writes: tuple[Operand, ...]) -> list[Dep]:
        """Record instruction `idx` of `core` (issued on `queue`); return what it must wait for.

        Readers are remembered per queue (the last one stands for the queue's prefix); pass a
        unique queue (e.g. the instruction index) for engines that complete out of order (DMA).
        HBM hazards are tracked per issuing core: the cores of a logical core run independent
        instruction streams, ordered only by explicit barriers, as on hardware.
        """
        deps: list[Dep] = []
        for op in reads:
            self._read(idx, core, queue, op, deps)
        for op in writes:
            self._write(idx, core, op, deps)
        return deps

    def _space(self, op: Operand, core: int) -> tuple[_Index, _Index]:
        r = op.region
        return self._index(r.space, core if r.space == "hbm" or r.core is None else r.core)

    def _read(self, idx: int, core: int, queue: object, op: Operand, deps: list[Dep]) -> None:
        r = op.region
        if r.byte_end <= r.byte_start:
            return
        windex, rindex = self._space(op, core)
        p0, p1 = r.partition_start, r.partition_start + r.partitions
        pitch, run = row_pattern(op)
        for rec in windex.find(p0, p1, r.byte_start, r.byte_end, pitch, run):
            if rec.writer != idx:
                deps.append(Dep(rec.writer, FLOW, op.name))
        key = (p0, p1, r.byte_start, r.byte_end, pitch)
        rec = rindex.exact.get(key)
        if rec is None:
            rec = _Rec(key, p0, p1, r.byte_start, r.byte_end, pitch, run)
            rindex.add(rec)
        rec.readers[queue] = idx

    def _write(self, idx: int, core: int, op: Operand, deps: list[Dep]) -> None:
        r = op.region
        if r.byte_end <= r.byte_start:
            return
        windex, rindex = self._space(op, core)
        p0, p1 = r.partition_start, r.partition_start + r.partitions
        b0, b1 = r.byte_start, r.byte_end
        pitch, run = row_pattern(op)
        for rec in windex.find(p0, p1, b0, b1, pitch, run):
            if rec.writer != idx:
                deps.append(Dep(rec.writer, OUTPUT, op.name))
            if rec.covered_by(p0, p1, b0, b1, pitch):
                windex.retire(rec)
        for rec in rindex.find(p0, p1, b0, b1, pitch, run):
            deps.extend(Dep(i, ANTI, op.name) for i in rec.readers.values() if i != idx)
            if rec.covered_by(p0, p1, b0, b1, pitch):
                rindex.retire(rec)
        key = (p0, p1, b0, b1, pitch)
        rec = _Rec(key, p0, p1, b0, b1, pitch, run)
        rec.writer = idx
        windex.add(rec)
