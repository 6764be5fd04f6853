"""Scheduler: in-order engine queues and semaphore waits in integer ticks. Knows nothing of values.

Each core has in-order queues for Tensor (LoadStationary then MultiplyMoving), Vector, Scalar,
GpSimd and Sync. An instruction issues when its queue is free and every producer it depends on
(derived from byte regions, see deps.py) has completed plus a semaphore latency. The engine may
issue the next instruction after the II; dependants wait for the completion latency. DMA
instructions are triggered from the Sync, Scalar or GpSimd queue and then move data on the DMA
engines (dma.py), which run on an event heap in time order because they share HBM bandwidth.

Compute instructions are placed as soon as their producers' completion times are known; only
DMA completions need simulated time. Every engine clock is an integer number of ticks of one
base clock (the least common multiple of the engine clocks), so costs stay integer cycles.
"""

from __future__ import annotations

import functools
import gc
import math
from collections import deque
from dataclasses import dataclass, field

from trnsim.chipspec import ChipSpec
from trnsim.program import Instruction
from trnsim.timing.costs import Cost, CostTable
from trnsim.timing.deps import ANTI, FLOW, DependencyTracker
from trnsim.timing.dma import ChunkRecord, DmaPlan, DmaSystem, plan_dma
from trnsim.timing.models import attr
from trnsim.timing.ports import Ports
from trnsim.timing.throttle import Throttle

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")
_COMPUTE, _TENSOR, _DMA, _BARRIER = range(4)  # how a queue issues an instruction
_MISSING = object()
_PORT_ENGINES = ("vector", "scalar", "gpsimd")  # the engines Ports.keys_of books
_MAX_BASE_MHZ = 100_000


def base_clock_mhz(chip: ChipSpec) -> int:
    """The tick frequency: the least common multiple of the engine clocks, in MHz."""
    base = 1
    for e in chip.engines.values():
        base = math.lcm(base, max(1, round(e.clock_ghz * 1000)))
    return min(base, _MAX_BASE_MHZ)


@dataclass
class Timeline:
    """Raw schedule in ticks, indexed by instruction (Profile converts to ns).

    start/end: issue and completion (DMA: trigger issue and last byte landed); issue_end: when
    the queue could issue again; wait: ticks stalled on semaphores, blocker: the producer waited
    on last (-1 if none). Tensor instructions also have ls (LoadStationary start, end).
    """

    ticks_per_ns: float
    start: list[int]
    end: list[int]
    issue_end: list[int]
    wait: list[int]
    blocker: list[int]
    deps: list[list[tuple[int, str, str]]]  # (producer, kind, operand): see deps.Dep
    queue: list[tuple[int, str]]
    costs: list[Cost | None]
    ls: dict[int, tuple[int, int]] = field(default_factory=dict)
    dma: dict[int, tuple[DmaPlan, int, int]] = field(default_factory=dict)  # plan, trig end, ready
    chunk_rows: list[tuple] = field(default_factory=list)  # ChunkRecord fields + count
    pending_samples: list[tuple[int, int]] = field(default_factory=list)
    throttle: dict[int, Throttle] = field(default_factory=dict)

    @functools.cached_property
    def chunks(self) -> list[ChunkRecord]:
        """DMA chunks, one per engine, in the order they were scheduled."""
        out = []
        for *r, count in self.chunk_rows:
            if count == 1:
                out.append(ChunkRecord(*r))
            else:
                out.extend(ChunkRecord(r[0], r[1], r[2] + k, *r[3:]) for k in range(count))
        return out


class _Queue:
    __slots__ = ("cum", "free", "head", "items", "last", "mm_free", "mm_start")

    def __init__(self) -> None:
        self.items: list[int] = []
        self.head = 0
        self.free = 0  # next issue tick (Tensor: LoadStationary side)
        self.last = -1
        self.cum = 0  # latest completion so far on this queue
        self.mm_free = 0
        self.mm_start = 0


