"""DMA engines and HBM: transfers split into per-engine chunks, simulated on an event heap.

A transfer is split across a core's DMA engines by partition (row) groups, each row slice being
one or more descriptors (a non-contiguous free-dimension slice adds descriptors). Each engine
serves one chunk at a time, round-robin across its queues, in order within a queue. A chunk costs
transfer_overhead_ns + n_descriptors x the descriptor's fixed cost, then streams its bytes at the
engine's rate divided by the descriptor's time factor; both come from the chip's per-descriptor
cost table (dma.descriptor_cost: one row per descriptor size class, each number documented,
inferred or fitted, as the chip file says).
Streams that touch HBM share the chip's HBM bandwidth: when their demand exceeds it, every stream
slows by the same factor (a fluid model, re-solved whenever the set of streams changes). Time is
in integer ticks of the scheduler's clock. Knows nothing about values.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from trnsim.chipspec import ChipSpec
from trnsim.program import Instruction
from trnsim.timing.models import attr


@dataclass(frozen=True)
class DmaPlan:
    """How one DMA instruction moves: queue, descriptor generation, chunks per engine."""

    queue: str  # profiler queue name, e.g. qSyncIO
    issuer: str  # engine whose queue triggers it: sync, scalar or gpsimd
    dge: str  # none | hwdge | swdge
    descriptors: int
    nbytes: int
    chunks: tuple[tuple[int, int], ...]  # (descriptors, bytes) per engine slot, in order
    hbm_weight: int  # HBM operands (HBM->HBM streams count twice)
    efficiency: float  # fraction of the engine rate (DMA transpose < 1)
    uniform: bool  # every chunk has the same descriptors and bytes
    hbm_read: int = 0
    hbm_write: int = 0
    # a collective transfer's route latency (ns), paid between the trigger and the data
    # moving (timing/world.py)
    extra_latency_ns: float = 0.0
    descriptor_ns: float = 0.0  # fixed cost of each descriptor (its size class's)
    descriptor_bytes: int = 0  # bytes of each descriptor (one contiguous run)


def _rows(instr: Instruction) -> int:
    onchip = [o.partitions for o in instr.operands if o.region.space != "hbm"]
    if onchip:
        return max(onchip)
    shape = instr.writes[0].shape if instr.writes else ()
    return int(shape[0]) if len(shape) >= 2 else 1


def plan_dma(instr: Instruction, chip: ChipSpec, transpose: bool = False) -> DmaPlan:
    """Split a dma_copy/dma_transpose record into descriptors and per-engine chunks."""
    dge = str(attr(instr, "dge_mode") or "unknown")
    if dge == "hwdge" and chip.dma.hwdge_blocks_per_core < 1:
        dge = "none"
    issuer = str(attr(instr, "queue_engine") or attr(instr, "engine") or "sync")
    extra = attr(instr, "cc_extra_latency_ns")
    if extra is not None:  # a collective's transfer: driven by the collective cores (qCC)
        issuer, dge = "cc", "none"
    elif dge == "swdge" or instr.engine == "gpsimd":
        issuer = "gpsimd"
    elif issuer not in ("sync", "scalar", "gpsimd"):
        issuer = "sync"
    name = {"sync": "Sync", "scalar": "Scalar", "gpsimd": "GpSimd", "cc": "CC"}[issuer]
    queue = f"q{name}" + {"swdge": "Dynamic", "hwdge": "DynamicHW"}.get(dge, "IO")
    if issuer == "cc":
        queue = "qCC"
    if attr(instr, "spill_reload"):  # the compiler's spill/reload DMAs (Beta-1 block tensors)
        queue = f"q{name}SpillReload"
    read_bytes = sum(o.nbytes for o in instr.reads)
    write_bytes = sum(o.nbytes for o in instr.writes)
    nbytes = max(read_bytes, write_bytes, 1)
    rows = max(1, _rows(instr))
    row_bytes = -(-nbytes // rows)
    runs = [min(max(1, o.contiguous_bytes), row_bytes) for o in instr.operands]
    desc_per_row = -(-row_bytes // min(runs)) if runs else 1
    engines = chip.dma.engines_per_core
    per_engine = -(-rows // engines)
    chunks = []
    left = rows
    while left > 0:
        r = min(per_engine, left)
        chunks.append((r * desc_per_row, min(r * row_bytes, nbytes - (rows - left) * row_bytes)))
        left -= r
    hbm_reads = [o.nbytes for o in instr.reads if o.region.space == "hbm"]
    hbm_writes = [o.nbytes for o in instr.writes if o.region.space == "hbm"]
    eff = 1.0
    rate = attr(instr, "cc_rate_gbps")
    if rate is not None:  # a collective transfer delivers no faster than its share of the link
        # (a reducing transfer streams all its inputs for each byte it delivers)
        eff = min(1.0, float(rate) * nbytes / (max(write_bytes, 1) * len(chunks)
                                               * chip.dma.engine_bytes_per_ns))
    desc_bytes = row_bytes // desc_per_row
    desc_ns, factor = chip.dma.descriptor_cost_at(desc_bytes)
    if transpose:
        src_hbm = any(o.region.space == "hbm" for o in instr.reads)
        eff = chip.dma.transpose_hbm_efficiency if src_hbm else chip.dma.transpose_sbuf_efficiency
    else:
        # A descriptor's size class sets how fast it streams (NKI-DMA-BW size guidance).
        eff /= factor
    return DmaPlan(
        queue,
        issuer,
        dge,
        rows * desc_per_row,
        nbytes,
        tuple(chunks),
        len(hbm_reads) + len(hbm_writes),
        eff,
        len(set(chunks)) == 1,
        sum(hbm_reads),
        sum(hbm_writes),
        float(extra or 0.0),
        desc_ns,
        desc_bytes,
    )


def isolated_ticks(plan: DmaPlan, chip: ChipSpec, ticks_per_ns: float) -> int:
    """Ticks a transfer takes on idle DMA engines and HBM: its slowest chunk's descriptor
    overheads plus streaming at the engine rate (trigger costs not included)."""
    rate = chip.dma.engine_bytes_per_ns * plan.efficiency / ticks_per_ns
    desc = plan.descriptor_ns * ticks_per_ns
    fixed = chip.dma.transfer_overhead_ns * ticks_per_ns
    return max(
        (math.ceil(fixed + d * desc) + math.ceil(b / rate) for d, b in plan.chunks), default=0
    )


class ChunkRecord(NamedTuple):
    """A finished chunk: one transfer's packet on one DMA engine, in ticks."""

    transfer: int  # instruction index
    core: int
    engine: int
    queue: str
    descriptors: int
    nbytes: int
    hbm_weight: int
    start: int
    stream_start: int  # descriptor overheads paid, data starts moving
    end: int


