"""How the Scheduler issues one instruction on its engine queue: compute, the activation table
load before an activation, the Tensor Engine's LoadStationary/MultiplyMoving pair, and a DMA
trigger. A mixin of trnsim.timing.scheduler.Scheduler, whose state (ticks, timeline, ports,
throttles, DMA system) these methods read and advance."""

from __future__ import annotations

from trnsim.timing.deps import ANTI
from trnsim.timing.timeline import EngineQueue

_LS_OPERANDS = ("stationary", "data")  # what LoadStationary waits for


class EngineIssueMixin:
    """Scheduler._issue_*: each returns False while the instruction is not ready."""

    def _issue_compute(self, i: int, qid: int, q: EngineQueue) -> bool:
        tl = self._tl
        # self._ready(i, qid), inlined (the most frequent issue)
        end, release = tl.end, self._release
        latest, blocker = -self.sem, -1
        for j, kind, _ in tl.deps[i]:
            t = release[j] if kind == ANTI else end[j]
            if t < 0:
                w = self._waiters[j]
                if w is None:
                    self._waiters[j] = [qid]
                else:
                    w.append(qid)
                return False
            if t > latest:
                latest, blocker = t, j
        ready = latest + self.sem
        ii, lat = self._ticks[i]
        free = q.free
        t = free if free > ready else ready
        ports = self._port_keys[i]
        if ports is not None:
            t = self.ports.reserve(ports, q.engine, t, ii)
        if ready > free:
            tl.wait[i], tl.blocker[i] = ready - free, blocker
        tl.start[i], tl.issue_end[i] = t, t + ii
        q.free, q.last = t + ii, i
        done = t + lat
        if done > q.cum:
            q.cum = done
        # self._complete(i, done, q.cum), inlined
        end[i] = done
        release[i] = q.cum
        waiting = self._waiters[i]
        if waiting is not None:
            self._waiters[i] = None
            in_work, work = self._in_work, self._work
            for w in waiting:
                if not in_work[w]:
                    in_work[w] = True
                    work.append(w)
        return True

    def _issue_after_table_load(self, i: int, qid: int, q: EngineQueue) -> bool:
        """The activation table load (ACT_TABLE_LOAD) runs on the queue as soon as the queue
        reaches it (it needs no data), then the activation issues as usual."""
        loads = self._tl.table_loads
        if i not in loads:
            loads[i] = (q.free, q.free + self._act_load)
            q.free += self._act_load
        return self._issue_compute(i, qid, q)

    def _issue_tensor(self, i: int, qid: int, q: EngineQueue) -> bool:
        tl = self._tl
        # self._ready_tensor(i, qid), inlined: LoadStationary waits for its operands'
        # producers, MultiplyMoving for all
        ends, release, sem = tl.end, self._release, self.sem
        latest = ls_latest = -sem
        blocker = first_missing = ls_missing = -1
        for j, kind, operand in tl.deps[i]:
            t = release[j] if kind == ANTI else ends[j]
            if t < 0:
                if operand in _LS_OPERANDS:
                    ls_missing = j
                    break
                if first_missing < 0:
                    first_missing = j
                continue
            if t > latest:
                latest, blocker = t, j
            if t > ls_latest and operand in _LS_OPERANDS:
                ls_latest = t
        missing = ls_missing if ls_missing >= 0 else first_missing
        if missing >= 0:
            w = self._waiters[missing]
            if w is None:
                self._waiters[missing] = [qid]
            else:
                w.append(qid)
            return False
        ls_ready, ready = ls_latest + sem, latest + sem
        ii, lat, ls_ii, ls_lat, cells = self._ticks[i]
        # Two weight buffers per PE cell: LoadStationary loads in the background once the
        # previous MultiplyMoving on its cells has started (freeing the other buffer); the pair
        # then runs at the slower of the two IIs (NKI-ARCH-V2 background LoadStationary).
        # LoadStationary and MultiplyMoving each issue in order; a matmul tiled onto part of
        # the array waits only for its own cells, so matmuls on disjoint tiles overlap.
        pe = q.pe
        ls_t = max(q.free, ls_ready, pe.started_at(cells))
        ls_issue_end = ls_t + ls_ii
        free_before = pe.free_at(cells)
        mm_t = max(free_before, ready, ls_issue_end, q.mm_start)
        mm_ii = self._throttles[q.key[0]].stretch(mm_t, ii)
        tl.ls[i] = (ls_t, ls_t + ls_lat)
        q.free = ls_issue_end
        q.mm_start = mm_t
        pe.occupy(cells, mm_t, mm_t + mm_ii)
        end = mm_t + lat + (mm_ii - ii)
        wait = ready - max(free_before, ls_issue_end)
        if wait > 0:
            tl.wait[i], tl.blocker[i] = wait, blocker
        tl.start[i], tl.issue_end[i] = mm_t, mm_t + mm_ii
        q.last = i
        if end > q.cum:
            q.cum = end
        self._complete(i, end, q.cum)
        return True

    def _issue_dma(self, i: int, qid: int, q: EngineQueue) -> bool:
        tl = self._tl
        # self._ready(i, qid), inlined (as in _issue_compute)
        end, release = tl.end, self._release
        latest, blocker = -self.sem, -1
        for j, kind, _ in tl.deps[i]:
            t = release[j] if kind == ANTI else end[j]
            if t < 0:
                w = self._waiters[j]
                if w is None:
                    self._waiters[j] = [qid]
                else:
                    w.append(qid)
                return False
            if t > latest:
                latest, blocker = t, j
        ready = latest + self.sem
        plan = tl.dma[i][0]
        free = q.free
        t = free if free > ready else ready
        issue_end = trig_end = t + self._ticks[i][0]
        if plan.dge == "hwdge":
            trig_end = self.ports.dge(q.key[0], issue_end)
        data_ready = trig_end + self._trigger_latency
        if self._queue_cost:
            # The DMA queue takes its transfers one at a time (dma.queue_dma_overhead_ns each).
            qkey = (q.key[0], plan.queue)
            data_ready = max(data_ready, self._dma_queue_free.get(qkey, 0)) + self._queue_cost
            self._dma_queue_free[qkey] = data_ready
        if plan.extra_latency_ns:  # a route's hops: in flight, not holding the queue
            data_ready += round(plan.extra_latency_ns * self.ticks_per_ns)
        if ready > free:
            tl.wait[i], tl.blocker[i] = ready - free, blocker
        tl.start[i], tl.issue_end[i] = t, issue_end
        tl.dma[i] = (plan, trig_end, data_ready)
        q.free = issue_end
        self.dma.submit(i, q.key[0], plan, data_ready)
        return True
