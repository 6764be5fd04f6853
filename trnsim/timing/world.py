"""Timing a multi-rank launch: every rank's program record in one schedule, each collective
expanded into its transfers. Knows nothing about values.

The ranks' records are merged in world order (the order the cooperative run issued them, a
causal order): rank r's core c becomes core r*lnc + c and its HBM is moved to its own address
range, so ranks never alias. After the last rank of a collective arrived, the collective's
transfers (trnsim.timing.collectives, one chunk per transfer) follow as `cc_transfer` DMAs on
the sending rank's engines, queue qCC: each reads its chunks and writes the receiver's, and
waits explicitly for the transfers it depends on (a ring's previous step) and for both ranks'
records; the ranks' later accesses to the buffers wait for the transfers. A transfer streams
on the DMA engines at its share of the links it crosses, sharing the engines and HBM with the
kernel's DMAs, after its route's hop latencies.

HBM bandwidth is pooled over the chips the ranks occupy (one fluid model for the launch), so
contention between the ranks of one chip is shared with the ranks of the others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trnsim.chipspec import ChipSpec
from trnsim.program import Instruction, Operand, Region
from trnsim.timing.collectives import Phase, Transfer, plan_collective
from trnsim.timing.reorder import schedule
from trnsim.topology import TopologySpec

RANK_SPAN = 1 << 44  # HBM bytes between two ranks' address ranges in the merged record
SCRATCH = 1 << 43  # a rank's collective staging buffer, inside its range


@dataclass(frozen=True)
class CollectiveRecord:
    """One collective of a launch, as the timing model needs it."""

    op: str  # the plan's op: all_reduce, all_gather, reduce_scatter, all_to_all, permute
    group: tuple[int, ...]  # ranks, in rank-list order
    nbytes: int  # plan_collective's size convention
    members: Mapping[int, int]  # rank -> index of its record in that rank's program
    at: int  # world-log position the transfers follow
    pairs: tuple[tuple[int, int, int], ...] | None = None  # permutes: (src, dst, bytes)
    api: str = ""  # the NKI function


@dataclass
class CollectiveSpan:
    """When one rank was busy with one collective (its CC-core row slice), in ns."""

    rank: int
    api: str
    algorithm: str
    start_ns: float
    end_ns: float
    nbytes: int
    steps: int
    group: tuple[int, ...]


@dataclass
class WorldTiming:
    """The merged record of a launch and its schedule (cores numbered rank*lnc + c), with each
    member rank's collective spans (trnsim.multirank makes the Profile)."""

    program: list[Instruction]
    timeline: Any
    chip: ChipSpec
    lnc: int
    ranks: int
    topology: TopologySpec
    spans: list[CollectiveSpan]


def _spans(timeline: Any, spans_of: list[tuple]) -> list[CollectiveSpan]:
    out = []
    tpn = timeline.ticks_per_ns
    for rank, api, algo, nbytes, steps, group, firsts, insts in spans_of:
        start = min((timeline.start[i] for i in firsts), default=0)
        end = max((timeline.end[i] for i in insts), default=start)
        out.append(CollectiveSpan(rank, api, algo, start / tpn, end / tpn, nbytes, steps,
                                  group))
    return out


def _shift(op: Operand, rank: int, core_base: int) -> Operand:
    r = op.region
    if r.space == "hbm":
        off = rank * RANK_SPAN
        region = Region(r.space, r.core, r.partition_start, r.partitions, r.byte_start + off,
                        r.byte_end + off)
    else:
        region = Region(r.space, r.core + core_base, r.partition_start, r.partitions,
                        r.byte_start, r.byte_end)
    return dataclasses.replace(op, region=region)