@dataclass(slots=True)
class Chunk:
    """One transfer's share on one DMA engine; start/end ticks filled in as it runs."""

    transfer: int  # instruction index
    core: int
    engine: int
    queue: str
    descriptors: int
    nbytes: int
    hbm_weight: int
    rate: float  # bytes per tick, unshared
    desc_ticks: float  # fixed cost of each of its descriptors
    start: int = -1
    stream_start: int = -1  # descriptor overheads paid, data starts moving
    end: int = -1
    # fluid state while streaming
    remaining: float = 0.0
    cur_rate: float = 0.0
    since: int = 0
    version: int = 0


@dataclass
class _Engine:
    queues: dict[str, deque[Chunk]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    last: int = -1
    busy: bool = False


class DmaSystem:
    """Every DMA engine of every core and the chip's shared HBM bandwidth, in event time."""

    def __init__(
        self, chip: ChipSpec, ticks_per_ns: float, cores: int | None = None, one_queue: bool = False
    ):
        self.chip = chip
        self.ticks_per_ns = ticks_per_ns
        self.hbm_cap = chip.hbm.bandwidth_gbps / ticks_per_ns  # bytes per tick
        self.fixed_ticks = chip.dma.transfer_overhead_ns * ticks_per_ns
        self._heap: list[tuple[int, int, int, object]] = []
        self._seq = 0
        self._engines: dict[tuple[int, int], _Engine] = {}
        self._active: dict[int, Chunk] = {}  # id -> streaming chunk touching HBM, join order
        self._demand = 0.0  # HBM bytes per tick the active streams would move unshared
        self._scaled = False
        # When every engine of every core streaming at once cannot exceed the HBM bandwidth,
        # sharing never binds and a chunk's end is known when it starts.
        n_cores = chip.cores_per_chip if cores is None else cores
        worst = n_cores * chip.dma.engines_per_core * chip.dma.engine_bytes_per_ns * 2
        self.uncapped = worst <= chip.hbm.bandwidth_gbps
        # ... and when each core's DMAs all use one queue, round-robin across queues is plain
        # arrival order: every chunk's times follow from its arrival (_arrive_uncapped).
        self.fast = self.uncapped and one_queue
        self._free: dict[int, list[int]] = {}  # uncapped: core -> tick each engine frees up
        self._left: dict[int, int] = {}  # transfer -> chunks not finished
        self._next_engine: dict[tuple[int, str], int] = {}
        self._n_eng = chip.dma.engines_per_core
        self._rates: dict[int, float] = {}  # id(plan) -> bytes per tick
        self._chunk_ticks: dict[int, list[tuple[int, int, int, int]]] = {}  # id(plan) -> ...
        self._plans: list[DmaPlan] = []
        # ChunkRecord fields + a count of consecutive engines sharing them, as plain tuples
        self.records: list[tuple] = []
        self.pending_samples: list[tuple[int, int]] = [(0, 0)]  # (tick, transfers in flight)

    def _push(self, t: int, kind: int, obj: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, obj))

    def submit(self, transfer: int, core: int, plan: DmaPlan, ready: int) -> None:
        """Transfer `transfer` (an instruction index) may start moving data at tick `ready`."""
        key = (core, plan.queue)
        first = self._next_engine.get(key, 0)
        self._next_engine[key] = (first + len(plan.chunks)) % self._n_eng
        self._seq += 1
        heapq.heappush(self._heap, (ready, self._seq, 0, (transfer, core, first, plan)))

    @property
    def idle(self) -> bool:
        return not self._heap

    def step(self) -> list[tuple[int, int]]:
        """Process every event at the earliest time, and at the next times while no transfer
        has finished; return finished transfers (index, tick), or [] once out of events."""
        done: list[tuple[int, int]] = []
        heap, pop = self._heap, heapq.heappop
        arrive = self._arrive_uncapped if self.fast else self._arrive
        while heap and not done:
            t = heap[0][0]
            while heap and heap[0][0] == t:
                _, _, kind, obj = pop(heap)
                if kind == 0:
                    arrive(t, obj)  # type: ignore[arg-type]
                elif kind == 3:
                    done.append((obj, t))  # type: ignore[arg-type]
                    self.pending_samples.append((t, self.pending_samples[-1][1] - 1))
                elif kind == 1:
                    self._stream(t, obj)  # type: ignore[arg-type]
                else:
                    chunk, version = obj  # type: ignore[misc]
                    if version == chunk.version:
                        self._finish(t, chunk, done)
        return done

    def _arrive_uncapped(self, t: int, arrival: tuple[int, int, int, DmaPlan]) -> None:
        """Without HBM contention, and with one queue per core, each engine's schedule follows
        from arrivals alone: chunks are served in arrival order."""
        transfer, core, first, plan = arrival
        samples = self.pending_samples
        samples.append((t, samples[-1][1] + 1))
        n_eng = self._n_eng
        free = self._free.get(core)
        if free is None:
            free = self._free[core] = [0] * n_eng
        chunk_ticks = self._chunk_ticks.get(id(plan))
        if chunk_ticks is None:
            chunk_ticks = self._uncapped_ticks(plan)
        queue, w, records = plan.queue, plan.hbm_weight, self.records
        n = len(plan.chunks)
        if plan.uniform and first + n <= n_eng:
            if n == 1:
                latest = free[first]
                uniform = True
            else:
                busy = free[first : first + n]
                latest = max(busy)
                uniform = latest <= t or min(busy) == latest
        else:
            uniform = False
        if uniform:
            # The common case: equal chunks on engines free at the same time (or idle): one
            # row for the whole group.
            d, b, d_ticks, b_ticks = chunk_ticks[0]
            if latest > t:
                t = latest
            stream = t + d_ticks
            end = stream + b_ticks
            free[first : first + n] = [end] * n
            records.append((transfer, core, first, queue, d, b, w, t, stream, end, n))
            self._seq += 1
            heapq.heappush(self._heap, (end, self._seq, 3, transfer))
            return
        last = t
        e = first
        for d, b, d_ticks, b_ticks in chunk_ticks:
            f = free[e]
            start = t if t > f else f
            stream = start + d_ticks
            end = free[e] = stream + b_ticks
            records.append((transfer, core, e, queue, d, b, w, start, stream, end, 1))
            if end > last:
                last = end
            e = e + 1 if e + 1 < n_eng else 0
        self._push(last, 3, transfer)

    def _uncapped_ticks(self, plan: DmaPlan) -> list[tuple[int, int, int, int]]:
        """(descriptors, bytes, descriptor ticks, streaming ticks) of each chunk of `plan` at
        the unshared rate (cached: plans are shared between transfers)."""
        rate = self._rate(plan)
        desc, fixed = plan.descriptor_ns * self.ticks_per_ns, self.fixed_ticks
        out = [(d, b, math.ceil(fixed + d * desc), math.ceil(b / rate)) for d, b in plan.chunks]
        self._chunk_ticks[id(plan)] = out  # _rate keeps the plan, so its id is not reused
        return out

    def _rate(self, plan: DmaPlan) -> float:
        """Bytes per tick of one engine on `plan` (cached: plans are shared between transfers)."""
        rate = self._rates.get(id(plan))
        if rate is None:
            rate = self.chip.dma.engine_bytes_per_ns * plan.efficiency / self.ticks_per_ns
            self._rates[id(plan)] = rate
            self._plans.append(plan)  # keeps id(plan) from being reused
        return rate

    def _arrive(self, t: int, arrival: tuple[int, int, int, DmaPlan]) -> None:
        transfer, core, first, plan = arrival
        n_eng, rate = self.chip.dma.engines_per_core, self._rate(plan)
        desc = plan.descriptor_ns * self.ticks_per_ns
        chunks = [
            Chunk(
                transfer, core, (first + i) % n_eng, plan.queue, d, b, plan.hbm_weight, rate, desc
            )
            for i, (d, b) in enumerate(plan.chunks)
        ]
        self._left[transfer] = len(chunks)
        self.pending_samples.append((t, self.pending_samples[-1][1] + 1))
        for c in chunks:
            eng = self._engines.get((c.core, c.engine))
            if eng is None:
                eng = self._engines[(c.core, c.engine)] = _Engine()
            q = eng.queues.get(c.queue)
            if q is None:
                q = eng.queues[c.queue] = deque()
                eng.order.append(c.queue)
            q.append(c)
            if not eng.busy:
                self._start_next(t, eng)

    def _start_next(self, t: int, eng: _Engine) -> None:
        n = len(eng.order)
        for k in range(1, n + 1):
            i = (eng.last + k) % n
            q = eng.queues[eng.order[i]]
            if q:
                c = q.popleft()
                eng.last, eng.busy = i, True
                c.start = t
                t_stream = c.stream_start = t + math.ceil(
                    self.fixed_ticks + c.descriptors * c.desc_ticks
                )
                if self.uncapped or c.hbm_weight == 0:
                    c.cur_rate = c.rate
                    self._push(t_stream + math.ceil(c.nbytes / c.rate), 2, (c, c.version))
                else:
                    self._push(t_stream, 1, c)
                return
        eng.busy = False

    def _stream(self, t: int, c: Chunk) -> None:
        c.remaining = float(c.nbytes)
        c.since = t
        self._active[id(c)] = c
        self._demand += c.rate * c.hbm_weight
        self._reshare(t, c)

    def _finish(self, t: int, c: Chunk, done: list[tuple[int, int]]) -> None:
        c.end = t
        self.records.append(
            (
                c.transfer,
                c.core,
                c.engine,
                c.queue,
                c.descriptors,
                c.nbytes,
                c.hbm_weight,
                c.start,
                c.stream_start,
                c.end,
                1,
            )
        )
        if id(c) in self._active:
            del self._active[id(c)]
            self._demand -= c.rate * c.hbm_weight
            self._reshare(t, None)
        self._left[c.transfer] -= 1
        if self._left[c.transfer] == 0:
            del self._left[c.transfer]
            done.append((c.transfer, t))
            self.pending_samples.append((t, self.pending_samples[-1][1] - 1))
        self._start_next(t, self._engines[(c.core, c.engine)])

    def _reshare(self, t: int, new: Chunk | None) -> None:
        """Re-solve HBM sharing after a stream joined (`new`) or left."""
        demand = self._demand if self._active else 0.0
        scale = min(1.0, self.hbm_cap / demand) if demand > 1e-12 else 1.0
        scaled = scale < 1.0
        if scaled or self._scaled:
            for c in self._active.values():
                if c is not new:
                    c.remaining -= c.cur_rate * (t - c.since)
                    c.since = t
                self._set_rate(t, c, c.rate * scale)
        elif new is not None:
            self._set_rate(t, new, new.rate)
        self._scaled = scaled

    def _set_rate(self, t: int, c: Chunk, rate: float) -> None:
        c.cur_rate = rate
        c.version += 1
        self._push(t + max(0, math.ceil(c.remaining / rate - 1e-9)), 2, (c, c.version))