class Scheduler:
    """Times a program record on a chip. One use: `Scheduler(chip).run(program)`."""

    def __init__(self, chip: ChipSpec):
        self.chip = chip
        base = base_clock_mhz(chip)
        self.ticks_per_ns = base / 1000
        self.period = {
            e: max(1, round(base / (s.clock_ghz * 1000))) for e, s in chip.engines.items()
        }
        self.sem = round(chip.timing["semaphore_latency_ns"] * self.ticks_per_ns)
        self._queues: dict[tuple[int, str], _Queue] = {}
        self._waiters: dict[int, list[tuple[int, str]]] = {}
        self._work: deque[tuple[int, str]] = deque()
        self._in_work: set[tuple[int, str]] = set()
        self.ports = Ports(chip, self.ticks_per_ns)
        self._barriers: dict[int, list[int]] = {}
        self.costs = CostTable(chip)

    # ------------------------------------------------------------ preparation
    def _prepare(self, program: list[Instruction]) -> Timeline:
        """Costs, DMA plans, dependencies and queues, in one pass in program order."""
        n = len(program)
        tl = Timeline(
            self.ticks_per_ns,
            [-1] * n,
            [-1] * n,
            [-1] * n,
            [0] * n,
            [-1] * n,
            [[] for _ in range(n)],
            [(0, "")] * n,
            [None] * n,
        )
        self._release = [-1] * n
        self._kind = kinds = [_COMPUTE] * n
        self._ticks: list[tuple[int, int]] = [(0, 0)] * n  # compute: (II, latency) in ticks
        self._port_keys: list[tuple | None] = [None] * n
        dep_queue: list[object] = [None] * n
        tracker = DependencyTracker()
        barrier_count: dict[int, int] = {}
        costs, queues, period = self.costs, self._queues, self.period
        static = int(self.chip.timing["vector_static_overhead_cycles"])
        plans: dict[tuple, DmaPlan] = {}
        port_cache: dict[tuple, tuple | None] = {}
        for ins in program:
            i = ins.index
            rec, params = costs.record(ins.opcode)
            if rec.model == "dma":
                sig = _dma_signature(ins)
                plan = plans.get(sig)
                if plan is None:
                    plan = plans[sig] = plan_dma(ins, self.chip, bool(params.get("transpose")))
                key = (ins.core, plan.issuer)
                dq: object = ("dma", i)
                tl.dma[i] = (plan, -1, -1)
                kinds[i] = _DMA
            else:
                # Control instructions recorded on "dma" (register_load/store) run in the Sync
                # engine's sequencer.
                eng = (
                    ins.engine
                    if ins.engine in ENGINES
                    else "sync"
                    if ins.engine == "dma"
                    else "vector"
                )
                key = dq = (ins.core, eng)
                cost, sig = costs.cost_and_key(ins)
                tl.costs[i] = cost
                if eng == "tensor":
                    kinds[i] = _TENSOR
                elif ins.opcode == "core_barrier":
                    kinds[i] = _BARRIER
                    k = barrier_count.get(ins.core, 0)
                    barrier_count[ins.core] = k + 1
                    self._barriers.setdefault(k, []).append(i)
                p = period[eng]
                self._ticks[i] = (cost.ii * p, cost.latency * p)
                if eng in _PORT_ENGINES:
                    # Filed under the cost key, the core and the operands' addresses (PSUM
                    # banks): ports are per core.
                    psig = sig and (sig, ins.core, *[o.region.byte_start for o in ins.operands])
                    pk = port_cache.get(psig, _MISSING) if psig is not None else _MISSING
                    if pk is _MISSING:
                        pk = self.ports.keys_of(ins, eng, cost)
                        if psig is not None:
                            port_cache[psig] = pk
                    self._port_keys[i] = pk  # type: ignore[assignment]
            dep_queue[i] = dq
            tl.queue[i] = key
            q = queues.get(key)
            if q is None:
                q = queues[key] = _Queue()
            deps = tracker.access(i, ins.core, dq, ins.reads, ins.writes)
            if ins.deps:
                deps.extend((j, FLOW, "") for j in ins.deps if 0 <= j < i)
            deps = tl.deps[i] = [d for d in deps if d[1] == FLOW or dep_queue[d[0]] != dq]
            if key[1] == "vector" and kinds[i] == _COMPUTE:
                # VectorE pays a static overhead on tiny or back-to-back dependent
                # instructions (NKI-PERF).
                prev = q.items[-1] if q.items else -1
                if cost.tiny or any(d[0] == prev and d[1] == FLOW for d in deps):
                    ii, lat = self._ticks[i]
                    self._ticks[i] = (ii + static * p, lat + static * p)
            q.items.append(i)
        return tl

    # ------------------------------------------------------------ main loop
    def run(self, program: list[Instruction]) -> Timeline:
        """Time `program`; the cyclic garbage collector pauses meanwhile (the scheduler makes
        no garbage cycles, and scanning a large program record's objects costs ~30 %)."""
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run(program)
        finally:
            if was_enabled:
                gc.enable()

    def _run(self, program: list[Instruction]) -> Timeline:
        tl = self._prepare(program)
        self.dma = DmaSystem(self.chip, self.ticks_per_ns, len({k[0] for k in self._queues}))
        self._tl = tl
        self._program = program
        self._throttles = {
            c: Throttle(self.chip.throttle, self.ticks_per_ns)
            for c in sorted({k[0] for k in self._queues})
        }
        tl.throttle = self._throttles
        for key in sorted(self._queues):
            self._wake(key)
        while True:
            while self._work:
                key = self._work.popleft()
                self._in_work.discard(key)
                self._drain(key)
            if self.dma.idle:
                break
            for i, t in self.dma.step():
                self._complete(i, t)
        stuck = [k for k, q in self._queues.items() if q.head < len(q.items)]
        if stuck:
            raise AssertionError(f"scheduler: queues {stuck} never drained")  # a trnsim bug
        tl.chunk_rows = self.dma.records
        tl.pending_samples = self.dma.pending_samples
        return tl

    def _wake(self, key: tuple[int, str]) -> None:
        if key not in self._in_work:
            self._in_work.add(key)
            self._work.append(key)

    def _complete(self, i: int, t: int, release: int | None = None) -> None:
        self._tl.end[i] = t
        self._release[i] = t if release is None else release
        for key in self._waiters.pop(i, ()):
            self._wake(key)

    def _ready(
        self, i: int, key: tuple[int, str], names: tuple[str, ...] | None = None
    ) -> tuple[int, int] | None:
        """(tick when the deps of i allow it to start, producer that bound it), or None."""
        tl, release, sem = self._tl, self._release, self.sem
        ready, blocker = 0, -1
        end = tl.end
        for j, kind, operand in tl.deps[i]:
            if names is not None and operand not in names:
                continue
            t = release[j] if kind == ANTI else end[j]
            if t < 0:
                self._waiters.setdefault(j, []).append(key)
                return None
            t += sem
            if t > ready:
                ready, blocker = t, j
        return ready, blocker

    def _drain(self, key: tuple[int, str]) -> None:
        q = self._queues[key]
        items = q.items
        kinds = self._kind
        while q.head < len(items):
            i = items[q.head]
            kind = kinds[i]
            if kind == _COMPUTE:
                done = self._issue_compute(i, key, q)
            elif kind == _TENSOR:
                done = self._issue_tensor(i, key, q)
            elif kind == _DMA:
                done = self._issue_dma(i, key, q)
            else:
                done = self._issue_barrier(i, key, q)
            if not done:
                return
            q.head += 1

    # ------------------------------------------------------------ engines
    def _issue_compute(self, i: int, key: tuple[int, str], q: _Queue) -> bool:
        r = self._ready(i, key)
        if r is None:
            return False
        ready, blocker = r
        ii, lat = self._ticks[i]
        t = q.free if q.free > ready else ready
        ports = self._port_keys[i]
        if ports is not None:
            t = self.ports.reserve(ports, key[1], t, ii)
        self._place(i, q, t, t + ii, t + lat, ready, blocker)
        return True

    def _place(
        self, i: int, q: _Queue, t: int, issue_end: int, end: int, ready: int, blocker: int
    ) -> None:
        tl = self._tl
        tl.wait[i] = max(0, ready - q.free)
        tl.blocker[i] = blocker if tl.wait[i] > 0 else -1
        tl.start[i], tl.issue_end[i] = t, issue_end
        q.free, q.last = issue_end, i
        q.cum = max(q.cum, end)
        self._complete(i, end, q.cum)

    def _issue_tensor(self, i: int, key: tuple[int, str], q: _Queue) -> bool:
        ls_r = self._ready(i, key, ("stationary", "data"))
        mm_r = self._ready(i, key) if ls_r is not None else None
        if mm_r is None:
            return False
        p = self.period["tensor"]
        cost = self._tl.costs[i]
        # Two weight buffers: LoadStationary loads in the background once the previous
        # MultiplyMoving has started (freeing the other buffer); the pair then runs at the
        # slower of the two IIs (NKI-ARCH-V2 background LoadStationary).
        ls_t = max(q.free, ls_r[0], q.mm_start)
        ls_issue_end = ls_t + cost.ls_ii * p
        mm_t = max(q.mm_free, mm_r[0], ls_issue_end, q.mm_start)
        mm_ii = self._throttles[key[0]].stretch(mm_t, cost.ii * p)
        self._tl.ls[i] = (ls_t, ls_t + cost.ls_latency * p)
        free_before = q.mm_free
        q.free = ls_issue_end
        q.mm_start = mm_t
        q.mm_free = mm_t + mm_ii
        end = mm_t + cost.latency * p + (mm_ii - cost.ii * p)
        tl = self._tl
        tl.wait[i] = max(0, mm_r[0] - max(free_before, ls_issue_end))
        tl.blocker[i] = mm_r[1] if tl.wait[i] > 0 else -1
        tl.start[i], tl.issue_end[i] = mm_t, q.mm_free
        q.last = i
        q.cum = max(q.cum, end)
        self._complete(i, end, q.cum)
        return True

    def _issue_dma(self, i: int, key: tuple[int, str], q: _Queue) -> bool:
        r = self._ready(i, key)
        if r is None:
            return False
        ready, blocker = r
        plan = self._tl.dma[i][0]
        p = self.period[key[1]]
        timing = self.chip.timing
        if plan.dge == "swdge":
            cycles = (
                timing["gpsimd_start_cycles"]
                + plan.descriptors * self.chip.dma.swdge_descriptor_cycles
            )
        else:
            cycles = self.costs.record(self._program[i].opcode)[1].get(
                "trigger_cycles", timing["min_ii_cycles"]
            )
        t = max(q.free, ready)
        issue_end = t + math.ceil(cycles) * p
        trig_end = issue_end
        if plan.dge == "hwdge":
            trig_end = self.ports.dge(key[0], issue_end)
        data_ready = trig_end + round(self.chip.dma.trigger_latency_ns * self.ticks_per_ns)
        tl = self._tl
        tl.wait[i] = max(0, ready - q.free)
        tl.blocker[i] = blocker if tl.wait[i] > 0 else -1
        tl.start[i], tl.issue_end[i] = t, issue_end
        tl.dma[i] = (plan, trig_end, data_ready)
        q.free = issue_end
        self.dma.submit(i, key[0], plan, data_ready)
        return True

    def _issue_barrier(self, i: int, key: tuple[int, str], q: _Queue) -> bool:
        """core_barrier: every core's k-th barrier completes when the last one arrives."""
        group = next(g for g in self._barriers.values() if i in g)
        tl = self._tl
        if tl.start[i] < 0:
            r = self._ready(i, key)
            if r is None:
                return False
            tl.start[i] = max(q.free, r[0])
            tl.wait[i] = max(0, r[0] - q.free)
            tl.blocker[i] = r[1] if tl.wait[i] > 0 else -1
        if any(tl.start[j] < 0 for j in group):
            for j in group:
                if tl.start[j] < 0:
                    self._waiters.setdefault(-1 - j, []).append(key)
            for w in self._waiters.pop(-1 - i, ()):
                self._wake(w)
            return False
        for w in self._waiters.pop(-1 - i, ()):
            self._wake(w)
        cost = tl.costs[i]
        t = max(tl.start[j] for j in group)
        p = self.period[key[1]]
        tl.wait[i] += t - tl.start[i]
        tl.issue_end[i] = t + cost.ii * p
        q.free, q.last = tl.issue_end[i], i
        q.cum = max(q.cum, t + cost.latency * p)
        self._complete(i, t + cost.latency * p, q.cum)
        return True


def _dma_signature(ins: Instruction) -> tuple:
    ops = tuple(
        [
            (
                o.name,
                o.region.space,
                o.nbytes,
                o.partitions,
                o.contiguous_bytes,
                len(o.shape) and o.shape[0],
            )
            for o in ins.operands
        ]
    )
    return (
        ins.opcode,
        ins.engine,
        ops,
        attr(ins, "dge_mode"),
        attr(ins, "queue_engine"),
        attr(ins, "engine"),
    )
