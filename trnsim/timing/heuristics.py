"""NKI scheduling's priorities (CompileConfig(scheduling=True, experimental_scheduling_heuristic=
CRITICAL_PATH or DMA_PREFETCH)): a list scheduler over the no-contention estimate.

NKI documents its scheduler as choosing, among the ready instructions, the next to issue:
ASAP the one that can start first, CRITICAL_PATH the one on the longest path to the kernel's
outputs, DMA_PREFETCH a DMA before any other instruction, TRIVIAL none (program order). ASAP is
trnsim's compiler order (timing/reorder.py) and TRIVIAL the in-order scheduler; this module
gives the other two. It does not document how it estimates times, so the estimate is the one
the compiler order uses: each instruction's duration from the cost model (reorder.asap_ticks),
each engine queue busy for the instruction's issue time (compute: II, plus LoadStationary's on
the Tensor engine; DMA: the trigger), dependants waiting for the duration plus the semaphore
latency.

The scheduler: at estimated time T, the ready instructions (all producers placed) whose data
and queue are free by T compete, and the one with the highest priority is placed next; T
advances only when none can start. Priorities: CRITICAL_PATH, the instruction's tail (its
duration plus the longest tail among its dependants), ties to the earlier start, then to
program order; DMA_PREFETCH, DMAs first, then the earlier start, then program order. The
result is one total order of the whole program, each queue taking its instructions in it: it
keeps every dependency (producers are placed first), so no queue can wait on a later position
of another (no deadlock), and the same constraints as the compiler order: the order inside a
`no_reorder` block, and control instructions (the `control` family) as fences that nothing on
their core moves across. Knows the prepared scheduler's statics, not values.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from trnsim.program import Instruction
from trnsim.timing.statics import DMA, TENSOR

HEURISTICS = ("critical_path", "dma_prefetch")


def list_order(
    program: list[Instruction],
    deps: list[list[tuple[int, str, str]]],
    queue_of: list[tuple[int, str]],
    kinds: list[int],
    ticks: list[tuple],
    start: list[int],
    done: list[int],
    heuristic: str,
    is_fence: Callable[[str], bool],
) -> dict[tuple[int, str], list[int]]:
    """Each queue's instructions in the list scheduler's order (module docstring). `deps`:
    each instruction's producers (j, kind, _); `start`/`done`: reorder.asap_ticks's estimate
    (done = start + duration + semaphore latency)."""
    if heuristic not in HEURISTICS:
        raise ValueError(f"list_order: heuristic={heuristic!r}; allowed: {', '.join(HEURISTICS)}")
    n = len(program)
    lat = [done[i] - start[i] for i in range(n)]
    occ = [0] * n
    for i in range(n):
        t = ticks[i]
        occ[i] = t[0] + (t[2] if kinds[i] == TENSOR and len(t) > 2 else 0)
    succ: list[list[int]] = [[] for _ in range(n)]
    npred = [0] * n
    for i in range(n):
        seen = set()
        for j, _, _ in deps[i]:
            if j not in seen and 0 <= j < i:
                seen.add(j)
                succ[j].append(i)
                npred[i] += 1
    data_succ = [list(s) for s in succ]  # the tail follows data only, not the order edges
    _order_edges(program, succ, npred, is_fence)

    if heuristic == "critical_path":
        tail = [0] * n
        for i in range(n - 1, -1, -1):
            best = 0
            for k in data_succ[i]:
                if tail[k] > best:
                    best = tail[k]
            tail[i] = lat[i] + best

        def prio(i: int, e: int) -> tuple:
            return (-tail[i], e, i)
    else:
        def prio(i: int, e: int) -> tuple:
            return (0 if kinds[i] == DMA else 1, e, i)

    ready_at = [0] * n  # producers' done: when i's data is ready
    queue_free: dict[tuple[int, str], int] = {}
    waiting: list[tuple[int, int]] = []  # (estimated start, index), lazily re-estimated
    avail: list[tuple] = []  # (priority, estimated start, index)
    for i in range(n):
        if npred[i] == 0:
            heapq.heappush(waiting, (0, i))
    placed: list[int] = []
    now = 0
    while waiting or avail:
        if not avail:
            e, i = heapq.heappop(waiting)
            e2 = max(ready_at[i], queue_free.get(queue_of[i], 0))
            if e2 > e:  # its queue got busy since: look again later
                heapq.heappush(waiting, (e2, i))
                continue
            now = max(now, e2)
            heapq.heappush(avail, (prio(i, e2), e2, i))
            while waiting and waiting[0][0] <= now:
                e, i = heapq.heappop(waiting)
                e2 = max(ready_at[i], queue_free.get(queue_of[i], 0))
                if e2 > now:
                    heapq.heappush(waiting, (e2, i))
                else:
                    heapq.heappush(avail, (prio(i, e2), e2, i))
        _, e, i = heapq.heappop(avail)
        q = queue_of[i]
        e2 = max(ready_at[i], queue_free.get(q, 0))
        if e2 > now:  # the queue took another instruction meanwhile
            heapq.heappush(waiting, (e2, i))
            continue
        placed.append(i)
        queue_free[q] = e2 + occ[i]
        finish = e2 + lat[i]
        for k in succ[i]:
            if finish > ready_at[k]:
                ready_at[k] = finish
            npred[k] -= 1
            if npred[k] == 0:
                ek = max(ready_at[k], queue_free.get(queue_of[k], 0))
                if ek <= now:
                    heapq.heappush(avail, (prio(k, ek), ek, k))
                else:
                    heapq.heappush(waiting, (ek, k))
    if len(placed) != n:  # (the edges all point forward: every instruction is placed)
        raise AssertionError(f"list_order placed {len(placed)} of {n} instructions")
    queues: dict[tuple[int, str], list[int]] = {}
    for i in placed:
        queues.setdefault(queue_of[i], []).append(i)
    return queues


def _order_edges(program: list[Instruction], succ: list[list[int]], npred: list[int],
                 is_fence: Callable[[str], bool]) -> None:
    """Order-only edges: consecutive members of a no_reorder block; on each core, everything
    before a fence to the fence and the fence to everything after it (via the fence)."""
    last_in_block: dict[int, int] = {}
    last_fence: dict[int, int] = {}
    since_fence: dict[int, list[int]] = {}
    for ins in program:
        i = ins.index
        for loop_id, kind, _ in ins.loops:
            if kind == "no_reorder":
                prev = last_in_block.get(loop_id)
                if prev is not None:
                    succ[prev].append(i)
                    npred[i] += 1
                last_in_block[loop_id] = i
        core = ins.core
        if is_fence(ins.opcode):
            for j in since_fence.pop(core, ()):
                succ[j].append(i)
                npred[i] += 1
            f = last_fence.get(core)
            if f is not None:
                succ[f].append(i)
                npred[i] += 1
            last_fence[core] = i
        else:
            f = last_fence.get(core)
            if f is not None:
                succ[f].append(i)
                npred[i] += 1
            since_fence.setdefault(core, []).append(i)
