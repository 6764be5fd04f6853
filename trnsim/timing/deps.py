"""Dependencies from byte regions: RAW, WAR and WAW on SBUF, PSUM and HBM. Knows nothing of time.

The compiler turns every data hazard between instructions into a semaphore wait; here each access
is checked against the earlier accesses to overlapping bytes. Every distinct region (memory
space, core, partitions, bytes) becomes a node holding its last writer and the readers since;
when a node is first seen, the nodes it overlaps are found once through a bucket index over byte
offsets and linked as neighbours, so repeated accesses to the same tiles cost a dict lookup and
a short walk. A write that covers a node clears it (the writer waited for everything there, so
later accesses need only the writer). Strided HBM tiles (rows of a row-major tensor) keep their
row pitch so that column blocks of the same rows do not falsely depend on each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from trnsim.program import Operand

FLOW, ANTI, OUTPUT = "flow", "anti", "output"  # RAW, WAR, WAW in the profiler's words
_BUCKET_SHIFT = {"sbuf": 12, "psum": 11, "hbm": 20}
_NO_LINKS: list = []  # a closed tracker's nodes (never appended to: nothing links them again)


class Dep(NamedTuple):
    """Instruction `producer` must complete before this one: kind flow/anti/output, via operand.

    The tracker returns plain (producer, kind, operand) tuples for speed; they unpack the same.
    """

    producer: int
    kind: str
    operand: str


class _Node:
    """One distinct region: its last writer (and that writer's queue) and the readers since,
    per queue. `links` pairs each overlapping node with whether this node covers it."""

    __slots__ = (
        "b0",
        "b1",
        "links",
        "neighbours",
        "p0",
        "p1",
        "pitch",
        "readers",
        "run",
        "seq",
        "writer",
        "writer_queue",
    )

    def __init__(self, p0: int, p1: int, b0: int, b1: int, pitch: int, run: int):
        self.p0, self.p1, self.b0, self.b1 = p0, p1, b0, b1
        self.pitch, self.run = pitch, run
        self.writer = -1
        self.writer_queue: object = None
        self.readers: dict[object, int] = {}
        self.neighbours: list[_Node] = []
        self.links: list[tuple[_Node, bool]] = []

    def overlaps(self, o: _Node) -> bool:
        if self.b1 <= o.b0 or o.b1 <= self.b0 or self.p1 <= o.p0 or o.p1 <= self.p0:
            return False
        pitch = o.pitch
        if pitch and pitch == self.pitch:
            d = (o.b0 - self.b0) % pitch
            return d < self.run or (pitch - d) % pitch < o.run
        return True

    def covers(self, o: _Node) -> bool:
        if self.pitch and (self.pitch != o.pitch or (o.b0 - self.b0) % self.pitch):
            return False
        return (
            self.p0 <= o.p0
            and o.p1 <= self.p1
            and self.b0 <= o.b0
            and o.b1 <= self.b1
            and (not self.pitch or o.b0 % self.pitch + o.run <= self.b0 % self.pitch + self.run)
        )

    def link(self, o: _Node) -> None:
        self.neighbours.append(o)
        self.links.append((o, self.covers(o)))
        o.neighbours.append(self)
        o.links.append((self, o.covers(self)))


class _Space:
    """The nodes of one memory space of one core, indexed for first lookups: nodes without a
    row pitch by the byte buckets of their span; pitched nodes (columns of HBM rows) by pitch,
    both by the buckets of their rows' runs and by phase within the pitch, so that a new
    column block meets only the blocks of its own columns rather than every block of the
    same rows, and costs its row count, not its span."""

    __slots__ = ("buckets", "by_pitch", "count", "nodes", "shift")

    def __init__(self, shift: int):
        self.shift = shift
        self.nodes: dict[tuple[int, int, int, int, int], _Node] = {}
        self.buckets: dict[int, list[_Node]] = {}
        # pitch -> [row-run buckets, (row bucket, phase bucket) cells, nodes not yet filed by
        # row runs, (row, phase) bucket shifts]: the row-run index is built only once a node
        # of another pitch (or none) needs it
        self.by_pitch: dict[int, list] = {}
        self.count = 0

    def node(self, key: tuple[int, int, int, int, int], run: int) -> _Node:
        """A new node for `key`, linked to every node it overlaps, in the order of the first
        span bucket they share, then creation (the bounding-box test is inlined: most
        candidates fail it)."""
        p0, p1, b0, b1, pitch = key
        n = _Node(p0, p1, b0, b1, pitch, run)
        n.seq = self.count
        self.count += 1
        shift = self.shift
        first, last = b0 >> shift, (b1 - 1) >> shift
        if not pitch and not self.by_pitch:  # plain regions only (on-chip, most HBM)
            return self._plain_node(key, n, first, last)
        # the buckets of the bytes it touches: its span, or only its rows' runs when pitched
        touched: Sequence[int] | None = None if pitch else range(first, last + 1)
        indexes = []
        if self.buckets:
            touched = touched or _row_buckets(b0, b1, run, pitch, shift)
            indexes.append((self.buckets, touched))
        for q, by in self.by_pitch.items():
            if q == pitch:
                indexes.append((by[1], _cells(b0, b1, run, q, by[3])))
                continue
            for m in by[2]:  # file the pending nodes of pitch q by their row runs
                _file(by[0], m, _row_buckets(m.b0, m.b1, m.run, q, shift))
            by[2] = []
            touched = touched or _row_buckets(b0, b1, run, pitch, shift)
            indexes.append((by[0], touched))
        found: dict[int, _Node] = {}
        for index, ids in indexes:
            for b in ids:
                lst = index.get(b)
                if lst is None:
                    continue
                for o in lst:
                    if o.b1 <= b0 or b1 <= o.b0 or o.p1 <= p0 or p1 <= o.p0:
                        continue
                    if pitch and pitch == o.pitch:  # the rest of o.overlaps(n)
                        d = (b0 - o.b0) % pitch
                        if not (d < o.run or (pitch - d) % pitch < run):
                            continue
                    found[id(o)] = o
        if found:
            for o in sorted(found.values(), key=lambda o: (max(first, o.b0 >> shift), o.seq)):
                o.link(n)
        if pitch:
            by = self.by_pitch.get(pitch)
            if by is None:  # cells of about the first region's rows and half to all of its run
                rows = (b1 - 1) // pitch - b0 // pitch + 1
                shifts = ((rows - 1).bit_length(), max(0, run.bit_length() - 1))
                by = self.by_pitch[pitch] = [{}, {}, [], shifts]
            by[2].append(n)
            _file(by[1], n, _cells(b0, b1, run, pitch, by[3]))
        else:
            _file(self.buckets, n, touched if touched is not None else range(first, last + 1))
        self.nodes[key] = n
        return n


    def _plain_node(self, key: tuple, n: _Node, first: int, last: int) -> _Node:
        """node() when neither `n` nor any earlier node is pitched: one pass over the span
        buckets links in bucket then creation order."""
        p0, p1, b0, b1 = n.p0, n.p1, n.b0, n.b1
        buckets = self.buckets
        seen: set[int] | None = set() if last > first else None  # spans buckets: dedupe
        for b in range(first, last + 1):
            lst = buckets.get(b)
            if lst is None:
                buckets[b] = [n]
                continue
            for o in lst:
                if o.b1 <= b0 or b1 <= o.b0 or o.p1 <= p0 or p1 <= o.p0:
                    continue
                if seen is not None:
                    if id(o) in seen:
                        continue
                    seen.add(id(o))
                o.link(n)
            lst.append(n)
        self.nodes[key] = n
        return n


def _cells(b0: int, b1: int, run: int, pitch: int, shifts: tuple[int, int]) -> list:
    """(row bucket, phase bucket) cells of a pitched region, rows counted as address // pitch
    and phases as address % pitch: two regions of one pitch share a byte only where they
    share a cell."""
    rs, ps = shifts
    rows = range((b0 // pitch) >> rs, (((b1 - 1) // pitch) >> rs) + 1)
    return [(r, f) for r in rows for f in _phase_buckets(b0, run, pitch, ps)]


def _row_buckets(b0: int, b1: int, run: int, pitch: int, shift: int) -> Sequence[int]:
    """Byte buckets of the runs [b0 + k * pitch, + run) of a pitched region (not the gaps
    between them: a wide tensor's column block would otherwise fill every bucket of its
    rows' span)."""
    if pitch - run < 1 << shift:  # no gap holds a whole bucket: every bucket of the span
        return range(b0 >> shift, ((b1 - 1) >> shift) + 1)
    out: set[int] = set()
    for s0 in range(b0, b1 - run + 1, pitch):
        out.update(range(s0 >> shift, ((s0 + run - 1) >> shift) + 1))
    return sorted(out)


def _phase_buckets(b0: int, run: int, pitch: int, ps: int) -> list[int]:
    """Phase buckets (2**ps bytes) of the bytes [b0, b0 + run) modulo `pitch` (a run may
    wrap)."""
    phase = b0 % pitch
    end = phase + run
    if end <= pitch:
        return list(range(phase >> ps, ((end - 1) >> ps) + 1))
    out = set(range(phase >> ps, ((pitch - 1) >> ps) + 1))
    out.update(range(0, ((end - pitch - 1) >> ps) + 1))
    return sorted(out)


def _file(index: dict, n: _Node, ids: Iterable) -> None:
    for b in ids:
        lst = index.get(b)
        if lst is None:
            index[b] = [n]
        else:
            lst.append(n)


def row_pattern(op: Operand) -> tuple[int, int]:
    """(pitch, run) when an HBM operand is evenly spaced contiguous runs, else (0, 0)."""
    r = op.region
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
        self._spaces: dict[tuple[str, int], _Space] = {}
        # Identity memos (the tracing side interns regions and operands, so the same objects
        # recur): id(on-chip region) -> (region, node), and (id(HBM operand), core) ->
        # (operand, node). Holding the object keeps its id from being reused.
        self._by_region: dict[int, tuple[object, _Node | None]] = {}
        self._by_operand: dict[tuple[int, int], tuple[Operand, _Node | None]] = {}

    def _node(self, op: Operand, core: int) -> _Node | None:
        """The node of `op` as accessed from `core`, through the identity memos."""
        r = op.region
        if r.space == "hbm":
            key = (id(op), core)
            got = self._by_operand.get(key)
            if got is None:
                got = self._by_operand[key] = (op, self._find(op, core))
            return got[1]
        got = self._by_region.get(id(r))
        if got is not None:
            return got[1]
        n = self._find(op, core)
        if r.core is not None:  # else the node depends on the issuing core: not memoised
            self._by_region[id(r)] = (r, n)
        return n

    def _find(self, op: Operand, core: int) -> _Node | None:
        """The node of `op` by value: its space's node for the same box, or a new one."""
        r = op.region
        if r.byte_end <= r.byte_start:
            return None
        space_name = r.space
        if space_name == "hbm":
            skey = (space_name, core)
            pitch, run = row_pattern(op)
        else:
            skey = (space_name, core if r.core is None else r.core)
            pitch = run = 0
        space = self._spaces.get(skey)
        if space is None:
            space = self._spaces[skey] = _Space(_BUCKET_SHIFT.get(space_name, 12))
        p0 = r.partition_start
        key = (p0, p0 + r.partitions, r.byte_start, r.byte_end, pitch)
        n = space.nodes.get(key)
        return n if n is not None else space.node(key, run)

    def close(self) -> None:
        """Drop every node's links to its neighbours. Nodes link both ways, so without this
        they are reference cycles that only Python's cyclic collector frees (and walks first:
        ~2 ms after scheduling a 2048^3 matmul); with it they are freed at once."""
        for space in self._spaces.values():
            for n in space.nodes.values():
                n.neighbours = n.links = _NO_LINKS
        self._spaces.clear()
        self._by_region.clear()
        self._by_operand.clear()

    def access(
        self,
        idx: int,
        core: int,
        queue: object,
        reads: tuple[Operand, ...],
        writes: tuple[Operand, ...],
    ) -> list[tuple[int, str, str]]:
        """Record instruction `idx` of `core` (issued on `queue`); return what it must wait for.

        Readers are remembered per queue (the last one stands for the queue's prefix); pass a
        unique queue (e.g. the instruction index) for engines that complete out of order (DMA).
        WAR and WAW waits on an instruction of the same queue are left out: in-order issue
        already implies them (RAW waits stay: a result takes its latency to land).
        HBM hazards are tracked per issuing core: the cores of a logical core run independent
        instruction streams, ordered only by explicit barriers, as on hardware.
        """
        deps: list[tuple[int, str, str]] = []
        node, by_region = self._node, self._by_region.get
        for op in reads:
            got = by_region(id(op.region))  # the common case, inlined
            n = got[1] if got is not None else node(op, core)
            if n is None:
                continue
            name = op.name
            if n.writer >= 0:
                deps.append((n.writer, FLOW, name))
            for o in n.neighbours:
                if o.writer >= 0:
                    deps.append((o.writer, FLOW, name))
            n.readers[queue] = idx
        for op in writes:
            got = by_region(id(op.region))
            n = got[1] if got is not None else node(op, core)
            if n is None:
                continue
            name = op.name
            # _clear(n, ...), inlined: every write clears its own node
            w = n.writer
            if w >= 0 and w != idx and n.writer_queue != queue:
                deps.append((w, OUTPUT, name))
            if n.readers:
                for q, i in n.readers.items():
                    if i != idx and q != queue:
                        deps.append((i, ANTI, name))
                n.readers = {}
            for o, covered in n.links:
                if covered:
                    _clear(o, idx, queue, name, deps)
                else:
                    if o.writer >= 0 and o.writer != idx and o.writer_queue != queue:
                        deps.append((o.writer, OUTPUT, name))
                    for q, i in o.readers.items():
                        if i != idx and q != queue:
                            deps.append((i, ANTI, name))
            n.writer, n.writer_queue = idx, queue
        return deps


def _clear(n: _Node, idx: int, queue: object, name: str, deps: list[tuple[int, str, str]]) -> None:
    """Instruction idx (on `queue`) overwrites all of node n: wait for its writer and readers,
    which it then replaces."""
    if n.writer >= 0 and n.writer != idx and n.writer_queue != queue:
        deps.append((n.writer, OUTPUT, name))
    if n.readers:
        for q, i in n.readers.items():
            if i != idx and q != queue:
                deps.append((i, ANTI, name))
        n.readers = {}
    n.writer = -1
