"""The compiler's instruction order: each engine's queue sorted by when its data is ready.

Hardware sequencers issue their instruction streams in order (trainium-hw.md B.1), but the
order is the compiler's, not the kernel's text: NKI documents that the compiler reorders
instructions unless `nl.no_reorder()` forbids it inside a block (B2/GA), and that the
iterations of a Beta-1 `affine_range` may be reordered or overlapped; it does not document
how. The model of that compiler is a static list scheduler with the textbook priority: each
instruction's ASAP time (when its data would be ready if no engine were ever busy, from the
cost model's durations: asap_ticks), each queue sorted by it, ties in program order.
The program is then timed once, in that order, by the in-order scheduler.

What the order keeps:
- every dependency: an instruction sorts after each producer it waits for (sort keys are
  raised along dependency edges, ties go to program order), which also makes the new order
  free of deadlocks (every wait and every queue position points the same way in one total
  order);
- the order inside a `no_reorder` block (keys never decrease along the block);
- control instructions (registers, device-loop branches, barriers, sendrecv: the `control`
  family of the ISA) as fences: nothing on the same core moves across one.
Data dependencies must then be complete, not reduced by in-order issue (DependencyTracker
with one queue per instruction).
"""

from __future__ import annotations

from collections.abc import Sequence

from trnsim.allocation import TileRecord
from trnsim.chipspec import ChipSpec
from trnsim.gcpause import gc_paused
from trnsim.program import Instruction
from trnsim.spec import instruction_specs
from trnsim.timing.compiler import CompilerRules
from trnsim.timing.dma import isolated_ticks
from trnsim.timing.heuristics import list_order
from trnsim.timing.scheduler import Scheduler
from trnsim.timing.statics import DMA, TENSOR
from trnsim.timing.timeline import Timeline


def _is_fence(opcode: str, cache: dict[str, bool]) -> bool:
    got = cache.get(opcode)
    if got is None:
        spec = instruction_specs().get(opcode)
        got = cache[opcode] = spec is not None and spec.family == "control"
    return got


def compiler_order(
    program: list[Instruction],
    deps: list[list[tuple[int, str, str]]],
    ready: list[int],
    queue_of: list[tuple[int, str]],
) -> dict[tuple[int, str], list[int]]:
    """Each queue's instructions in the compiler's order, by `ready` (each instruction's
    data-ready tick with no engine ever busy, see asap_ticks)."""
    n = len(program)
    key = [0] * n
    segment = [0] * n
    fences: dict[int, int] = {}  # core -> fences so far
    last_in_block: dict[int, int] = {}  # no_reorder block -> last key
    fence_cache: dict[str, bool] = {}
    for ins in program:
        i = ins.index
        k = ready[i]
        for j, _, _ in deps[i]:
            if key[j] > k:
                k = key[j]
        for loop_id, kind, _ in ins.loops:
            if kind == "no_reorder":
                prev = last_in_block.get(loop_id, k)
                if prev > k:
                    k = prev
                last_in_block[loop_id] = k
        key[i] = k
        fence = fence_cache.get(ins.opcode)
        if fence is None:
            fence = _is_fence(ins.opcode, fence_cache)
        if fence:
            f = fences.get(ins.core, 0)
            segment[i] = 2 * f + 1  # after everything before it, before everything after
            fences[ins.core] = f + 1
        elif fences:
            segment[i] = 2 * fences.get(ins.core, 0)
    queues: dict[tuple[int, str], list[int]] = {}
    for i in range(n):
        queues.setdefault(queue_of[i], []).append(i)
    # Sorted by (segment, key, index): items are in index order and the sort is stable, so
    # ties keep it; without fences every segment is 0 and the key alone decides.
    by = key.__getitem__ if not fences else (lambda i: (segment[i], key[i]))
    for items in queues.values():
        items.sort(key=by)
    return queues


ORDERS = ("compiler", "program", "critical_path", "dma_prefetch")


def schedule(
    program: list[Instruction],
    chip: ChipSpec,
    reorder: bool = True,
    rules: CompilerRules | None = None,
    allocations: Sequence[TileRecord] | None = None,
    order: str = "compiler",
) -> Timeline:
    """Time `program` on `chip`: as written (reorder=False or order="program"), or in the
    compiler's order (order="compiler", the default), or in the order of a list scheduler
    with NKI scheduling's CRITICAL_PATH or DMA_PREFETCH priority (timing/heuristics.py); with
    the compiler rules `rules` (default: all on, see timing/compiler.py) and the launch's
    on-chip allocation records `allocations` (core.Device.allocations: the rule `allocation`
    re-places automatic tiles by them; not needed while it is "traced"). The cyclic garbage
    collector pauses throughout (Scheduler.run): preparing a large program makes many objects
    and no cycles, and collections walking the growing record cost ~1/3 of the preparation."""
    if order not in ORDERS:
        raise ValueError(f"schedule: order={order!r} is not an order; allowed: "
                         f"{', '.join(ORDERS)}")
    if not reorder or order == "program":
        return Scheduler(chip, rules, allocations).run(program)
    with gc_paused():
        planner = Scheduler(chip, rules, allocations)
        planner.prepare(program, full_deps=True)
        if order == "compiler":
            asap = asap_ticks(planner)
            queues = compiler_order(program, planner.order_deps, asap, planner.prepared.queue)
        else:
            done: list[int] = []
            asap = asap_ticks(planner, done)
            fences: dict[str, bool] = {}
            queues = list_order(program, planner.order_deps, planner.prepared.queue,
                                planner.kinds, planner.ticks, asap, done, order,
                                lambda op: _is_fence(op, fences))
            del done
        planner.reorder(queues)
        timeline = planner.run_prepared(program)
        # Freed here by reference counting, not walked by the collection that follows.
        del planner, asap
    return timeline


def asap_ticks(sched: Scheduler, done_out: list[int] | None = None) -> list[int]:
    """Each prepared instruction's earliest start if no engine were ever busy: the latest of
    its producers' ASAP starts plus their cost-model durations (compute: latency; Tensor:
    LoadStationary issue plus MultiplyMoving latency; DMA: trigger, trigger latency and the
    transfer on idle engines), plus the semaphore latency; 0 with no producer. `done_out`, if
    given, receives each instruction's start plus duration plus semaphore latency."""
    tl, chip = sched.prepared, sched.chip
    kinds, ticks, dma = sched.kinds, sched.ticks, tl.dma
    isolated: dict[int, int] = {}
    sem, trigger = sched.sem, sched.trigger_latency
    out: list[int] = []
    done: list[int] = []  # out[j] + dur[j] + sem: when a dependant of j may start
    for i, deps in enumerate(tl.deps):
        r = 0
        for j, _, _ in deps:
            t = done[j]
            if t > r:
                r = t
        out.append(r)
        kind = kinds[i]
        if kind == DMA:
            plan = dma[i][0]
            d = isolated.get(id(plan))
            if d is None:
                d = isolated[id(plan)] = isolated_ticks(plan, chip, sched.ticks_per_ns) + round(
                    plan.extra_latency_ns * sched.ticks_per_ns)
            done.append(r + ticks[i][0] + trigger + d + sem)
        elif kind == TENSOR:
            t = ticks[i]
            done.append(r + t[2] + t[1] + sem)
        else:
            done.append(r + ticks[i][1] + sem)
    if done_out is not None:
        done_out.extend(done)
    return out
