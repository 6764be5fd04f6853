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

import warnings
from collections import deque
from collections.abc import Sequence

from trnsim.allocation import TileRecord
from trnsim.chipspec import ChipSpec
from trnsim.errors import SimulationWarning
from trnsim.gcpause import gc_paused
from trnsim.program import Instruction
from trnsim.timing.barriers import BarrierMixin
from trnsim.timing.compiler import (
    CompilerRules,
    dropped_zero_fills,
    mark_table_loads,
    place_engines,
    place_scalar_equivalents,
    reuse_stationary,
    reused_loads,
)
from trnsim.timing.costs import CostTable
from trnsim.timing.deps import ANTI, FLOW, DependencyTracker
from trnsim.timing.dma import DmaSystem
from trnsim.timing.engines import EngineIssueMixin
from trnsim.timing.ports import Ports
from trnsim.timing.realloc import reallocate
from trnsim.timing.statics import BARRIER, COMPUTE, DMA, TABLE_LOAD, TENSOR, Statics
from trnsim.timing.throttle import Throttle
from trnsim.timing.timeline import EngineQueue, Timeline, base_clock_mhz

_NOT_READY = (-1, -1)

class Scheduler(BarrierMixin, EngineIssueMixin):
    """Times a program record on a chip. One use: `Scheduler(chip).run(program)`.

    Everything an instruction's timing needs that does not depend on time (cost in ticks,
    ports, DMA plan, the producers it waits for) is worked out once in `_prepare`, shared
    between instructions of the same signature; the main loop then only compares times.
    Queues are numbered (qid) and times live in flat lists indexed by instruction.
    """

    def __init__(self, chip: ChipSpec, rules: CompilerRules | None = None,
                 allocations: Sequence[TileRecord] | None = None):
        """`allocations`: the launch's on-chip allocation records (core.Device.allocations),
        which the compiler rule `allocation` needs unless it is "traced"."""
        self.chip = chip
        self.rules = CompilerRules() if rules is None else rules
        self.allocations = allocations
        self.notes: list[str] = []  # what a compiler rule could not do, for the profile
        base = base_clock_mhz(chip)
        self.ticks_per_ns = base / 1000
        self.period = {
            e: max(1, round(base / (s.clock_ghz * 1000))) for e, s in chip.engines.items()
        }
        self.sem = round(chip.timing["semaphore_latency_ns"] * self.ticks_per_ns)
        self._trigger_latency = round(chip.dma.trigger_latency_ns * self.ticks_per_ns)
        self._queue_cost = round(chip.dma.queue_dma_overhead_ns * self.ticks_per_ns)
        self._qid: dict[tuple[int, str], int] = {}  # (core, engine) -> queue number
        self._queues: list[EngineQueue] = []
        self.ports = Ports(chip, self.ticks_per_ns)
        self._init_barriers()
        self.costs = CostTable(chip)
        self.statics = Statics(chip, self.period, self.costs, self.ports)
        self._act_load = round(chip.timing.get("act_table_load_ns", 0) * self.ticks_per_ns)

    def _compile(self, program: list[Instruction]) -> list[Instruction]:
        """The compiler rules that rewrite the record before timing (timing/compiler.py):
        automatic tiles re-placed (rule `allocation`, not "traced"), engine placement and
        ScalarE equivalents (a copy of the list with moved instructions) and dropped
        zero-fills and reused loads."""
        rules = self.rules
        policy = rules.allocation_for(self.chip.name)
        # (the chip's own policy on a record without allocation records, e.g. a hand-made
        # one, keeps its addresses silently: only a policy asked for is reported)
        if (policy != "traced" and (self.allocations is not None or rules.allocation)) or (
                rules.sequential_buffers and self.allocations is not None):
            program, note = reallocate(program, self.allocations, policy,
                                       rules.sequential_buffers)
            if note:
                self.notes.append(note)
                warnings.warn(note, SimulationWarning, stacklevel=2)
        if rules.place_unknown_engine and any(ins.engine_unknown for ins in program):
            period, cost = self.period, self.costs.cost
            program = place_engines(
                program,
                lambda ins: cost(ins).ii * period[ins.engine],
                shared_psum=rules.psum_port_placement and self.chip.nc_version <= 2,
                only=rules.place_opcodes,
            )
        if rules.scalar_equivalent:
            program = place_scalar_equivalents(program)
        self._dropped = dropped_zero_fills(program) if rules.drop_psum_zero_fill else set()
        window = int(self.chip.timing.get("load_reuse_window", 0))
        self._reused = reused_loads(program, window) if rules.reuse_loads else {}
        self._dropped = self._dropped | set(self._reused)
        return program

    # ------------------------------------------------------------ preparation
    def _prepare(self, program: list[Instruction], full_deps: bool = False) -> Timeline:
        """Costs, DMA plans, dependencies and queues, in one pass in program order.

        `full_deps` also records, in `self.order_deps`, the WAR and WAW pairs within one queue
        that issue in program order implies (not waits: an engine's reads and writes land in
        issue order, but a new order must keep them); `reorder` may then change the order."""
        program = self._program = self._compile(program)
        dropped, forward = self._dropped, {}
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
        self.prepared = tl
        tl.notes = self.notes
        self._stationary_keys: dict[int, tuple | None] = {}  # (deps are fixed from here on)
        self._kind = kinds = [COMPUTE] * n
        # Compute: (II, latency) in ticks (Tensor: and LoadStationary's); DMA: (trigger issue
        # ticks, 0).
        self._ticks = ticks = [(0, 0)] * n
        self._port_keys: list[tuple | None] = [None] * n
        tracker = DependencyTracker()
        access = tracker.access
        self.order_deps: list[list[tuple[int, str, str]]] = []
        order_deps = self.order_deps
        record, qids, queues = self.costs.record, self._qid, self._queues
        tl_deps, tl_queue, tl_dma, tl_costs = tl.deps, tl.queue, tl.dma, tl.costs
        port_keys, dma_statics = self._port_keys, self.statics.dma
        compute_statics = self.statics.compute
        static = int(self.chip.timing["vector_static_overhead_cycles"]) * self.period["vector"]
        is_dma: dict[str, bool] = {}  # opcode -> timed as a DMA
        for ins in program:
            i, core, opcode = ins.index, ins.core, ins.opcode
            dma = is_dma.get(opcode)
            if dma is None:
                dma = is_dma[opcode] = record(opcode)[0].model == "dma"
            if dma:
                plan, dma_ticks, unscheduled = dma_statics(ins)
                key = (core, plan.issuer)
                if i in self._reused:  # not issued: a zero-length bar on its trigger queue
                    kinds[i] = kind = COMPUTE
                else:
                    tl_dma[i] = unscheduled
                    kinds[i] = kind = DMA
                    ticks[i] = dma_ticks
            else:
                eng, kind, cost, ticks[i], port_keys[i] = compute_statics(ins)
                kinds[i] = kind
                if kind == BARRIER:
                    self._add_barrier(i, core, ins.attrs.get("barrier_domain", 0))
                key = (core, eng)
                tl_costs[i] = cost
            qid = qids.get(key)
            if qid is None:
                qid = qids[key] = len(queues)
                queues.append(EngineQueue(key))
            q = queues[qid]
            tl_queue[i] = key = q.key  # one tuple per queue, not per instruction
            # Readers are remembered per queue; a DMA is a queue of its own (DMAs complete out
            # of order), and so is every instruction when the order may change.
            dq = -1 - i if kind == DMA or full_deps else qid
            ideps = access(i, core, dq, ins.reads, ins.writes)
            if ins.deps:
                ideps.extend((j, FLOW, "") for j in ins.deps if 0 <= j < i)
            if dropped:
                # A dropped zero-fill's dependants wait for what it would have waited for, a
                # reused load's for the load whose tile it reuses.
                if any(d[0] in forward for d in ideps):
                    ideps = [e for d in ideps for e in forward.get(d[0], (d,))]
                if i in dropped:
                    root = self._reused.get(i)
                    forward[i] = ideps if root is None else [(root, FLOW, "")]
                    ideps = []
                    ticks[i], port_keys[i], tl_costs[i] = (0, 0), None, None
            if full_deps:
                order_deps.append(ideps)
                if kind != DMA and ideps:  # (DMAs complete out of order: they keep every wait)
                    kept = []
                    for d in ideps:
                        # (queue keys are one object per queue: `is not` is `!=`)
                        if d[1] == FLOW or tl_queue[d[0]] is not key or kinds[d[0]] == DMA:
                            kept.append(d)
                    ideps = kept
            tl_deps[i] = ideps
            if not full_deps and kind == COMPUTE and key[1] == "vector" and i not in dropped:
                # VectorE pays a static overhead on tiny or back-to-back dependent
                # instructions (NKI-PERF); with full_deps, reorder() works it out.
                prev = q.items[-1] if q.items else -1
                if cost.tiny or _flows_from(ideps, prev):
                    ii, lat = ticks[i]
                    ticks[i] = (ii + static, lat + static)
            q.items.append(i)
        tracker.close()
        if full_deps:
            self._base_ticks = list(ticks)  # before VectorE's overhead, which depends on order
            self._static = static
            self.reorder({})
        else:
            for q in queues:
                self._order_rules(q)
        return tl

    def prepare(self, program: list[Instruction], full_deps: bool = False) -> Timeline:
        """Costs, plans, dependencies and queues without timing (`self.prepared`); then
        `reorder` may change the queues' order and `run_prepared` times them."""
        return self._prepare(program, full_deps)

    @property
    def kinds(self) -> list[int]:
        """After prepare: how each instruction issues (statics COMPUTE, TENSOR, DMA, BARRIER)."""
        return self._kind

    @property
    def ticks(self) -> list[tuple]:
        """After prepare: each instruction's issue costs in ticks (compute: II, latency;
        Tensor: also LoadStationary's II, latency and PE cells; DMA: trigger issue, 0)."""
        return self._ticks

    @property
    def trigger_latency(self) -> int:
        """Ticks from a DMA trigger to the data moving."""
        return self._trigger_latency

    def reorder(self, order: dict[tuple[int, str], list[int]]) -> None:
        """After _prepare: issue each queue named in `order` in that order (the rest keep
        theirs), with VectorE's static overhead worked out again for the new neighbours."""
        # Only the order rules and VectorE's overhead (Vector and Tensor queues) change ticks
        # after _prepare: every other instruction's ticks are their base ones anyway.
        self._ticks[:] = self._base_ticks
        for q in self._queues:
            if q.key in order:
                q.items = order[q.key]
            if q.engine == "vector":
                self._vector_overhead(q, self.prepared, self._static)
            self._order_rules(q)

    def _order_rules(self, q: EngineQueue) -> None:
        """The compiler rules that depend on a queue's issue order (timing/compiler.py)."""
        if q.engine == "tensor" and self.rules.reuse_stationary:
            reuse_stationary(q.items, self._kind, self._ticks, self.prepared.deps, self._program,
                             self._stationary_keys)
        elif q.engine == "scalar":
            on = self.rules.act_table_load and self._act_load > 0
            mark_table_loads(q.items, self._kind, self._program, on)

    def _vector_overhead(self, q: EngineQueue, tl: Timeline, static: int) -> None:
        """VectorE's static overhead on tiny or back-to-back dependent instructions, for the
        queue's issue order."""
        kinds, ticks, costs = self._kind, self._ticks, tl.costs
        prev = -1
        for i in q.items:
            cost = costs[i]
            if (
                kinds[i] == COMPUTE
                and cost is not None
                and (cost.tiny or _flows_from(tl.deps[i], prev))
            ):
                ii, lat = ticks[i]
                ticks[i] = (ii + static, lat + static)
            prev = i

    # ------------------------------------------------------------ main loop
    def run(self, program: list[Instruction]) -> Timeline:
        """Time `program` as written; the cyclic garbage collector pauses meanwhile (the
        scheduler makes no garbage cycles, and scanning a large program record's objects costs
        ~30 %)."""
        with gc_paused():
            return self._execute(program, self._prepare(program))

    def run_prepared(self, program: list[Instruction]) -> Timeline:
        """Time `program` as prepared (asap_ticks) and ordered (reorder); GC paused as in run."""
        with gc_paused():
            return self._execute(program, self.prepared)

    def _execute(self, program: list[Instruction], tl: Timeline) -> Timeline:
        n = len(program)
        cores = sorted({q.key[0] for q in self._queues})
        queues: dict[int, set[str]] = {}
        for i, entry in tl.dma.items():  # (DMAs only)
            queues.setdefault(program[i].core, set()).add(entry[0].queue)
        one_queue = all(len(qs) == 1 for qs in queues.values())
        self.dma = DmaSystem(self.chip, self.ticks_per_ns, len(cores), one_queue=one_queue)
        self._tl = tl
        self._release = [-1] * n  # when a WAR wait on the instruction is over
        self._dma_queue_free: dict[tuple[int, str], int] = {}  # (core, DMA queue) -> tick
        self._waiters: list[list[int] | None] = [None] * n  # producer -> queues to wake
        self._barrier_waiters = {}
        self._work: deque[int] = deque()
        self._in_work = [False] * len(self._queues)
        self._throttles = {c: Throttle(self.chip.throttle, self.ticks_per_ns) for c in cores}
        tl.throttle = self._throttles
        for key in sorted(self._qid):
            self._wake(self._qid[key])
        work, in_work, drain, dma = self._work, self._in_work, self._drain, self.dma
        while True:
            while work:
                qid = work.popleft()
                in_work[qid] = False
                drain(qid)
            if dma.idle:
                break
            for i, t in dma.step():
                self._complete(i, t, t)
        stuck = [q.key for q in self._queues if q.head < len(q.items)]
        if stuck:
            raise AssertionError(f"scheduler: queues {stuck} never drained")  # a trnsim bug
        tl.chunk_rows = self.dma.records
        tl.pending_samples = self.dma.pending_samples
        return tl

    def _wake(self, qid: int) -> None:
        if not self._in_work[qid]:
            self._in_work[qid] = True
            self._work.append(qid)

    def _complete(self, i: int, t: int, release: int) -> None:
        self._tl.end[i] = t
        self._release[i] = release
        waiting = self._waiters[i]
        if waiting is not None:
            self._waiters[i] = None
            for qid in waiting:
                if not self._in_work[qid]:
                    self._in_work[qid] = True
                    self._work.append(qid)

    def _ready(self, i: int, qid: int) -> tuple[int, int]:
        """(tick when the producers of i allow it to start, producer that bound it), or
        _NOT_READY (then queue `qid` is woken when the first unfinished producer completes)."""
        end, release = self._tl.end, self._release
        latest, blocker = -self.sem, -1  # latest finish of a producer, before the semaphore
        for j, kind, _ in self._tl.deps[i]:
            t = release[j] if kind == ANTI else end[j]
            if t < 0:
                w = self._waiters[j]
                if w is None:
                    self._waiters[j] = [qid]
                else:
                    w.append(qid)
                return _NOT_READY
            if t > latest:
                latest, blocker = t, j
        return latest + self.sem, blocker

    def _drain(self, qid: int) -> None:
        """Issue queue qid's instructions in order until one must wait."""
        q = self._queues[qid]
        items = q.items
        kinds = self._kind
        head, stop = q.head, len(items)
        while head < stop:
            i = items[head]
            kind = kinds[i]
            if kind == COMPUTE:
                done = self._issue_compute(i, qid, q)
            elif kind == TABLE_LOAD:
                done = self._issue_after_table_load(i, qid, q)
            elif kind == TENSOR:
                done = self._issue_tensor(i, qid, q)
            elif kind == DMA:
                done = self._issue_dma(i, qid, q)
            else:
                done = self._issue_barrier(i, qid, q)
            if not done:
                break
            head += 1
        q.head = head


def _flows_from(deps: list[tuple[int, str, str]], producer: int) -> bool:
    """Whether `deps` has a RAW wait on `producer` (a loop: any() over a generator costs more
    than the short search)."""
    for j, kind, _ in deps:
        if j == producer and kind == FLOW:
            break
    else:
        return False
    return True
