"""Compiler rule `allocation`: automatic SBUF/PSUM tiles re-placed by their true live ranges.

Knows the program record and the launch's allocation records (allocation.TileRecord); nothing
about values or time. Values are final when this runs: only the addresses the dependency
tracker (timing/deps.py) sees change, so only the false WAR/WAW waits between tiles that share
bytes change.

At trace time trnsim gives an automatic tile (nl.ndarray and friends without an address) an
address when Python creates it and frees it when Python drops it (next fit, allocation.py).
The Neuron compiler assigns the addresses itself. What the Neuron SDK documents (NKI API
reference, nki.compiler.Allocation and nki.compiler.AllocationMode, CompileConfig's
`allocation` and `experimental_allocation_mode`, pages marked for Trn2/Trn3; read 2026-12),
restated:

- COLORING, the default flow: neuronx-cc colours an interference graph of the tiles after
  tracing. Its choices are not described; trnsim's trace-time placement stands in for it
  (policy "traced", the default: the rule is off).
- LINEAR: a linear scan before the rest of compilation; a tile holds its address from its
  first write to its last read. Three modes choose the address:
  RING: a fresh address for every tile; freed bytes are taken again only once the allocation
  has wrapped around the memory, so a load into a new tile seldom waits for compute still
  reading an older one; fragments SBUF most; in PSUM it cycles through the 8 banks
  (policy "ring": next fit from a cursor after the last tile placed, wrapping to 0).
  FAST: tiles whose lifetimes nest are stacked; every other tile goes into the freed space
  that fits it best; compact, but a tile may land where a tile freed just before was, so a
  load into it waits for the reads of the old one (policy "fast": a tile whose live range
  lies inside that of the tile on top of the stack goes at the stack's top if that is free
  and is pushed; the rest, best fit).
  MAX_REUSE: every tile into the freed space that fits it best; least memory, least overlap
  of loads with compute (policy "max_reuse": best fit: the smallest free gap that holds the
  tile, the lowest such gap on a tie, at its lowest aligned address; the never-used tail
  counts as one gap, the largest). Reusing freed bytes as soon as possible makes it the
  policy with the most WAR/WAW waits.

What trnsim adds (not documented): a tile's live range is its first to its last access in
program order on its core (first write to last read for any tile that is written before it is
read and read after its last write; an access outside that, e.g. a dead store, counts too); a
tile never accessed takes no space; a tile frees its bytes for tiles whose first access comes
strictly after its last. Tiles with an explicit address, automatic tiles whose trace-time
bytes an explicit tile shared while both were alive (aliasing: their bytes stay), and on-chip
accesses to no recorded tile (e.g. the Beta-1 overflow space) keep their addresses and block
their bytes for their live ranges. Alignment and usable capacity are the memory's (SBUF 64 B,
PSUM 2 KiB banks). If a policy cannot place a tile, the whole program keeps the traced
addresses and the returned note says why. The addresses are applied as a rewritten copy of the
program (moved operands get new Region objects, one per distinct region and shift, so the
dependency tracker's identity memos keep working); with "traced" nothing here runs.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import replace

from trnsim.allocation import TileRecord
from trnsim.program import Instruction, Operand, Region

_ON_CHIP = ("sbuf", "psum")


def reallocate(
    program: list[Instruction], records: Sequence[TileRecord] | None, policy: str,
    sequential_buffers: bool = False,
) -> tuple[list[Instruction], str]:
    """(`program` with its automatic tiles at the addresses `policy` gives them, note): the
    note is "" when the policy applied, else why the traced addresses were kept.
    `sequential_buffers` (compiler rule sequential_buffers): the tiles of one declaration
    (TileRecord.decl) share one buffer where their live ranges allow, the rest of the program
    placed by `policy` ("ring" for "traced", whose addresses assumed the tiles apart)."""
    redeclared = sequential_buffers and records is not None and _redeclared(records)
    if policy == "traced" and not redeclared:
        return program, ""
    if records is None:
        return program, (f"allocation {policy!r}: the program record comes without its "
                         "allocation records; timed at the traced addresses")
    if not any(r.auto for r in records):
        return program, ""
    owners, first, last, pinned, extra = _live_ranges(program, records)
    prefer: dict[int, int] = {}
    if redeclared:
        prefer = _predecessors(records, first, pinned)
        if not prefer and policy == "traced":
            return program, ""
    place = "ring" if policy == "traced" else policy
    shift: dict[int, int] = {}
    memories: dict[tuple[str, int], list[int]] = {}
    for k, r in enumerate(records):
        memories.setdefault((r.space, r.core), []).append(k)
    for (space, core), ks in sorted(memories.items()):
        moved, why = _place(place, records, ks, first, last, pinned,
                            extra.get((space, core), {}), prefer)
        if why:
            rule = f"allocation {policy!r}" + (" with sequential_buffers" if prefer else "")
            return program, (f"{rule}: {space} of core {core}: {why}; timed at the traced "
                             "addresses")
        shift.update(moved)
    if not shift:
        return program, ""
    return _rewrite(program, owners, shift), ""


# ---------------------------------------------------------------- sequential declarations
def _key(r: TileRecord) -> tuple:
    return (r.decl, r.space, r.core, r.partition_start, r.partitions, r.nbytes)


def _redeclared(records: Sequence[TileRecord]) -> bool:
    """Whether two automatic tiles come from one declaration (a sequential loop's body)."""
    seen = set()
    for r in records:
        if r.auto and r.decl is not None:
            key = _key(r)
            if key in seen:
                return True
            seen.add(key)
    return False


def _predecessors(records, first, pinned) -> dict[int, int]:
    """tile -> the previous tile of its declaration (by first access): the buffer the
    compiler gives the declaration in the previous iteration of a sequential loop."""
    groups: dict[tuple, list[int]] = {}
    for k, r in enumerate(records):
        if r.auto and r.decl is not None and first[k] >= 0 and not pinned[k]:
            groups.setdefault(_key(r), []).append(k)
    prefer: dict[int, int] = {}
    for ks in groups.values():
        if len(ks) > 1:
            ks.sort(key=lambda k: (first[k], k))
            prefer.update(zip(ks[1:], ks[:-1], strict=True))
    return prefer


# ---------------------------------------------------------------- live ranges
def _live_ranges(program: list[Instruction], records: Sequence[TileRecord]):
    """Per instruction, the record index owning each operand (-1: none; None for an
    instruction without on-chip operands), each record's first and last access, which
    automatic records are pinned (they shared bytes with a live explicit tile), and the live
    ranges of on-chip boxes no record owns, per memory."""
    n = len(program)
    nrec = len(records)
    first = [-1] * nrec
    last = [-1] * nrec
    pinned = [False] * nrec
    extra: dict[tuple[str, int], dict[tuple[int, int, int, int], list[int]]] = {}
    ends = [r.died if r.died >= 0 else n for r in records]
    births = sorted(range(nrec), key=lambda k: records[k].born)
    deaths = sorted(range(nrec), key=lambda k: ends[k])
    nb = nd = 0
    autos: dict[tuple[str, int], tuple[list[int], dict[int, int]]] = {}  # starts, start -> k
    fixed: dict[tuple[str, int], list[int]] = {}  # live explicit records
    memo: dict[int, tuple[Region, int]] = {}  # id(region) -> (region, owner while it lives)
    owners: list[tuple[int, ...] | None] = [None] * n
    for i, ins in enumerate(program):
        while nd < nrec and ends[deaths[nd]] <= i:
            k = deaths[nd]
            nd += 1
            r = records[k]
            if r.born < ends[k] and r.born <= i:
                _deactivate(r, k, autos, fixed)
        while nb < nrec and records[births[nb]].born <= i:
            k = births[nb]
            nb += 1
            if records[k].born < ends[k]:
                _activate(records, k, autos, fixed, pinned)
        got: list[int] | None = None
        ops = ins.reads + ins.writes if ins.writes else ins.reads
        for j, op in enumerate(ops):
            reg = op.region
            if reg.space not in _ON_CHIP or reg.byte_end <= reg.byte_start:
                continue
            if got is None:
                got = [-1] * len(ops)
            hit = memo.get(id(reg))
            if hit is not None and hit[1] >= 0 and records[hit[1]].born <= i < ends[hit[1]]:
                k = hit[1]
            else:
                k = _owner(reg, records, autos, fixed)
                memo[id(reg)] = (reg, k)
            if k < 0:
                box = (reg.partition_start, reg.partition_start + reg.partitions,
                       reg.byte_start, reg.byte_end)
                span = extra.setdefault((reg.space, reg.core), {}).setdefault(box, [i, i])
                span[1] = i
                continue
            got[j] = k
            if first[k] < 0:
                first[k] = i
            last[k] = i
        if got is not None:
            owners[i] = tuple(got)
    return owners, first, last, pinned, extra


def _activate(records, k, autos, fixed, pinned) -> None:
    r = records[k]
    key = (r.space, r.core)
    starts, at = autos.setdefault(key, ([], {}))
    live = fixed.setdefault(key, [])
    if r.auto:
        bisect.insort(starts, r.byte_start)
        at[r.byte_start] = k
        if any(_boxes_meet(r, records[e]) for e in live):
            pinned[k] = True
    else:
        live.append(k)
        for s in starts:
            if _boxes_meet(r, records[at[s]]):
                pinned[at[s]] = True


def _deactivate(r: TileRecord, k: int, autos, fixed) -> None:
    key = (r.space, r.core)
    if r.auto:
        starts, at = autos[key]
        if at.get(r.byte_start) == k:
            del at[r.byte_start]
            del starts[bisect.bisect_left(starts, r.byte_start)]
    else:
        fixed[key].remove(k)


def _boxes_meet(a: TileRecord, b: TileRecord) -> bool:
    return (a.byte_start < b.byte_start + b.nbytes and b.byte_start < a.byte_start + a.nbytes
            and a.partition_start < b.partition_start + b.partitions
            and b.partition_start < a.partition_start + a.partitions)


def _owner(reg: Region, records, autos, fixed) -> int:
    """The live record whose bytes hold `reg`: an automatic one (live ones never share
    bytes: they all start at partition 0), else an explicit one; -1 if none."""
    key = (reg.space, reg.core)
    got = autos.get(key)
    if got is not None and got[0]:
        starts, at = got
        pos = bisect.bisect_right(starts, reg.byte_start) - 1
        if pos >= 0:
            k = at[starts[pos]]
            if _holds(records[k], reg):
                return k
    for k in fixed.get(key, ()):
        if _holds(records[k], reg):
            return k
    return -1


def _holds(r: TileRecord, reg: Region) -> bool:
    return (r.byte_start <= reg.byte_start and reg.byte_end <= r.byte_start + r.nbytes
            and r.partition_start <= reg.partition_start
            and reg.partition_start + reg.partitions <= r.partition_start + r.partitions)


# ---------------------------------------------------------------- placement
def _place(policy, records, ks, first, last, pinned, extra,
           prefer=None) -> tuple[dict[int, int], str]:
    """New byte starts of one memory's movable tiles, as shifts (record -> new - old), or
    ("", why) when a tile does not fit. A tile in `prefer` (tile -> an earlier tile) takes the
    bytes the earlier tile got if they are free over its live range (the ring cursor stays),
    else what the policy gives."""
    prefer = prefer or {}
    capacity = records[ks[0]].capacity
    # Occupants that stay: (first, last, partition_start, partition_end, byte_start, byte_end)
    stay = []
    movable = []
    for k in ks:
        r = records[k]
        if first[k] < 0:
            continue
        box = (r.partition_start, r.partition_start + r.partitions, r.byte_start,
               r.byte_start + r.nbytes)
        if r.auto and not pinned[k]:
            movable.append(k)
        else:
            stay.append((first[k], last[k], *box))
    for box, (s, e) in extra.items():
        if box[2] < capacity:
            stay.append((s, e, *box))
    stay.sort()
    movable.sort(key=lambda k: (first[k], k))
    shifts: dict[int, int] = {}
    placed: list[tuple[int, int, int]] = []  # (last, b0, b1) of the live placed tiles
    stack: list[tuple[int, int]] = []  # fast: (last, b1) of stacked tiles
    cursor = 0
    near = 0  # stay[:near] have started
    started: list[tuple] = []  # occupants that stay and have started
    for k in movable:
        r = records[k]
        s, e, size, parts = first[k], last[k], r.nbytes, r.partitions
        placed = [p for p in placed if p[0] >= s]
        while near < len(stay) and stay[near][0] <= s:
            started.append(stay[near])
            near += 1
        started = [o for o in started if o[1] >= s]
        busy = [(p[1], p[2]) for p in placed]  # (every automatic tile starts at partition 0)
        busy += [(o[4], o[5]) for o in started if o[2] < parts]
        for o in stay[near:]:
            if o[0] > e:
                break
            if o[2] < parts:
                busy.append((o[4], o[5]))
        gaps = _gaps(busy, capacity)
        b0 = None
        pred = prefer.get(k)
        if pred is not None:
            at = records[pred].byte_start + shifts.get(pred, 0)
            if any(g0 <= at and at + size <= g1 for g0, g1 in gaps):
                placed.append((e, at, at + size))
                if at != r.byte_start:
                    shifts[k] = at - r.byte_start
                continue
        if policy == "ring":
            b0 = _next_fit(gaps, cursor, size, r.align)
            if b0 is None and cursor:
                b0 = _next_fit(gaps, 0, size, r.align)
        elif policy == "fast":
            while stack and stack[-1][0] < s:
                stack.pop()
            if not stack or e <= stack[-1][0]:
                top = _align_up(stack[-1][1] if stack else 0, r.align)
                if any(g0 <= top and top + size <= g1 for g0, g1 in gaps):
                    b0 = top
                    stack.append((e, top + size))
        if b0 is None and policy != "ring":
            b0 = _best_fit(gaps, size, r.align)
        if b0 is None:
            return {}, (f"no room for a tile of {size} bytes per partition x {parts} "
                        f"partitions live over instructions {s}..{e} (capacity {capacity} bytes "
                        "per partition)")
        cursor = b0 + size if b0 + size < capacity else 0
        placed.append((e, b0, b0 + size))
        if b0 != r.byte_start:
            shifts[k] = b0 - r.byte_start
    return shifts, ""


def _gaps(busy: list[tuple[int, int]], capacity: int) -> list[tuple[int, int]]:
    """Free byte ranges [start, end) of [0, capacity) between the busy ranges."""
    out = []
    at = 0
    for b0, b1 in sorted(busy):
        if b0 > at:
            out.append((at, min(b0, capacity)))
        at = max(at, b1)
        if at >= capacity:
            break
    if at < capacity:
        out.append((at, capacity))
    return [(g0, g1) for g0, g1 in out if g1 > g0]


def _align_up(x: int, a: int) -> int:
    return -(-x // a) * a


def _next_fit(gaps, cursor: int, size: int, align: int) -> int | None:
    for g0, g1 in gaps:
        if g1 <= cursor:
            continue
        b0 = _align_up(max(g0, cursor), align)
        if b0 + size <= g1:
            return b0
    return None


def _best_fit(gaps, size: int, align: int) -> int | None:
    best = None
    for g0, g1 in gaps:
        b0 = _align_up(g0, align)
        if b0 + size <= g1 and (best is None or g1 - g0 < best[0]):
            best = (g1 - g0, b0)
    return None if best is None else best[1]


# ---------------------------------------------------------------- rewrite
def _rewrite(program: list[Instruction], owners, shift: dict[int, int]) -> list[Instruction]:
    """A copy of `program` whose operands of moved records are moved by their shift."""
    out = list(program)
    regions: dict[tuple[int, int], Region] = {}
    operands: dict[tuple[int, int], tuple[Operand, Operand]] = {}
    for i, got in enumerate(owners):
        if got is None or not any(k in shift for k in got):
            continue
        ins = program[i]
        ops = ins.reads + ins.writes
        new = list(ops)
        for j, k in enumerate(got):
            d = shift.get(k, 0) if k >= 0 else 0
            if not d:
                continue
            op = ops[j]
            hit = operands.get((id(op), d))
            if hit is None:
                reg = op.region
                moved = regions.get((id(reg), d))
                if moved is None:
                    moved = regions[(id(reg), d)] = Region(
                        reg.space, reg.core, reg.partition_start, reg.partitions,
                        reg.byte_start + d, reg.byte_end + d)
                hit = operands[(id(op), d)] = (op, replace(op, region=moved))
            new[j] = hit[1]
        nr = len(ins.reads)
        out[i] = replace(ins, reads=tuple(new[:nr]), writes=tuple(new[nr:]))
    return out
