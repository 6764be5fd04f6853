"""Cross-core barriers for the scheduler: every core's k-th `core_barrier` completes when the
last of them arrives. Knows nothing of values."""

from __future__ import annotations

from typing import Any

from trnsim.timing.timeline import EngineQueue


class BarrierMixin:
    """The barrier half of Scheduler (it provides _tl, _ready, _wake, _complete, period)."""

    _tl: Any

    def _init_barriers(self) -> None:
        self._barriers: dict[tuple[int, int], list[int]] = {}  # (domain, k) -> barriers
        self._group: dict[int, list[int]] = {}  # barrier instruction -> its group
        self._barrier_count: dict[int, int] = {}  # core -> barriers so far
        self._barrier_waiters: dict[int, list[int]] = {}

    def _add_barrier(self, i: int, core: int, domain: int = 0) -> None:
        """File barrier i as its core's k-th: the k-th barriers of all cores of one domain (the
        cores of one rank, in a multi-rank program) wait for each other."""
        k = self._barrier_count.get(core, 0)
        self._barrier_count[core] = k + 1
        group = self._barriers.setdefault((domain, k), [])
        group.append(i)
        self._group[i] = group

    def _issue_barrier(self, i: int, qid: int, q: EngineQueue) -> bool:
        """core_barrier: every core's k-th barrier completes when the last one arrives."""
        group = self._group[i]
        tl = self._tl
        waiters = self._barrier_waiters
        if tl.start[i] < 0:
            ready, blocker = self._ready(i, qid)
            if ready < 0:
                return False
            tl.start[i] = max(q.free, ready)
            tl.wait[i] = max(0, ready - q.free)
            tl.blocker[i] = blocker if tl.wait[i] > 0 else -1
        if any(tl.start[j] < 0 for j in group):
            for j in group:
                if tl.start[j] < 0:
                    waiters.setdefault(j, []).append(qid)
            for w in waiters.pop(i, ()):
                self._wake(w)
            return False
        for w in waiters.pop(i, ()):
            self._wake(w)
        cost = tl.costs[i]
        t = max(tl.start[j] for j in group)
        p = self.period[q.engine]
        tl.wait[i] += t - tl.start[i]
        tl.issue_end[i] = t + cost.ii * p
        q.free, q.last = tl.issue_end[i], i
        q.cum = max(q.cum, t + cost.latency * p)
        self._complete(i, t + cost.latency * p, q.cum)
        return True