class _Merger:
    """Builds the merged record: ranks' instructions in world order, collectives' transfers.

    HBM hazards are tracked per issuing core (deps.py: a chip's cores order HBM accesses only
    through barriers), so a transfer issued by one rank never meets another rank's accesses
    by region: its waits are explicit. It waits for both ranks' records (sources ready,
    destination free) and for the transfers that wrote the chunks it reads, or last read or
    wrote the chunk it writes; a rank's later instructions that touch a collective's
    destination (or overwrite its source) wait for the transfers that used it.
    """

    def __init__(self, programs: Sequence[list[Instruction]], topo: TopologySpec, lnc: int,
                 chip: ChipSpec):
        self.programs, self.topo, self.lnc, self.chip = programs, topo, lnc, chip
        self.out: list[Instruction] = []
        self.index: dict[tuple[int, int], int] = {}
        self.spans: list[tuple] = []
        self.buffers: dict[int, list[tuple[Region, list[int], bool]]] = {}  # rank -> uses
        self.writer: dict[tuple[int, str, int], int] = {}  # (rank, buf, chunk) -> transfer
        self.readers: dict[tuple[int, str, int], list[int]] = {}

    def add(self, rank: int, i: int) -> None:
        ins = self.programs[rank][i]
        g = len(self.out)
        self.index[(rank, i)] = g
        base = rank * self.lnc
        attrs = ins.attrs
        if ins.opcode == "core_barrier":
            attrs = {**attrs, "barrier_domain": rank}
        reads = tuple(_shift(o, rank, base) for o in ins.reads)
        writes = tuple(_shift(o, rank, base) for o in ins.writes)
        deps = {self.index[(rank, d)] for d in ins.deps}
        for region, users, is_dst in self.buffers.get(rank, ()):
            hit = any(o.region.overlaps(region) for o in writes) or (
                is_dst and any(o.region.overlaps(region) for o in reads))
            if hit:
                deps.update(users)
        self.out.append(Instruction(g, ins.opcode, ins.engine, base + ins.core, reads, writes,
                                    attrs, ins.loc, ins.name, ins.loops, tuple(sorted(deps))))

    def expand(self, rec: CollectiveRecord) -> None:
        """Append the collective's transfers and file each member rank's span."""
        topo, lnc = self.topo, self.lnc
        plan = plan_collective(rec.op, rec.nbytes, rec.group, topo, lnc, pairs=rec.pairs,
                               detailed=True)
        n = len(rec.group)
        markers = {r: self.out[self.index[(r, i)]] for r, i in rec.members.items()}
        touched: dict[int, list[int]] = {r: [m.index] for r, m in markers.items()}
        uses: dict[tuple[int, bool], list[int]] = {}  # (rank, dst?) -> transfers
        for ph in plan.phases:
            senders = _senders(ph, rec.group, topo, lnc)
            for rep in range(ph.repeat):
                for t in ph.transfers:
                    ins = _transfer(rec, ph, rep, t, markers, n, topo, lnc, self.chip,
                                    len(self.out), senders)
                    ins.deps = self._chunk_deps(rec, ph, rep, t, markers, ins.index)
                    self.out.append(ins)
                    for r in (rec.group[t.src], rec.group[t.dst]):
                        touched[r].append(ins.index)
                    for p, buf, _ in t.reads:
                        uses.setdefault((rec.group[p], buf == "dst"), []).append(ins.index)
                    uses.setdefault((rec.group[t.dst], True), []).append(ins.index)
                    if t.reduce:
                        uses.setdefault((rec.group[t.dst], False), []).append(ins.index)
        for (r, is_dst), users in uses.items():
            op = _buffer(markers[r], "dst" if is_dst else "src") if r in markers else None
            if op is not None:
                self.buffers.setdefault(r, []).append((op.region, users, is_dst))
        for r in rec.group:
            if r in markers:
                self.spans.append((r, rec.api or rec.op, plan.algorithm, rec.nbytes, plan.steps,
                                   rec.group, [markers[r].index], touched[r]))

    def _chunk_deps(self, rec: CollectiveRecord, ph: Phase, rep: int, t: Transfer,
                    markers: Mapping[int, Instruction], idx: int) -> tuple[int, ...]:
        g = rec.group
        deps = {markers[g[t.src]].index, markers[g[t.dst]].index}
        reads = [(g[p], buf, ph.chunk_at(c, rep)) for p, buf, c in t.reads]
        wbuf, wchunk = t.write
        w = (g[t.dst], wbuf, ph.chunk_at(wchunk, rep))
        if t.reduce:
            reads.append((w[0], "src", w[2]))
        for key in reads:
            deps.update(self._writers_of(key))
        deps.update(self._writers_of(w))
        for k in self._overlapping(w):
            deps.update(self.readers.get(k, ()))
        for key in reads:
            self.readers.setdefault(key, []).append(idx)
        for k in self._overlapping(w):
            self.readers.pop(k, None)
            self.writer.pop(k, None)
        self.writer[w] = idx
        deps.discard(idx)
        return tuple(sorted(deps))

    def _overlapping(self, key: tuple[int, str, int]) -> list[tuple[int, str, int]]:
        r, buf, c = key
        known = set(self.writer) | set(self.readers)
        return [k for k in known if k[0] == r and k[1] == buf and (c < 0 or k[2] < 0
                                                                   or k[2] == c)]

    def _writers_of(self, key: tuple[int, str, int]) -> list[int]:
        return [self.writer[k] for k in self._overlapping(key) if k in self.writer]


def time_world(programs: Sequence[list[Instruction]], log: Sequence[tuple[int, int]],
               calls: Sequence[CollectiveRecord], topo: TopologySpec, lnc: int, chip: ChipSpec,
               reorder: bool = True) -> WorldTiming:
    """Schedule every rank's record and every collective's transfers together."""
    m = _Merger(programs, topo, lnc, chip)
    pending = sorted(calls, key=lambda c: c.at)
    k = 0
    for pos, (rank, i) in enumerate(log):
        m.add(rank, i)
        while k < len(pending) and pending[k].at == pos + 1:
            m.expand(pending[k])
            k += 1
    for rec in pending[k:]:
        m.expand(rec)
    ranks = len(programs)
    nchips = -(-ranks // topo.ranks_per_chip(lnc))
    pooled = dataclasses.replace(chip, hbm=dataclasses.replace(
        chip.hbm, bandwidth_gbps=chip.hbm.bandwidth_gbps * nchips))
    tl = schedule(m.out, pooled, reorder)
    return WorldTiming(m.out, tl, chip, lnc, ranks, topo, _spans(tl, m.spans))


def _senders(ph: Phase, group: tuple[int, ...], topo: TopologySpec,
             lnc: int) -> dict[tuple[int, int], int]:
    """(chip, level) -> how many ranks of the chip send across that level in the phase: they
    share the chip's links there."""
    out: dict[tuple[int, int], set[int]] = {}
    for t in ph.transfers:
        a, b = topo.place(group[t.src], lnc).chip, topo.place(group[t.dst], lnc).chip
        if a != b:
            for lv, h in enumerate(topo.hops(a, b)):
                if h:
                    out.setdefault((a, lv), set()).add(t.src)
    return {k: len(v) for k, v in out.items()}


def _transfer(rec: CollectiveRecord, ph: Phase, rep: int, t: Transfer,
              markers: Mapping[int, Instruction], n: int, topo: TopologySpec, lnc: int,
              chip: ChipSpec, g: int, senders: Mapping[tuple[int, int], int]) -> Instruction:
    """One transfer as a DMA on the sender's first core: its engines stream it at its share
    of the links it crosses (a chip's level bandwidth over the chip's ranks sending on it,
    over the hops it makes there), after the route's hop latencies; a rank's transfers take
    turns on its engines, and HBM is shared with everything else in flight."""
    sender, receiver = rec.group[t.src], rec.group[t.dst]
    engines = chip.dma.engines_per_core
    reads = [_chunk(markers[rec.group[p]], buf, ph.chunk_at(c, rep), n, t.nbytes, engines,
                    rec.group[p])
             for p, buf, c in t.reads]
    wbuf, wchunk = t.write
    wchunk = ph.chunk_at(wchunk, rep)
    if t.reduce:
        reads.append(_chunk(markers[receiver], "src", wchunk, n, t.nbytes, engines, receiver))
    writes = [_chunk(markers[receiver], wbuf, wchunk, n, t.nbytes, engines, receiver)]
    a, b = topo.place(sender, lnc).chip, topo.place(receiver, lnc).chip
    attrs: dict[str, Any] = {"cc": rec.api or rec.op, "cc_src_rank": sender,
                             "cc_dst_rank": receiver, "cc_extra_latency_ns": 0.0}
    if a != b:
        hops = topo.hops(a, b)
        attrs["cc_extra_latency_ns"] = sum(h * lv.latency_ns
                                           for h, lv in zip(hops, topo.levels, strict=True))
        attrs["cc_rate_gbps"] = min(lv.bandwidth_gbps / (senders.get((a, i), 1) * h)
                                    for i, (lv, h) in enumerate(zip(topo.levels, hops,
                                                                    strict=True)) if h)
    return Instruction(g, "cc_transfer", "dma", sender * lnc, tuple(reads), tuple(writes),
                       attrs, markers[sender].loc, rec.api or rec.op)


def _rows(nbytes: int, engines: int) -> int:
    """Rows an HBM-to-HBM transfer is cut into: one per DMA engine, at least 64 bytes each."""
    return max(1, min(engines, nbytes // 64))


def _buffer(marker: Instruction, buf: str) -> Operand | None:
    ops = marker.writes if buf == "dst" else marker.reads
    name = "dst" if buf == "dst" else "src"
    return next((o for o in ops if o.name == name), None)


def _chunk(marker: Instruction, buf: str, chunk: int, n: int, nbytes: int, engines: int,
           rank: int) -> Operand:
    """The operand record of `buf`'s chunk on the marker's rank (scratch: its staging area),
    shaped so the transfer spreads over the core's DMA engines."""
    base = _buffer(marker, "src" if buf == "scratch" else buf)
    if buf == "scratch" or base is None:
        lo = rank * RANK_SPAN + SCRATCH
        region = Region("hbm", marker.core, 0, 1, lo, lo + n * max(nbytes, 1))
        space_hbm, name, dtype = True, "scratch", "uint8"
    else:
        region, space_hbm, name, dtype = base.region, base.region.space == "hbm", base.name, \
            base.dtype
    if chunk >= 0 and n > 1:
        if space_hbm or region.partitions < n:
            size = (region.byte_end - region.byte_start) // n
            lo = region.byte_start + chunk * size
            region = dataclasses.replace(region, byte_start=lo, byte_end=lo + max(size, 1))
        else:
            parts = region.partitions // n
            region = dataclasses.replace(region, partition_start=region.partition_start
                                         + chunk * parts, partitions=max(parts, 1))
    if space_hbm:
        rows = _rows(nbytes, engines)
        cols = -(-nbytes // rows)
        return Operand(name, region, dtype, (rows, cols), 1, nbytes, nbytes, 1, cols,
                       base.tensor_name if base is not None else "cc_scratch")
    per = -(-nbytes // max(region.partitions, 1))
    return Operand(name, region, dtype, (region.partitions, per), region.partitions, per,
                   nbytes, 1, per, base.tensor_name)
